"""KV-capacity margin: how much a prediction depends on the size of the KV pool.

A deployment near its KV-capacity edge queues requests for memory, and its TTFT then moves
steeply with the pool: on the H100 benchmark rows a pool 10% smaller than the memory rules'
multiplies some rows' simulated TTFT by 2-4 (bench/README.md, "KV-capacity margin"), and those
rows are also the worst predicted (TTFT MAPE 47% against 22% for the others). Engines size
their pools from what they measure at start-up, which a rule reproduces only to a few percent
and an engine release's own quirks can move further; several capacity-bound rows of the
benchmark file behave as if their pool were 5-15% below the rule's (others match it).

``kv_margin`` re-simulates a configuration with its L1 pool scaled by ``1 - fraction`` and
``1 + fraction`` (``ServingConfig.kv_capacity_scale``; same workload and seed) and compares
TTFT (mean and p90) and TPOT (p50) with the nominal run. A prediction is **on the KV-capacity
edge** when either variant moves a TTFT figure by ``EDGE_RATIO`` or more, or only one of the
two can run; such a figure is a statement about the pool as much as about the deployment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hardware.schema import Catalog
from simulator.api import SimResult, WorkloadBuilder, simulate
from simulator.config import ServingConfig

__all__ = ["DEFAULT_FRACTION", "EDGE_RATIO", "KvMargin", "MarginRun", "kv_margin"]

#: The pool change ``kv_margin`` tries by default, both ways (10%: the gap between the rule and
#: the pools the capacity-bound benchmark rows imply).
DEFAULT_FRACTION = 0.10
#: A TTFT ratio to the nominal run (either way) from which a prediction is on the edge.
EDGE_RATIO = 1.5
#: The figures compared, ``(metric, statistic)`` of ``Summary``.
FIGURES: tuple[tuple[str, str], ...] = (("ttft_ms", "mean"), ("ttft_ms", "p90"), ("tpot_ms", "p50"))


@dataclass(frozen=True, slots=True)
class MarginRun:
    """One variant: the pool factor, its figures (None: it could not run) and their ratios to
    the nominal run's."""

    scale: float
    figures: dict[str, float] | None
    ratios: dict[str, float] | None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (non-finite numbers as None)."""
        return {
            "kv_capacity_scale": self.scale,
            "feasible": self.figures is not None,
            "figures": _finite(self.figures),
            "ratios": _finite(self.ratios),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class KvMargin:
    """The nominal run's figures and the two variants (module doc)."""

    fraction: float
    nominal: dict[str, float]
    smaller: MarginRun
    larger: MarginRun

    @property
    def edge(self) -> bool:
        """Whether the prediction is on the KV-capacity edge (module doc)."""
        runs = (self.smaller, self.larger)
        if any(run.ratios is None for run in runs):
            return True
        return any(
            not math.isfinite(value) or abs(math.log(value)) >= math.log(EDGE_RATIO)
            for run in runs
            for key, value in (run.ratios or {}).items()
            if key.startswith("ttft")
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "fraction": self.fraction,
            "edge": self.edge,
            "nominal": _finite(self.nominal),
            "smaller": self.smaller.to_dict(),
            "larger": self.larger.to_dict(),
        }

    def sentence(self) -> str:
        """One line for people: the TTFT p90 and TPOT p50 moves, and the verdict."""
        pct = f"{self.fraction:.0%}"
        parts = [
            f"{label} {pct}: {_moves(run)}"
            for label, run in (("smaller", self.smaller), ("larger", self.larger))
        ]
        verdict = (
            "on the KV-capacity edge: the prediction depends steeply on the pool, which "
            "engines size from what they measure at start-up"
            if self.edge
            else "not capacity-bound"
        )
        return f"KV pool {'; '.join(parts)} — {verdict}"


def kv_margin(
    config: ServingConfig,
    workload: WorkloadBuilder,
    nominal: SimResult,
    *,
    seed: int,
    catalog: Catalog | None = None,
    fraction: float = DEFAULT_FRACTION,
    drop_overlong_requests: bool = True,
) -> KvMargin:
    """``nominal`` (a feasible run of ``config`` on ``workload`` with ``seed``) against the
    same run with the pool ``fraction`` smaller and larger (module doc). ``ValueError`` if
    ``fraction`` is not in (0, 1) or ``nominal`` did not run."""
    if not 0 < fraction < 1:
        raise ValueError(f"kv_margin: fraction must lie in (0, 1), got {fraction}")
    base = _figures(nominal)
    if base is None:
        raise ValueError("kv_margin: the nominal run did not run")

    def run(scale: float) -> MarginRun:
        variant = config.model_copy(update={"kv_capacity_scale": config.kv_capacity_scale * scale})
        result = simulate(
            variant,
            workload,
            seed=seed,
            catalog=catalog,
            drop_overlong_requests=drop_overlong_requests,
        )
        figures = _figures(result)
        if figures is None:
            return MarginRun(scale, None, None, result.reason)
        ratios = {key: _ratio(figures[key], base[key]) for key in base}
        return MarginRun(scale, figures, ratios)

    return KvMargin(fraction, base, run(1 - fraction), run(1 + fraction))


def _figures(result: SimResult) -> dict[str, float] | None:
    """The compared figures of a run, or None if it could not run or finished nothing."""
    summary = result.summary
    if summary is None or not result.feasible or summary.n_requests == 0:
        return None
    return {
        f"{metric}.{stat}": float(getattr(getattr(summary, metric), stat))
        for metric, stat in FIGURES
    }


def _ratio(value: float, base: float) -> float:
    if base > 0 and math.isfinite(base):
        return value / base
    return 1.0 if value == base else math.inf


def _moves(run: MarginRun) -> str:
    if run.ratios is None:
        return f"cannot run ({run.reason})" if run.reason else "cannot run"
    ttft, tpot = run.ratios["ttft_ms.p90"], run.ratios["tpot_ms.p50"]
    return f"TTFT p90 x{ttft:.2f}, TPOT p50 x{tpot:.2f}"


def _finite(values: dict[str, float] | None) -> dict[str, float | None] | None:
    if values is None:
        return None
    return {k: (v if math.isfinite(v) else None) for k, v in values.items()}
