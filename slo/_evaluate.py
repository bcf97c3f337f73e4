"""Evaluating measured metrics against an SLO: constraint violations and objective values.

Called once per optimizer trial, after the simulator has summarised its per-request records into
flat metrics. Each constraint gets a *relative* violation, so limits in milliseconds, dollars and
GPUs can be compared and summed by a sampler:

- upper bound (latency targets, budget): ``(measured - limit) / limit``
- lower bound (attainment):               ``(limit - measured) / limit``

Optuna's convention: a violation ≤ 0 is feasible. A measured value that is NaN (e.g. a percentile
of zero finished requests) counts as infinitely violated, because Optuna rejects NaN constraints
and "no measurement" must never look feasible.

This is not where metrics are computed: that is the simulator's job (``slo.attainment`` helps).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from slo._metrics import metric_value
from slo._spec import SloSpec

__all__ = ["ConstraintResult", "SloReport", "check_budget", "evaluate", "objective_values"]

ConstraintKind = Literal["target", "attainment", "budget"]

# A budget limit's name -> the flat metric it bounds.
_BUDGET_METRIC: dict[str, str] = {
    "usd_per_hour": "usd_per_hour",
    "usd_per_month": "usd_per_month",
    "max_gpus": "gpus",
}


@dataclass(frozen=True, slots=True)
class ConstraintResult:
    """One checked constraint: a latency target, the attainment floor or a budget limit.

    ``measured`` and ``limit`` are in the constraint's own unit (ms, share, USD, GPUs);
    ``violation`` is relative and unitless, ≤ 0 when met.
    """

    name: str  # "ttft_ms.p90", "attainment", "budget.usd_per_hour"
    kind: ConstraintKind
    measured: float
    limit: float
    violation: float

    @property
    def met(self) -> bool:
        """Whether the constraint holds (``violation <= 0``)."""
        return self.violation <= 0


def _violation(measured: float, limit: float, *, upper: bool) -> float:
    if math.isnan(measured):
        return math.inf
    excess = measured - limit if upper else limit - measured
    return excess / limit


@dataclass(frozen=True, slots=True)
class SloReport:
    """Outcome of ``evaluate``: every constraint in a fixed order, and the objectives.

    The order of ``constraints`` (and so of ``violations``) depends on the spec only: targets in
    file order, then attainment, then budget limits (usd_per_hour, usd_per_month, max_gpus).
    Every trial of one study therefore reports the same constraint at the same index.
    """

    spec: SloSpec
    targets: tuple[ConstraintResult, ...]
    attainment: ConstraintResult | None
    budget: tuple[ConstraintResult, ...]
    metrics: Mapping[str, float] = field(repr=False)

    @property
    def constraints(self) -> tuple[ConstraintResult, ...]:
        """All constraints in the report's fixed order."""
        floor = () if self.attainment is None else (self.attainment,)
        return (*self.targets, *floor, *self.budget)

    @property
    def violations(self) -> tuple[float, ...]:
        """Relative violations in ``constraints`` order; ≤ 0 feasible (Optuna's convention)."""
        return tuple(c.violation for c in self.constraints)

    @property
    def constraint_names(self) -> tuple[str, ...]:
        """Names parallel to ``violations``, for labelling stored trials."""
        return tuple(c.name for c in self.constraints)

    @property
    def feasible(self) -> bool:
        """Whether every constraint is met (trivially true when there are none)."""
        return all(c.met for c in self.constraints)

    @property
    def directions(self) -> dict[str, str]:
        """Optimization direction per objective role (latency, throughput, cost)."""
        return dict(self.spec.objectives.directions)

    def objective_values(self, metrics: Mapping[str, float] | None = None) -> dict[str, float]:
        """Objective value per role, in ``directions`` order, from ``metrics``.

        ``metrics`` defaults to the mapping this report was evaluated on. Raises
        ``MissingMetricError`` when an objective's metric is absent and not derivable.
        """
        return objective_values(self.metrics if metrics is None else metrics, self.spec)


def objective_values(metrics: Mapping[str, float], spec: SloSpec) -> dict[str, float]:
    """The spec's latency, throughput and cost objective values, read or derived from metrics."""
    return {
        role: metric_value(metrics, objective.metric, spec)
        for role, objective in spec.objectives.by_role().items()
    }


def evaluate(metrics: Mapping[str, float], spec: SloSpec) -> SloReport:
    """Check ``metrics`` (flat names, e.g. ``ttft_ms.p90``) against every constraint of ``spec``.

    Reads each target's ``<metric>.<statistic>``, ``attainment`` when the spec sets a floor, and
    ``usd_per_hour`` / ``usd_per_month`` / ``gpus`` for the budget limits that are set (see
    ``slo._metrics`` for what is derived when absent). Objective values are read lazily by
    ``SloReport.objective_values``, so a report can be made from constraint metrics alone.

    Raises ``MissingMetricError`` (a ``KeyError``) naming the first metric that is needed but
    neither present nor derivable.
    """
    frozen = MappingProxyType(dict(metrics))
    targets = tuple(
        _check(frozen, spec, f"{m}.{stat}", metric=f"{m}.{stat}", kind="target", limit=limit)
        for m, stat, limit in spec.target_items()
    )
    floor = None
    if spec.attainment is not None:
        floor = _check(
            frozen,
            spec,
            "attainment",
            metric="attainment",
            kind="attainment",
            limit=spec.attainment,
        )
    budget = check_budget(frozen, spec)
    return SloReport(spec=spec, targets=targets, attainment=floor, budget=budget, metrics=frozen)


def check_budget(metrics: Mapping[str, float], spec: SloSpec) -> tuple[ConstraintResult, ...]:
    """The budget limits of ``spec`` that are set, checked against ``metrics`` (``usd_per_hour``
    and ``gpus`` suffice: ``usd_per_month`` is derived). The one budget rule: ``evaluate`` and
    the optimizer's no-simulation budget screen both use it."""
    return tuple(
        _check(metrics, spec, f"budget.{key}", metric=_BUDGET_METRIC[key], kind="budget", limit=lim)
        for key, lim in spec.budget.limits().items()
    )


def _check(
    metrics: Mapping[str, float],
    spec: SloSpec,
    name: str,
    *,
    metric: str,
    kind: ConstraintKind,
    limit: float,
) -> ConstraintResult:
    measured = metric_value(metrics, metric, spec)
    violation = _violation(measured, limit, upper=kind != "attainment")
    return ConstraintResult(name, kind, measured, limit, violation)
