"""Scoring a validation run: error statistics per group and overall, and held-out fits.

For TTFT and TPOT separately (``ErrorStats``): MAPE, the median absolute percentage error, the
median signed error (bias: positive = the simulator is slow), and the MAPE without the worst 1%
of rows (``int(0.01·n)`` rows dropped; none below 100 rows), so that a handful of outliers is
visible as the gap between the two. Groups are (model, backend, mode) by default, or one of
``GROUP_KEYS``: ``gpu``, ``engine``, ``model``, ``concurrency``, ``harness``.

``holdout`` scores generalisation: the only quantity ``validate`` fits to measured rows is the
opt-in TTFT offset per backend (``FITTED_TTFT_OFFSET_MS``; the latency model's calibration is
fitted to kernel profiles, not to these rows). With a hold-out it is refitted on the *other*
rows (the constant that minimises their TTFT MAPE, 0–300 ms in 1 ms steps) and only the held-out
rows are scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from simulator.validation.rules import harness
from simulator.validation.silicon.rows import Row, Skipped, model_matches
from slo.inputfile import InputError

if TYPE_CHECKING:
    from simulator.validation.validate import RowResult

__all__ = [
    "GROUP_KEYS",
    "ErrorStats",
    "FidelityReport",
    "GroupSummary",
    "Holdout",
    "error_stats",
    "fit_ttft_offsets",
    "mape",
    "parse_holdout",
]

#: ``--by`` choices → the label of a row's group.
GROUP_KEYS: dict[str, Callable[[Row], str]] = {
    "group": lambda r: f"{r.model} {r.backend}" + ("" if r.mode == "agg" else f" {r.mode}"),
    "gpu": lambda r: r.system,
    "engine": lambda r: r.backend,
    "model": lambda r: r.model,
    "concurrency": lambda r: f"N={r.concurrency}",
    "harness": harness,
}
GroupKey = Literal["group", "gpu", "engine", "model", "concurrency", "harness"]
_OFFSET_GRID_MS = np.arange(0.0, 301.0, 1.0)


def mape(errors: Iterable[float]) -> float:
    """Mean absolute relative error (a fraction) over the finite ``errors``; NaN when none."""
    values = [abs(e) for e in errors if math.isfinite(e)]
    return float(np.mean(values)) if values else math.nan


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """Signed relative errors of one metric over some rows, summarised (fractions)."""

    n: int
    mape: float
    median_ape: float
    median_bias: float
    #: MAPE without the worst 1% of rows.
    mape_trimmed: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"n": self.n, "mape": self.mape, "median_ape": self.median_ape,
                "median_bias": self.median_bias, "mape_trimmed": self.mape_trimmed}  # fmt: skip


def error_stats(errors: Iterable[float]) -> ErrorStats:
    """``ErrorStats`` of the finite ``errors`` (NaN fields when there are none)."""
    signed = np.array([e for e in errors if math.isfinite(e)], dtype=float)
    if not len(signed):
        return ErrorStats(0, math.nan, math.nan, math.nan, math.nan)
    absolute = np.sort(np.abs(signed))
    drop = int(0.01 * len(absolute))
    kept = absolute[: len(absolute) - drop]
    return ErrorStats(
        len(signed),
        float(absolute.mean()),
        float(np.median(absolute)),
        float(np.median(signed)),
        float(kept.mean()),
    )


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """Error statistics of one group of rows."""

    label: str
    n: int
    ttft: ErrorStats
    tpot: ErrorStats
    #: For the default grouping: the model, backend and mode of the group.
    model: str = ""
    backend: str = ""
    mode: str = "agg"

    @property
    def ttft_mape(self) -> float:
        """MAPE of mean TTFT (a fraction)."""
        return self.ttft.mape

    @property
    def tpot_mape(self) -> float:
        """MAPE of mean TPOT (a fraction)."""
        return self.tpot.mape

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``ttft_mape`` / ``tpot_mape`` kept at the top level)."""
        return {
            "group": self.label,
            "model": self.model,
            "backend": self.backend,
            "mode": self.mode,
            "n": self.n,
            "ttft_mape": self.ttft.mape,
            "tpot_mape": self.tpot.mape,
            "ttft": self.ttft.to_dict(),
            "tpot": self.tpot.to_dict(),
        }


def summarise(label: str, results: Sequence[RowResult]) -> GroupSummary:
    """The ``GroupSummary`` of ``results`` under ``label``."""
    first = results[0].row if results else None
    return GroupSummary(
        label,
        len(results),
        error_stats(r.ttft_error for r in results),
        error_stats(r.tpot_error for r in results),
        first.model if first else "",
        first.backend if first else "",
        first.mode if first else "agg",
    )


