"""The SLO file: latency targets, an attainment floor, a budget and the search objectives.

An SLO file is what a user promises their customers (targets, attainment) and what they can
spend (budget), plus which three numbers the optimizer trades off (objectives). It is plain
data: this module validates it and says nothing about how the numbers are measured; evaluation
against measured metrics is ``slo._evaluate``.

Example (YAML; TOML and JSON carry the same keys)::

    name: chat-production
    targets:                     # milliseconds, at a statistic of the per-request distribution
      ttft_ms: {p90: 2000, p99: 5000}
      tpot_ms: {p90: 50}
    attainment: 0.95             # share of requests that must meet every target
    budget: {usd_per_hour: 200, max_gpus: 64}
    objectives: {latency: ttft_ms.p90, throughput: goodput_tokens_per_s, cost: usd_per_hour}
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from slo.inputfile import load_input_file

__all__ = [
    "COST_METRICS",
    "OBJECTIVE_ROLES",
    "TARGET_METRICS",
    "TARGET_METRIC_HELP",
    "THROUGHPUT_METRICS",
    "Budget",
    "Direction",
    "Objective",
    "Objectives",
    "SloSpec",
    "TargetMetric",
    "canonical_stat",
    "load_slo",
    "percentile_of",
]

TargetMetric = Literal["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms"]
Direction = Literal["minimize", "maximize"]
ObjectiveRole = Literal["latency", "throughput", "cost"]

#: Per-request latency metrics a target may name, in the order tables show them.
TARGET_METRICS: tuple[str, ...] = get_args(TargetMetric)

#: What each target metric measures for one request. This is the contract the simulator's
#: metrics follow; all are wall-clock milliseconds of simulated time.
TARGET_METRIC_HELP: dict[str, str] = {
    "ttft_ms": "time to first token: arrival to the first output token",
    "tpot_ms": "time per output token: (e2e - ttft) / (output tokens - 1)",
    "itl_ms": "inter-token latency: gap between consecutive output tokens",
    "e2e_ms": "end-to-end latency: arrival to the last output token",
    "queue_ms": "queueing delay: arrival to the first scheduled step",
}

#: Metrics a throughput objective may name (all maximized), rates per second of simulated time.
#: ``capacity_requests_per_s`` is the highest arrival rate that still meets the SLO; naming it
#: makes ``kvplan optimize`` run the capacity search (as ``--capacity`` does).
THROUGHPUT_METRICS: tuple[str, ...] = (
    "goodput_tokens_per_s",
    "goodput_requests_per_s",
    "output_tokens_per_s",
    "requests_per_s",
    "capacity_requests_per_s",
)

#: Metrics a cost objective may name (all minimized), in USD.
COST_METRICS: tuple[str, ...] = ("usd_per_hour", "usd_per_million_output_tokens")

#: Objective roles in the fixed order of ``Objectives.directions`` and objective value tuples.
OBJECTIVE_ROLES: tuple[ObjectiveRole, ...] = get_args(ObjectiveRole)

_ROLE_DIRECTION: dict[str, Direction] = {
    "latency": "minimize",
    "throughput": "maximize",
    "cost": "minimize",
}

# "p90", "p99.9"; a leading zero or trailing fractional zeros are allowed and normalised away.
_PERCENTILE = re.compile(r"p(\d+)(?:\.(\d+))?")


def canonical_stat(key: str) -> str:
    """Normalise a statistic key: ``'mean'`` or a percentile ``'pNN'`` / ``'pNN.N'``.

    ``'p90.0'`` and ``'p090'`` become ``'p90'``, so a statistic has one spelling in metric names
    (``ttft_ms.p90``). Raises ``ValueError`` for anything else or a percentile outside (0, 100].
    """
    if key == "mean":
        return key
    match = _PERCENTILE.fullmatch(key)
    if match is None:
        raise ValueError(
            f"statistic must be 'mean' or a percentile like 'p90' or 'p99.9', got {key!r}"
        )
    whole, fraction = str(int(match.group(1))), (match.group(2) or "").rstrip("0")
    if not 0 < float(f"{whole}.{fraction or 0}") <= 100:
        raise ValueError("percentile must be in (0, 100]")
    return f"p{whole}.{fraction}" if fraction else f"p{whole}"


def percentile_of(stat: str) -> float | None:
    """The percentile (0, 100] a canonical statistic asks for, or ``None`` for ``'mean'``.

    For the code that computes metrics: ``np.percentile(values, percentile_of("p99.9"))``.
    """
    stat = canonical_stat(stat)
    return None if stat == "mean" else float(stat[1:])


def _known_target(name: object) -> object:
    # Before the Literal check, so an unknown name gets a hint instead of pydantic's long list.
    if isinstance(name, str) and name not in TARGET_METRICS:
        close = difflib.get_close_matches(name, TARGET_METRICS, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(
            f"unknown target metric {name!r}{hint}; known: {', '.join(TARGET_METRICS)}"
        )
    return name


_TargetKey = Annotated[TargetMetric, BeforeValidator(_known_target)]
_StatKey = Annotated[str, AfterValidator(canonical_stat)]
#: Longest latency target, ms (a week): a bigger figure is a typo, and would be no target at all.
MAX_TARGET_MS = 7 * 24 * 3600 * 1000.0
_Milliseconds = Annotated[float, Field(gt=0, le=MAX_TARGET_MS, allow_inf_nan=False)]


def _non_empty(stats: dict[str, float]) -> dict[str, float]:
    if not stats:
        raise ValueError("give at least one statistic and its limit in ms, e.g. {p90: 2000}")
    return stats


_Stats = Annotated[dict[_StatKey, _Milliseconds], AfterValidator(_non_empty)]


class _Frozen(BaseModel):
    # strict: a quoted "2000" or a YAML `yes` is a mistake in an SLO file, not a number.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Budget(_Frozen):
    """Hard spending limits; a configuration over any of them is infeasible. All optional."""

    usd_per_hour: float | None = Field(
        default=None,
        gt=0,
        le=1e9,
        allow_inf_nan=False,
        description="Most the whole deployment may cost per hour, USD (GPUs plus cache tiers).",
    )
    usd_per_month: float | None = Field(
        default=None,
        gt=0,
        le=1e12,
        allow_inf_nan=False,
        description="Most the deployment may cost per month, USD (a month is 730 hours).",
    )
    max_gpus: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Most GPUs the deployment may use, over all instances.",
    )

    def limits(self) -> dict[str, float]:
        """The limits that are set, by budget field name, in field order."""
        values = {"usd_per_hour": self.usd_per_hour, "usd_per_month": self.usd_per_month}
        values["max_gpus"] = None if self.max_gpus is None else float(self.max_gpus)
        return {name: value for name, value in values.items() if value is not None}


class Objective(_Frozen):
    """One objective: the metric to optimize and which way.

    In a file, a bare metric name is enough (``latency: ttft_ms.p99``); the direction follows from
    the role (latency and cost are minimized, throughput maximized). The mapping form
    ``{metric: ..., direction: ...}`` may state the direction, but only the role's own: every
    metric a role accepts has one meaningful direction, and the opposite one (a maximized
    latency) would search for the worst configurations.
    """

    metric: str = Field(description="Flat metric name, e.g. 'ttft_ms.p90' or 'usd_per_hour'.")
    direction: Direction = Field(description="Whether the optimizer minimizes or maximizes it.")


def _objective_input(role: str, value: Any) -> Any:
    if isinstance(value, str):
        return {"metric": value, "direction": _ROLE_DIRECTION[role]}
    if isinstance(value, dict) and "direction" not in value:
        return {**value, "direction": _ROLE_DIRECTION[role]}
    return value


def _check_latency_metric(name: str) -> str:
    target, _, stat = name.partition(".")
    if target not in TARGET_METRICS or not stat:
        raise ValueError(
            f"latency objective must be '<target>.<statistic>' with target one of "
            f"{', '.join(TARGET_METRICS)}, e.g. 'ttft_ms.p90'; got {name!r}"
        )
    return f"{target}.{canonical_stat(stat)}"


def _check_in(name: str, known: tuple[str, ...], role: str) -> str:
    if name not in known:
        raise ValueError(f"unknown {role} metric {name!r}; known: {', '.join(known)}")
    return name


class Objectives(_Frozen):
    """The three numbers the optimizer trades off; omitted roles take the defaults."""

    latency: Objective = Field(
        default=Objective(metric="ttft_ms.p90", direction="minimize"),
        description="Latency objective: '<target>.<statistic>' of a target metric (minimized).",
    )
    throughput: Objective = Field(
        default=Objective(metric="goodput_tokens_per_s", direction="maximize"),
        description="Throughput objective: one of "
        + ", ".join(THROUGHPUT_METRICS)
        + " (maximized).",
    )
    cost: Objective = Field(
        default=Objective(metric="usd_per_hour", direction="minimize"),
        description="Cost objective: one of " + ", ".join(COST_METRICS) + " (minimized).",
    )

    @model_validator(mode="before")
    @classmethod
    def _derive_directions(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {
            key: _objective_input(key, value) if key in _ROLE_DIRECTION else value
            for key, value in data.items()
        }

    @field_validator("latency", "throughput", "cost")
    @classmethod
    def _role_direction(cls, value: Objective, info: ValidationInfo) -> Objective:
        role = str(info.field_name)
        expected = _ROLE_DIRECTION[role]
        if value.direction != expected:
            raise ValueError(
                f"direction {value.direction!r} would search for the worst {role}; {role} "
                f"objectives are {expected}d (omit direction)"
            )
        return value

    @field_validator("latency")
    @classmethod
    def _latency_metric(cls, value: Objective) -> Objective:
        return value.model_copy(update={"metric": _check_latency_metric(value.metric)})

    @field_validator("throughput")
    @classmethod
    def _throughput_metric(cls, value: Objective) -> Objective:
        _check_in(value.metric, THROUGHPUT_METRICS, "throughput")
        return value

    @field_validator("cost")
    @classmethod
    def _cost_metric(cls, value: Objective) -> Objective:
        _check_in(value.metric, COST_METRICS, "cost")
        return value

    def by_role(self) -> dict[str, Objective]:
        """Each role's objective, in ``OBJECTIVE_ROLES`` order."""
        return {role: getattr(self, role) for role in OBJECTIVE_ROLES}

    @property
    def directions(self) -> dict[str, Direction]:
        """Direction per role, in ``OBJECTIVE_ROLES`` order: ``list(...values())`` suits Optuna."""
        return {role: objective.direction for role, objective in self.by_role().items()}


