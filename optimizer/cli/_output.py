"""Shared console objects and JSON printing for every command."""

from __future__ import annotations

import json
import math
from typing import Any

from rich.console import Console

__all__ = ["clean_json", "console", "err_console", "print_json"]

console = Console()
err_console = Console(stderr=True)


def clean_json(value: Any) -> Any:
    """Make ``value`` strict-JSON: NaN/inf become null, tuples lists, numpy scalars Python."""
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (no rich markup, no wrapping), for scripting."""
    print(json.dumps(clean_json(data), indent=2, allow_nan=False))
