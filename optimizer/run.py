"""Running a study: the setup every worker rebuilds, the worker loop, and trial snapshots.

``OptimizeSetup`` is plain data (paths and settings), so ``--workers N`` can hand it to N
processes; each rebuilds the evaluator from the same files and joins the same study through
the shared storage. A study runs until it has spent ``n_trials`` whole-workload simulations:
each trial that evaluated a new configuration costs the share of the workload it simulated
(1 in full, 0 ruled out without simulating, a part when given up on; a trial repeating a
configuration is free: ``optimizer.objective``), so screening and giving up buy more
configurations for the same simulation cost. ``n_trials`` is the study's total, shared by every
worker and every process that joins it, enforced through the storage (``optimizer.claims``);
each process also stops after ``MAX_TRIALS_PER_NEW`` trials per whole simulation it had left
(a sampler that keeps repeating, or a space nearly all ruled out without simulating).
Re-running the same command after an interruption fails the RUNNING trials the dead run left
and runs only what is missing.

Ending: Ctrl-C (or SIGTERM to a worker) marks the unfinished trials FAILED and raises
``Interrupted``; a worker that fails or is killed ends the run with ``WorkerError`` (one line);
workers exit when their parent dies (``optimizer.workers``).

Determinism: one worker and a seed give the same trials and the same front every time. With
several workers the set of trials depends on timing (each worker's sampler is seeded
``seed + worker index``); every trial is still deterministic given its parameters.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hardware.catalog import load_catalog
from optimizer import claims
from optimizer.configs import validate_space_names
from optimizer.objective import (
    FINISHED_STATES,
    TrialEvaluator,
    is_evaluated,
    is_repeat,
    simulation_share,
)
from optimizer.results import TrialRecord
from optimizer.space import default_space_path, load_space
from optimizer.study import (
    CONSTRAINTS_ATTR,
    grid_exhausted,
    make_sampler,
    make_storage,
    open_study,
)
from optimizer.workers import Pool, die_with_parent, serve, worker_guard
from optimizer.workloads import describe_workload, workload_from_arg
from simulator.cluster.overlong import OverlongPolicy
from slo import SloSpec, load_slo
from slo.inputfile import InputError

__all__ = [
    "MAX_TRIALS_PER_NEW",
    "InterruptLatch",
    "Interrupted",
    "OptimizeSetup",
    "StudyWorkers",
    "WorkerError",
    "build_evaluator",
    "count_complete",
    "count_simulated",
    "open_setup_study",
    "records_of",
    "run_trials",
    "run_workers",
    "simulations_spent",
]

#: Trials per whole simulation of the budget after which a run stops although budget is left:
#: a sampler that keeps repeating tried configurations (the bench's TPE needed at most 1.6 per
#: new one on a 216-point grid), or points that cost nothing to rule out, without end.
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
    #: Built kernel tables kept between runs (``ServingConfig.latency_cache_dir``).
    latency_cache_dir: str | None = None
    time_scale: float | None = None
    max_requests: int | None = None
    capacity: bool = False
    overlong: OverlongPolicy = "drop"


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
        latency_cache_dir=setup.latency_cache_dir,
        capacity=setup.capacity,
        overlong=setup.overlong,
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
        "overlong": setup.overlong,
    }


def open_setup_study(
    setup: OptimizeSetup, evaluator: TrialEvaluator, *, worker: int = 0
) -> optuna.Study:
    """Create or resume the study of ``setup`` (refusing one with another definition)."""
    storage = make_storage(setup.storage)
    grid = setup.sampler == "grid"
    # A grid sampler's seed shuffles the grid, and the storage records each trial's place in
    # that order: every worker must shuffle alike, or they disagree on what is still unvisited.
    sampler = make_sampler(
        setup.sampler,
        setup.seed if grid else setup.seed + worker,
        evaluator.space.grid() if grid else None,
    )
    return open_study(
        name=setup.study_name,
        storage=storage,
        sampler=sampler,
        directions=list(evaluator.spec.objectives.directions.values()),
        definition=_definition(setup, evaluator),
    )


def count_complete(study: optuna.Study) -> int:
    """Evaluated trials in the study (COMPLETE, or PRUNED as infeasible), repeats included."""
    return sum(
        1 for t in study.get_trials(deepcopy=False, states=FINISHED_STATES) if is_evaluated(t)
    )


def count_simulated(study: optuna.Study) -> int:
    """Evaluated trials that each evaluated a new configuration (repeats left out)."""
    trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
    return sum(1 for t in trials if is_evaluated(t) and not is_repeat(t))


def simulations_spent(study: optuna.Study, trials: Sequence[FrozenTrial] | None = None) -> float:
    """What the finished new configurations cost, in whole-workload simulations (what
    ``n_trials`` bounds; ``optimizer.claims``); ``trials``: the study's finished trials when
    the caller has read them already."""
    if trials is None:
        trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
    return sum(simulation_share(t) for t in trials if is_evaluated(t) and not is_repeat(t))


class WorkerError(Exception):
    """Worker processes failed; ``str(err)`` is one line (the CLI prints it and exits 2)."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped (Ctrl-C): unfinished trials are FAILED, finished ones stored.

    ``str(err)`` is one line for the user (the CLI exits 130)."""


def run_trials(
    study: optuna.Study,
    evaluator: TrialEvaluator,
    n_target: int,
    *,
    max_trials: int,
    callbacks: Sequence[Callable[[optuna.Study, FrozenTrial], None]] = (),
    check_interrupt: Callable[[], None] | None = None,
) -> None:
    """Run trials until the study has spent ``n_target`` simulations (``optimizer.claims``).

    Looks at the storage before each trial, so any number of processes share the total. Stops
    after ``max_trials`` trials of this call (a sampler that only repeats tried configurations,
    on a space about exhausted), and once a grid sampler has a trial on every point. A trial
    that raises — ``KeyboardInterrupt`` included — is marked FAILED and the exception
    propagates. ``check_interrupt`` is called before each trial (``InterruptLatch.check``).
    """
    for _ in range(max_trials):
        if check_interrupt is not None:
            check_interrupt()
        if claims.claimed(study).spent(n_target) or grid_exhausted(study):
            return
        trial: optuna.Trial | None = None
        heartbeat: claims.Heartbeat | None = None
        try:
            # Held off until the trial names its worker, so no trial is left without one.
            with _signals_deferred():
                trial = study.ask()
                heartbeat = claims.Heartbeat(trial)
                heartbeat.start()
            values, state = _run_trial(study, trial, evaluator, n_target)
            frozen = study.tell(trial, values, state=state)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another process took this worker for dead and failed the trial
        except BaseException as error:
            if trial is not None:
                if isinstance(error, KeyboardInterrupt):
                    _let_go_of_interrupted_calls(error)
                _fail(study, trial)
            raise
        finally:
            if heartbeat is not None:
                heartbeat.stop()
        for callback in callbacks:
            callback(study, frozen)
    if check_interrupt is not None:
        check_interrupt()


#: Tries at marking an interrupted trial FAILED, and the pause between them (seconds): when
#: every worker is stopped at once, their writes meet on a locked SQLite file.
FAIL_TRIES, FAIL_PAUSE_S = 5, 0.2


def _let_go_of_interrupted_calls(interrupt: BaseException) -> None:
    """Free what a Ctrl-C cut short inside a storage call, so that the run can still write.

    A ``KeyboardInterrupt`` raised while SQLAlchemy runs a query leaves SQLite's statement
    unfinished: it holds a shared lock on the database file (no other connection can commit)
    until its cursor is reset or freed, and the cursor stays reachable from the exception's
    traceback frames for as long as the exception lives — all the while the run marks its
    trial FAILED. Dropping the tracebacks (the CLI prints the interrupt as one line) and
    collecting the frames frees the cursor and its lock. ``tests/optimizer/test_exact_trials.py``
    interrupts such a query deterministically."""
    seen: set[int] = set()
    error: BaseException | None = interrupt
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__context__ or error.__cause__
    gc.collect()


def _fail(study: optuna.Study, trial: optuna.Trial) -> None:
    """Mark ``trial`` FAILED on the way out, retrying a storage error a few times (a trial left
    RUNNING is failed later by the next run's stale-trial check, but only then)."""
    for attempt in range(FAIL_TRIES):
        try:
            study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            return
        except Exception:  # any storage error: try again, then give up quietly
            if attempt + 1 < FAIL_TRIES:
                time.sleep(FAIL_PAUSE_S)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM inside the block and deliver them at its end (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous: dict[int, Any] = {
        int(number): signal.signal(number, lambda n, _f: pending.append(n)) for number in held
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if pending:
            handler = previous[pending[0]]
            if callable(handler):
                handler(pending[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), pending[0])


class InterruptLatch:
    """Ctrl-C raised *and* remembered while a study runs in this process.

    Python drops an exception raised inside a garbage-collection callback (it prints
    "Exception ignored in …" and goes on): a SIGINT whose ``KeyboardInterrupt`` lands in one —
    SQLAlchemy's weak dictionaries run such callbacks between any two statements of a trial —
    was lost, and the study ran on to the end with exit status 0. Inside the ``with`` block
    (main thread, SIGINT at Python's default) the handler also sets ``hit``, a swallowed
    ``KeyboardInterrupt`` is recorded instead of printed (``sys.unraisablehook``), and
    ``check`` raises it again where the run can act on it (between trials, while waiting for
    the workers).
    """

    def __init__(self) -> None:
        self.hit = False
        self._restore: list[Callable[[], None]] = []

    def __enter__(self) -> InterruptLatch:
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, self._on_sigint)

            def default_handler() -> None:
                signal.signal(signal.SIGINT, signal.default_int_handler)

            self._restore.append(default_handler)
            previous = sys.unraisablehook

            def unraisable(info: Any) -> None:
                if isinstance(info.exc_value, KeyboardInterrupt):
                    self.hit = True
                    return
                previous(info)

            sys.unraisablehook = unraisable
            self._restore.append(lambda: setattr(sys, "unraisablehook", previous))
        return self

    def __exit__(self, *_: object) -> None:
        while self._restore:
            self._restore.pop()()

    def _on_sigint(self, signum: int, frame: Any) -> None:
        del signum, frame
        self.hit = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if Ctrl-C came (even if its first raise was lost)."""
        if self.hit:
            raise KeyboardInterrupt


def _run_trial(
    study: optuna.Study, trial: optuna.Trial, evaluator: TrialEvaluator, n_target: int
) -> tuple[Sequence[float] | None, TrialState]:
    """One trial by the claim protocol: its values (or None) and the state to tell."""
    evaluator.space.suggest(trial)
    decision = claims.decide(study, trial.number, trial.params, n_target)
    trial.set_user_attr(claims.CLAIM_ATTR, decision.kind)
    if decision.kind == "surplus":
        return None, TrialState.FAIL
    if decision.kind == "wait":
        assert decision.of is not None
        trial.set_user_attr(claims.CLAIM_OF_ATTR, decision.of)
        if not claims.wait_for(study, decision.of):
            trial.set_user_attr(claims.CLAIM_ATTR, "abandoned")
            return None, TrialState.FAIL
    # ``repeat`` and a finished ``wait`` find the completed trial and copy it; ``new`` simulates.
    try:
        return evaluator(trial), TrialState.COMPLETE
    except optuna.TrialPruned:
        return None, TrialState.PRUNED


def _worker_main(
    setup: OptimizeSetup, worker: int, parent_pid: int, jobs: Connection, report: Connection
) -> None:
    with worker_guard(report):
        die_with_parent(parent_pid)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        evaluator = build_evaluator(setup)
        study = open_setup_study(setup, evaluator, worker=worker)
        missing = claims.claimed(study).left(setup.n_trials)
        run_trials(study, evaluator, setup.n_trials, max_trials=missing * MAX_TRIALS_PER_NEW)
        serve(jobs, evaluator)  # then the planning's tasks, if the parent has any


class StudyWorkers:
    """The processes of one ``--workers K`` run: this one (worker 0) and ``K − 1`` spawned
    when ``run`` starts the trials, kept after them — ready, with their evaluators built and
    latency tables warm — for the planning (``pool``; ``plan_runner.planning_runner``) until
    the ``with`` block ends (they are stopped if it raises)."""

    def __init__(self, setup: OptimizeSetup, *, workers: int) -> None:
        self.setup = setup
        self.workers = workers
        #: The spawned workers once ``run`` started them (None: one worker, or not yet).
        self.pool: Pool | None = None

    def __enter__(self) -> StudyWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.close()
        elif self.pool is not None:
            self.pool.stop()

    def close(self) -> None:
        """Let the spawned workers exit and wait for them (again: nothing)."""
        if self.pool is not None:
            self.pool.close()

    def run(self, on_progress: Callable[[optuna.Study], None] | None = None) -> optuna.Study:
        """Run the study until it has spent ``setup.n_trials`` simulations, together with any
        other process joining the study; see ``run_workers``."""
        setup, workers = self.setup, self.workers
        evaluator = build_evaluator(setup)
        study = open_setup_study(setup, evaluator)
        if workers > 1 and setup.storage is None:
            raise InputError(
                "--workers needs a shared --storage (sqlite:///FILE, a journal file "
                "or postgresql://...)"
            )
        missing = claims.claimed(study).left(setup.n_trials)  # fails stale RUNNING trials
        if missing <= 0:
            return study
        failed_before = _failed(study)
        callbacks = [lambda s, _t: on_progress(s)] if on_progress else []
        latch = InterruptLatch()

        def tick() -> None:  # while the spawned workers finish
            latch.check()
            if on_progress is not None:
                on_progress(study)

        here = functools.partial(
            run_trials,
            study,
            evaluator,
            setup.n_trials,
            max_trials=missing * MAX_TRIALS_PER_NEW,
            callbacks=callbacks,
            check_interrupt=latch.check,
        )
        try:
            with latch:
                if workers > 1:
                    # Spawned once the study exists (so no two processes create it); this
                    # process is worker 0, imported and its evaluator built.
                    self.pool = Pool(
                        _worker_main,
                        [(setup, i, os.getpid()) for i in range(1, workers)],
                        first=1,
                    )
                    self.pool.start()
                here()
                if self.pool is not None:
                    self.pool.supervise(tick)
        except KeyboardInterrupt as interrupt:
            _let_go_of_interrupted_calls(interrupt)
            if self.pool is not None:
                self.pool.stop()
            # Trials of workers killed before they could mark them, and this process's own if
            # its marking lost a race for the storage with the stopping workers.
            claims.fail_stale(study, mine=True)
            unfinished = len(_failed(study) - failed_before)
            done, spent = count_simulated(study), simulations_spent(study)
            raise Interrupted(
                f"interrupted: {done} trials ({spent:.1f} of {setup.n_trials} simulations) "
                "done and stored, "
                f"{unfinished} unfinished marked failed; rerun the same command to continue"
            ) from None
        failed = self.pool.failures() if self.pool is not None else []
        if failed:
            raise WorkerError(
                f"{len(failed)} of {workers} workers failed ({'; '.join(failed)}); finished "
                "trials are stored: rerun the same command to complete the study"
            )
        return study


def run_workers(
    setup: OptimizeSetup,
    *,
    workers: int,
    on_progress: Callable[[optuna.Study], None] | None = None,
) -> optuna.Study:
    """Run the study until it has spent ``setup.n_trials`` simulations, with ``workers``
    processes (this one and ``workers − 1`` spawned, which exit at the end), together with any
    other process joining the study.

    Repeats of a configuration are recorded for the sampler but not counted. RUNNING trials
    left by a killed run are failed first. ``on_progress(study)`` is called after each trial
    of this process, then about once a second until the spawned workers are done. Raises
    ``Interrupted`` on Ctrl-C (after failing the unfinished trials) and ``WorkerError`` when a
    worker process failed. ``StudyWorkers`` keeps the spawned workers for the planning.
    """
    with StudyWorkers(setup, workers=workers) as crew:
        return crew.run(on_progress)


def _failed(study: optuna.Study) -> set[int]:
    return {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}


def records_of(
    study: optuna.Study, trials: Sequence[FrozenTrial] | None = None
) -> list[TrialRecord]:
    """Snapshots of the evaluated trials, for results and reports: COMPLETE ones, and those
    PRUNED as infeasible without a full simulation (no objectives, violated constraints);
    ``trials``: the study's finished trials when the caller has read them already."""
    roles = list(
        study.user_attrs.get("kvplan_definition", {}).get("slo", {}).get("objectives", {})
        or ("latency", "throughput", "cost")
    )
    if trials is None:
        trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
    records = []
    for trial in trials:
        if is_evaluated(trial) and not is_repeat(trial):  # a repeat's is recorded already
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
