"""An interrupted trial is marked FAILED even when the storage refuses the first writes."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from optimizer import run


def test_a_locked_storage_is_retried_before_the_trial_is_left_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    study = optuna.create_study(storage="sqlite:///:memory:")
    trial = study.ask()
    tell = study.tell
    refusals = [RuntimeError("database is locked")] * 2

    def flaky_tell(*args: Any, **kwargs: Any) -> Any:
        if refusals:
            raise refusals.pop()
        return tell(*args, **kwargs)

    monkeypatch.setattr(study, "tell", flaky_tell)
    monkeypatch.setattr(run, "FAIL_PAUSE_S", 0.0)
    run._fail(study, trial)
    assert study.trials[0].state == TrialState.FAIL
    # More refusals than tries: it gives up quietly (the next run fails the stale trial).
    other = study.ask()
    refusals.extend([RuntimeError("database is locked")] * run.FAIL_TRIES)
    run._fail(study, other)
    assert study.trials[1].state == TrialState.RUNNING
