"""The grid sampler in kvplan's ask-and-tell worker loop: the run ends when every grid point
has a trial, with one worker or several, even when ``--trials`` asks for more points than the
grid has (Optuna's own ``GridSampler`` would call ``Study.stop()`` outside ``optimize`` and
raise)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from optimizer.objective import is_repeat
from optimizer.run import OptimizeSetup, run_workers
from optimizer.study import grid_exhausted

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_grid_walk_ends_after_every_point(tmp_path: Path, workers: int) -> None:
    setup = OptimizeSetup(
        slo_path=str(DATA / "tiny_slo.yaml"),
        space_path=str(DATA / "grid4_space.yaml"),
        workload=None,
        catalog_path=None,
        storage=f"sqlite:///{tmp_path / 'grid.db'}",
        study_name="grid",
        sampler="grid",
        seed=0,
        n_trials=9,
        max_requests=20,
    )
    study = run_workers(setup, workers=workers)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE and not is_repeat(t)]
    points = {(t.params["instances"], t.params["l2_dram_gib"]) for t in done}
    assert points == {(1, 0), (1, 64), (2, 0), (2, 64)}
    assert len(done) == 4, "a grid point was simulated twice"
    assert not [t for t in study.trials if t.state in (TrialState.RUNNING, TrialState.FAIL)]
    assert grid_exhausted(study)


def test_grid_exhausted_is_false_for_other_samplers() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    assert not grid_exhausted(study)
