"""Traces shipped inside the package (``simulator/data/traces/``; attribution in its README).

Located with ``importlib.resources``, so they are found in a source tree and in an installed
wheel alike. kvplan is never imported from a zip file, so the result is a real path.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from slo.inputfile import InputError

__all__ = ["bundled_trace_names", "bundled_trace_path"]

_TRACE_SUFFIXES = (".jsonl", ".jsonl.zst", ".lcp", ".lcp.zst")


def _traces_dir() -> Path:
    return Path(str(files("simulator").joinpath("data", "traces")))


def bundled_trace_names() -> tuple[str, ...]:
    """File names of the bundled traces, sorted."""
    return tuple(
        sorted(p.name for p in _traces_dir().iterdir() if p.name.endswith(_TRACE_SUFFIXES))
    )


def bundled_trace_path(name: str) -> Path:
    """Path of a bundled trace, by file name or by name without its suffix.

    Raises ``InputError`` naming the available traces if there is no such trace.
    """
    for file_name in bundled_trace_names():
        if name == file_name or any(name + suffix == file_name for suffix in _TRACE_SUFFIXES):
            return _traces_dir() / file_name
    available = ", ".join(bundled_trace_names()) or "none"
    raise InputError(f"no bundled trace {name!r} (available: {available})")
