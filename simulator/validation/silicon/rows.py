"""Measured serving benchmarks: the silicon CSV format, read into checked rows.

The format is aiconfigurator's ``silicon_sample.csv``: one row per benchmarked deployment
(``backend``, ``model_path``, ``system``, ``mode`` agg/disagg, ``isl``, ``osl``,
``batch_size`` = concurrent users per attention-DP rank, ``tp_size`` (GPUs per rank: a worker
has ``tp_size × attention_dp_size``), optional ``pp_size``, ``attention_dp_size``,
``moe_tp_size``, ``moe_ep_size`` (``moe_tp × moe_ep`` = the worker's GPUs), ``precision``,
``gemm_quant_mode``, ``moe_quant_mode`` (the routed experts'; ``../rules.py`` reads the
spellings)) with the measured means
``silicon_ttft_ms`` and ``silicon_tpot_ms``. ``read.read_silicon`` returns the
aggregated rows (``SiliconRow``) and the disaggregated ones (``DisaggRow``, parsed by
``disagg.py`` from the per-role ``prefill_*`` / ``decode_*`` columns), checked,
and the rest as ``Skipped`` (with the reason); ``../validate.py`` simulates them.

Errors: a missing column, or a value in a row that is not the number its column needs,
raises ``InputError`` naming the file, the line and the column.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from slo.inputfile import InputError

if TYPE_CHECKING:
    from simulator.validation.silicon.disagg import DisaggRow

__all__ = [
    "KNOWN_COLUMNS",
    "REQUIRED_COLUMNS",
    "MeasuredRow",
    "Row",
    "SiliconRow",
    "Skipped",
    "check_header",
    "identity_fields",
    "model_matches",
    "parse_agg_row",
    "parse_number",
    "select_rows",
    "skipped_row",
    "source_concurrency",
]

#: Columns every file must have.
REQUIRED_COLUMNS = (
    "model_path",
    "backend",
    "system",
    "mode",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
#: Per-role column suffixes of a disaggregated row (``prefill_tp_size``, ``decode_tp_size``, ...).
ROLE_SUFFIXES = (
    "batch_size",
    "num_workers",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
)
#: Every column the format defines (aiconfigurator's silicon CSV): anything else is a typo.
KNOWN_COLUMNS = (
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    *(f"{role}_{what}" for role in ("prefill", "decode") for what in ROLE_SUFFIXES),
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
_INT_COLUMNS = ("isl", "osl", "batch_size", "tp_size")
_FLOAT_COLUMNS = ("silicon_ttft_ms", "silicon_tpot_ms")
#: Optional integer columns and their value when empty.
_OPTIONAL_INTS = {"pp_size": 1, "attention_dp_size": 1, "moe_tp_size": 0, "moe_ep_size": 0}


@dataclass(frozen=True, slots=True)
class MeasuredRow:
    """What every measured benchmark has, whatever its mode (``SiliconRow``, ``DisaggRow``)."""

    line: int
    """Line of the CSV file (the header is line 1)."""
    id: str
    model: str
    backend: str
    system: str
    isl: int
    osl: int
    concurrency: int
    """Users of the closed loop."""
    precision: str
    """Weight precision as written (``gemm_quant_mode``, else ``precision``; may be empty)."""
    measured_ttft_ms: float
    measured_tpot_ms: float
    source: str = field(default="", kw_only=True)
    """``silicon_data_source`` as written: which harness produced the row
    (``simulator/validation/rules.py`` reads it)."""
    backend_version: str = field(default="", kw_only=True)
    """``backend_version`` as written (may be empty)."""
    moe_precision: str = field(default="", kw_only=True)
    """Routed experts' weight precision as written (``moe_quant_mode``, lower-cased; may be
    empty; meaningful for MoE models only)."""
    release_at_most: str = field(default="", kw_only=True)
    """For a row without ``backend_version``: the newest engine release it can have run, as the
    rows of its export say (``versions.py``); empty where the row names its release or nothing
    says. ``release`` reads the two together."""

    @property
    def release(self) -> str:
        """The engine release the row ran (``backend_version``), else the newest it can have
        run (``release_at_most``); empty when unknown. Enough for rules of the form "releases
        before X behave so"."""
        return self.backend_version or self.release_at_most

    @property
    def mode(self) -> str:
        """``agg`` or ``disagg`` (each subclass says)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """The identifying fields, JSON-ready (subclasses add theirs)."""
        return {
            "id": self.id,
            "line": self.line,
            "model": self.model,
            "backend": self.backend,
            "mode": self.mode,
            "isl": self.isl,
            "osl": self.osl,
            "concurrency": self.concurrency,
            "precision": self.precision or None,
        }


def identity_fields(line: int, record: Mapping[str, str | None]) -> dict[str, Any]:
    """The text fields of a ``MeasuredRow`` from a CSV record (``id`` defaults to the line)."""

    def text(column: str) -> str:
        return (record.get(column) or "").strip()

    precision = (text("gemm_quant_mode") or text("precision")).lower()
    experts = text("moe_quant_mode").lower()
    return {
        "line": line,
        "id": text("id") or f"line {line}",
        "model": text("model_path"),
        "backend": text("backend").lower(),
        "system": text("system"),
        "precision": precision if precision != "nan" else "",
        "source": text("silicon_data_source"),
        "backend_version": text("backend_version"),
        "moe_precision": experts if experts != "nan" else "",
    }


@dataclass(frozen=True, slots=True)
class SiliconRow(MeasuredRow):
    """One measured aggregated benchmark (numbers parsed and checked)."""

    tp: int
    pp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int

    @property
    def mode(self) -> str:
        """``agg`` (``DisaggRow.mode`` is ``disagg``)."""
        return "agg"

    def describe(self) -> dict[str, Any]:
        """The identifying fields, JSON-ready."""
        return {**MeasuredRow.describe(self), "tp": self.tp}


#: A measured benchmark of either mode.
Row: TypeAlias = "SiliconRow | DisaggRow"


@dataclass(frozen=True, slots=True)
class Skipped:
    """A row that was not simulated, and why."""

    line: int
    id: str
    model: str
    backend: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "id": self.id,
            "line": self.line,
            "model": self.model,
            "backend": self.backend,
            "reason": self.reason,
        }


def check_header(
    path: Path, header: Sequence[str], known: Sequence[str], required: Sequence[str], what: str
) -> None:
    """``InputError`` naming ``path``, line 1 and the column when ``header`` has a column not
    in ``known`` or lacks one of ``required`` (``what`` names the format in the message)."""
    unknown = [c for c in header if c not in known]
    if unknown:
        raise InputError(
            f"{path}: line 1: unknown column {unknown[0]!r} ({what} has {', '.join(known)})"
        )
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"{path}: line 1: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} ({what} needs {', '.join(required)})"
        )


def skipped_row(record: dict[str, Any], line: int, reason: str) -> Skipped:
    """A row set aside at ``line`` of the file, with ``reason``."""
    return Skipped(
        line=line,
        id=(record.get("id") or "").strip() or f"line {line}",
        model=(record.get("model_path") or "").strip(),
        backend=(record.get("backend") or "").strip(),
        reason=reason,
    )


#: The largest number a silicon column may hold: 1e9 tokens, users, GPUs or ms (11.6 days) is
#: past any benchmark; beyond it a mistyped exponent (1e300) printed a 300-digit TP or scored a
#: measurement no prediction can approach.
MAX_SILICON_NUMBER = 1e9


def parse_number(path: Path, line: int, column: str, text: str | None, *, integer: bool) -> float:
    """``text`` of ``column`` as a positive (integer) number up to ``MAX_SILICON_NUMBER``;
    else ``InputError`` naming file, line and column."""
    value = (text or "").strip()
    what = "a positive integer" if integer else "a positive number"
    try:
        number = float(value)
    except ValueError:
        shown = f"'{value}'" if value else "an empty value"
        raise InputError(
            f"{path}: line {line}: column {column}: expected {what}, got {shown}"
        ) from None
    if math.isfinite(number) and number > MAX_SILICON_NUMBER:
        raise InputError(
            f"{path}: line {line}: column {column}: expected at most {MAX_SILICON_NUMBER:,.0f}, "
            f"got '{value}'"
        )
    if not math.isfinite(number) or number <= 0 or (integer and not number.is_integer()):
        raise InputError(f"{path}: line {line}: column {column}: expected {what}, got '{value}'")
    return number


#: ``silicon_concurrency=N`` in ``silicon_data_source``: the users of the benchmark's closed loop.
_SOURCE_CONCURRENCY = re.compile(r"(?:^|;)\s*silicon_concurrency\s*=\s*([^;]*)")


def source_concurrency(path: Path, line: int, record: Mapping[str, Any]) -> int | None:
    """The users ``silicon_data_source`` records (``silicon_concurrency=N``), or None where it
    records none; raises ``InputError`` (file, line, column) for a value that is not a positive
    integer."""
    match = _SOURCE_CONCURRENCY.search(record.get("silicon_data_source") or "")
    if not match:
        return None
    value = match.group(1).strip()
    try:
        return int(parse_number(path, line, "silicon_data_source", value, integer=True))
    except InputError:
        shown = f"'{value}'" if value else "an empty value"
        raise InputError(
            f"{path}: line {line}: column silicon_data_source: silicon_concurrency: "
            f"expected a positive integer, got {shown}"
        ) from None


def parse_agg_row(path: Path, line: int, record: dict[str, Any]) -> SiliconRow | str:
    """The checked aggregated row of ``record`` (line ``line`` of ``path``), or why it cannot be
    one: a row whose ``silicon_concurrency`` contradicts ``batch_size × attention_dp_size``
    (which users, or which layout, the benchmark ran is then not determined). Raises
    ``InputError`` for a value that is not the number its column needs."""
    ints = {c: int(parse_number(path, line, c, record.get(c), integer=True)) for c in _INT_COLUMNS}
    floats = {c: parse_number(path, line, c, record.get(c), integer=False) for c in _FLOAT_COLUMNS}
    optional: dict[str, int] = {}
    for column, default in _OPTIONAL_INTS.items():
        text = (record.get(column) or "").strip()
        if not text or text.lower() == "nan":
            optional[column] = default
        elif default == 0 and text in ("0", "0.0"):
            optional[column] = 0
        else:
            optional[column] = int(parse_number(path, line, column, text, integer=True))
    # aiconfigurator's batch_size is per attention-DP rank: the benchmark's users are D times
    # it (the MiniMax-M2.5 rows at attention DP 4 record silicon_concurrency = 4 x batch_size).
    users = ints["batch_size"] * max(1, optional["attention_dp_size"])
    recorded = source_concurrency(path, line, record)
    if recorded is not None and recorded != users:
        # Simulating batch_size users would score another load than the one measured (the
        # H100 gpt-oss TensorRT-LLM rows: c192 in the id, 48 per GPU of TP4, no attention DP).
        return (
            f"silicon_concurrency={recorded} but batch_size x attention_dp_size = {users}: "
            "the benchmark's users and its recorded layout disagree"
        )
    return SiliconRow(
        **identity_fields(line, record),
        isl=ints["isl"],
        osl=ints["osl"],
        concurrency=users,
        tp=ints["tp_size"],
        pp=optional["pp_size"],
        attention_dp=optional["attention_dp_size"],
        moe_tp=optional["moe_tp_size"],
        moe_ep=optional["moe_ep_size"],
        measured_ttft_ms=floats["silicon_ttft_ms"],
        measured_tpot_ms=floats["silicon_tpot_ms"],
    )


# ----- from a row to a simulation ---------------------------------------------------------------


def model_matches(wanted: str, model: str) -> bool:
    """Whether the user's ``wanted`` names ``model``: its full id or the part after '/',
    case-insensitive (``Qwen3-32B`` and ``qwen/qwen3-32b`` both name ``Qwen/Qwen3-32B``)."""
    key, name = wanted.strip().lower(), model.lower()
    return key in (name, name.rsplit("/", 1)[-1])


def select_rows(
    rows: Sequence[Row],
    *,
    model: str | None = None,
    backend: str | None = None,
    limit: int | None = None,
) -> list[Row]:
    """The rows of ``model`` (full id or the part after '/', case-insensitive) and ``backend``;
    with ``limit``, at most that many spread evenly over them (deterministic)."""
    picked = list(rows)
    if model:
        picked = [r for r in picked if model_matches(model, r.model)]
    if backend:
        picked = [r for r in picked if r.backend == backend.strip().lower()]
    if limit is not None and 0 < limit < len(picked):
        # Even spacing keeps every group and regime represented, unlike the first `limit` rows.
        index = np.linspace(0, len(picked) - 1, limit).round().astype(int)
        picked = [picked[i] for i in dict.fromkeys(index.tolist())]
    return picked
