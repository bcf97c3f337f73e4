"""Recommendations a planner can defend: tolerance picks, a scaled knee, and noise checks.

Literal argmins are fragile: "best latency" may cost 17% more than a configuration 0.4 ms
slower, and a knee found after rescaling every objective to 0–1 over the front magnifies an
objective that barely varies. So, on the feasible front:

- **best X** is the cheapest configuration whose X lies within ``tolerance`` (relative, default
  2%) of the best X on the front; for the cost objective itself, among the configurations within
  ``tolerance`` of the cheapest, the one with the smallest shortfall (below) on the others.
- **balanced** is the configuration with the smallest shortfall: the Euclidean norm over the
  objectives of ``(value − best) / scale``, the scale being meaningful in the objective's own
  units — the SLO target when the objective's metric has one (a TTFT p90 shortfall of 400 ms
  against a 4,000 ms target counts 0.1), otherwise the best value (a 10% dearer configuration
  counts 0.1).
- An objective whose relative spread on the front is below its **noise** is "not a trade-off
  here": it drives no pick and no knee. The noise of a simulated metric is taken as
  ``1/√n`` for ``n`` simulated requests (the relative standard error of a rate or mean over
  ``n`` independent requests — percentiles are noisier, so this is a floor), at least the
  capacity search's bisection step for a capacity objective, and 0 for costs (deterministic).

What this module is not: it does not find the front (``optimizer.results``) and it reads
nothing from Optuna.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slo import SloSpec

if TYPE_CHECKING:
    from optimizer.results import TrialRecord

__all__ = [
    "CAPACITY_METRIC",
    "DEFAULT_TOLERANCE",
    "ObjectiveInfo",
    "PickSet",
    "make_picks",
    "metric_names",
    "objective_infos",
    "unit_of",
    "wants_capacity",
]

#: Relative tolerance of the "best X" picks (``--tolerance``).
DEFAULT_TOLERANCE = 0.02
#: Relative step of the capacity search's bisection (``simulator.capacity``): the
#: resolution, hence the noise floor, of a capacity objective.
CAPACITY_RESOLUTION = 0.025

_UNITS = (
    ("_ms", "ms"),
    ("tokens_per_s", "tok/s"),
    ("requests_per_s", "req/s"),
    ("usd_per_hour", "USD/h"),
    ("usd_per_month", "USD/month"),
    ("usd_per_million_output_tokens", "USD/1M tok"),
)


#: Display names of metric bases (the unit is added by ``ObjectiveInfo.label``).
_NAMES = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT",
    "itl_ms": "ITL",
    "e2e_ms": "E2E latency",
    "queue_ms": "queueing",
    "goodput_tokens_per_s": "goodput",
    "output_tokens_per_s": "output throughput",
    "capacity_requests_per_s": "capacity",
    "requests_per_s": "request rate",
    "usd_per_hour": "cost",
    "usd_per_million_output_tokens": "cost per output",
}


def unit_of(metric: str) -> str:
    """The unit of a flat metric name (``ttft_ms.p90`` → ``ms``; '' when it has none)."""
    base = metric.split(".", 1)[0]
    return next((unit for suffix, unit in _UNITS if base.endswith(suffix)), "")


@dataclass(frozen=True, slots=True)
class ObjectiveInfo:
    """What one objective is: its role, the metric behind it, direction and meaningful scale."""

    role: str
    """``latency`` / ``throughput`` / ``cost`` (the study's objective names)."""
    metric: str
    """The flat metric optimised (``ttft_ms.p90``, ``capacity_requests_per_s``, …)."""
    direction: str
    """``minimize`` or ``maximize``."""
    target: float | None = None
    """The SLO target of ``metric`` in its unit, when the SLO sets one (the knee's scale)."""

    @property
    def unit(self) -> str:
        """The metric's unit for tables and sentences."""
        return unit_of(self.metric)

    @property
    def name(self) -> str:
        """The metric in words, for sentences: ``TTFT p90``, ``cost``, ``goodput``."""
        base, _, stat = self.metric.partition(".")
        name = _NAMES.get(base) or base.replace("_", " ")
        return " ".join(w for w in (name, stat) if w)

    @property
    def label(self) -> str:
        """A column or axis title with the unit: ``TTFT p90 (ms)``, ``cost (USD/h)``."""
        return f"{self.name} ({self.unit})" if self.unit else self.name

    @property
    def sign(self) -> float:
        """+1 for a minimised objective, -1 for a maximised one."""
        return 1.0 if self.direction == "minimize" else -1.0

    def noise(self, records: Sequence[TrialRecord]) -> float:
        """Relative noise of this objective over ``records`` (module docstring)."""
        if self.metric.startswith(("usd", "gpus")) or self.role == "cost":
            return 0.0
        counts = [float(r.metrics.get("n_requests") or 0) for r in records]
        n = min((c for c in counts if c > 0), default=0.0)
        noise = 1.0 / math.sqrt(n) if n else 0.0
        if self.metric.startswith("capacity_"):
            noise = max(noise, CAPACITY_RESOLUTION)
        return noise

    def text(self, value: float) -> str:
        """``812 ms``, ``USD 126.20/h``, ``931 tok/s``."""
        if self.unit == "USD/h":
            return f"USD {value:,.2f}/h"
        shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"
        return f"{shown} {self.unit}".strip()


#: The metric of the capacity objective (``--capacity``, or an SLO that names it).
CAPACITY_METRIC = "capacity_requests_per_s"


def wants_capacity(spec: SloSpec) -> bool:
    """Whether the SLO's throughput objective is the sustainable rate (capacity search)."""
    throughput = spec.objectives.by_role().get("throughput")
    return throughput is not None and throughput.metric == CAPACITY_METRIC


def objective_infos(spec: SloSpec, *, capacity: bool = False) -> dict[str, ObjectiveInfo]:
    """What each objective of ``spec`` is; ``capacity``: throughput is the sustainable rate.

    A latency objective's target is the SLO's limit at the same statistic, else the metric's
    tightest limit (the bar one request must clear), else none.
    """
    infos: dict[str, ObjectiveInfo] = {}
    bars = spec.per_request_bars()
    for role, objective in spec.objectives.by_role().items():
        metric = objective.metric
        if capacity and role == "throughput":
            metric = CAPACITY_METRIC
        base, _, stat = metric.partition(".")
        stats = spec.targets.get(base, {})  # type: ignore[call-overload]
        target = stats.get(stat, bars.get(base))
        direction = spec.objectives.directions[role]
        infos[role] = ObjectiveInfo(role, metric, direction, float(target) if target else None)
    return infos


def metric_names(definition: Mapping[str, Any], directions: Sequence[str]) -> list[str]:
    """Optuna metric names for a study definition (``optimizer.run``'s): ``latency:
    ttft_ms.p90``, ``throughput: capacity_requests_per_s``… — what optuna-dashboard shows.
    A definition without an SLO (a bare study) gets ``objective 0``, ``objective 1``…"""
    if "slo" not in definition:
        return [f"objective {i}" for i in range(len(directions))]
    spec = SloSpec.model_validate(definition["slo"])
    infos = objective_infos(spec, capacity=bool(definition.get("capacity")))
    return [f"{role}: {info.metric}" for role, info in infos.items()]


@dataclass(frozen=True, slots=True)
class PickSet:
    """The picks ``(label, trial, why)``, notes on the objectives, and the trade-off roles."""

    picks: tuple[tuple[str, TrialRecord, str], ...]
    notes: tuple[str, ...]
    tradeoffs: tuple[str, ...]


def _cost_of(record: TrialRecord, infos: Mapping[str, ObjectiveInfo]) -> float:
    cost = infos.get("cost")
    if cost is not None:
        return float(record.objectives[cost.role])
    value = record.metrics.get("usd_per_hour")
    return float(value) if value is not None else 0.0


class _Front:
    """The front with the per-objective best values the picks and their reasons compare to."""

    def __init__(self, front: Sequence[TrialRecord], infos: Mapping[str, ObjectiveInfo]) -> None:
        self.records = list(front)
        self.infos = infos
        self.best = {role: self._argbest(role) for role in infos}

    def _argbest(self, role: str) -> TrialRecord:
        sign = self.infos[role].sign
        return min(self.records, key=lambda r: (sign * r.objectives[role], r.number))

    def best_value(self, role: str) -> float:
        return float(self.best[role].objectives[role])

    def shortfall(self, record: TrialRecord, role: str) -> float:
        """How far ``record`` is behind the best on ``role``, relative to the best (≥ 0)."""
        best = self.best_value(role)
        gap = self.infos[role].sign * (record.objectives[role] - best)
        return gap / abs(best) if best else (0.0 if gap == 0 else math.inf)

    def scaled(self, record: TrialRecord, roles: Sequence[str]) -> float:
        """The knee's distance: shortfalls over meaningful scales (module docstring)."""
        total = 0.0
        for role in roles:
            info = self.infos[role]
            gap = info.sign * (record.objectives[role] - self.best_value(role))
            scale = info.target or abs(self.best_value(role)) or 1.0
            total += (gap / scale) ** 2
        return math.sqrt(total)

    def gives_up(self, record: TrialRecord, roles: Sequence[str]) -> str:
        """``TTFT p90 812 ms vs best 800 ms (+1.5%)`` for each objective it is not best on."""
        parts = []
        for role in roles:
            share = self.shortfall(record, role)
            if share <= 0:
                continue
            info = self.infos[role]
            signed = share if info.sign > 0 else -share
            parts.append(
                f"{info.name} {info.text(record.objectives[role])} vs best "
                f"{info.text(self.best_value(role))} ({_pct(signed)})"
            )
        return "; ".join(parts) if parts else "nothing: it is the best on every trade-off"


def _pct(share: float) -> str:
    """``+1.5%``, with two decimals under one percent (``+0.05%``)."""
    return f"{share:+.2%}" if abs(share) < 0.01 else f"{share:+.1%}"


def _spread_note(info: ObjectiveInfo, values: Sequence[float], noise: float, n: int) -> str:
    low, high = min(values), max(values)
    spread = (high - low) / max(abs(low), abs(high), 1e-12)
    return (
        f"{info.role} ({info.metric}) is not a trade-off here: it spans "
        f"{info.text(low)}–{info.text(high)} on the front ({spread:.1%}), within the "
        f"simulation's noise (≈{noise:.1%} for {n:,} requests), so it drives no pick"
    )


def _tradeoffs(
    front: Sequence[TrialRecord], infos: Mapping[str, ObjectiveInfo]
) -> tuple[list[str], list[str]]:
    tradeoffs: list[str] = []
    notes: list[str] = []
    counts = [int(r.metrics.get("n_requests") or 0) for r in front]
    n = min((c for c in counts if c > 0), default=0)
    for role, info in infos.items():
        values = [float(r.objectives[role]) for r in front]
        low, high = min(values), max(values)
        spread = (high - low) / max(abs(low), abs(high), 1e-12)
        noise = info.noise(front)
        if len(front) > 1 and spread <= noise:
            notes.append(_spread_note(info, values, noise, n))
            if role == "throughput" and not info.metric.startswith("capacity_"):
                notes.append(
                    "the offered load fixes the throughput: every configuration on the front "
                    "serves the same workload, so goodput says little about the configuration; "
                    "rerun with --capacity to rank configurations by the load each sustains "
                    "under the SLO"
                )
        else:
            tradeoffs.append(role)
    return tradeoffs, notes


def _noise_members(
    front: Sequence[TrialRecord], infos: Mapping[str, ObjectiveInfo], tradeoffs: Sequence[str]
) -> list[str]:
    """A note naming the front's members that are there only through an objective that is not
    a trade-off: on the trade-off objectives alone another member is at least as good on every
    one and better on one (``trial 87 (by 40)``)."""

    def key(record: TrialRecord, role: str) -> float:
        return infos[role].sign * float(record.objectives[role])

    def dominates(a: TrialRecord, b: TrialRecord) -> bool:
        pairs = [(key(a, role), key(b, role)) for role in tradeoffs]
        return all(x <= y for x, y in pairs) and any(x < y for x, y in pairs)

    shown = []
    for record in front:
        better = [o for o in front if o is not record and dominates(o, record)]
        if better:
            by = min(better, key=lambda o: o.number).number
            shown.append(f"{record.number} (by {by})")
    if not shown:
        return []
    names = " and ".join(infos[role].name for role in tradeoffs)
    quiet = " and ".join(role for role in infos if role not in tradeoffs)
    many = len(shown) > 1
    return [
        f"trial{'s' * many} {', '.join(shown)} {'are' if many else 'is'} on the front only "
        f"through {quiet} differences within the noise: on {names} alone another "
        "configuration is at least as good on each and better on one"
    ]


def make_picks(
    front: Sequence[TrialRecord],
    infos: Mapping[str, ObjectiveInfo],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> PickSet:
    """Tolerance picks per trade-off objective and the scaled knee (module docstring)."""
    if not front:
        return PickSet((), (), ())
    view = _Front(front, infos)
    tradeoffs, notes = _tradeoffs(front, infos)
    if tradeoffs and len(tradeoffs) < len(infos):
        notes += _noise_members(front, infos, tradeoffs)
    roles = tradeoffs or list(infos)  # nothing varies: still name one configuration
    picks: list[tuple[str, TrialRecord, str]] = []
    for role in tradeoffs:
        near = [r for r in front if view.shortfall(r, role) <= tolerance]
        others = [x for x in roles if x != role]
        if role == "cost":
            pick = min(near, key=lambda r: (view.scaled(r, others), _cost_of(r, infos), r.number))
        else:
            pick = min(near, key=lambda r: (_cost_of(r, infos), view.shortfall(r, role), r.number))
        picks.append((f"best {role}", pick, _why_best(view, role, pick, near, tolerance, others)))
    knee = min(front, key=lambda r: (view.scaled(r, roles), _cost_of(r, infos), r.number))
    picks.append(("balanced", knee, _why_knee(view, knee, roles)))
    return PickSet(tuple(picks), tuple(notes), tuple(tradeoffs))


def _why_best(  # noqa: PLR0917  (the pick and everything its reason quotes)
    view: _Front,
    role: str,
    pick: TrialRecord,
    near: Sequence[TrialRecord],
    tolerance: float,
    others: Sequence[str],
) -> str:
    info = view.infos[role]
    literal = view.best[role]
    value = info.text(pick.objectives[role])
    best = info.text(view.best_value(role))
    if role == "cost" and len(near) == 1:
        head = (
            f"Trial {pick.number} is the cheapest feasible configuration at {best}, and no "
            f"other comes within {tolerance:.0%} of it."
        )
    elif role == "cost":
        head = (
            f"The cheapest feasible configuration costs {best} (trial {literal.number}); of the "
            f"{len(near)} within {tolerance:.0%} of it, trial {pick.number} ({value}) is "
            "closest to the best on the other objectives."
        )
    else:
        if len(near) > 1:
            head = (
                f"{info.name} {value} is within {tolerance:.0%} of the best on the front "
                f"({best}, trial {literal.number}); of the {len(near)} configurations that "
                f"close, trial {pick.number} is the cheapest at {_money(view, pick)}"
            )
        else:
            head = (
                f"{info.name} {value} is the best on the front and no other configuration "
                f"comes within {tolerance:.0%} of it; it costs {_money(view, pick)}"
            )
        saved = _cost_of(literal, view.infos) - _cost_of(pick, view.infos)
        head += f", {_money_delta(view, saved)} less than the literal best." if saved > 0 else "."
    head = head[0].upper() + head[1:]  # "goodput 3,000 tok/s is …" opens a sentence
    return f"{head} It gives up: {view.gives_up(pick, [role, *others])}."


def _why_knee(view: _Front, knee: TrialRecord, roles: Sequence[str]) -> str:
    scales = []
    for role in roles:
        info = view.infos[role]
        scales.append(
            f"{info.name} against its SLO target {info.text(info.target)}"
            if info.target
            else f"{info.name} relative to the best"
        )
    return (
        f"The knee of the front: trial {knee.number} has the smallest combined shortfall from "
        f"the best ({view.scaled(knee, roles):.3f}), each objective measured on a meaningful "
        f"scale ({'; '.join(scales)}). It costs {_money(view, knee)} and gives up: "
        f"{view.gives_up(knee, roles)}."
    )


def _money(view: _Front, record: TrialRecord) -> str:
    return _money_delta(view, _cost_of(record, view.infos))


def _money_delta(view: _Front, value: float) -> str:
    cost = view.infos.get("cost")
    return cost.text(value) if cost is not None else f"USD {value:,.2f}/h"
