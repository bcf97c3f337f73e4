"""Fixtures for the workload tests: tiny hand-written traces on disk."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

WriteJsonl = Callable[[Sequence[dict[str, Any] | str], str], Path]


@pytest.fixture
def write_jsonl(tmp_path: Path) -> WriteJsonl:
    """``write_jsonl(lines, name)``: dicts become JSON lines, strings are written verbatim."""

    def write(lines: Sequence[dict[str, Any] | str], name: str = "trace.jsonl") -> Path:
        path = tmp_path / name
        text = "".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines)
        path.write_text(text, encoding="utf-8")
        return path

    return write
