"""From finished trials to the feasible Pareto front and the recommended picks.

Works on ``TrialRecord`` (a plain snapshot of an Optuna trial), so a study re-rendered from
storage (``kvplan report``) gives exactly what the live run printed.

Picks (``optimizer.picks``): per objective, the cheapest configuration within ``tolerance`` of
the best, and the knee on meaningfully scaled objectives; an objective that varies less than its
noise over the front is noted as no trade-off instead. Near duplicates — front members whose
objectives all lie within ``collapse`` (relative) of an earlier member's — are collapsed into
that member, so the table shows distinct trade-offs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optimizer.pareto import non_dominated, to_minimisation
from optimizer.picks import DEFAULT_TOLERANCE, ObjectiveInfo, make_picks

__all__ = ["Pick", "StudyResult", "TrialRecord", "settings_text", "summarise"]


def settings_text(params: Mapping[str, Any]) -> str:
    """``key=value, ...`` of a configuration's settings, the model left out; floats at 6
    significant digits (a sampler's float steps leave values like 0.8500000000000001)."""
    return ", ".join(
        f"{key}={value:.6g}" if isinstance(value, float) else f"{key}={value}"
        for key, value in params.items()
        if key != "model"
    )


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """One finished trial: its parameters, objective values, metrics and feasibility."""

    number: int
    params: Mapping[str, Any]
    objectives: Mapping[str, float]
    """Objective name (latency/throughput/cost) -> value, in the study's order."""
    constraints: tuple[float, ...]
    """Constraint values, ≤ 0 feasible (Optuna's convention)."""
    metrics: Mapping[str, Any] = field(default_factory=dict)
    """Everything the simulator and the SLO evaluation reported (for reports)."""
    infeasible_reason: str = ""
    """Why the trial is infeasible, when it is ('' otherwise)."""

    @property
    def feasible(self) -> bool:
        """Whether every constraint is satisfied."""
        return all(c <= 0 for c in self.constraints)


@dataclass(frozen=True, slots=True)
class Pick:
    """A recommended trial and why it was picked."""

    label: str
    trial: TrialRecord
    why: str


@dataclass(frozen=True, slots=True)
class StudyResult:
    """The outcome of a study: counts, the collapsed feasible front, and the picks."""

    directions: Mapping[str, str]
    n_trials: int
    n_feasible: int
    front: tuple[TrialRecord, ...]
    picks: tuple[Pick, ...]
    notes: tuple[str, ...] = ()
    """What the picks could not say with a pick (objectives that are no trade-off, advice)."""
    objectives: Mapping[str, ObjectiveInfo] = field(default_factory=dict)
    """Role -> what the objective is (metric, unit, SLO target)."""
    tolerance: float = DEFAULT_TOLERANCE
    """Relative tolerance of the "best X" picks."""


def _collapse(
    front: list[TrialRecord], names: Sequence[str], tolerance: float
) -> list[TrialRecord]:
    kept: list[TrialRecord] = []
    for record in front:
        values = np.array([record.objectives[n] for n in names], dtype=float)
        duplicate = False
        for other in kept:
            ref = np.array([other.objectives[n] for n in names], dtype=float)
            scale = np.maximum(np.abs(ref), 1e-12)
            if np.all(np.abs(values - ref) <= tolerance * scale):
                duplicate = True
                break
        if not duplicate:
            kept.append(record)
    return kept


def summarise(
    records: Sequence[TrialRecord],
    directions: Mapping[str, str],
    *,
    collapse: float = 0.01,
    tolerance: float = DEFAULT_TOLERANCE,
    objectives: Mapping[str, ObjectiveInfo] | None = None,
) -> StudyResult:
    """The feasible non-dominated set (near-duplicates collapsed) and the recommended picks.

    ``directions`` maps objective name -> 'minimize' | 'maximize', in the study's order;
    ``objectives`` says what each is (default: the name is the metric, no SLO target).
    """
    names = list(directions)
    infos = dict(objectives or {n: ObjectiveInfo(n, n, directions[n]) for n in names})
    feasible = [r for r in records if r.feasible]
    if not feasible:
        return StudyResult(dict(directions), len(records), 0, (), (), objectives=infos)
    points = to_minimisation(
        [[r.objectives[n] for n in names] for r in feasible], [directions[n] for n in names]
    )
    front_idx = non_dominated(points)
    # Cheapest first inside the front, so collapsing keeps the cheaper of two near-twins.
    order = sorted(front_idx, key=lambda i: tuple(points[i][::-1]))
    front = _collapse([feasible[i] for i in order], names, collapse)
    chosen = make_picks(front, infos, tolerance=tolerance)
    return StudyResult(
        dict(directions),
        len(records),
        len(feasible),
        tuple(front),
        tuple(Pick(label, trial, why) for label, trial, why in chosen.picks),
        notes=chosen.notes,
        objectives=infos,
        tolerance=tolerance,
    )
