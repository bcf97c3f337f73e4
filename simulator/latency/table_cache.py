"""Built ``ProfileTable``s kept on disk between processes, keyed on everything they come from.

Building the grids of one GPU and engine costs about half a second (reading the profile CSVs,
filling the GEMM grids' gaps, the isotonic passes); every ``kvplan`` process paid it per GPU
type it met: each optimize worker for each GPU of the space, each ``simulate``. Loading the
pickled table costs milliseconds.

The key is a SHA-256 over the profile files' contents, the table's other inputs (engine, the
profiled GPU's spec, monotone or not), the source of the modules that build and lay out a
table, and the numpy and Python versions (pickle compatibility): a changed file, a changed
catalog entry or another kvplan gives another key, so a stale table is never read. The cache
directory is the caller's (the CLI passes ``$XDG_CACHE_HOME/kvplan/tables``); ``None`` builds
in every process, as before.

Best effort by design: an unreadable or corrupt entry is rebuilt and replaced, a directory
that cannot be written is skipped silently (the table is still returned), entries are written
to a temporary file and renamed into place (two processes building the same table at once
leave one whole file), and past ``MAX_ENTRIES`` the oldest entries are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import pickle
import platform
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

__all__ = ["MAX_ENTRIES", "cached_build", "table_key"]

#: Entries kept per cache directory (each ~1-3 MB); older ones are removed on write.
MAX_ENTRIES = 48
#: Bumped when the entry format changes (beyond what the source hash already covers).
_FORMAT = 1
#: Modules whose code decides a built table's contents or its pickled layout.
_BUILDERS = (
    "simulator.latency.profile_grid",
    "simulator.latency.profiles",
    "simulator.latency.profile_files",
    "simulator.latency.table",
    "simulator.latency.moe_table",
    "simulator.latency.mla_table",
    "simulator.latency.roofline",
    "simulator.latency.kernels",
)

T = TypeVar("T")


@cache
def _builders_digest() -> str:
    """SHA-256 of the builder modules' source files (once per process)."""
    digest = hashlib.sha256()
    for name in _BUILDERS:
        digest.update(name.encode())
        digest.update(Path(str(importlib.import_module(name).__file__)).read_bytes())
    return digest.hexdigest()


def table_key(files: Sequence[Path], inputs: Mapping[str, Any]) -> str:
    """The cache key of a table built from ``files`` with ``inputs`` (JSON-able settings)."""
    digest = hashlib.sha256()
    header = {
        "format": _FORMAT,
        "builders": _builders_digest(),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "inputs": inputs,
    }
    digest.update(json.dumps(header, sort_keys=True, default=str).encode())
    for path in files:
        digest.update(str(path.name).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cached_build(cache_dir: Path | None, key: str, build: Callable[[], T], kind: type[T]) -> T:
    """The ``kind`` object stored under ``key`` in ``cache_dir``, else ``build()`` (stored
    for the next process when the directory can be written). ``cache_dir=None``: build."""
    if cache_dir is None:
        return build()
    entry = cache_dir / f"table-{key}.pkl"
    with contextlib.suppress(Exception):  # missing, truncated, another layout: rebuild
        with entry.open("rb") as handle:
            loaded = pickle.load(handle)
        if isinstance(loaded, kind):
            return loaded
    built = build()
    with contextlib.suppress(OSError, pickle.PicklingError):
        _store(cache_dir, entry, built)
    return built


def _store(cache_dir: Path, entry: Path, value: object) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=cache_dir, prefix=".table-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, entry)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    entries = sorted(cache_dir.glob("table-*.pkl"), key=lambda p: p.stat().st_mtime)
    for stale in entries[:-MAX_ENTRIES]:
        with contextlib.suppress(OSError):
            stale.unlink()
