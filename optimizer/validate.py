"""End-to-end fidelity: measured serving benchmarks → closed-loop simulations → MAPE.

Input: a CSV of measured benchmarks in the format of aiconfigurator's ``silicon_sample.csv``
(one row = one deployment benchmarked with ``batch_size`` concurrent users sending requests of
exactly ``isl`` input and ``osl`` output tokens; ``silicon_ttft_ms`` / ``silicon_tpot_ms`` are
the measured means). Every aggregated (``mode == agg``) row is simulated as the benchmark ran:

- **Workload**: a closed loop of ``batch_size`` users, fixed lengths, prompts of fresh blocks
  (the benchmark's random-token prompts share no prefix), every user starting at time 0.
- **Warm-up** (documented choice): not simulated. aiperf (``--warmup-request-count 2·N``) waits
  for every warm-up response before the profiling phase starts, so profiling begins from an
  idle server with all N users sending at once — exactly the simulated start — and warm-up
  leaves nothing behind that the simulator models (no shared prefixes; JIT and allocation
  effects are not simulated). All simulated requests count towards the means.
- **Length of the run**: aiperf sends 20·N requests (20 per user). We simulate
  ``min(20, rounds)`` requests per user (``DEFAULT_ROUNDS``): the load is periodic after the
  first round, so a few rounds give the same means at a fraction of the cost
  (``bench/validate_fidelity.py --rounds 20`` measures the difference).
- **Deployment**: ``tp_size`` GPUs of ``system``, the ``backend`` preset, weight precision from
  ``gemm_quant_mode`` / ``precision`` (empty: fp8 if the model name says FP8, else bf16), KV
  cache in bf16 (the engines' default for these checkpoints), MoE experts split
  ``moe_ep_size`` ways.

Rows that cannot be simulated are returned as ``Skipped`` with the reason, never dropped:
disaggregated rows, models or GPUs not in the catalog, pipeline or attention-data parallelism,
MoE layouts the simulator cannot express, and configurations that do not fit in memory.

Errors: a malformed CSV (missing column, non-numeric value in a row that is simulated) raises
``InputError`` naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from hardware.catalog import load_catalog
from hardware.schema import Catalog
from optimizer.simconfig import closed_loop_workload
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.latency.presets import BACKEND_PRESETS
from slo.inputfile import InputError

__all__ = [
    "DEFAULT_ROUNDS",
    "FidelityReport",
    "RowResult",
    "SiliconRow",
    "Skipped",
    "read_silicon",
    "run_validation",
    "simulate_row",
]

#: Requests per user simulated by default (aiperf sends 20 per user; see module doc).
DEFAULT_ROUNDS = 5
#: Requests per user aiperf sends in the profiling phase (``--num-requests 20·N``).
BENCHMARK_ROUNDS = 20

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
_INT_COLUMNS = ("isl", "osl", "batch_size", "tp_size")
_FLOAT_COLUMNS = ("silicon_ttft_ms", "silicon_tpot_ms")
#: Optional integer columns and their value when empty.
_OPTIONAL_INTS = {"pp_size": 1, "attention_dp_size": 1, "moe_tp_size": 0, "moe_ep_size": 0}

#: ``gemm_quant_mode`` / ``precision`` spellings → the simulator's weight precision.
_PRECISIONS = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "fp8_static": "fp8",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
    "fp4": "fp4",
    "int8": "int8",
    "w8a8": "int8",
    "int4": "int4",
    "w4a16": "int4",
    "awq": "int4",
}


# ----- rows -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SiliconRow:
    """One measured benchmark (an aggregated row; numbers parsed and checked)."""

    line: int
    """Line of the CSV file (the header is line 1)."""
    id: str
    model: str
    backend: str
    system: str
    isl: int
    osl: int
    concurrency: int
    tp: int
    pp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    precision: str
    """Weight precision as written (``gemm_quant_mode``, else ``precision``; may be empty)."""
    measured_ttft_ms: float
    measured_tpot_ms: float

    def describe(self) -> dict[str, Any]:
        """The identifying fields, JSON-ready."""
        return {
            "id": self.id,
            "line": self.line,
            "model": self.model,
            "backend": self.backend,
            "isl": self.isl,
            "osl": self.osl,
            "concurrency": self.concurrency,
            "tp": self.tp,
            "precision": self.precision or None,
        }


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


@dataclass(frozen=True, slots=True)
class RowResult:
    """Predicted against measured means for one simulated row."""

    row: SiliconRow
    predicted_ttft_ms: float
    predicted_tpot_ms: float
    requests: int
    """Requests simulated (all of them count towards the means)."""

    @property
    def ttft_error(self) -> float:
        """Signed relative error of TTFT, (predicted − measured) / measured."""
        return _relative(self.predicted_ttft_ms, self.row.measured_ttft_ms)

    @property
    def tpot_error(self) -> float:
        """Signed relative error of TPOT, (predicted − measured) / measured."""
        return _relative(self.predicted_tpot_ms, self.row.measured_tpot_ms)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the row's identity, both means, both signed errors."""
        return {
            **self.row.describe(),
            "measured_ttft_ms": self.row.measured_ttft_ms,
            "predicted_ttft_ms": self.predicted_ttft_ms,
            "ttft_error": self.ttft_error,
            "measured_tpot_ms": self.row.measured_tpot_ms,
            "predicted_tpot_ms": self.predicted_tpot_ms,
            "tpot_error": self.tpot_error,
            "simulated_requests": self.requests,
        }


