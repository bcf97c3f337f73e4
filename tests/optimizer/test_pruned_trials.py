"""Trials decided without a full simulation end PRUNED (no placeholder objectives), with their
constraints; simulations are given up on once the attainment floor is out of reach; Optuna's
``best_trials`` is kvplan's front; TPE samples as it did with placeholder objectives."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState
from typer.testing import CliRunner

from optimizer.cli.main import app
from optimizer.objective import (
    REPEAT_ATTR,
    SHARE_ATTR,
    Evaluation,
    TrialEvaluator,
    is_evaluated,
    is_repeat,
)
from optimizer.plan_runner import config_key, stored_evaluations
from optimizer.results import summarise
from optimizer.run import (
    OptimizeSetup,
    build_evaluator,
    count_simulated,
    records_of,
    run_workers,
    simulations_spent,
)
from optimizer.schema import ResultsFile
from optimizer.study import make_sampler

DATA = Path(__file__).parent / "data"
SPACE = str(DATA / "tiny_space.yaml")
SPACE_MODEL = "Qwen/Qwen3-8B"
runner = CliRunner()

#: Over tiny_space.yaml (40 requests): two H100s (about 12 USD/h) break the 10 USD/h budget;
#: one H100 meets it with 4096-token chunks or none (TPOT p90 about 72 ms) and misses TPOT
#: with 2048-token chunks (132 ms) in a full simulation; L40S instances miss TTFT by far. So a
#: run holds pruned, infeasible and feasible trials.
MIXED_SLO = """name: mixed
targets:
  ttft_ms: {p90: 5000}
  tpot_ms: {p90: 100}
attainment: 0.5
budget: {usd_per_hour: 10}
"""
#: One L40S instance: about 4% of 113 requests meet a 3 s TTFT bar (90% must), yet the solo
#: prefill bound (about 2.3 s) is below the bar, so it is not screened: the simulation runs
#: and is given up on before the last requests arrive.
HARSH_SLO = """name: harsh
targets:
  ttft_ms: {p90: 3000}
  tpot_ms: {p90: 250}
