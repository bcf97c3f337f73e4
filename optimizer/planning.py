"""Cost-benefit planning for the picks: what each cache tier buys, headroom, the baseline.

All figures come from extra simulations on the study's own workload and seed:

- **tier value**: the pick re-simulated without its L3 tier, and without L2 (hence without L3);
  if the variant breaks the SLO, instances are added one at a time (up to
  ``MAX_EXTRA_INSTANCES``) until it meets it again. The GPUs and dollars the variant needs
  beyond the pick are what the tier saves.
- **headroom**: the largest load multiplier k ≥ 1 (arrival rate × k, i.e. ``time_scale`` 1/k)
  at which the pick still meets the SLO, by ``capacity_search`` (bisection to 2.5%, up to 8×);
  open-loop workloads only.
- **KV margin**: the pick re-simulated with its KV pool ``KV_MARGIN_SCALE`` (90%) of what the
  memory rules fit (``kv_capacity_scale``): whether it still meets the SLO, how its TTFT p90
  moves, and how many instances (up to ``MAX_EXTRA_INSTANCES``) restore the SLO if not. Engines
  size their pools from what they measure at start-up, and several capacity-bound H100
  benchmark rows behave as if their pool were 5-15% below the rule's (``simulator/kv_margin.py``):
  a pick that fails here sits on the KV-capacity edge, where the simulator is least reliable.
- **baseline**: the user's configuration evaluated the same way, and each pick's saving.

How the simulations run (``plan_runner``): evaluations whose configuration a trial already
ran are copied from it when ``plan`` is given a ``ReusingEvaluator``, the headroom search
skips the nominal load (a pick met the SLO there in its trial) and gives up on a simulation
once the attainment floor is out of reach (requests judged at their first token: TTFT misses,
the usual failure near the capacity, are certain then), and a ``runner`` may spread the per-pick
tasks over worker processes; none of it changes a figure (the headroom's simulation count
aside).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from optimizer.objective import Evaluation, TrialEvaluator
from optimizer.plan_runner import InProcess, PlanRunner
from optimizer.report_sections import Planning
from optimizer.results import StudyResult
from simulator.kv_margin import DEFAULT_FRACTION
from slo.inputfile import InputError
from slo.units import HOURS_PER_MONTH

__all__ = ["KV_MARGIN_SCALE", "MAX_EXTRA_INSTANCES", "plan"]

MAX_EXTRA_INSTANCES = 8
#: The KV pool each pick is re-simulated with, as a share of the rule's (module doc).
KV_MARGIN_SCALE = 1 - DEFAULT_FRACTION


def _feasible(evaluation: Evaluation) -> bool:
    return all(c <= 0 for c in evaluation.constraints)


def _tier_rows(evaluator: TrialEvaluator, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    variants: list[tuple[str, dict[str, Any]]] = []
    if params.get("l3") not in (None, "none") or params.get("l3_tier"):
        variants.append(("without L3", {**params, "l3": "none", "l3_tier": None}))
    if float(params.get("l2_dram_gib") or 0) > 0:
        variants.append(("without L2 and L3", {**params, "l2_dram_gib": 0, "l3": "none"}))
    rows = []
    base = evaluator.evaluate_params(params)
    rows.append(_row("as picked", params, base))
    for label, start in variants:
        variant = {k: v for k, v in start.items() if not (k == "l3_tier" and v is None)}
        variant, evaluation, _ = _restore(evaluator, variant)
        rows.append(_row(label, variant, evaluation))
    return rows


def _restore(
    evaluator: TrialEvaluator, variant: dict[str, Any]
) -> tuple[dict[str, Any], Evaluation, int]:
    """``variant`` evaluated, with instances added one at a time (up to
    ``MAX_EXTRA_INSTANCES``) while it breaks the SLO: the point, its evaluation and the
    instances added."""
    instances = int(variant.get("instances", 1))
    evaluation = evaluator.evaluate_params(variant)
    extra = 0
    while not _feasible(evaluation) and extra < MAX_EXTRA_INSTANCES:
        extra += 1
        variant = {**variant, "instances": instances + extra}
        evaluation = evaluator.evaluate_params(variant)
    return variant, evaluation, extra


def _kv_margin(evaluator: TrialEvaluator, params: Mapping[str, Any]) -> dict[str, Any]:
    """The pick with its KV pool ``KV_MARGIN_SCALE`` of the rule's (module doc): whether it
    still meets the SLO, its TTFT p90 against the pick's, and the instances that restore it."""
    scale = KV_MARGIN_SCALE * float(params.get("kv_capacity_scale", 1.0))
    base = evaluator.evaluate_params(params)
    first = evaluator.evaluate_params({**params, "kv_capacity_scale": scale})
    entry: dict[str, Any] = {
        "kv_capacity_scale": scale,
        "meets SLO": _feasible(first),
        "TTFT p90 ms": first.metrics.get("ttft_ms.p90"),
        "TTFT p90 ratio": _ratio(first.metrics.get("ttft_ms.p90"), base.metrics.get("ttft_ms.p90")),
        "extra instances": 0,
    }
    if not entry["meets SLO"]:
        _, restored, extra = _restore(evaluator, {**params, "kv_capacity_scale": scale})
        entry["extra instances"] = extra if _feasible(restored) else None
    return entry