def _relative(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if measured > 0 else math.nan


# ----- reading ----------------------------------------------------------------------------------
def read_silicon(path: str | Path) -> tuple[list[SiliconRow], list[Skipped]]:
    """The aggregated rows of ``path`` and the skipped non-aggregated ones, in file order.

    Raises ``InputError`` for a missing file, a missing column, or a value in an aggregated row
    that is not the number its column needs (naming file, line and column).
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            if missing:
                raise InputError(
                    f"{path}: line 1: missing column{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)} (a silicon benchmark CSV needs "
                    f"{', '.join(REQUIRED_COLUMNS)})"
                )
            rows: list[SiliconRow] = []
            skipped: list[Skipped] = []
            for record in reader:
                line = reader.line_num
                mode = (record.get("mode") or "").strip().lower()
                if mode != "agg":
                    skipped.append(_skip(record, line, f"mode '{mode or '(empty)'}' is not agg: "
                                         "only aggregated serving is validated"))
                    continue
                rows.append(_parse_row(path, line, record))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"{path}: cannot read as CSV: {err}") from None
    return rows, skipped


def _skip(record: dict[str, Any], line: int, reason: str) -> Skipped:
    return Skipped(
        line=line,
        id=(record.get("id") or "").strip() or f"line {line}",
        model=(record.get("model_path") or "").strip(),
        backend=(record.get("backend") or "").strip(),
        reason=reason,
    )


def _number(path: Path, line: int, column: str, text: str | None, *, integer: bool) -> float:
    value = (text or "").strip()
    what = "a positive integer" if integer else "a positive number"
    try:
        number = float(value)
    except ValueError:
        shown = f"'{value}'" if value else "an empty value"
        raise InputError(f"{path}: line {line}: column {column}: expected {what}, got {shown}") from None
    if not math.isfinite(number) or number <= 0 or (integer and not number.is_integer()):
        raise InputError(f"{path}: line {line}: column {column}: expected {what}, got '{value}'")
    return number


def _parse_row(path: Path, line: int, record: dict[str, Any]) -> SiliconRow:
    ints = {c: int(_number(path, line, c, record.get(c), integer=True)) for c in _INT_COLUMNS}
    floats = {c: _number(path, line, c, record.get(c), integer=False) for c in _FLOAT_COLUMNS}
    optional: dict[str, int] = {}
    for column, default in _OPTIONAL_INTS.items():
        text = (record.get(column) or "").strip()
        if not text or text.lower() == "nan":
            optional[column] = default
        elif default == 0 and text in ("0", "0.0"):
            optional[column] = 0
        else:
            optional[column] = int(_number(path, line, column, text, integer=True))
    precision = (record.get("gemm_quant_mode") or "").strip() or (
        record.get("precision") or ""
    ).strip()
    return SiliconRow(
        line=line,
        id=(record.get("id") or "").strip() or f"line {line}",
        model=(record.get("model_path") or "").strip(),
        backend=(record.get("backend") or "").strip().lower(),
        system=(record.get("system") or "").strip(),
        isl=ints["isl"],
        osl=ints["osl"],
        concurrency=ints["batch_size"],
        tp=ints["tp_size"],
        pp=optional["pp_size"],
        attention_dp=optional["attention_dp_size"],
        moe_tp=optional["moe_tp_size"],
        moe_ep=optional["moe_ep_size"],
        precision=precision.lower() if precision.lower() != "nan" else "",
        measured_ttft_ms=floats["silicon_ttft_ms"],
        measured_tpot_ms=floats["silicon_tpot_ms"],
    )


# ----- from a row to a simulation ---------------------------------------------------------------
def _weight_precision(row: SiliconRow) -> str | None:
    """The simulator's weight precision for ``row``; None when the spelling is unknown."""
    if not row.precision:
        return "fp8" if "fp8" in row.model.lower() else "bf16"
    return _PRECISIONS.get(row.precision)


def row_config(
    row: SiliconRow, catalog: Catalog, *, latency_model: str
) -> ServingConfig | str:
    """The deployment ``row`` measured, or the reason it cannot be expressed (module doc)."""
    if row.backend not in BACKEND_PRESETS:
        return f"backend '{row.backend}' has no preset (known: {', '.join(BACKEND_PRESETS)})"
    if row.pp > 1:
        return f"pipeline parallelism (pp_size={row.pp}) is not modelled"
    if row.attention_dp > 1:
        return f"data-parallel attention (attention_dp_size={row.attention_dp}) is not modelled"
    try:
        model = catalog.model(row.model)
        gpu = catalog.gpu(row.system)
    except InputError as err:
        return str(err).split(";", 1)[0]  # "unknown model 'x' (did you mean ...)"
    precision = _weight_precision(row)
    if precision is None:
        return f"unknown precision '{row.precision}'"
    ep: int | None = None
    if model.is_moe:
        moe_tp, moe_ep = row.moe_tp or 1, row.moe_ep or 1
        if moe_tp * moe_ep != row.tp:
            return (
                f"MoE layout moe_tp_size={moe_tp} × moe_ep_size={moe_ep} != tp_size={row.tp} "
                "cannot be expressed"
            )
        ep = moe_ep
    try:
        return ServingConfig(
            model=model.name,
            gpu=gpu.name,
            tp=row.tp,
            ep=ep,
            weight_precision=precision,  # type: ignore[arg-type]  # checked by pydantic
            backend=row.backend,
            latency_model=latency_model,
        )
    except ValueError as err:  # pydantic's ValidationError is a ValueError
        return f"cannot express the deployment: {str(err).splitlines()[0]}"


def rounds_for(rounds: int) -> int:
    """Requests per user actually simulated: ``rounds`` capped at the benchmark's 20."""
    return max(1, min(BENCHMARK_ROUNDS, rounds))


def simulate_row(
    row: SiliconRow,
    *,
    latency_model: str,
    catalog: Catalog,
    seed: int = 0,
    rounds: int = DEFAULT_ROUNDS,
) -> RowResult | Skipped:
    """Simulate the benchmark of ``row`` and return its mean TTFT and TPOT (module doc).

    An ``InputError`` from a bad ``latency_model`` spec propagates (a user mistake that would
    fail every row); a configuration that cannot run becomes ``Skipped``.
    """
    config = row_config(row, catalog, latency_model=latency_model)
    if isinstance(config, str):
        return Skipped(row.line, row.id, row.model, row.backend, config)
    requests = row.concurrency * rounds_for(rounds)
    workload = closed_loop_workload(
        users=row.concurrency,
        requests=requests,
        input_tokens=row.isl,
        output_tokens=row.osl,
        source=f"row {row.id}",
    )
    result = simulate(config, workload, seed=seed, catalog=catalog)
    if not result.feasible or result.summary is None:
        return Skipped(row.line, row.id, row.model, row.backend, f"infeasible: {result.reason}")
    if not result.records:
        rejected = result.summary.n_rejected
        return Skipped(
            row.line, row.id, row.model, row.backend,
            f"no request finished ({rejected} rejected: longer than the context or the KV cache)",
        )
    arrays = result.per_request_ms()
    tpot = arrays["tpot_ms"]
    return RowResult(
        row=row,
        predicted_ttft_ms=float(np.mean(arrays["ttft_ms"])),
        predicted_tpot_ms=float(np.nanmean(tpot)) if np.any(~np.isnan(tpot)) else math.nan,
        requests=len(result.records),
    )


# ----- many rows --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GroupSummary:
    """MAPE of one (model, backend) group."""

    model: str
    backend: str
    n: int
    ttft_mape: float
    tpot_mape: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "model": self.model,
            "backend": self.backend,
            "n": self.n,
            "ttft_mape": self.ttft_mape,
            "tpot_mape": self.tpot_mape,
        }


