"""One trial: space → config → (budget check) → ``simulate`` → SLO evaluation → objectives.

With ``capacity=True`` the throughput objective is the sustainable request rate instead: the
highest load (arrival rate × k, k ≥ 1) at which the configuration still meets the SLO, from
``simulator.capacity.capacity_search`` (about 8 extra simulations per feasible trial).

Every trial stores, as user attributes, what a report needs without re-simulating:
``params`` (the full sampled point), ``metrics`` (flat simulator metrics plus attainment and
goodput), ``constraints`` (≤ 0 feasible, Optuna's convention: ``[fit, *slo violations]``) and
``infeasible_reason`` ('' when the configuration ran).

Repeats are free: a trial whose parameters equal an earlier completed trial's (samplers
re-propose configurations on small categorical spaces — TPE a fifth of its first 43 trials in
``bench/search_quality.py``) copies that trial's stored result instead of simulating, and is
marked ``repeat_of`` (``is_repeat``). The sampler still learns from it; ``optimizer.run`` does
not count it toward the requested trials, and the results skip it.

Infeasible points decided without a full simulation — an invalid combination, over the
budget, not fitting in memory, screened out by latency lower bounds (``optimizer.screen``), or
given up on part-way (below) — end PRUNED, Optuna's state for a trial stopped before its
objectives were measured: they hold no objective values, so no placeholder squashes a plot or
joins a Pareto front that ignores constraints (optuna-dashboard's), and they carry their
constraint values (violated) and ``infeasible_reason`` like every trial. What the samplers do
with them (Optuna 5.1): TPE classifies a trial as infeasible by its constraints before it
looks at its state, so a PRUNED infeasible trial weighs exactly as a COMPLETE one did (ranked
by total violation; objective values of infeasible trials are never read); NSGA-II builds its
generations from COMPLETE trials only, so it no longer breeds from them; ``study.best_trials``
reads COMPLETE feasible trials, which are unchanged. A trial simulated in full that misses the
SLO stays COMPLETE with its measured objectives and violated constraints.

Giving up part-way (multi-fidelity): with an attainment floor whose bars bound a request's
end-to-end latency (``miss_rule``), the simulation runs under ``simulator.give_up``'s watch and
stops as soon as so many requests have certainly missed a bar that the floor cannot be reached
even if every remaining request met every target — the rule capacity searches use, so a trial
given up on would have missed the floor in full. Optuna's own pruning interface
(``Trial.report`` / ``should_prune``) is single-objective only (it raises
``NotImplementedError`` in a multi-objective study), so the objective applies the rule during
the simulation, at every arrival and finish rather than after a fixed prefix, and ends the
trial with ``optuna.TrialPruned``. ``metrics['simulated_requests']`` says how many requests
arrived before it stopped (all of them for a full simulation).

What a trial cost: ``simulation_share`` (a user attribute, and a metric) is the share of one
whole-workload simulation the trial ran — 1 for a full simulation, 0 for a point ruled out
without simulating, the share of the workload's requests that had arrived for one given up
part-way (an upper bound: the requests still queued then were never simulated). ``--trials N``
is a budget of N such simulations (``optimizer.claims``); capacity probes are not counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import optuna
from optuna.trial import TrialState

from hardware.schema import Catalog
from optimizer.configs import to_config
from optimizer.screen import Shapes, screen, workload_shapes
from optimizer.space import SearchSpace
from optimizer.study import CONSTRAINTS_ATTR
from optimizer.trial_state import (
    FINISHED_STATES,
    REPEAT_ATTR,
    SHARE_ATTR,
    is_evaluated,
    is_repeat,
    simulation_share,
)
from optimizer.workloads import describe_workload
from simulator.api import SimResult, WorkloadBuilder, build_source, simulate
from simulator.capacity import Capacity, capacity_search
from simulator.cluster.overlong import OverlongPolicy
from simulator.config import ServingConfig
from simulator.cost import deployment_cost
from simulator.give_up import Decided, MissRule, Watched
from simulator.workload.source import OpenLoopSource
from slo import SloSpec, attainment, check_budget, evaluate, slo_met_mask

__all__ = [
    "FINISHED_STATES",
    "REPEAT_ATTR",
    "SCALAR_METRICS",
    "SHARE_ATTR",
    "Evaluation",
    "TrialEvaluator",
    "is_evaluated",
    "is_repeat",
    "miss_rule",
    "simulation_share",
]

#: Metrics stored as scalar user attributes on every trial, besides the SLO's own.
SCALAR_METRICS = (
    "ttft_ms.p90",
    "tpot_ms.p90",
    "e2e_ms.p90",
    "goodput_tokens_per_s",
    "output_tokens_per_s",
    "usd_per_hour",
    "usd_per_million_output_tokens",
    "gpus",
    "attainment",
    "n_rejected",
    SHARE_ATTR,
)

#: Constraint value of an SLO constraint a trial stopped without measuring (Optuna's scale:
#: a violation of 1 is a metric twice its limit), the same for every such constraint so that
#: TPE ranks trials by how much is known to be violated.
UNKNOWN_VIOLATION = 1.0


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What one trial produced (also stored on the Optuna trial as user attributes)."""

    values: dict[str, float]
    """Objective role -> value, in the SLO spec's order (latency, throughput, cost)."""
    constraints: list[float]
    metrics: dict[str, float]
    infeasible_reason: str
    pruned: bool = False
    """Infeasible without a full simulation: recorded as a PRUNED trial, ``values`` empty."""


