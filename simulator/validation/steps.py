"""The isolated estimator check (HiSim's): measured fixed batches → step-time MAPE.

``kvplan validate --steps FILE`` reads a CSV of measured engine steps, one batch per row::

    id,gpu,engine,model,tp,precision,kv_precision,batch,measured_ms
    q32-tp2-n16,h100_sxm,trtllm,Qwen/Qwen3-32B,2,fp8,fp8,1088x16,21.3

``batch`` lists the step's requests as ``cache_len:new_tokens`` pairs separated by spaces or
``;`` (a pair ``AxB`` is shorthand for ``B`` requests of cache ``A`` and one new token, i.e. a
decode step); ``measured_ms`` is the measured step time. ``precision`` is the weight
precision; ``kv_precision`` may be empty (bf16). ``id`` is optional. Every row is priced by
the latency model for its deployment with the engine's kernel tables and its preset's CPU
overheads, exactly as the serving simulator prices a step, and compared with the measurement.

Errors: a missing or unknown column, or a value that is not what its column needs, raises
``InputError`` naming the file, the line and the column. A row the simulator cannot express
(unknown model or GPU, a precision the GPU lacks) is returned as skipped with the reason.
"""

from __future__ import annotations

import csv
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hardware.schema import Catalog
from simulator.latency import Deployment, LatencyContext, make_latency_model
from simulator.presets import load_preset
from simulator.validation.report import ErrorStats, error_stats
from simulator.validation.silicon.rows import MAX_SILICON_NUMBER, Skipped, check_header
from slo.inputfile import InputError

__all__ = ["STEP_COLUMNS", "StepReport", "StepRow", "read_steps", "validate_steps"]

#: Columns of a steps file; ``id`` and ``kv_precision`` may be left out.
STEP_COLUMNS = ("id", "gpu", "engine", "model", "tp", "precision", "kv_precision", "batch",
                "measured_ms")  # fmt: skip
_OPTIONAL = ("id", "kv_precision")
_PAIR = re.compile(r"^(\d+):(\d+)$")
_DECODES = re.compile(r"^(\d+)x(\d+)$")
#: Most requests one measured step may list (engines schedule thousands at most); a mistyped
#: ``AxB`` of 1e14 requests once exhausted memory expanding it.
MAX_STEP_REQUESTS = 1_000_000


@dataclass(frozen=True, slots=True)
class StepRow:
    """One measured batch."""

    line: int
    id: str
    gpu: str
    engine: str
    model: str
    tp: int
    precision: str
    kv_precision: str
    batch: tuple[tuple[int, int], ...]
    measured_ms: float


@dataclass(frozen=True, slots=True)
class StepReport:
    """Predicted against measured step times."""

    latency_model: str
    rows: tuple[tuple[StepRow, float], ...]
    skipped: tuple[Skipped, ...]

    def stats(self) -> ErrorStats:
        """Error statistics of the predicted step times."""
        return error_stats((p - r.measured_ms) / r.measured_ms for r, p in self.rows)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every row with its prediction and error, the statistics, the skipped."""
        return {
            "latency_model": self.latency_model,
            "rows": [
                {
                    "id": r.id,
                    "line": r.line,
                    "gpu": r.gpu,
                    "engine": r.engine,
                    "model": r.model,
                    "tp": r.tp,
                    "requests": len(r.batch),
                    "measured_ms": r.measured_ms,
                    "predicted_ms": p,
                    "error": (p - r.measured_ms) / r.measured_ms,
                }
                for r, p in self.rows
            ],
            "summary": self.stats().to_dict(),
            "skipped": [s.to_dict() for s in self.skipped],
        }


def read_steps(path: str | Path) -> list[StepRow]:
    """The rows of a steps file (module doc); ``InputError`` naming file, line and column."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            required = [c for c in STEP_COLUMNS if c not in _OPTIONAL]
            check_header(path, reader.fieldnames or [], STEP_COLUMNS, required, "a steps file")
            return [_parse(path, reader.line_num, record) for record in reader]
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"{path}: cannot read as CSV: {err}") from None