def mape(errors: Iterable[float]) -> float:
    """Mean absolute relative error (a fraction) over the finite ``errors``; NaN when none."""
    values = [abs(e) for e in errors if math.isfinite(e)]
    return float(np.mean(values)) if values else math.nan


@dataclass(frozen=True, slots=True)
class FidelityReport:
    """Every simulated and skipped row of one validation run."""

    latency_model: str
    rounds: int
    results: tuple[RowResult, ...]
    skipped: tuple[Skipped, ...]

    def groups(self) -> list[GroupSummary]:
        """MAPE per (model, backend), in order of first appearance."""
        keys = list(dict.fromkeys((r.row.model, r.row.backend) for r in self.results))
        out = []
        for model, backend in keys:
            members = [r for r in self.results if (r.row.model, r.row.backend) == (model, backend)]
            out.append(
                GroupSummary(
                    model,
                    backend,
                    len(members),
                    mape(r.ttft_error for r in members),
                    mape(r.tpot_error for r in members),
                )
            )
        return out

    def summary(self) -> dict[str, Any]:
        """Overall MAPE (fractions) over every simulated row, and the counts."""
        return {
            "ttft_mape": mape(r.ttft_error for r in self.results),
            "tpot_mape": mape(r.tpot_error for r in self.results),
            "n": len(self.results),
            "n_skipped": len(self.skipped),
            "latency_model": self.latency_model,
            "rounds": self.rounds,
        }

    def to_dict(self) -> dict[str, Any]:
        """``{"rows", "summary", "groups", "skipped"}`` (what ``kvplan validate --json`` prints)."""
        return {
            "rows": [r.to_dict() for r in self.results],
            "summary": self.summary(),
            "groups": [g.to_dict() for g in self.groups()],
            "skipped": [s.to_dict() for s in self.skipped],
        }


