"""Planning execution: reusing the trials' stored results and a worker pool change no figure."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from optimizer.objective import TrialEvaluator
from optimizer.plan_runner import (
    ROW_METRICS,
    CrewRunner,
    InProcess,
    ReusingEvaluator,
    WorkerPool,
    config_key,
    planning_runner,
    stored_evaluations,
)
from optimizer.planning import plan
from optimizer.report import Planning
from optimizer.results import StudyResult, TrialRecord, summarise
from optimizer.run import (
    OptimizeSetup,
    StudyWorkers,
    WorkerError,
    build_evaluator,
    records_of,
    run_workers,
)

#: The tiny space on H100s only (every request of the slice fits: no infinite TTFT, whose
#: trials are not reused) and targets it meets at the nominal load.
SPACE = """\
model: Qwen/Qwen3-8B
dimensions:
  instances: {low: 1, high: 2}
  l2_dram_gib: {choices: [0, 64]}
  scheduler: {choices: [prefill_first, chunked]}
fixed: {backend: vllm, gpu: h100_sxm}
"""
SLO = """\
name: loose
targets:
  ttft_ms: {p90: 60000}
attainment: 0.5
budget: {usd_per_hour: 20}
"""


def _setup(files: dict[str, str]) -> OptimizeSetup:
    return OptimizeSetup(
        **files,  # slo_path, space_path
        workload=None,
        catalog_path=None,
        storage=None,
        study_name="t",
        sampler="nsga2",
        seed=7,
        n_trials=6,
        max_requests=30,
    )


def _study(setup: OptimizeSetup) -> tuple[TrialEvaluator, list[TrialRecord], StudyResult]:
    evaluator = build_evaluator(setup)
    records = records_of(run_workers(setup, workers=1))
    result = summarise(records, dict(evaluator.spec.objectives.directions))
    assert result.picks, "the tiny study should have feasible picks"
    return evaluator, records, result


def _figures(planning: Planning) -> dict[str, Any]:
    # The headroom rows count their simulations, which reuse lowers; every figure else is kept.
    headroom = {
        k: {f: v for f, v in row.items() if f != "simulations"}
        for k, row in planning.headroom.items()
    }
    return {
        "tiers": planning.tier_value,
        "headroom": headroom,
        "baseline": planning.baseline,
        "kv_margin": planning.kv_margin,
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("plan")
    (folder / "slo.yaml").write_text(SLO)
    (folder / "space.yaml").write_text(SPACE)
    return {"slo_path": str(folder / "slo.yaml"), "space_path": str(folder / "space.yaml")}


@pytest.fixture(scope="module")
def study(files: dict[str, str]) -> tuple[TrialEvaluator, list[TrialRecord], StudyResult]:
    return _study(_setup(files))


def test_stored_results_are_what_a_fresh_evaluation_gives(
    study: tuple[TrialEvaluator, list[TrialRecord], StudyResult], files: dict[str, str]
) -> None:
    evaluator, records, _ = study
    stored = stored_evaluations(evaluator, records)
    assert 0 < len(stored) <= len(records)
    record = next(r for r in records if r.feasible)
    key = config_key(evaluator, record.params)
    assert key is not None
    fresh = build_evaluator(_setup(files)).evaluate_params(record.params)
    again = stored[key]
    assert again.values == fresh.values
    assert again.constraints == fresh.constraints
    assert again.infeasible_reason == fresh.infeasible_reason
    for name, value in fresh.metrics.items():  # what the storage cannot keep: inf as NaN
        assert again.metrics[name] == value or not math.isfinite(value), name
    for name in ROW_METRICS:
        assert again.metrics.get(name) == fresh.metrics.get(name)


def test_reuse_keeps_every_figure_and_skips_simulations(
    study: tuple[TrialEvaluator, list[TrialRecord], StudyResult], files: dict[str, str]
) -> None:
    evaluator, records, result = study
    baseline = dict(result.picks[0].trial.params)
    plain = plan(build_evaluator(_setup(files)), result, baseline=baseline)
    with planning_runner(_setup(files), evaluator, records) as runner:
        assert isinstance(runner, InProcess)
        reused = plan(evaluator, result, baseline=baseline, runner=runner)
    assert _figures(reused) == _figures(plain)
    reusing = runner.evaluator
    assert isinstance(reusing, ReusingEvaluator)
    # At least every pick's own row ("as picked") came from the trials.
    assert reusing.n_reused >= len({p.trial.number for p in result.picks})
    for label, row in reused.headroom.items():
        assert row["simulations"] < plain.headroom[label]["simulations"] or row["at_limit"]


@pytest.mark.slow
def test_a_worker_pool_gives_the_same_planning(
    study: tuple[TrialEvaluator, list[TrialRecord], StudyResult], files: dict[str, str]
) -> None:
    evaluator, records, result = study
    with planning_runner(_setup(files), evaluator, records) as runner:
        serial = plan(evaluator, result, runner=runner)
    with planning_runner(_setup(files), evaluator, records, workers=2) as pool:
        parallel = plan(evaluator, result, runner=pool)
    assert parallel == serial


def _where(evaluator: TrialEvaluator, index: int) -> tuple[int, int]:
    """A task that says which process ran it (module-level: the workers unpickle it)."""
    del evaluator
    time.sleep(0.2)  # long enough for the spawned worker's feeder to have taken the first
    return index, os.getpid()


@pytest.mark.slow
def test_the_pool_runs_tasks_here_and_in_the_spawned_worker_in_order(
    study: tuple[TrialEvaluator, list[TrialRecord], StudyResult], files: dict[str, str]
) -> None:
    evaluator, records, _ = study
    heard: list[tuple[int, int]] = []
    with planning_runner(
        _setup(files), evaluator, records, workers=2, progress=lambda d, n: heard.append((d, n))
    ) as pool:
        assert isinstance(pool, WorkerPool)
        assert pool.spawned == 1  # this process is the other worker
        done = pool.map(_where, list(range(6)))
    assert [index for index, _ in done] == list(range(6))
    assert done[-1][1] == os.getpid()  # this process takes tasks from the back at once
    assert done[0][1] != os.getpid()  # the spawned worker from the front
    assert heard == [(k, 6) for k in range(1, 7)]


def _fails(evaluator: TrialEvaluator, index: int) -> int:
    """A task that raises in whichever process runs it."""
    del evaluator
    raise ValueError(f"task {index} failed")


def test_the_kept_trial_workers_plan_as_one_process_does(
    files: dict[str, str], tmp_path: Path
) -> None:
    """``--workers 2`` plans in the trial worker the study spawned (kept, ready): the same
    figures as in one process, tasks in both processes, a task's error raised here, and the
    worker gone once the block ends."""
    setup = dataclasses.replace(_setup(files), storage=str(tmp_path / "study.journal"))
    evaluator = build_evaluator(setup)
    with StudyWorkers(setup, workers=2) as crew:
        records = records_of(crew.run())
        result = summarise(records, dict(evaluator.spec.objectives.directions))
        assert result.picks
        pool = crew.pool
        assert pool is not None
        assert pool.ready() == [0]  # done with its trials, waiting
        with planning_runner(setup, evaluator, records, workers=2, kept=pool) as runner:
            assert isinstance(runner, CrewRunner)
            kept = plan(evaluator, result, runner=runner)
            where = runner.map(_where, list(range(4)))
            with pytest.raises(ValueError, match="task 0 failed"):  # the worker's, from the front
                runner.map(_fails, [0])
            assert [i for i, _ in runner.map(_where, [8, 9])] == [8, 9]  # still usable
    assert not pool.alive()
    assert pool.failures() == []
    with planning_runner(setup, evaluator, records) as runner:
        serial = plan(evaluator, result, runner=runner)
    assert kept == serial
    assert [index for index, _ in where] == list(range(4))
    assert where[0][1] != os.getpid()
    assert where[-1][1] == os.getpid()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL of the kept worker")
def test_a_kept_worker_that_died_is_one_line_worker_error(
    files: dict[str, str], tmp_path: Path
) -> None:
    setup = dataclasses.replace(_setup(files), storage=str(tmp_path / "study.journal"))
    evaluator = build_evaluator(setup)
    with StudyWorkers(setup, workers=2) as crew:
        records = records_of(crew.run())
        pool = crew.pool
        assert pool is not None
        assert pool.ready() == [0]
        victim = pool._processes[0]  # the spawned trial worker, waiting for planning jobs
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=30)
        with (
            pytest.raises(WorkerError) as caught,
            planning_runner(setup, evaluator, records, workers=2, kept=pool),
        ):
            pass
    message = str(caught.value)
    assert "\n" not in message
    assert "worker 1: killed by SIGKILL" in message
