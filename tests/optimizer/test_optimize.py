"""The optimizer end to end on the real simulator: determinism, resume after kill -9, worker
processes on SQLite and PostgreSQL, infeasible points never simulated, CLI smoke tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from typer.testing import CliRunner

import optimizer.objective as objective_module
from optimizer.cli.main import app
from optimizer.objective import REPEAT_ATTR, is_repeat
from optimizer.run import (
    MAX_TRIALS_PER_NEW,
    OptimizeSetup,
    build_evaluator,
    count_complete,
    count_simulated,
    records_of,
    run_workers,
)
from optimizer.study import make_storage

DATA = Path(__file__).parent / "data"
SPACE = str(DATA / "tiny_space.yaml")
SLO = str(DATA / "tiny_slo.yaml")
FAST = {"max_requests": 30}


def _setup(**overrides: Any) -> OptimizeSetup:
    fields: dict[str, Any] = {
        "slo_path": SLO,
        "space_path": SPACE,
        "workload": None,
        "catalog_path": None,
        "storage": None,
        "study_name": "t",
        "sampler": "nsga2",
        "seed": 7,
        "n_trials": 6,
        **FAST,
    }
    fields.update(overrides)
    return OptimizeSetup(**fields)


def _front(setup: OptimizeSetup) -> list[tuple[dict[str, Any], tuple[float, ...]]]:
    study = run_workers(setup, workers=1)
    return [(dict(r.params), tuple(r.objectives.values())) for r in records_of(study)]


def test_same_seed_same_trials() -> None:
    first = _front(_setup())
    second = _front(_setup())
    assert first == second
    assert len(first) == 6


def test_infeasible_points_never_reach_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = objective_module.simulate

    def spy(config: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(config)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(objective_module, "simulate", spy)
    evaluator = build_evaluator(_setup())
    # 4 × h100 at about 6 USD/h each breaks the 20 USD/h budget of tiny_slo.yaml.
    over = evaluator.evaluate_params({"gpu": "h100_sxm", "instances": 4, "backend": "vllm"})
    assert over.infeasible_reason.startswith("costs USD")
    assert calls == []
    assert all(c > 0 for c in over.constraints)
    invalid = evaluator.evaluate_params(
        {
            "gpu": "h100_sxm",
            "instances": 1,
            "scheduler": "chunked",
            "chunk_tokens": 99999,
            "max_batched_tokens": 1024,
        }
    )
    assert invalid.infeasible_reason.startswith("configuration:")
    assert calls == []
    fine = evaluator.evaluate_params({"gpu": "h100_sxm", "instances": 1, "backend": "vllm"})
    assert fine.infeasible_reason == ""
    assert len(calls) == 1


def _assert_six_simulated(study: optuna.Study) -> None:
    """Six configurations simulated; a trial that lost the race for the last one to another
    worker ended FAILED without simulating (``optimizer.claims``: "surplus")."""
    assert all(t.state.is_finished() for t in study.trials)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len([t for t in complete if not is_repeat(t)]) == 6
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    assert all(t.user_attrs.get("claim") == "surplus" for t in failed)


def test_two_workers_on_sqlite_finish_exact_count(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    setup = _setup(storage=url, n_trials=6, study_name="sq")
    study = run_workers(setup, workers=2)
    assert count_simulated(study) == 6
    reloaded = optuna.load_study(study_name="sq", storage=make_storage(url))
    _assert_six_simulated(reloaded)


@pytest.mark.postgres
def test_two_workers_on_postgresql_finish_exact_count(postgres_url: str) -> None:
    name = f"pg-{os.getpid()}-{time.monotonic_ns()}"
    setup = _setup(storage=postgres_url, n_trials=6, study_name=name)
    study = run_workers(setup, workers=2)
    assert count_simulated(study) == 6
    reloaded = optuna.load_study(study_name=name, storage=make_storage(postgres_url))
    _assert_six_simulated(reloaded)


def test_repeats_are_free_and_an_exhausted_space_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two configurations, five asked for: each is simulated once, the sampler's repeats copy
    the stored result, and the study stops after MAX_TRIALS_PER_NEW trials per new one asked."""
    space = tmp_path / "two.yaml"
    space.write_text(
        "model: Qwen/Qwen3-8B\n"
        "dimensions:\n  gpu: {choices: [h100_sxm, l40s]}\n"
        "fixed: {backend: vllm, instances: 1}\n"
    )
    simulated: list[Any] = []
    real = objective_module.simulate

    def spy(config: Any, *args: Any, **kwargs: Any) -> Any:
        simulated.append(config.gpu)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(objective_module, "simulate", spy)
    url = f"sqlite:///{tmp_path / 'two.db'}"
    study = run_workers(
        _setup(space_path=str(space), storage=url, n_trials=5, sampler="tpe"), workers=1
    )
    assert sorted(simulated) == ["h100_sxm", "l40s"]
    assert count_simulated(study) == 2
    assert count_complete(study) == 5 * MAX_TRIALS_PER_NEW
    originals = {t.number: t for t in study.trials if not is_repeat(t)}
    for trial in study.trials:
        if is_repeat(trial):
            source = originals[trial.user_attrs[REPEAT_ATTR]]
            assert trial.params == source.params
            assert trial.values == source.values
            assert trial.user_attrs["metrics"] == source.user_attrs["metrics"]
            assert trial.constraints == source.constraints
    assert len(records_of(study)) == 2
    # Resuming finds the stored results: nothing is simulated again.
    simulated.clear()
    run_workers(_setup(space_path=str(space), storage=url, n_trials=5, sampler="tpe"), workers=1)
    assert simulated == []