@dataclass(frozen=True, slots=True)
class Holdout:
    """Rows whose ``key`` equals ``value`` (``concurrency`` also takes a band ``LO-HI``)."""

    key: str
    value: str

    def matches(self, row: Row) -> bool:
        """Whether ``row`` is held out."""
        if self.key == "concurrency" and "-" in self.value:
            low, high = (int(v) for v in self.value.split("-", 1))
            return low <= row.concurrency <= high
        label = GROUP_KEYS[self.key](row)
        if self.key == "model":
            return model_matches(self.value, label)
        wanted = self.value.strip().lower()
        return label.lower() in (wanted, f"n={wanted}")


def parse_holdout(text: str) -> Holdout:
    """``KEY=VALUE`` → ``Holdout``; ``InputError`` (one line) for a bad spelling."""
    key, sep, value = text.partition("=")
    key = key.strip().lower()
    keys = [k for k in GROUP_KEYS if k != "group"]
    if not sep or not value.strip() or key not in keys:
        raise InputError(
            f"--holdout {text!r}: expected KEY=VALUE with KEY one of {', '.join(keys)}"
        )
    if key == "concurrency":
        try:
            [int(v) for v in value.split("-", 1)]
        except ValueError:
            raise InputError(
                f"--holdout {text!r}: concurrency: expected N or LO-HI, got {value!r}"
            ) from None
    return Holdout(key, value.strip())


def fit_ttft_offsets(results: Sequence[RowResult], backends: Iterable[str]) -> dict[str, float]:
    """Per backend, the constant TTFT offset (ms) that minimises the TTFT MAPE of ``results``
    (rows simulated without an offset); backends without rows get none."""
    offsets: dict[str, float] = {}
    for backend in backends:
        rows = [r for r in results if r.row.backend == backend]
        if not rows:
            continue
        predicted = np.array([r.predicted_ttft_ms for r in rows])
        measured = np.array([r.row.measured_ttft_ms for r in rows])
        errors = np.abs(predicted[None, :] + _OFFSET_GRID_MS[:, None] - measured) / measured
        offsets[backend] = float(_OFFSET_GRID_MS[int(np.argmin(errors.mean(axis=1)))])
    return offsets


@dataclass(frozen=True, slots=True)
class FidelityReport:
    """Every simulated and skipped row of one validation run."""

    latency_model: str
    rounds: int
    results: tuple[RowResult, ...]
    skipped: tuple[Skipped, ...]
    start: str = "together"
    deployment: str = "benchmark"
    ttft_offset: bool = False
    #: The held-out rows scored (None: every row), and the offsets fitted without them.
    holdout: Holdout | None = None
    fitted_offsets_ms: dict[str, float] | None = None

    def groups(self, by: GroupKey = "group") -> list[GroupSummary]:
        """Statistics per group (``GROUP_KEYS``), in order of first appearance."""
        label = GROUP_KEYS[by]
        names = dict.fromkeys(label(r.row) for r in self.results)
        return [summarise(n, [r for r in self.results if label(r.row) == n]) for n in names]

    def summary(self) -> dict[str, Any]:
        """Overall statistics (fractions) over every scored row, and the run's settings."""
        ttft = error_stats(r.ttft_error for r in self.results)
        tpot = error_stats(r.tpot_error for r in self.results)
        return {
            "ttft_mape": ttft.mape,
            "tpot_mape": tpot.mape,
            "ttft": ttft.to_dict(),
            "tpot": tpot.to_dict(),
            "n": len(self.results),
            "n_skipped": len(self.skipped),
            "latency_model": self.latency_model,
            "rounds": self.rounds,
            "start": self.start,
            "deployment": self.deployment,
            "ttft_offset": self.ttft_offset,
            "holdout": f"{self.holdout.key}={self.holdout.value}" if self.holdout else None,
            "fitted_offsets_ms": self.fitted_offsets_ms,
        }

    def to_dict(self, by: GroupKey = "group") -> dict[str, Any]:
        """``{"rows", "summary", "groups", "skipped"}`` (what ``kvplan validate --json`` prints)."""
        return {
            "rows": [r.to_dict() for r in self.results],
            "summary": self.summary(),
            "groups": [g.to_dict() for g in self.groups(by)],
            "skipped": [s.to_dict() for s in self.skipped],
        }

    def held_out(self, holdout: Holdout) -> FidelityReport:
        """Only the rows ``holdout`` matches; with ``ttft_offset`` the per-backend offset is
        refitted on the other rows first (module doc). ``self`` must be a run without the
        offset, so that the fit sees the simulator's own TTFTs."""
        test = [r for r in self.results if holdout.matches(r.row)]
        if not test:
            raise InputError(f"--holdout {holdout.key}={holdout.value}: no simulated row matches")
        offsets: dict[str, float] | None = None
        if self.ttft_offset:
            train = [r for r in self.results if not holdout.matches(r.row)]
            offsets = fit_ttft_offsets(train, {r.row.backend for r in test})
            test = [
                replace(r, predicted_ttft_ms=r.predicted_ttft_ms + offsets.get(r.row.backend, 0))
                for r in test
            ]
        return replace(self, results=tuple(test), holdout=holdout, fitted_offsets_ms=offsets)
