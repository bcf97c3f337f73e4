"""Storages by URL, samplers by name, and the study-definition guard."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import optuna
import pytest

from optimizer.study import SAMPLERS, AskTellGridSampler, make_sampler, make_storage, open_study
from slo.inputfile import InputError

#: The Optuna sampler class each CLI name must build.
EXPECTED_SAMPLERS = {
    "nsga2": optuna.samplers.NSGAIISampler,
    "tpe": optuna.samplers.TPESampler,
    "gp": optuna.samplers.GPSampler,
    "random": optuna.samplers.RandomSampler,
    "grid": AskTellGridSampler,  # Optuna's GridSampler, without its Study.stop() (run_trials)
}


def test_every_sampler_builds() -> None:
    assert set(SAMPLERS) == set(EXPECTED_SAMPLERS)
    for name in SAMPLERS:
        if name == "gp":
            pytest.importorskip("torch", reason="the gp sampler needs PyTorch (extra 'gp')")
        # Without a caller's filter (a worker process has none): no ExperimentalWarning for
        # the experimental options kvplan uses on purpose (TPE group, GP deterministic).
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sampler = make_sampler(name, seed=1, grid={"x": [1, 2]})
        assert type(sampler) is EXPECTED_SAMPLERS[name], name
    grid = make_sampler("grid", seed=1, grid={"x": [1, 2]})
    assert isinstance(grid, optuna.samplers.GridSampler)
    assert grid.is_exhausted(optuna.create_study()) is False  # a real two-point grid, unused


def test_unknown_sampler_lists_known() -> None:
    with pytest.raises(InputError, match="unknown sampler 'cma'; known: nsga2"):
        make_sampler("cma", seed=0)


def test_sqlite_study_refuses_other_definition(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    kwargs = {"name": "s", "directions": ["minimize", "maximize"]}
    open_study(
        storage=make_storage(url), sampler=make_sampler("random", 0), definition={"a": 1}, **kwargs
    )
    again = open_study(
        storage=make_storage(url), sampler=make_sampler("random", 0), definition={"a": 1}, **kwargs
    )
    assert again.study_name == "s"
    with pytest.raises(InputError, match="already exists in this storage with a different"):
        open_study(
            storage=make_storage(url),
            sampler=make_sampler("random", 0),
            definition={"a": 2},
            **kwargs,
        )


def test_journal_storage(tmp_path: Path) -> None:
    storage = make_storage(str(tmp_path / "study.log"))
    study = open_study(
        name="j",
        storage=storage,
        sampler=make_sampler("random", 0),
        directions=["minimize"],
        definition={},
    )
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    reopened = open_study(
        name="j",
        storage=make_storage(str(tmp_path / "study.log")),
        sampler=make_sampler("random", 0),
        directions=["minimize"],
        definition={},
    )
    assert len(reopened.trials) == 3


@pytest.mark.parametrize(
    "url",
    ["postgresql://nobody@127.0.0.1:1/none", "notaurl", "journal:///no/such/dir/x.log"],
)
def test_unusable_storage_is_one_line_error(url: str) -> None:
    with pytest.raises(InputError) as info:
        make_storage(url)
    assert "\n" not in str(info.value)
    assert url in str(info.value)


def test_gp_sampler_runs_real_trials() -> None:
    pytest.importorskip("torch", reason="the gp sampler needs PyTorch (extra 'gp')")
    pytest.importorskip("scipy", reason="the gp sampler needs SciPy (extra 'gp')")
    study = open_study(
        name="gp",
        storage=make_storage(None),
        sampler=make_sampler("gp", seed=0),
        directions=["minimize", "minimize"],
        definition={},
    )

    def objective(trial: Any) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        trial.set_constraint("c", x - 0.8)
        return x, 1.0 - x

    study.optimize(objective, n_trials=14)
    assert len(study.trials) == 14
    assert all(t.state.is_finished() for t in study.trials)