def _cli(*args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "optimizer.cli",
        "optimize",
        "--space",
        SPACE,
        "--slo",
        SLO,
        "--max-requests",
        "30",
        "--no-plan",
        "--seed",
        "3",
        *args,
    ]


def test_resume_after_kill_keeps_every_finished_trial(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    proc = subprocess.Popen(
        _cli("--storage", url, "--trials", "12", "--json"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    storage_ready = False
    deadline = time.monotonic() + 120
    before: dict[int, dict[str, Any]] = {}
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            study = optuna.load_study(study_name="kvplan", storage=make_storage(url))
        except Exception:  # not created yet
            continue
        storage_ready = True
        done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if len(done) >= 3:
            before = {t.number: dict(t.params) for t in done}
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=30)
    assert storage_ready, "the study was never created"
    assert before, "the study never got 3 trials done before the deadline"
    rerun = subprocess.run(
        _cli("--storage", url, "--trials", "12", "--json"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr
    study = optuna.load_study(study_name="kvplan", storage=make_storage(url))
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len([t for t in complete if not is_repeat(t)]) == 12
    after = {t.number: dict(t.params) for t in complete}
    for number, params in before.items():
        assert after[number] == params  # kept, unchanged, not re-run
    assert json.loads(rerun.stdout)["trials"] == 12


def test_cli_optimize_json_and_report(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "optimize",
            "--space",
            SPACE,
            "--slo",
            SLO,
            "--max-requests",
            "30",
            "--trials",
            "6",
            "--storage",
            url,
            "--json",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= {"directions", "trials", "feasible_trials", "pareto", "recommendations"}
    assert data["trials"] == 6
    assert data["directions"] == {
        "latency": "minimize",
        "throughput": "maximize",
        "cost": "minimize",
    }
    for entry in data["pareto"]:
        assert set(entry["objectives"]) == {"latency", "throughput", "cost"}
        assert entry["params"]["model"] == "Qwen/Qwen3-8B"
    for name in ("pareto.csv", "trials.csv", "results.json", "report.md", "report.html"):
        assert (tmp_path / "out" / name).exists()
    again = runner.invoke(app, ["report", "--storage", url, "--study", "kvplan", "--json"])
    assert again.exit_code == 0, again.output
    rerendered = json.loads(again.stdout)
    assert [p["trial"] for p in rerendered["pareto"]] == [p["trial"] for p in data["pareto"]]


def test_study_with_other_space_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    run_workers(_setup(storage=url, n_trials=2), workers=1)
    other = tmp_path / "space.yaml"
    other.write_text(Path(SPACE).read_text().replace("high: 2", "high: 3"))
    command = [
        sys.executable,
        "-m",
        "optimizer.cli",
        "optimize",
        "--space",
        str(other),
        "--slo",
        SLO,
        "--max-requests",
        "30",
        "--no-plan",
        "--seed",
        "7",
        "--storage",
        url,
        "--study",
        "t",
        "--trials",
        "2",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "already exists in this storage with a different" in proc.stderr
    assert "Traceback" not in proc.stderr