def _ratio(value: Any, base: Any) -> float | None:
    """``value / base`` of two finite positive figures, else None."""
    try:
        v, b = float(value), float(base)
    except (TypeError, ValueError):
        return None
    return v / b if b > 0 and math.isfinite(b) and math.isfinite(v) else None


def _row(label: str, params: Mapping[str, Any], evaluation: Evaluation) -> dict[str, Any]:
    m = evaluation.metrics
    return {
        "variant": label,
        "meets SLO": _feasible(evaluation),
        "instances": int(params.get("instances", 1)),
        "GPUs": m.get("gpus"),
        "USD/h": m.get("usd_per_hour"),
        "TTFT p90 ms": m.get("ttft_ms.p90"),
        "L1+L2+L3 hit": sum(m.get(f"hit_ratio.{t}", 0.0) or 0.0 for t in ("l1", "l2", "l3")),
    }


def plan(
    evaluator: TrialEvaluator,
    result: StudyResult,
    *,
    baseline: Mapping[str, Any] | None = None,
    headroom: bool = True,
    runner: PlanRunner | None = None,
    on_step: Callable[[str], None] | None = None,
) -> Planning:
    """Measure tier value and headroom for each distinct pick, and compare with ``baseline``.

    ``runner`` runs the per-pick tasks (default: here, with ``evaluator``); the baseline is
    evaluated with ``evaluator``. ``on_step`` is told what is being measured before each
    stage (progress for a person).
    """
    say = on_step or (lambda _text: None)
    runner = runner or InProcess(evaluator)
    picks: dict[int, tuple[str, dict[str, Any]]] = {}
    for pick in result.picks:
        picks.setdefault(pick.trial.number, (pick.label, dict(pick.trial.params)))
    labels = [label for label, _ in picks.values()]
    points = [params for _, params in picks.values()]
    # Headroom searches first: they are the long tasks, so a pool starts them early.
    tasks = [("headroom", p) for p in points] if headroom else []
    tasks += [("tiers", p) for p in points]
    tasks += [("kv_margin", p) for p in points]
    say(f"planning: what each cache tier buys and the headroom of {len(points)} pick(s)")
    done = runner.map(_pick_task, tasks)
    start = len(points) if headroom else 0
    tier_value = dict(zip(labels, done[start : start + len(points)], strict=True))
    kv_margin = dict(zip(labels, done[start + len(points) :], strict=True))
    headroom_rows = dict(zip(labels, done[: len(points)], strict=True)) if headroom else {}
    if baseline is not None:
        say("planning: your baseline")
    base_info = _baseline(evaluator, result, baseline) if baseline is not None else None
    return Planning(
        tier_value=tier_value, headroom=headroom_rows, baseline=base_info, kv_margin=kv_margin
    )


def _pick_task(evaluator: TrialEvaluator, task: tuple[str, dict[str, Any]]) -> Any:
    """One planning task of a pick: its tier rows or its headroom (module-level: picklable)."""
    kind, params = task
    if kind == "headroom":
        return _headroom(evaluator, params)
    return _kv_margin(evaluator, params) if kind == "kv_margin" else _tier_rows(evaluator, params)


def _headroom(evaluator: TrialEvaluator, params: Mapping[str, Any]) -> dict[str, Any]:
    try:
        # A pick met the SLO at the nominal load in its trial: the same search as --capacity.
        found = evaluator.capacity_above_nominal(evaluator.config_for(params))
    except InputError as err:  # e.g. a closed-loop workload has no arrival rate to scale
        return {"load_scale": None, "requests_per_s": None, "note": str(err)}
    return {
        "load_scale": found.load_scale,
        "requests_per_s": found.requests_per_s,
        "simulations": found.simulations,
        "at_limit": found.at_limit,
    }


def _baseline(
    evaluator: TrialEvaluator, result: StudyResult, baseline: Mapping[str, Any]
) -> dict[str, Any]:
    evaluation = evaluator.evaluate_params(baseline)
    feasible = _feasible(evaluation)
    base_cost = evaluation.metrics.get("usd_per_hour")
    # Latency is compared only when the baseline ran: an infeasible one has no latency (its
    # objective value is a placeholder, never a figure to print).
    base_latency = evaluation.metrics.get("objective.latency") if feasible else None
    comparison: dict[str, str] = {}
    for pick in result.picks:
        cost = pick.trial.metrics.get("usd_per_hour")
        if base_cost is None or cost is None or base_cost != base_cost:  # noqa: PLR0124  (NaN)
            continue
        saving = (base_cost - cost) * HOURS_PER_MONTH
        text = (
            f"saves USD {saving:,.0f}/month"
            if saving >= 0
            else f"costs USD {-saving:,.0f}/month more"
        )
        latency = pick.trial.objectives.get("latency")
        if base_latency is not None and latency is not None:
            text += f"; latency objective {latency:,.0f} vs baseline {base_latency:,.0f}"
        comparison[pick.label] = text
    reason = evaluation.infeasible_reason
    if not feasible and not reason:
        reason = "it ran but misses the SLO targets or attainment"
    return {
        "params": dict(baseline),
        "feasible": feasible,
        "reason": reason,
        "metrics": evaluation.metrics,
        "comparison": comparison,
    }
