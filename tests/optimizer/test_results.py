"""Front, picks and near-duplicate collapsing on hand-made trial records."""

from __future__ import annotations

import csv
from pathlib import Path

from optimizer.cli.optimize_output import _write_csv
from optimizer.results import StudyResult, TrialRecord, summarise

DIRECTIONS = {"latency": "minimize", "throughput": "maximize", "cost": "minimize"}


def _rec(n: int, lat: float, thr: float, cost: float, feasible: bool = True) -> TrialRecord:
    return TrialRecord(
        number=n,
        params={"n": n},
        objectives={"latency": lat, "throughput": thr, "cost": cost},
        constraints=(-0.1,) if feasible else (0.5,),
    )


def test_front_excludes_dominated_and_infeasible() -> None:
    records = [
        _rec(0, 100, 50, 10),
        _rec(1, 200, 40, 20),  # dominated by 0
        _rec(2, 50, 60, 30),
        _rec(3, 10, 1000, 1, feasible=False),  # would dominate all, but infeasible
        _rec(4, 300, 100, 5),
    ]
    result = summarise(records, DIRECTIONS)
    assert result.n_trials == 5
    assert result.n_feasible == 4
    assert sorted(r.number for r in result.front) == [0, 2, 4]
    picks = {p.label: p.trial.number for p in result.picks}
    assert picks["best latency"] == 2
    assert picks["best throughput"] == 4
    assert picks["best cost"] == 4
    assert picks["balanced"] in {0, 2, 4}


def test_near_duplicates_collapse_to_cheaper() -> None:
    records = [_rec(0, 100, 50, 10.05), _rec(1, 100.5, 50.2, 10.0), _rec(2, 50, 60, 30)]
    result = summarise(records, DIRECTIONS, collapse=0.01)
    assert sorted(r.number for r in result.front) == [1, 2]


def test_no_feasible_trial_gives_empty_front() -> None:
    result = summarise([_rec(0, 1, 1, 1, feasible=False)], DIRECTIONS)
    assert result.front == ()
    assert result.picks == ()


def test_count_columns_stay_whole_where_a_trial_has_nan(tmp_path: Path) -> None:
    # A trial ruled out before simulating can carry NaN (not None) for a count; the column is
    # still written as whole numbers with an empty cell, not as 16.0.
    records = [
        TrialRecord(0, {"tp": 2}, {"latency": 1.0}, (0.0,), {"gpus": 16.0, "n_requests": 749}),
        TrialRecord(1, {"tp": 4}, {}, (1.0,), {"gpus": float("nan"), "n_requests": None}),
    ]
    result = StudyResult({"latency": "minimize"}, 2, 1, (records[0],), ())
    path = tmp_path / "trials.csv"
    _write_csv(path, records, result, records)
    rows = list(csv.DictReader(path.open()))
    assert [r["metric.gpus"] for r in rows] == ["16", ""]
    assert [r["metric.n_requests"] for r in rows] == ["749", ""]
