"""Running a study: the setup every worker rebuilds, the worker loop, and trial snapshots.

``OptimizeSetup`` is plain data (paths and settings), so ``--workers N`` can hand it to N
processes; each rebuilds the evaluator from the same files and joins the same study through
the shared storage. A study runs until it holds ``n_trials`` completed trials that each
evaluated a new configuration (a trial repeating one is free: ``optimizer.objective``);
re-running the same command after an interruption runs only the missing ones.

Determinism: one worker and a seed give the same trials and the same front every time. With
several workers the set of trials depends on timing (each worker's sampler is seeded
``seed + worker index``); every trial is still deterministic given its parameters.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hardware.catalog import load_catalog
from optimizer.configs import validate_space_names
from optimizer.objective import TrialEvaluator, is_repeat
from optimizer.results import TrialRecord
from optimizer.space import default_space_path, load_space
from optimizer.study import CONSTRAINTS_ATTR, make_sampler, make_storage, open_study
from optimizer.workloads import describe_workload, workload_from_arg
from slo import SloSpec, load_slo
from slo.inputfile import InputError

__all__ = [
    "MAX_TRIALS_PER_NEW",
    "OptimizeSetup",
    "build_evaluator",
    "count_complete",
    "count_simulated",
    "open_setup_study",
    "optimize_until",
    "records_of",
    "run_workers",
]

#: Trials per new configuration after which a sampler that keeps repeating tried
#: configurations is stopped (the bench's TPE needed at most 1.6 on a 216-point grid).
MAX_TRIALS_PER_NEW = 4


@dataclass(frozen=True, slots=True)
class OptimizeSetup:
    """Everything that defines a study and how to run it (picklable)."""

    slo_path: str
    space_path: str | None
    workload: str | None
    catalog_path: str | None
    storage: str | None
    study_name: str
    sampler: str
    seed: int
    n_trials: int
    latency_model: str | None = None
    #: The user's imported kernel profiles (``ServingConfig.kernel_profiles_dir``).
    kernel_profiles_dir: str | None = None
    time_scale: float | None = None
    max_requests: int | None = None
    capacity: bool = False


def _spec(setup: OptimizeSetup) -> SloSpec:
    return load_slo(setup.slo_path)


def build_evaluator(setup: OptimizeSetup) -> TrialEvaluator:
    """The objective for this setup (loads and validates every input file)."""
    space_path = setup.space_path or str(default_space_path())
    space = load_space(space_path)
    validate_space_names(space, space_path)
    catalog = load_catalog(setup.catalog_path)
    catalog.model(space.model)  # unknown model: one line now, not in every trial
    workload = workload_from_arg(
        setup.workload, time_scale=setup.time_scale, max_requests=setup.max_requests
    )
    return TrialEvaluator(
        space=space,
        spec=_spec(setup),
        workload=workload,
        catalog=catalog,
        seed=setup.seed,
        latency_model=setup.latency_model,
        kernel_profiles_dir=setup.kernel_profiles_dir,
        capacity=setup.capacity,
    )


def _definition(setup: OptimizeSetup, evaluator: TrialEvaluator) -> dict[str, Any]:
    """What the trials depend on: contents, not file paths (the fingerprint's input)."""
    return {
        "space": evaluator.space.model_dump(mode="json"),
        "slo": evaluator.spec.model_dump(mode="json"),
        "workload": describe_workload(evaluator.workload),
        "catalog": evaluator.catalog.model_dump(mode="json"),
        "seed": setup.seed,
        "latency_model": setup.latency_model,
        "capacity": setup.capacity,
    }


def open_setup_study(
    setup: OptimizeSetup, evaluator: TrialEvaluator, *, worker: int = 0
) -> optuna.Study:
    """Create or resume the study of ``setup`` (refusing one with another definition)."""
    storage = make_storage(setup.storage)
    sampler = make_sampler(
        setup.sampler,
        setup.seed + worker,
        evaluator.space.grid() if setup.sampler == "grid" else None,
    )
    return open_study(
        name=setup.study_name,
        storage=storage,
        sampler=sampler,
        directions=list(evaluator.spec.objectives.directions.values()),
        definition=_definition(setup, evaluator),
    )


def count_complete(study: optuna.Study) -> int:
    """Completed trials in the study (feasible or not), repeats included."""
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def count_simulated(study: optuna.Study) -> int:
    """Completed trials that each evaluated a new configuration (what ``n_trials`` counts)."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return sum(1 for t in trials if not is_repeat(t))


def optimize_until(
    study: optuna.Study,
    evaluator: TrialEvaluator,
    new_configurations: int,
    callbacks: Sequence[Callable[[optuna.Study, FrozenTrial], None]] = (),
) -> None:
    """Run trials until this call has evaluated ``new_configurations`` new configurations.

    Repeats of a tried configuration are free (``TrialEvaluator``) and do not count; a sampler
    that only repeats (a space about exhausted) is stopped after ``MAX_TRIALS_PER_NEW`` trials
    per configuration asked for.
    """
    done = 0

    def count(study: optuna.Study, trial: FrozenTrial) -> None:
        nonlocal done
        if trial.state == TrialState.COMPLETE and not is_repeat(trial):
            done += 1
        if done >= new_configurations:
            study.stop()

    study.optimize(
        evaluator,
        n_trials=new_configurations * MAX_TRIALS_PER_NEW,
        callbacks=[count, *callbacks],
        gc_after_trial=False,
    )


def _worker_main(setup: OptimizeSetup, worker: int, n_trials: int) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    evaluator = build_evaluator(setup)
    study = open_setup_study(setup, evaluator, worker=worker)
    # On Ctrl-C the parent reports; finished trials are already stored.
    with contextlib.suppress(KeyboardInterrupt):
        optimize_until(study, evaluator, n_trials)


def run_workers(
    setup: OptimizeSetup,
    *,
    workers: int,
    on_progress: Callable[[optuna.Study], None] | None = None,
) -> optuna.Study:
    """Run the missing trials of the study with ``workers`` processes (1 = in this process).

    The study is complete when it holds ``setup.n_trials`` simulated configurations (repeats
    of a configuration are recorded for the sampler but not counted). ``on_progress(study)``
    is called after each trial (one worker) or about once a second (several workers).
    ``KeyboardInterrupt`` stops cleanly: finished trials stay stored.
    """
    evaluator = build_evaluator(setup)
    study = open_setup_study(setup, evaluator)
    missing = setup.n_trials - count_simulated(study)
    if missing <= 0:
        return study
    if workers <= 1:
        callbacks = [lambda s, _t: on_progress(s)] if on_progress else []
        with contextlib.suppress(KeyboardInterrupt):  # finished trials stay stored
            optimize_until(study, evaluator, missing, callbacks)
        return study
    if setup.storage is None:
        raise InputError(
            "--workers needs a shared --storage (sqlite:///FILE, a journal file "
            "or postgresql://...)"
        )
    shares = [missing // workers + (1 if i < missing % workers else 0) for i in range(workers)]
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_worker_main, args=(setup, i, share), daemon=True)
        for i, share in enumerate(shares)
        if share
    ]
    for process in processes:
        process.start()
    try:
        while any(p.is_alive() for p in processes):
            if on_progress:
                on_progress(study)
            time.sleep(1.0)
    except KeyboardInterrupt:
        for process in processes:
            process.join(timeout=30)
    failed = [p.exitcode for p in processes if p.exitcode not in (0, None)]
    if failed:
        raise RuntimeError(f"{len(failed)} worker process(es) failed (exit codes {failed})")
    return study


def records_of(study: optuna.Study) -> list[TrialRecord]:
    """Snapshots of the completed trials, for results and reports."""
    roles = list(
        study.user_attrs.get("kvplan_definition", {}).get("slo", {}).get("objectives", {})
        or ("latency", "throughput", "cost")
    )
    records = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if not is_repeat(trial):  # its configuration is already recorded
            records.append(_record(trial, roles))
    return records


def _record(trial: FrozenTrial, roles: list[str]) -> TrialRecord:
    values = trial.values or []
    metrics = {
        k: (v if v is not None else float("nan"))
        for k, v in trial.user_attrs.get("metrics", {}).items()
    }
    return TrialRecord(
        number=trial.number,
        params=trial.user_attrs.get("params", dict(trial.params)),
        objectives=dict(zip(roles, values, strict=False)),
        constraints=tuple(trial.user_attrs.get(CONSTRAINTS_ATTR, (1.0,))),
        metrics=metrics,
        infeasible_reason=trial.user_attrs.get("infeasible_reason", ""),
    )
