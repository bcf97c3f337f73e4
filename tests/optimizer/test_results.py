"""Front, picks and near-duplicate collapsing on hand-made trial records."""

from __future__ import annotations

from optimizer.results import TrialRecord, summarise

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
