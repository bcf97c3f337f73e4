"""Smoke test of ``bench/search_quality.py`` on a 6-point space with a 20-request workload."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import optuna
import pytest

from optimizer.objective import Evaluation, TrialEvaluator
from optimizer.run import OptimizeSetup, build_evaluator

BENCH = Path(__file__).resolve().parents[2] / "bench" / "search_quality.py"

# 1 GPU type x 2 instance counts x (prefill_first, chunked x 2 chunk sizes) = 6 points.
SPACE = """\
model: Qwen/Qwen3-8B
dimensions:
  gpu: {choices: [h100_sxm]}
  instances: {choices: [1, 2]}
  scheduler: {choices: [prefill_first, chunked]}
  chunk_tokens: {choices: [1024, 4096]}
fixed: {backend: vllm}
"""
# Loose enough that every point that runs is feasible: the front is then non-empty.
SLO = """\
name: smoke
targets:
  ttft_ms: {p90: 600000}
attainment: 0.5
objectives: {latency: ttft_ms.p90, throughput: goodput_tokens_per_s, cost: usd_per_hour}
"""


@pytest.fixture(scope="module")
def sq() -> ModuleType:
    spec = importlib.util.spec_from_file_location("search_quality", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> TrialEvaluator:
    root = tmp_path_factory.mktemp("sq")
    (root / "space.yaml").write_text(SPACE)
    (root / "slo.yaml").write_text(SLO)
    setup = OptimizeSetup(
        slo_path=str(root / "slo.yaml"),
        space_path=str(root / "space.yaml"),
        workload=None,
        catalog_path=None,
        storage=None,
        study_name="smoke",
        sampler="random",
        seed=0,
        n_trials=0,
        max_requests=20,
    )
    return build_evaluator(setup)


def test_enumerates_conditional_points_once(sq: ModuleType, evaluator: TrialEvaluator) -> None:
    points = sq.enumerate_points(evaluator.space)
    assert len(points) == 6
    assert len({sq.point_key(p) for p in points}) == 6
    assert all(("chunk_tokens" in p) == (p["scheduler"] == "chunked") for p in points)
    assert all(p["backend"] == "vllm" for p in points)


def test_scores_and_cache(sq: ModuleType, evaluator: TrialEvaluator, tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    table = sq.evaluate_grid(evaluator, sq.enumerate_points(evaluator.space))
    assert len(table.evaluations) == 6
    assert any(sq.is_feasible(e) for e in table.evaluations.values())

    factories = sq.sampler_factories(["random", "nsga2"])
    scores = sq.score_runs(evaluator, table, factories, seeds=[0, 1], budgets=[0.5, 1.0])
    assert len(scores) == 2 * 2 * 2
    assert {s.n_trials for s in scores} == {3, 6}
    assert all(0.0 <= s.hv_fraction <= 1.0 + 1e-9 for s in scores)

    # Counting distinct points, a run stops once it has seen the budget's number of points or
    # after MAX_TRIALS_PER_NEW trials per point asked for (kvplan's limit); a run that saw the
    # whole grid has the whole front.
    random_only = sq.sampler_factories(["random"])
    full = sq.score_runs(
        evaluator, table, random_only, seeds=[0, 1, 2], budgets=[1.0], count="simulations"
    )
    assert len(full) == 3
    for score in full:
        assert score.n_trials <= sq.MAX_TRIALS_PER_NEW * 6
        assert score.n_unique == 6 or score.n_trials == sq.MAX_TRIALS_PER_NEW * 6
        if score.n_unique == 6:
            assert score.hv_fraction == pytest.approx(1.0)
            assert score.front_recall == 1.0
    assert any(score.n_unique == 6 for score in full)

    path = tmp_path / "grid.json"
    sq.save_table(path, table, "abc")
    assert sq.load_table(path, "other") is None
    loaded = sq.load_table(path, "abc")
    assert loaded is not None
    assert loaded.roles == table.roles
    for key, evaluation in table.evaluations.items():
        assert loaded.evaluations[key].values == evaluation.values
        assert loaded.evaluations[key].constraints == evaluation.constraints


def test_cached_objective_mirrors_the_real_one(sq: ModuleType, evaluator: TrialEvaluator) -> None:
    table = sq.evaluate_grid(evaluator, sq.enumerate_points(evaluator.space))
    studies = []
    for objective in (evaluator, sq.CachedObjective(evaluator, table)):
        study = optuna.create_study(
            directions=["minimize", "maximize", "minimize"],
            sampler=optuna.samplers.RandomSampler(seed=3),
        )
        study.optimize(objective, n_trials=3)
        studies.append(study)
    real, cached = (s.trials for s in studies)
    for a, b in zip(real, cached, strict=True):
        assert a.params == b.params
        assert a.values == b.values
        assert a.user_attrs == b.user_attrs
        assert a.system_attrs == b.system_attrs  # the constraints samplers read


def test_budgets_count_what_each_point_simulated(sq: ModuleType, tmp_path: Path) -> None:
    def point(name: str, simulated: float, *, pruned: bool) -> tuple[Any, Evaluation]:
        metrics = {"usd_per_hour": 1.0, "simulated_requests": simulated}
        evaluation = Evaluation({}, [1.0], metrics, "why" if pruned else "", pruned=pruned)
        return sq.point_key({"p": name}), evaluation

    full = point("a", 100, pruned=False)
    stopped = point("b", 25, pruned=True)
    screened = point("c", 0, pruned=True)
    table = sq.GridTable(dict([full, stopped, screened]), ("cost",), ("minimize",))
    keys = [screened[0], stopped[0], stopped[0], full[0]]
    # A screened point is free, a point given up on after a quarter of the requests costs a
    # quarter of a simulation (``requests``) or a whole one (``simulated``), once.
    assert len(sq._prefix(keys, 1, "simulations", table)) == 1
    assert len(sq._prefix(keys, 1, "simulated", table)) == 2
    assert len(sq._prefix(keys, 1, "requests", table)) == 4
    assert len(sq._prefix(keys, 1, "trials", table)) == 1
    path = tmp_path / "grid.json"
    sq.save_table(path, table, "abc")
    loaded = sq.load_table(path, "abc")
    assert loaded is not None
    assert loaded.evaluations[stopped[0]].pruned
    assert not loaded.evaluations[full[0]].pruned


@pytest.mark.parametrize(
    ("space", "slo", "points"),
    [
        ("search_quality.yaml", "search_quality_tight_slo.yaml", 216),
        ("search_quality_policies.yaml", "search_quality_policies_slo.yaml", 128),
    ],
)
def test_the_bench_spaces_enumerate_as_documented(
    sq: ModuleType, space: str, slo: str, points: int
) -> None:
    """The two enumerable spaces bench/README's search-quality tables are measured on, with
    the SLO files that constrain them (issue 15, item 4)."""
    from optimizer.space import load_space  # noqa: PLC0415
    from slo import load_slo  # noqa: PLC0415

    spaces = BENCH.parent / "spaces"
    assert len(sq.enumerate_points(load_space(spaces / space))) == points
    assert load_slo(spaces / slo).attainment is not None