def _parse(path: Path, line: int, record: Mapping[str, str | None]) -> StepRow:
    def text(column: str) -> str:
        return (record.get(column) or "").strip()

    def bad(column: str, expected: str) -> InputError:
        shown = f"'{text(column)}'" if text(column) else "an empty value"
        return InputError(f"{path}: line {line}: column {column}: expected {expected}, got {shown}")

    for column in ("gpu", "engine", "model", "precision"):
        if not text(column):
            raise bad(column, "a name")
    if not text("tp").isdigit() or int(text("tp")) < 1:
        raise bad("tp", "a positive integer")
    try:
        measured = float(text("measured_ms"))
    except ValueError:
        raise bad("measured_ms", "a positive number of milliseconds") from None
    if not math.isfinite(measured) or measured <= 0:
        raise bad("measured_ms", "a positive number of milliseconds")
    if measured > MAX_SILICON_NUMBER:
        raise bad("measured_ms", f"at most {MAX_SILICON_NUMBER:,.0f} milliseconds")
    batch = _batch(text("batch"))
    if batch is None:
        raise bad(
            "batch",
            f"cache_len:new_tokens pairs (or AxB: B decodes at cache A), at most "
            f"{MAX_STEP_REQUESTS:,} requests of at most {MAX_SILICON_NUMBER:,.0f} tokens",
        )
    return StepRow(
        line, text("id") or f"line {line}", text("gpu"), text("engine").lower(), text("model"),
        int(text("tp")), text("precision").lower(), text("kv_precision").lower() or "bf16",
        batch, measured,
    )  # fmt: skip


def _batch(text: str) -> tuple[tuple[int, int], ...] | None:
    """The (cache_len, new_tokens) pairs of a ``batch`` cell (module doc); None where it is not
    one, or lists more than ``MAX_STEP_REQUESTS`` requests or lengths past
    ``MAX_SILICON_NUMBER``."""
    pairs: list[tuple[int, int]] = []
    for item in re.split(r"[;\s]+", text.strip()):
        pair, decodes = _PAIR.match(item), _DECODES.match(item)
        if pair:
            cache, new, count = int(pair[1]), int(pair[2]), 1
        elif decodes:
            cache, new, count = int(decodes[1]), 1, int(decodes[2])
        else:
            return None
        if len(pairs) + count > MAX_STEP_REQUESTS:
            return None
        pairs.extend([(cache, new)] * count)
    if not pairs or any(new < 1 or max(cache, new) > MAX_SILICON_NUMBER for cache, new in pairs):
        return None
    return tuple(pairs)


def validate_steps(
    rows: list[StepRow],
    *,
    latency_model: str,
    catalog: Catalog,
    profile_roots: Sequence[str | Path] = (),
    table_cache: str | Path | None = None,
) -> StepReport:
    """Price every row's batch with ``latency_model`` on its engine's kernels (module doc;
    ``profile_roots`` are the user's imported profiles, searched first, ``table_cache`` where
    built tables are kept). An ``InputError`` from a bad ``latency_model`` spec propagates; a
    row that cannot be expressed is skipped."""
    priced: list[tuple[StepRow, float]] = []
    skipped: list[Skipped] = []
    for row in rows:
        try:
            preset = load_preset(row.engine)
            deployment = Deployment(
                catalog.model(row.model), catalog.gpu(row.gpu), tp=row.tp,
                weight_precision=row.precision, kv_precision=row.kv_precision,
                allow_multi_node=True, fp8_weight_only=preset.fp8_weight_only,
                linear_state_precision=preset.linear_state_precision,
                mxfp4_expert_alignment=preset.mxfp4_expert_alignment(
                    catalog.gpu(row.gpu), None
                ),
            )  # fmt: skip
        except (InputError, KeyError) as err:
            reason = str(err).split(";", 1)[0]
            skipped.append(Skipped(row.line, row.id, row.model, row.engine, reason))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # grid-gap notes would repeat for every row
            model = make_latency_model(
                latency_model,
                deployment,
                params=preset.compose_params(),
                context=LatencyContext.of(preset.name, profile_roots, table_cache),
            )
            priced.append((row, model.step_seconds(list(row.batch)) * 1e3))
    return StepReport(latency_model, tuple(priced), tuple(skipped))
