"""Which engine release a measured row can have run, where the row does not say.

A dated export (InferenceX's ``source_file=YYYY-MM-DD.csv``) mixes rows that name their engine
release (``backend_version``, or ``image=vllm/vllm-openai:v0.11.2`` in the source) with rows that
do not, each with the day it was measured (``measured=`` in ``silicon_data_source``). A harness
upgrades its engine, it does not go back: a row measured on or before a row of the same export
and backend that ran release ``v`` ran ``v`` or older. ``with_release_bounds`` records that
bound in ``MeasuredRow.release_at_most`` (the oldest such ``v``), which with the versions rows
do name (``MeasuredRow.release``) is all a rule of the form "releases before X behave so" needs
(``simulator/validation/rules.py``: vLLM before 0.13 ignores a ModelOpt checkpoint's FP8 KV
scheme). A row with neither a version nor such a later row keeps an empty bound.

Pure functions over parsed rows: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TypeVar

from simulator.validation.silicon.rows import MeasuredRow

__all__ = ["source_fields", "version_key", "with_release_bounds"]

R = TypeVar("R", bound=MeasuredRow)


def source_fields(source: str) -> dict[str, str]:
    """``silicon_data_source``'s ``key=value`` pairs (separated by ``;``)."""
    pairs = (part.split("=", 1) for part in source.split(";") if "=" in part)
    return {key.strip(): value.strip() for key, value in pairs}


def version_key(text: str) -> tuple[int, ...] | None:
    """A release's ordering key (its first three numbers), None without a number."""
    parts = re.findall(r"\d+", text)[:3]
    return tuple(int(p) for p in parts) if parts else None


def _export_day(row: MeasuredRow) -> tuple[str, str] | None:
    """(export, measured day) of a dated-export row, None for any other."""
    fields = source_fields(row.source)
    export, measured = fields.get("source_file", ""), fields.get("measured", "")[:10]
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}\.csv", export):
        return None
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", measured):
        return None
    return export, measured


def with_release_bounds(rows: Sequence[R]) -> list[R]:
    """``rows`` (same order) with ``release_at_most`` set (module doc)."""
    stated: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (export, backend) -> (day, ver)
    for row in rows:
        where = _export_day(row)
        if row.backend_version and version_key(row.backend_version) and where is not None:
            stated.setdefault((where[0], row.backend), []).append((where[1], row.backend_version))
    out: list[R] = []
    for row in rows:
        where = _export_day(row)
        if row.backend_version or where is None:
            out.append(row)
            continue
        later = [v for day, v in stated.get((where[0], row.backend), []) if day >= where[1]]
        bound = min(later, key=lambda v: version_key(v) or ()) if later else ""
        out.append(dataclasses.replace(row, release_at_most=bound) if bound else row)
    return out