def _finite(metrics: Mapping[str, float]) -> dict[str, float | None]:
    """JSON-safe copy for storage: non-finite values become None."""
    return {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}


class TrialEvaluator:
    """The objective: built once per worker, called once per trial (Optuna's ``func(trial)``).

    ``workload`` must be a builder (``WorkloadSpec``): every trial rebuilds it from the same
    ``seed``, so all trials see an identical request sample.
    """

    def __init__(
        self,
        *,
        space: SearchSpace,
        spec: SloSpec,
        workload: WorkloadBuilder,
        catalog: Catalog,
        seed: int,
        latency_model: str | None = None,
        kernel_profiles_dir: str | None = None,
        latency_cache_dir: str | None = None,
        capacity: bool = False,
        overlong: OverlongPolicy = "drop",
        screen: bool = True,
        give_up: bool = True,
    ) -> None:
        self.space = space
        #: Rule points out by latency lower bounds before simulating (``optimizer.screen``);
        #: closed-loop workloads are never screened (their later turns exist only in a run).
        self.screening = screen and describe_workload(workload).get("kind") != "closed_loop"
        self._shape_cache: Shapes | None = None
        #: Stop a simulation once the attainment floor is out of reach (module docstring).
        self.giving_up = give_up
        self._give_up: tuple[MissRule | None] | None = None  # decided on first use
        self._counts: list[int] = []  # ``Watched``'s count, shared by every trial
        self.capacity = capacity
        self.overlong = overlong
        #: ``drop`` removes requests longer than the model's context before each simulation;
        #: otherwise they reach the engine, which rejects them (SLO misses).
        self.drop_overlong = overlong == "drop"
        self._memo: dict[tuple[tuple[str, str], ...], Evaluation] = {}
        self.spec = spec
        self.workload = workload
        self.catalog = catalog
        self.seed = seed
        self.latency_model = latency_model
        self.kernel_profiles_dir = kernel_profiles_dir
        self.latency_cache_dir = latency_cache_dir
        self.roles = list(spec.objectives.directions)
        self.constraint_names = [
            "fits",
            *evaluate(self._placeholder_metrics(), spec).constraint_names,
        ]
        #: Metrics also stored as scalar user attributes (optuna-dashboard sorts and plots
        #: those, not the ``metrics`` blob): the SLO's and the objectives' metrics and a few
        #: a planner compares by.
        self.scalar_metrics = list(
            dict.fromkeys([*spec.required_metrics(), *SCALAR_METRICS, "capacity_requests_per_s"])
        )

    def _placeholder_metrics(self) -> dict[str, float]:
        return dict.fromkeys(self.spec.required_metrics(), 1.0)

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        params = self.space.suggest(trial)
        earlier = self.earlier_evaluation(trial)
        if earlier is not None:
            # A configuration the study already holds: the simulation is deterministic, so
            # the earlier result is this trial's too. The sampler still sees the repeat (TPE
            # weighs a configuration it keeps choosing), the study does not pay for it.
            number, evaluation = earlier
            trial.set_user_attr(REPEAT_ATTR, number)
        else:
            evaluation = self.evaluate_params(params)
        return self.record(trial, params, evaluation)

    def record(
        self, trial: optuna.Trial, params: Mapping[str, Any], evaluation: Evaluation
    ) -> tuple[float, ...]:
        """Store ``evaluation`` on ``trial`` (user attributes, constraints); its objectives.

        Raises ``optuna.TrialPruned`` after storing a ``pruned`` evaluation. The one place
        that decides what a trial holds (``bench/search_quality.py`` records
        cached evaluations through it too).
        """
        trial.set_user_attr("params", {"model": self.space.model, **params})
        trial.set_user_attr("metrics", _finite(evaluation.metrics))
        for name in self.scalar_metrics:  # beside the blob: sortable and plottable columns
            value = evaluation.metrics.get(name)
            if value is not None and math.isfinite(value):
                trial.set_user_attr(name, value)
        trial.set_user_attr(CONSTRAINTS_ATTR, evaluation.constraints)
        for name, value in zip(self.constraint_names, evaluation.constraints, strict=True):
            trial.set_constraint(name, value)  # what Optuna's samplers and best_trials read
        trial.set_user_attr("infeasible_reason", evaluation.infeasible_reason)
        if evaluation.pruned:  # no objective values: stopped before they were measured
            raise optuna.TrialPruned(evaluation.infeasible_reason)
        return tuple(evaluation.values[role] for role in self.roles)

    def earlier_evaluation(self, trial: optuna.Trial) -> tuple[int, Evaluation] | None:
        """The first finished, non-repeat trial of ``trial``'s study with the same parameters:
        COMPLETE, or PRUNED by this objective (infeasible without a full simulation).

        Returns its number and its ``Evaluation`` as stored (objective values, constraints,
        metrics, reason), or None. It reads the storage, so a configuration simulated by
        another worker, or before an interruption, counts too.
        """
        params = trial.params
        for done in trial.study.get_trials(deepcopy=False, states=FINISHED_STATES):
            if done.params != params or is_repeat(done) or not is_evaluated(done):
                continue
            attrs = done.user_attrs
            metrics = {k: math.nan if v is None else float(v) for k, v in attrs["metrics"].items()}
            return done.number, Evaluation(
                values=dict(zip(self.roles, done.values or (), strict=False)),
                constraints=[float(c) for c in attrs[CONSTRAINTS_ATTR]],
                metrics=metrics,
                infeasible_reason=str(attrs.get("infeasible_reason", "")),
                pruned=done.state == TrialState.PRUNED,
            )
        return None

    def config_for(self, params: Mapping[str, Any]) -> ServingConfig:
        """The ``ServingConfig`` of a parameter point (``ValueError`` if invalid)."""
        merged = dict(params)
        if self.latency_model is not None and "latency_model" not in merged:
            merged["latency_model"] = self.latency_model
        if self.kernel_profiles_dir is not None:
            merged.setdefault("kernel_profiles_dir", self.kernel_profiles_dir)
        if self.latency_cache_dir is not None:
            merged.setdefault("latency_cache_dir", self.latency_cache_dir)
        return to_config(self.space.model, merged)

    def evaluate_params(self, params: Mapping[str, Any]) -> Evaluation:
        """Evaluate one parameter point (used by trials and by the planning re-runs).

        Memoised per point: the simulation is deterministic, and samplers on small categorical
        spaces propose the same point again (a fifth of NSGA-II's trials in
        bench/search_quality.py), which then costs no simulation.
        """
        key = tuple(sorted((k, repr(v)) for k, v in params.items()))
        cached = self._memo.get(key)
        if cached is None:
            cached = self._memo[key] = self._evaluate(params)
        return cached

    def _evaluate(self, params: Mapping[str, Any]) -> Evaluation:
        try:
            config = self.config_for(params)
        except ValueError as err:
            return self._infeasible(str(err), usd_per_hour=math.nan, gpus=math.nan)
        cost = deployment_cost(config, self.catalog)
        over = self._over_budget(cost.usd_per_hour, cost.gpus)
        if over:
            return self._infeasible(over, usd_per_hour=cost.usd_per_hour, gpus=cost.gpus)
        screened = screen(config, self.catalog, self._shapes(), self.spec) if self.screening else ""
        if screened:
            return self._infeasible(screened, usd_per_hour=cost.usd_per_hour, gpus=cost.gpus)
        rule = self._give_up_rule()
        workload = self.workload if rule is None else Watched(self.workload, rule, self._counts)
        try:
            result = simulate(
                config,
                workload,
                seed=self.seed,
                catalog=self.catalog,
                drop_overlong_requests=self.drop_overlong,
            )
        except Decided as stop:
            return self._given_up(stop, usd_per_hour=cost.usd_per_hour, gpus=cost.gpus)
        if not result.feasible:
            return self._infeasible(result.reason, usd_per_hour=cost.usd_per_hour, gpus=cost.gpus)
        metrics = self.slo_metrics(result)
        report = evaluate(metrics, self.spec)
        if self.capacity:
            metrics["capacity_requests_per_s"] = 0.0  # it misses the SLO at the nominal load
            if report.feasible:
                found = self.capacity_above_nominal(config)
                metrics["capacity_requests_per_s"] = found.requests_per_s or 0.0
                metrics["capacity_load_scale"] = found.load_scale or 0.0
                metrics["capacity_simulations"] = float(found.simulations)
        # Read after the capacity search: an SLO may name capacity_requests_per_s itself.
        values = report.objective_values(metrics)
        if self.capacity:
            values["throughput"] = metrics["capacity_requests_per_s"]
        rejected = result.summary.n_rejected if result.summary is not None else 0
        metrics["simulated_requests"] = float(len(result.records) + rejected)
        metrics[SHARE_ATTR] = 1.0
        return Evaluation(
            values={role: float(values[role]) for role in self.roles},
            constraints=[-1.0, *(float(v) for v in report.violations)],
            metrics={**metrics, **{f"objective.{k}": float(v) for k, v in values.items()}},
            infeasible_reason="",
        )

    def capacity_above_nominal(self, config: ServingConfig) -> Capacity:
        """The highest load (arrival rate × k, k ≥ 1) at which ``config`` meets the SLO: the
        nominal load passed already, so the search runs only above it."""
        return capacity_search(
            config,
            self.workload,
            self.meets_slo,
            seed=self.seed,
            catalog=self.catalog,
            max_time_scale=1.0,
            drop_overlong_requests=self.drop_overlong,
            passes_at_max=True,  # the trial met the SLO at the nominal load
            give_up=self._miss_rule(),  # a failing probe stops once its miss is certain
        )

    def _shapes(self) -> Shapes:
        """The workload's request shapes for screening (computed once per evaluator)."""
        if self._shape_cache is None:
            limit = self.catalog.model(self.space.model).max_context_tokens
            self._shape_cache = workload_shapes(
                self.workload,
                seed=self.seed,
                max_context_tokens=limit,
                drop_overlong=self.drop_overlong,
            )
        return self._shape_cache

    def slo_metrics(self, result: SimResult) -> dict[str, float]:
        """Flat metrics of a feasible simulation, with attainment and exact goodput added."""
        return self._metrics(result.metrics_for_slo(self._extra_stats()), result)

    def meets_slo(self, result: SimResult) -> bool:
        """Whether a simulation meets every SLO target and the attainment share."""
        return result.feasible and evaluate(self.slo_metrics(result), self.spec).feasible

    def _extra_stats(self) -> list[str]:
        standard = {"mean", "p50", "p90", "p99"}
        stats = {stat for _, stat, _ in self.spec.target_items()}
        return sorted(stats - standard)

    def _metrics(self, flat: dict[str, float], result: SimResult) -> dict[str, float]:
        per_request = result.per_request_ms()
        metrics = dict(flat)
        if self.spec.targets:
            mask = slo_met_mask(per_request, self.spec)
            metrics["attainment"] = attainment(per_request, self.spec)
            assert result.summary is not None  # only feasible results reach here
            duration = float(result.summary.duration_s)
            outputs = [float(r.output_tokens) for r in result.records]
            # Rejected requests trail the mask (they met nothing and produced no tokens).
            good_tokens = sum(o for o, ok in zip(outputs, mask[: len(outputs)], strict=True) if ok)
            if duration > 0:
                # Exact goodput: output tokens of the requests that met every target.
                metrics["goodput_tokens_per_s"] = good_tokens / duration
        return metrics

    def _over_budget(self, usd_per_hour: float, gpus: int) -> str:
        """Why the cost alone breaks the SLO file's budget ('' if it does not), by the same
        rule ``slo.evaluate`` applies after a simulation (``slo.check_budget``)."""
        for limit in check_budget({"usd_per_hour": usd_per_hour, "gpus": gpus}, self.spec):
            if limit.violation <= 0:
                continue
            if limit.name == "budget.usd_per_hour":
                return f"costs USD {usd_per_hour:.2f}/h > budget USD {limit.limit:g}/h"
            if limit.name == "budget.usd_per_month":
                return f"costs USD {limit.measured:,.0f}/month > budget USD {limit.limit:,.0f}"
            return f"uses {gpus} GPUs > budget of {limit.limit:g}"
        return ""

    def _infeasible(self, reason: str, *, usd_per_hour: float, gpus: float) -> Evaluation:
        """Infeasible without simulating: every constraint counted violated by one unit."""
        return Evaluation(
            values={},
            constraints=[UNKNOWN_VIOLATION] * len(self.constraint_names),
            metrics={
                "usd_per_hour": usd_per_hour,
                "gpus": float(gpus),
                "simulated_requests": 0.0,
                SHARE_ATTR: 0.0,
            },
            infeasible_reason=reason,
            pruned=True,
        )

    def _given_up(self, stop: Decided, *, usd_per_hour: float, gpus: float) -> Evaluation:
        """A simulation stopped once the attainment floor was out of reach (``Decided``).

        Constraints: it fits; the attainment floor is violated at least by what the certain
        misses alone prove (attainment ≤ (N − missed) / N); the budget as measured; the
        percentile targets were not measured (``UNKNOWN_VIOLATION``).
        """
        n = max(1, stop.n_requests)
        at_most = (n - stop.missed) / n
        known = {limit.name: limit.violation for limit in self._budget(usd_per_hour, gpus)}
        floor = self.spec.attainment or 1.0
        known["attainment"] = (floor - at_most) / floor
        constraints = [-1.0]
        constraints += [known.get(name, UNKNOWN_VIOLATION) for name in self.constraint_names[1:]]
        return Evaluation(
            values={},
            constraints=constraints,
            metrics={
                "usd_per_hour": usd_per_hour,
                "gpus": float(gpus),
                "simulated_requests": float(stop.arrived),
                SHARE_ATTR: min(1.0, stop.arrived / n),
                "attainment_at_most": at_most,
            },
            infeasible_reason=(
                f"given up after {stop.arrived} of {stop.n_requests} requests: {stop.missed} "
                f"certainly missed a target, so attainment ≤ {at_most:.1%} < floor {floor:.0%}"
            ),
            pruned=True,
        )

    def _give_up_rule(self) -> MissRule | None:
        """The rule a simulation is watched by (None: not watched): an attainment floor whose
        bars bound a request's latency, on an open-loop workload (a closed loop's later turns
        depend on the run). Requests the run drops as overlong are not counted."""
        if not self.giving_up:
            return None
        if self._give_up is None:
            rule = self._miss_rule()
            open_loop = isinstance(build_source(self.workload, self.seed), OpenLoopSource)
            self._give_up = (rule if rule is not None and rule.bounded and open_loop else None,)
        return self._give_up[0]

    def _miss_rule(self) -> MissRule | None:
        """``miss_rule`` of the SLO, leaving out the requests the run drops as overlong (they
        are not in the attainment's denominator)."""
        rule = miss_rule(self.spec)
        if rule is not None and self.drop_overlong:
            limit = self.catalog.model(self.space.model).max_context_tokens
            rule = replace(rule, max_context_tokens=limit)
        return rule

    def _budget(self, usd_per_hour: float, gpus: float) -> tuple[Any, ...]:
        return check_budget({"usd_per_hour": usd_per_hour, "gpus": gpus}, self.spec)


def miss_rule(spec: SloSpec) -> MissRule | None:
    """The attainment floor and per-request bars of ``spec`` for giving up on a capacity
    search's failing simulations (None without a floor)."""
    if spec.attainment is None or not spec.targets:
        return None
    bars = {metric: ms / 1e3 for metric, ms in spec.per_request_bars().items()}
    return MissRule(
        floor=spec.attainment,
        ttft_s=bars.get("ttft_ms"),
        tpot_s=bars.get("tpot_ms"),
        itl_s=bars.get("itl_ms"),
        e2e_s=bars.get("e2e_ms"),
    )