attainment: 0.9
"""


def _setup(tmp_path: Path, slo: str, **overrides: Any) -> OptimizeSetup:
    path = tmp_path / "slo.yaml"
    path.write_text(slo)
    fields: dict[str, Any] = {
        "slo_path": str(path),
        "space_path": SPACE,
        "workload": None,
        "catalog_path": None,
        "storage": None,
        "study_name": "t",
        "sampler": "tpe",
        "seed": 3,
        "n_trials": 10,
        "max_requests": 40,
    }
    fields.update(overrides)
    return OptimizeSetup(**fields)


def test_infeasible_without_simulation_is_pruned_and_best_trials_is_the_front(
    tmp_path: Path,
) -> None:
    study = run_workers(_setup(tmp_path, MIXED_SLO), workers=1)
    pruned = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
    assert any(t.user_attrs["infeasible_reason"].startswith("costs USD") for t in pruned)
    for trial in pruned:
        assert trial.values is None  # nothing for a plot to squash or a front to hold
        assert trial.user_attrs["infeasible_reason"]
        assert any(v > 0 for v in trial.constraints.values())  # what TPE ranks it by
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    assert all(v < 1e8 for t in complete for v in t.values)  # no placeholder objectives
    assert any(any(v > 0 for v in t.constraints.values()) for t in complete)  # SLO misses
    # Pruned trials are configurations of the study, recorded as infeasible; those ruled out
    # without simulating cost none of the 10 simulations the budget allows.
    spent = simulations_spent(study)
    assert 9 < spent <= 10
    free = [t for t in pruned if not is_repeat(t) and t.user_attrs[SHARE_ATTR] == 0]
    assert free
    assert count_simulated(study) >= 10 + len(free)  # the free ones bought more trials
    records = records_of(study)
    assert len(records) == count_simulated(study)
    assert {r.number for r in records if not r.objectives} == {
        t.number for t in pruned if not is_repeat(t)
    }
    assert all(not r.feasible for r in records if not r.objectives)
    directions = dict(
        zip(("latency", "throughput", "cost"), ("minimize", "maximize", "minimize"), strict=True)
    )
    front = summarise(records, directions, collapse=0.0).front
    assert front
    ours = {tuple(r.objectives.values()) for r in front}
    assert ours == {tuple(t.values) for t in study.best_trials}


def test_a_repeat_of_a_pruned_configuration_is_pruned_without_evaluating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluator = build_evaluator(_setup(tmp_path, MIXED_SLO))
    over = {"gpu": "h100_sxm", "instances": 2, "l2_dram_gib": 0, "scheduler": "prefill_first"}
    study = optuna.create_study(directions=["minimize", "maximize", "minimize"])
    for _ in range(2):
        study.enqueue_trial(over)
    study.optimize(evaluator, n_trials=1)
    calls: list[Any] = []
    monkeypatch.setattr(evaluator, "evaluate_params", calls.append)
    study.optimize(evaluator, n_trials=1)
    first, second = study.trials
    assert first.state == second.state == TrialState.PRUNED
    assert second.user_attrs[REPEAT_ATTR] == first.number
    assert second.constraints == first.constraints
    assert calls == []


def test_a_hopeless_simulation_is_given_up_and_would_have_missed_in_full(tmp_path: Path) -> None:
    setup = _setup(tmp_path, HARSH_SLO, max_requests=120)
    point = {"gpu": "l40s", "instances": 1, "l2_dram_gib": 0, "scheduler": "prefill_first"}
    point["backend"] = "vllm"
    watched = build_evaluator(setup).evaluate_params(point)
    full = build_evaluator(setup)
    full.giving_up = False
    whole = full.evaluate_params(point)
    assert watched.pruned
    assert watched.infeasible_reason.startswith("given up after")
    n = whole.metrics["simulated_requests"]
    assert 0 < watched.metrics["simulated_requests"] < n
    # It cost the share of the workload that had arrived, not a whole simulation.
    assert watched.metrics[SHARE_ATTR] == pytest.approx(watched.metrics["simulated_requests"] / n)
    assert whole.metrics[SHARE_ATTR] == 1.0
    assert not whole.pruned
    assert whole.metrics["attainment"] < 0.95  # sound: the full run misses the floor
    assert whole.metrics["attainment"] <= watched.metrics["attainment_at_most"]
    # It fits, and the attainment floor is known to be violated.
    assert watched.constraints[0] < 0
    attainment = full.constraint_names.index("attainment")
    assert watched.constraints[attainment] > 0


def test_the_budget_counts_a_trial_by_the_share_it_simulated(tmp_path: Path) -> None:
    """``--trials N`` bounds what is simulated: N whole-workload simulations, a trial given up
    part-way costing its share, one ruled out without simulating nothing."""
    study = run_workers(_setup(tmp_path, HARSH_SLO, n_trials=4, max_requests=120), workers=1)
    new = [t for t in study.get_trials(deepcopy=False) if is_evaluated(t) and not is_repeat(t)]
    given_up = []
    for trial in new:
        share, reason = trial.user_attrs[SHARE_ATTR], trial.user_attrs["infeasible_reason"]
        if trial.state == TrialState.COMPLETE:
            assert share == 1.0
        elif reason.startswith("given up after"):
            arrived, of = (int(w) for w in reason.split(":")[0].split()[3::2])
            assert share == pytest.approx(arrived / of)
            given_up.append(share)
        else:
            assert share == 0.0
    assert given_up
    assert min(given_up) < 1
    spent = simulations_spent(study)
    assert spent == pytest.approx(sum(t.user_attrs[SHARE_ATTR] for t in new))
    assert 3 < spent <= 4  # never more than the budget, stopped once a whole one no longer fits


def test_tpe_samples_as_it_did_with_placeholder_objectives(tmp_path: Path) -> None:
    """Optuna's TPE ranks infeasible trials by their constraints before their state or values,
    so recording them PRUNED instead of COMPLETE with placeholders changes no proposal."""
    evaluator = build_evaluator(_setup(tmp_path, MIXED_SLO, max_requests=20))
    table: dict[tuple[tuple[str, Any], ...], Evaluation] = {}

    def run(placeholders: bool) -> list[dict[str, Any]]:
        study = optuna.create_study(
            directions=["minimize", "maximize", "minimize"], sampler=make_sampler("tpe", 5)
        )
        study.optimize(lambda t: _objective(t, evaluator, table, placeholders), n_trials=16)
        states = {t.state for t in study.trials}
        assert (TrialState.PRUNED in states) != placeholders
        return [t.params for t in study.trials]

    assert run(placeholders=True) == run(placeholders=False)


def _objective(
    trial: optuna.Trial,
    evaluator: TrialEvaluator,
    table: dict[tuple[tuple[str, Any], ...], Evaluation],
    placeholders: bool,
) -> tuple[float, ...]:
    params = evaluator.space.suggest(trial)
    key = tuple(sorted(params.items()))
    if key not in table:
        table[key] = evaluator.evaluate_params(params)
    evaluation = table[key]
    if placeholders and evaluation.pruned:  # how kvplan recorded them before
        for name, value in zip(evaluator.constraint_names, evaluation.constraints, strict=True):
            trial.set_constraint(name, value)
        cost = evaluation.metrics["usd_per_hour"]
        return 1e9, 0.0, cost if math.isfinite(cost) else 1e9
    return evaluator.record(trial, params, evaluation)


def test_optimize_and_report_with_pruned_trials(tmp_path: Path) -> None:
    """Files written live and re-rendered from storage agree with PRUNED trials in the study;
    those trials are listed as infeasible with their reason and no objective values."""
    slo = tmp_path / "slo.yaml"
    slo.write_text(MIXED_SLO)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    args = ["optimize", "--space", SPACE, "--slo", str(slo), "--max-requests", "40"]
    args += ["--trials", "8", "--sampler", "tpe", "--storage", url]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert re.search(r"\d+ trials for \d\.\d of 8 simulations \(\d+ in full, ", said), said
    assert "given up part-way" in said
    again = runner.invoke(app, ["report", "--storage", url, "--out", str(tmp_path / "b")])
    assert again.exit_code == 0, again.output
    for name in ("report.md", "results.json", "pareto.csv", "trials.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    ResultsFile.model_validate(data)
    study = optuna.load_study(study_name="kvplan", storage=url)
    pruned = {t.number for t in study.trials if t.state == TrialState.PRUNED and not is_repeat(t)}
    assert pruned
    rows = {int(r["trial"]): r for r in csv.DictReader((tmp_path / "a" / "trials.csv").open())}
    for number in pruned:
        assert rows[number]["feasible"] == "False"
        assert rows[number]["infeasible_reason"]
        assert rows[number]["objective.latency (ms)"] == ""
    # Counts and integer parameters are written as whole numbers though some cells are empty
    # (a trial ruled out without simulating has no request count; chunk_tokens may not apply).
    whole = ("metric.gpus", "metric.n_requests", "metric.simulated_requests", "param.instances")
    for column in (*whole, "param.chunk_tokens"):
        cells = [r[column] for r in rows.values()]
        assert any(cells), column
        assert all(re.fullmatch(r"\d*", cell) for cell in cells), (column, cells)
    assert any(r["metric.n_requests"] == "" for r in rows.values())  # the gaps are there


def test_planning_reuses_pruned_trials_as_they_were(tmp_path: Path) -> None:
    setup = _setup(tmp_path, MIXED_SLO, n_trials=6)
    records = records_of(run_workers(setup, workers=1))
    evaluator = build_evaluator(setup)
    stored = stored_evaluations(evaluator, records)
    pruned = [r for r in records if not r.objectives]
    assert pruned
    for record in pruned:
        key = config_key(evaluator, record.params)
        assert key is not None
        again, fresh = stored[key], evaluator.evaluate_params(record.params)
        assert again.pruned
        assert fresh.pruned
        assert again.constraints == fresh.constraints
        assert again.infeasible_reason == fresh.infeasible_reason


def test_the_watch_leaves_out_requests_the_run_drops(tmp_path: Path) -> None:
    """Trials and capacity probes are watched by a rule that does not count the requests the
    ``drop`` policy removes (``test_give_up_overlong``: counting them gives up passing runs)."""
    dropping = build_evaluator(_setup(tmp_path, HARSH_SLO))
    rule = dropping._miss_rule()
    assert rule is not None
    assert rule.max_context_tokens == dropping.catalog.model(SPACE_MODEL).max_context_tokens
    kept = build_evaluator(_setup(tmp_path, HARSH_SLO, overlong="count-as-miss"))
    counted = kept._miss_rule()
    assert counted is not None
    assert counted.max_context_tokens is None  # overlong requests reach the engine: misses
