"""Search quality: how much of the exhaustive grid's Pareto front the samplers find, and how fast.

Usage::

    python bench/search_quality.py                            # nsga2, tpe, random (+ gp), 3 seeds
    python bench/search_quality.py --samplers nsga2,tpe --seeds 0-29 --count trials
    python bench/search_quality.py --cache /tmp/sq_grid.json  # simulate the grid once, reuse it
    python bench/search_quality.py --slo FILE --count requests --check-give-up  # multi-fidelity

Method. Every point of a space small enough to enumerate (``bench/spaces/search_quality.yaml``,
216 points) is evaluated once with the real ``TrialEvaluator`` (the simulator is deterministic
for its seed, so one evaluation per point is the truth). Each sampler then runs an ordinary
Optuna study whose objective looks the point's ``Evaluation`` up instead of simulating, and
records it on the trial exactly as ``TrialEvaluator.__call__`` does (``set_constraint`` per
constraint, the same user attributes), so samplers see what they see in ``kvplan optimize``.
A sampler's score at a budget is the hypervolume of its feasible trials within the budget
divided by the hypervolume of the grid's feasible points. Budgets are fractions of the grid's
size, counted (``--count``) in distinct points (``simulations``, the default: what ``kvplan
optimize`` pays — a trial that repeats a tried configuration copies its result, and the study
runs until it has the requested number of new ones) or in trials, repeats included (how
kvplan counted before repeats were free).

Reference point. Objectives are turned into minimisation vectors (``to_minimisation``); the
reference is the worst feasible value of each objective over the grid pushed out by
``--margin`` × the feasible range (default 0.1: the scale of BoTorch's
``infer_reference_point``, after Ishibuchi et al. 2011, which applies it to the front's nadir),
so the extreme points of the front still add volume. Ratios do not depend on the objectives'
units (each axis scales both volumes alike) but do depend on the margin: a larger one weighs
the extremes more.

Sampler names are kvplan's (``optimizer.study.SAMPLERS``) or the bench-only ``VARIANTS``
(other settings of the same Optuna samplers, measured as proposals for ``optimizer/study.py``).
``--cache FILE`` stores the grid's evaluations keyed by the inputs and the source code of the
packages that produce them, so a changed simulator is re-simulated, never silently reused.

What this is not: a speed benchmark, or a fidelity check (the simulator is taken as given).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import optuna

import hardware
import optimizer
import simulator
import slo
from optimizer.objective import REPEAT_ATTR, Evaluation, TrialEvaluator
from optimizer.pareto import hypervolume, non_dominated, to_minimisation
from optimizer.run import MAX_TRIALS_PER_NEW, OptimizeSetup, build_evaluator
from optimizer.space import Scalar, SearchSpace
from optimizer.study import NSGA2_POPULATION, SAMPLERS, fingerprint, make_sampler
from optimizer.workloads import describe_workload

HERE = Path(__file__).resolve().parent
DEFAULT_SPACE = HERE / "spaces" / "search_quality.yaml"
DEFAULT_SLO = HERE / "spaces" / "search_quality_slo.yaml"
DEFAULT_SAMPLERS = ("nsga2", "tpe", "random", "gp")
DEFAULT_BUDGETS = (0.2, 0.4)
DEFAULT_MARGIN = 0.1

#: A parameter point as a hashable lookup key (sorted ``(name, value)`` pairs, fixed included).
PointKey = tuple[tuple[str, Scalar], ...]
#: ``factory(seed) -> sampler``: how the benchmark builds one sampler for one seed.
SamplerFactory = Callable[[int], optuna.samplers.BaseSampler]


def point_key(params: Mapping[str, Any]) -> PointKey:
    """The lookup key of a parameter point (order of the mapping does not matter)."""
    return tuple(sorted(params.items()))


def enumerate_points(space: SearchSpace) -> list[dict[str, Scalar]]:
    """Every distinct point ``space.suggest`` can return, fixed settings merged in.

    A conditional dimension is branched on only where its condition holds (so ``chunk_tokens``
    multiplies the ``chunked`` points only) — the same rule as ``SearchSpace.suggest``. This is
    *not* ``space.grid()``, whose Cartesian product (what Optuna's grid sampler walks) repeats
    each unconditioned point once per value of every inactive dimension.
    """
    partials: list[dict[str, Scalar]] = [{}]
    for name, dim in space.dimensions.items():
        condition = space.condition(name)
        grown: list[dict[str, Scalar]] = []
        for point in partials:
            if all(point.get(k) in allowed for k, allowed in condition.items()):
                grown.extend({**point, name: value} for value in dim.values())
            else:
                grown.append(point)
        partials = grown
    return [{**space.fixed, **point} for point in partials]


@dataclass(frozen=True, slots=True)
class GridTable:
    """The exhaustive grid: every point's ``Evaluation`` and the study directions."""

    evaluations: dict[PointKey, Evaluation]
    roles: tuple[str, ...]
    """Objective roles in value order (latency, throughput, cost)."""
    directions: tuple[str, ...]
    """'minimize' | 'maximize' per role."""

    def minimisation(self, evaluations: Sequence[Evaluation]) -> np.ndarray[Any, Any]:
        """Objective rows of the *feasible* ``evaluations`` as minimisation vectors."""
        rows = [[e.values[r] for r in self.roles] for e in evaluations if is_feasible(e)]
        return to_minimisation(rows, self.directions)


def is_feasible(evaluation: Evaluation) -> bool:
    """Whether every constraint holds (≤ 0, Optuna's convention)."""
    return all(c <= 0 for c in evaluation.constraints)


def evaluate_grid(
    evaluator: TrialEvaluator,
    points: Sequence[Mapping[str, Scalar]],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> GridTable:
    """Evaluate every point with the real objective (one simulation each, in order)."""
    evaluations: dict[PointKey, Evaluation] = {}
    for i, params in enumerate(points):
        evaluations[point_key(params)] = evaluator.evaluate_params(params)
        if progress is not None:
            progress(i + 1, len(points))
    directions = tuple(evaluator.spec.objectives.directions[r] for r in evaluator.roles)
    return GridTable(evaluations, tuple(evaluator.roles), directions)


class CachedObjective:
    """An Optuna objective that looks trials up in a ``GridTable`` instead of simulating.

    Mirrors ``TrialEvaluator.__call__`` (same suggestions, user attributes and constraints), so
    a sampler cannot tell the difference. A point missing from the table is a ``KeyError``: the
    table must come from ``enumerate_points`` of the same space.
    """

    def __init__(self, evaluator: TrialEvaluator, table: GridTable) -> None:
        self.evaluator = evaluator
        self.table = table

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        """Suggest a point, record its cached evaluation on ``trial``, return its objectives."""
        params = self.evaluator.space.suggest(trial)
        evaluation = self.table.evaluations[point_key(params)]
        earlier = self.evaluator.earlier_evaluation(trial)
        if earlier is not None:  # marked like kvplan's free repeats
            trial.set_user_attr(REPEAT_ATTR, earlier[0])
        return self.evaluator.record(trial, params, evaluation)


def _finite(metrics: Mapping[str, float]) -> dict[str, float | None]:
    return {k: (v if math.isfinite(v) else None) for k, v in metrics.items()}


def reference_point(grid_points: np.ndarray[Any, Any], margin: float) -> list[float]:
    """The worst value per objective pushed out by ``margin`` × the range of ``grid_points``.

    A constant objective (zero range) is pushed out by ``margin`` × its magnitude (or by
    ``margin`` if it is 0), so the reference stays strictly worse than every point.
    """
    worst = grid_points.max(axis=0)
    span = worst - grid_points.min(axis=0)
    span = np.where(span > 0, span, np.maximum(np.abs(worst), 1.0))
    return [float(v) for v in worst + margin * span]


#: How a budget is counted: distinct points (``simulations``: what ``kvplan optimize`` pays,
#: since a trial repeating a configuration copies the earlier result), distinct points that ran
#: the simulator (``simulated``: a point ruled out without simulating — over budget, not fitting
#: in memory, or screened by ``optimizer.screen`` — costs nothing; one given up on part-way
#: costs a whole simulation), simulated requests (``requests``: each distinct point costs the
#: share of the workload it simulated, so a simulation given up on after a tenth of the
#: requests costs 0.1; the budget is in whole-workload simulations), or every trial
#: (``trials``: how kvplan counted before repeats were free).
Count = Literal["simulations", "simulated", "requests", "trials"]
COUNTS: tuple[Count, ...] = get_args(Count)


@dataclass(frozen=True, slots=True)
class RunScore:
    """One sampler run (one seed) scored at one budget."""

    sampler: str
    seed: int
    budget: float
    """Fraction of the grid's point count."""
    n_trials: int
    """Trials the sampler ran to reach the budget."""
    n_unique: int
    """Distinct points among those trials (the rest are repeats)."""
    n_feasible: int
    """Feasible trials (repeats included when counting trials)."""
    hv_fraction: float
    """Hypervolume of the feasible trials' objectives / the grid's (same reference)."""
    front_recall: float
    """Share of the grid's Pareto points found (exact objective match)."""


@dataclass(frozen=True, slots=True)
class _GridFront:
    """The yardstick: the grid's reference point, hypervolume and Pareto points."""

    reference: list[float]
    hypervolume: float
    front: frozenset[tuple[float, ...]]

    @classmethod
    def of(cls, table: GridTable, margin: float) -> _GridFront:
        grid = table.minimisation(list(table.evaluations.values()))
        if len(grid) == 0:
            raise ValueError("no feasible point in the grid: loosen the SLO or widen the space")
        reference = reference_point(grid, margin)
        front = frozenset(tuple(row) for row in grid[non_dominated(grid)])
        return cls(reference, hypervolume(grid, reference), front)


def run_sampler(
    objective: CachedObjective, sampler: optuna.samplers.BaseSampler, n: int, count: Count
) -> list[PointKey]:
    """The points a fresh study with ``sampler`` evaluates, in trial order.

    Stops after ``n`` trials, or (``count='simulations'``) once ``n`` distinct points were seen
    or ``MAX_TRIALS_PER_NEW`` × ``n`` trials ran (``optimize_until``'s limit).
    """
    directions = [optuna.study.StudyDirection[d.upper()] for d in objective.table.directions]
    study = optuna.create_study(directions=directions, sampler=sampler)
    keys: list[PointKey] = []
    paid = _Spent(objective.table, count)
    cap = MAX_TRIALS_PER_NEW * n

    def stop_when_done(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        keys.append(_trial_key(trial))
        paid.add(keys[-1])
        if count != "trials" and (paid.total >= n or len(keys) >= cap):
            study.stop()

    limit = n if count == "trials" else cap
    study.optimize(objective, n_trials=limit, callbacks=[stop_when_done], gc_after_trial=False)
    return keys


def costs_simulation(evaluation: Evaluation) -> bool:
    """Whether the point ran the simulator, in full or part-way (it simulated requests)."""
    simulated = evaluation.metrics.get("simulated_requests")
    if simulated is None:  # a grid cached before the count was stored
        return "ttft_ms.p90" in evaluation.metrics
    return simulated > 0


def workload_share(evaluation: Evaluation, full: float) -> float:
    """The share of a whole-workload simulation ``evaluation`` cost (``full`` requests each)."""
    if not costs_simulation(evaluation):
        return 0.0
    simulated = evaluation.metrics.get("simulated_requests")
    return 1.0 if simulated is None or full <= 0 else min(1.0, simulated / full)


class _Spent:
    """What a run has paid so far, in ``count`` units (each distinct point paid once)."""

    def __init__(self, table: GridTable, count: Count) -> None:
        self.table, self.count = table, count
        self.full = max(
            (e.metrics.get("simulated_requests", 0.0) for e in table.evaluations.values()),
            default=0.0,
        )
        self.seen: set[PointKey] = set()
        self.total = 0.0
        self.trials = 0

    def add(self, key: PointKey) -> None:
        self.trials += 1
        if self.count == "trials":
            self.total += 1
            return
        if key in self.seen:
            return
        self.seen.add(key)
        evaluation = self.table.evaluations[key]
        if self.count == "simulations":
            self.total += 1
        elif self.count == "simulated":
            self.total += costs_simulation(evaluation)
        else:
            self.total += workload_share(evaluation, self.full)


def _prefix(
    keys: Sequence[PointKey], n: int, count: Count, table: GridTable | None = None
) -> list[PointKey]:
    """The trials until ``n`` units of ``count`` were paid (all of ``keys`` if fewer were)."""
    if count == "trials" or table is None:
        return list(keys[:n])
    paid = _Spent(table, count)
    for i, key in enumerate(keys):
        paid.add(key)
        if paid.total >= n - 1e-9:
            return list(keys[: i + 1])
    return list(keys)


def _score(
    table: GridTable, yardstick: _GridFront, keys: Sequence[PointKey], count: Count
) -> tuple[int, int, float, float]:
    """(feasible trials, unique points, HV fraction, front recall) of one prefix."""
    evaluations = [table.evaluations[k] for k in (keys if count == "trials" else set(keys))]
    found = table.minimisation(evaluations)
    hv = hypervolume(found, yardstick.reference) / yardstick.hypervolume
    recall = len(yardstick.front & {tuple(r) for r in found}) / len(yardstick.front)
    return len(found), len(set(keys)), hv, recall


def score_runs(
    evaluator: TrialEvaluator,
    table: GridTable,
    samplers: Mapping[str, SamplerFactory],
    *,
    seeds: Sequence[int],
    budgets: Sequence[float] = DEFAULT_BUDGETS,
    margin: float = DEFAULT_MARGIN,
    count: Count = "trials",
) -> list[RunScore]:
    """Run each sampler once per seed up to the largest budget; score every budget prefix.

    A budget is a fraction of the grid's point count, counted as ``count`` says. Raises
    ``ValueError`` when the grid has no feasible point (no front to compare with).
    """
    yardstick = _GridFront.of(table, margin)
    n_points = len(table.evaluations)
    sizes = [max(1, round(b * n_points)) for b in budgets]
    objective = CachedObjective(evaluator, table)
    scores: list[RunScore] = []
    for name, factory in samplers.items():
        for seed in seeds:
            keys = run_sampler(objective, factory(seed), max(sizes), count)
            for budget, size in zip(budgets, sizes, strict=True):
                prefix = _prefix(keys, size, count, table)
                n_feasible, n_unique, hv, recall = _score(table, yardstick, prefix, count)
                scores.append(
                    RunScore(name, seed, budget, len(prefix), n_unique, n_feasible, hv, recall)
                )
    return scores


def _trial_key(trial: optuna.trial.FrozenTrial) -> PointKey:
    params = dict(trial.user_attrs["params"])
    params.pop("model")
    return point_key(params)


# ----- grid cache ---------------------------------------------------------------------------------


def grid_fingerprint(evaluator: TrialEvaluator) -> str:
    """What the grid's evaluations depend on: the inputs and the source of the code that runs.

    The code is part of it because the simulator evolves; a cache from older code is stale.
    """
    code = hashlib.sha256()
    for package in (simulator, optimizer, slo, hardware):
        root = Path(str(package.__file__)).parent
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml", ".jsonl", ".csv", ".gz") and path.is_file():
                code.update(path.relative_to(root).as_posix().encode())
                code.update(path.read_bytes())
    return fingerprint(
        {
            "space": evaluator.space.model_dump(mode="json"),
            "slo": evaluator.spec.model_dump(mode="json"),
            "workload": describe_workload(evaluator.workload),
            "catalog": evaluator.catalog.model_dump(mode="json"),
            "seed": evaluator.seed,
            "latency_model": evaluator.latency_model,
            "code": code.hexdigest(),
        }
    )


def save_table(path: Path, table: GridTable, digest: str) -> None:
    """Write the grid's evaluations as JSON (non-finite metrics become null)."""
    points = [
        {
            "params": dict(key),
            "values": e.values,
            "constraints": e.constraints,
            "metrics": _finite(e.metrics),
            "infeasible_reason": e.infeasible_reason,
            "pruned": e.pruned,
        }
        for key, e in table.evaluations.items()
    ]
    data = {
        "fingerprint": digest,
        "roles": table.roles,
        "directions": table.directions,
        "points": points,
    }
    path.write_text(json.dumps(data, indent=1))


def load_table(path: Path, digest: str) -> GridTable | None:
    """The grid saved at ``path`` if it exists and has fingerprint ``digest``, else None."""
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data.get("fingerprint") != digest:
        return None
    evaluations = {
        point_key(p["params"]): Evaluation(
            values=p["values"],
            constraints=p["constraints"],
            metrics={k: (math.nan if v is None else v) for k, v in p["metrics"].items()},
            infeasible_reason=p["infeasible_reason"],
            pruned=bool(p.get("pruned", False)),
        )
        for p in data["points"]
    }
    return GridTable(evaluations, tuple(data["roles"]), tuple(data["directions"]))


# ----- samplers -----------------------------------------------------------------------------------


#: Bench-only settings measured against ``optimizer/study.py``'s (see bench/README.md):
#: ``nsga2-mut0.5`` is kvplan's NSGA-II with each parameter mutated with probability 0.5
#: instead of 1/n_params (on a few categorical dimensions crossover mostly re-creates a parent;
#: mutation is what makes new points); ``tpe-start5`` is kvplan's TPE with 5 random startup
#: trials instead of Optuna's 10 (both are kvplan's defaults now). ``tpe-start10`` goes back
#: to Optuna's 10; ``tpe-start3`` tries fewer; ``tpe-gamma20`` puts the best 20% of trials
#: instead of 10% in TPE's "good" density (on a space where few points are feasible, more
#: near-misses inform it).
VARIANTS: dict[str, SamplerFactory] = {
    "nsga2-mut0.5": lambda seed: optuna.samplers.NSGAIISampler(
        seed=seed, population_size=NSGA2_POPULATION, mutation_prob=0.5
    ),
    "tpe-start5": lambda seed: _tpe_variant(seed, n_startup_trials=5),
    "tpe-start3": lambda seed: _tpe_variant(seed, n_startup_trials=3),
    "tpe-start10": lambda seed: _tpe_variant(seed, n_startup_trials=10),
    "tpe-gamma20": lambda seed: _tpe_variant(seed, n_startup_trials=5, gamma=_gamma20),
}


def _gamma20(n: int) -> int:
    return math.ceil(0.2 * n)


def _tpe_variant(seed: int, **settings: Any) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, **settings)


def sampler_factories(names: Sequence[str]) -> dict[str, SamplerFactory]:
    """Factories for ``names``: bench ``VARIANTS``, else kvplan's samplers (``make_sampler``)."""
    return {n: VARIANTS.get(n) or partial(_kvplan_sampler, n) for n in names}


def known_samplers() -> list[str]:
    """Names ``--samplers`` accepts (kvplan's grid sampler is no sampler to score here)."""
    return [n for n in SAMPLERS if n != "grid"] + list(VARIANTS)


def _kvplan_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    return make_sampler(name, seed)


def gp_available() -> bool:
    """Whether Optuna's GPSampler can run: it needs PyTorch *and* SciPy (imported lazily)."""
    try:
        import scipy  # noqa: F401, PLC0415  (optional)
        import torch  # noqa: F401, PLC0415  (optional)
    except ImportError:
        return False
    return True


# ----- report -------------------------------------------------------------------------------------


def summary_rows(scores: Sequence[RunScore]) -> list[dict[str, Any]]:
    """Per sampler × budget: mean/std/min HV fraction over seeds, mean unique points, recall."""
    groups: dict[tuple[str, float], list[RunScore]] = {}
    for score in scores:
        groups.setdefault((score.sampler, score.budget), []).append(score)
    rows = []
    for (sampler, budget), group in groups.items():
        hv = np.array([s.hv_fraction for s in group])
        rows.append(
            {
                "sampler": sampler,
                "budget": budget,
                "trials": float(np.mean([s.n_trials for s in group])),
                "seeds": len(group),
                "hv_mean": float(hv.mean()),
                "hv_std": float(hv.std()),
                "hv_min": float(hv.min()),
                "unique_mean": float(np.mean([s.n_unique for s in group])),
                "feasible_mean": float(np.mean([s.n_feasible for s in group])),
                "recall_mean": float(np.mean([s.front_recall for s in group])),
            }
        )
    return rows


def print_report(
    table: GridTable, rows: Sequence[Mapping[str, Any]], margin: float, count: Count
) -> None:
    """The grid's facts, then one line per sampler × budget."""
    grid = table.minimisation(list(table.evaluations.values()))
    n = len(table.evaluations)
    reasons: dict[str, int] = {}
    for e in table.evaluations.values():
        if not is_feasible(e):
            kind = "misses the SLO in full"
            if e.infeasible_reason:
                given_up = e.pruned and costs_simulation(e)
                kind = "given up part-way" if given_up else "ruled out without simulating"
            reasons[kind] = reasons.get(kind, 0) + 1
    why = ", ".join(f"{v} {k}" for k, v in sorted(reasons.items()))
    print(f"grid: {n} points, {len(grid)} feasible ({len(grid) / n:.0%}; {why})")
    print(f"grid front: {len(non_dominated(grid))} points; reference = nadir + {margin} x range")
    print(f"budgets count {count}; mean over seeds (± population std, min)")
    print(
        f"{'sampler':<16} {'budget':>6} {'trials':>6} {'HV frac':>8} {'± std':>6} {'min':>6} "
        f"{'unique':>6} {'feas.':>6} {'recall':>6}"
    )
    for r in rows:
        print(
            f"{r['sampler']:<16} {r['budget']:>6.0%} {r['trials']:>6.0f} {r['hv_mean']:>8.3f} "
            f"{r['hv_std']:>6.3f} {r['hv_min']:>6.3f} {r['unique_mean']:>6.1f} "
            f"{r['feasible_mean']:>6.1f} {r['recall_mean']:>6.2f}"
        )


# ----- command line -------------------------------------------------------------------------------


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v]


def _seeds(text: str) -> list[int]:
    """``'0,1,2'`` or a range ``'0-99'``."""
    if "-" in text:
        first, last = (int(v) for v in text.split("-", 1))
        return list(range(first, last + 1))
    return [int(v) for v in text.split(",") if v]


def main(argv: Sequence[str] | None = None) -> int:
    """Evaluate (or load) the grid, run every sampler for every seed, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", default=str(DEFAULT_SPACE), help="space file to enumerate")
    parser.add_argument("--slo", default=str(DEFAULT_SLO), help="SLO file")
    parser.add_argument("--workload", default=None, help="trace/workload file (default: bundled)")
    parser.add_argument("--max-requests", type=int, default=200, help="requests replayed")
    parser.add_argument("--sim-seed", type=int, default=0, help="simulator seed (the grid's)")
    parser.add_argument("--samplers", default=",".join(DEFAULT_SAMPLERS), help="comma list")
    parser.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="'0,1,2' or '0-99'")
    parser.add_argument("--budgets", type=_floats, default=list(DEFAULT_BUDGETS))
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN, help="reference margin")
    parser.add_argument("--cache", type=Path, default=None, help="grid cache file (JSON)")
    parser.add_argument(
        "--count", choices=COUNTS, default="simulations", help="what a budget counts (docstring)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write scores here")
    parser.add_argument(
        "--no-give-up",
        action="store_true",
        help="simulate every point in full (no stopping once the attainment floor is lost)",
    )
    parser.add_argument(
        "--check-give-up",
        action="store_true",
        help="re-simulate every point given up on in full and check it misses the SLO",
    )
    args = parser.parse_args(argv)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # kvplan's samplers use experimental arguments (TPE's group=True) on purpose.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    setup = OptimizeSetup(
        slo_path=args.slo,
        space_path=args.space,
        workload=args.workload,
        catalog_path=None,
        storage=None,
        study_name="search-quality",
        sampler="random",
        seed=args.sim_seed,
        n_trials=0,
        max_requests=args.max_requests,
    )
    evaluator = build_evaluator(setup)
    evaluator.giving_up = not args.no_give_up
    digest = grid_fingerprint(evaluator)
    table = load_table(args.cache, digest) if args.cache else None
    if table is None:
        points = enumerate_points(evaluator.space)
        start = time.perf_counter()
        table = evaluate_grid(evaluator, points, progress=_progress)
        seconds = time.perf_counter() - start
        print(f"\ngrid: {len(points)} points evaluated in {seconds:.0f} s (CPU-bound, one core)")
        if args.cache:
            save_table(args.cache, table, digest)
    else:
        print(f"grid: loaded {len(table.evaluations)} evaluations from {args.cache}")
    print(grid_cost_line(table))
    if args.check_give_up:
        print(check_give_up(build_evaluator(setup), table))

    names = [n for n in args.samplers.split(",") if n]
    unknown = [n for n in names if n not in known_samplers()]
    if unknown:
        parser.error(f"unknown sampler {unknown[0]!r}; known: {', '.join(known_samplers())}")
    if "gp" in names and not gp_available():
        print("gp: skipped (needs PyTorch and SciPy)")
        names.remove("gp")
    start = time.perf_counter()
    scores = score_runs(
        evaluator,
        table,
        sampler_factories(names),
        seeds=args.seeds,
        budgets=args.budgets,
        margin=args.margin,
        count=args.count,
    )
    print(f"samplers: {time.perf_counter() - start:.0f} s")
    rows = summary_rows(scores)
    print_report(table, rows, args.margin, args.count)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "runs": [asdict(s) for s in scores]}))
    return 0


def grid_cost_line(table: GridTable) -> str:
    """How many requests the grid simulated, and what giving up part-way saved."""
    evaluations = list(table.evaluations.values())
    full = max((e.metrics.get("simulated_requests", 0.0) for e in evaluations), default=0.0)
    ran = [e for e in evaluations if costs_simulation(e)]
    stopped = [e for e in ran if e.pruned]
    simulated = sum(e.metrics.get("simulated_requests", full) for e in ran)
    return (
        f"grid cost: {len(ran)} points simulated, {len(stopped)} of them given up part-way; "
        f"{simulated:,.0f} requests simulated of {full * len(ran):,.0f} in full "
        f"({simulated / max(1.0, full * len(ran)):.0%})"
    )


def check_give_up(evaluator: TrialEvaluator, table: GridTable) -> str:
    """Re-simulate the points given up on without giving up: each must miss the SLO."""
    evaluator.giving_up = False
    stopped = [k for k, e in table.evaluations.items() if e.pruned and costs_simulation(e)]
    wrong = [k for k in stopped if is_feasible(evaluator.evaluate_params(dict(k)))]
    if wrong:
        raise AssertionError(f"given up on but feasible in full: {wrong}")
    return f"give-up check: all {len(stopped)} points given up on miss the SLO in full"


def _progress(done: int, total: int) -> None:
    if sys.stdout.isatty():
        print(f"\rgrid: {done}/{total}", end="", flush=True)
    elif done % max(1, total // 10) == 0:  # a log file gets about ten lines
        print(f"grid: {done}/{total}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