class SloSpec(_Frozen):
    """A validated SLO file. Frozen: evaluation never changes it.

    Every limit is an upper bound on a statistic of the per-request distribution of a metric
    (``targets.ttft_ms.p90 = 2000`` means: the 90th percentile of TTFT is at most 2000 ms).
    ``attainment`` is a separate, per-request criterion: see ``slo.attainment``.
    """

    name: str = Field(min_length=1, description="Name shown in tables and reports.")
    description: str = Field(default="", description="Free text: whom the SLO serves and why.")
    targets: dict[_TargetKey, _Stats] = Field(
        default_factory=dict,
        description="Latency limits in milliseconds: metric -> {statistic: limit}. Metrics: "
        + ", ".join(TARGET_METRICS)
        + "; statistics: 'mean' or percentiles 'pNN' / 'pNN.N' in (0, 100].",
    )
    attainment: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Least share (0, 1] of requests that must meet every target on their own "
        "(the goodput criterion); omitted = no such constraint.",
    )
    budget: Budget = Field(default_factory=Budget, description="Hard spending limits.")
    objectives: Objectives = Field(
        default_factory=Objectives, description="What the optimizer minimizes and maximizes."
    )

    @field_validator("attainment")
    @classmethod
    def _attainment_needs_targets(cls, value: float | None, info: ValidationInfo) -> float | None:
        # Fields validate in order, so ``targets`` is in info.data unless it failed itself.
        if value is not None and not info.data.get("targets", True):
            raise ValueError("needs at least one target to attain")
        return value

    def target_items(self) -> list[tuple[str, str, float]]:
        """Every ``(metric, statistic, limit_ms)`` in file order."""
        return [(m, s, limit) for m, stats in self.targets.items() for s, limit in stats.items()]

    def per_request_bars(self) -> dict[str, float]:
        """The tightest limit of each target metric, ms: the bar one request must clear."""
        return {metric: min(stats.values()) for metric, stats in self.targets.items()}

    def required_metrics(self) -> tuple[str, ...]:
        """Flat metric names ``evaluate`` and the objectives read (derivable ones included)."""
        names = [f"{metric}.{stat}" for metric, stat, _ in self.target_items()]
        if self.attainment is not None:
            names.append("attainment")
        budget_metric = {"usd_per_hour": "usd_per_hour", "usd_per_month": "usd_per_month"}
        names += [budget_metric.get(key, "gpus") for key in self.budget.limits()]
        names += [objective.metric for objective in self.objectives.by_role().values()]
        return tuple(dict.fromkeys(names))


def load_slo(path: str | Path) -> SloSpec:
    """Read and validate an SLO file (YAML, TOML or JSON by suffix).

    Raises ``InputError`` with one line naming the file and field, e.g.
    ``chat.yaml: targets.ttft_ms.p120: percentile must be in (0, 100]``.
    """
    return load_input_file(path, SloSpec)