def select_rows(
    rows: Sequence[SiliconRow],
    *,
    model: str | None = None,
    backend: str | None = None,
    limit: int | None = None,
) -> list[SiliconRow]:
    """The rows of ``model`` (full id or the part after '/', case-insensitive) and ``backend``;
    with ``limit``, at most that many spread evenly over them (deterministic)."""
    picked = list(rows)
    if model:
        key = model.strip().lower()
        picked = [
            r for r in picked if key in (r.model.lower(), r.model.lower().rsplit("/", 1)[-1])
        ]
    if backend:
        picked = [r for r in picked if r.backend == backend.strip().lower()]
    if limit is not None and 0 < limit < len(picked):
        # Even spacing keeps every group and regime represented, unlike the first `limit` rows.
        index = np.linspace(0, len(picked) - 1, limit).round().astype(int)
        picked = [picked[i] for i in dict.fromkeys(index.tolist())]
    return picked


def _simulate_one(
    row: SiliconRow, latency_model: str, catalog_path: str | None, seed: int, rounds: int
) -> RowResult | Skipped:
    """Worker entry (module level so it pickles); the catalog is reloaded per process."""
    return simulate_row(
        row, latency_model=latency_model, catalog=load_catalog(catalog_path), seed=seed,
        rounds=rounds,
    )


def run_validation(
    rows: Sequence[SiliconRow],
    *,
    latency_model: str,
    catalog_path: str | Path | None = None,
    seed: int = 0,
    rounds: int = DEFAULT_ROUNDS,
    jobs: int = 1,
    skipped: Sequence[Skipped] = (),
    progress: Callable[[int], None] | None = None,
) -> FidelityReport:
    """Simulate every row (in ``jobs`` processes) and collect the report.

    ``skipped`` are rows already set aside (e.g. by ``read_silicon``); they come first in the
    report's skipped list. ``progress`` is called with 1 after each row.
    """
    catalog = None if catalog_path is None else str(catalog_path)
    work = partial(
        _simulate_one, latency_model=latency_model, catalog_path=catalog, seed=seed, rounds=rounds
    )
    outcomes: list[RowResult | Skipped] = []
    if jobs > 1 and len(rows) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for outcome in pool.map(work, rows):
                outcomes.append(outcome)
                if progress:
                    progress(1)
    else:
        for row in rows:
            outcomes.append(work(row))
            if progress:
                progress(1)
    results = tuple(o for o in outcomes if isinstance(o, RowResult))
    more = tuple(o for o in outcomes if isinstance(o, Skipped))
    return FidelityReport(latency_model, rounds_for(rounds), results, (*skipped, *more))
