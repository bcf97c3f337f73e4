"""How the planning after a study runs: stored trial results reused, work spread over workers.

``planning.plan`` decides *what* to measure (tier value, headroom, the baseline); this module
decides *how* the simulations behind it run, without changing any figure:

- **reuse**: a tier-row evaluation whose configuration equals a completed trial's (the pick
  itself, or a tier variant the study also tried) copies that trial's stored evaluation
  instead of simulating (``ReusingEvaluator``). Exact, because a simulation is a pure function
  of configuration, workload and seed, and the trials ran on the same ones — for the metrics
  the rows read (``ROW_METRICS``); the baseline, whose report shows every metric, is
  evaluated afresh by the caller's own evaluator.
- **giving up**: a headroom search abandons a simulation as failing once the SLO's attainment
  floor is out of reach (``miss_rule``; ``simulator.give_up``), which is exact.
- **parallelism**: ``WorkerPool`` runs the per-pick tasks (each pick's tier rows, each pick's
  headroom search) in ``workers`` processes — this one, with its evaluator, and ``workers − 1``
  spawned ones, each with its own evaluator built from the study's ``OptimizeSetup``; results
  are gathered in task order, so the report is identical for any number of workers.
  ``CrewRunner`` does the same in the study's own trial workers, kept after the trials
  (``optimizer.run.StudyWorkers``: no start-up, latency tables warm), which is what
  ``kvplan optimize --workers K`` uses; ``InProcess`` runs them here, one after the other.

What this is not: the planning content (``planning.py``) or the capacity search
(``simulator.capacity``).
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from optimizer.objective import Evaluation, TrialEvaluator
from optimizer.results import TrialRecord
from optimizer.run import OptimizeSetup, WorkerError, build_evaluator
from optimizer.workers import Pool, WorkerLostError

__all__ = [
    "ROW_METRICS",
    "CrewRunner",
    "InProcess",
    "PlanRunner",
    "Progress",
    "ReusingEvaluator",
    "WorkerPool",
    "config_key",
    "planning_runner",
    "stored_evaluations",
]

T = TypeVar("T")
R = TypeVar("R")

#: A planning task: what it computes from an evaluator and one argument.
Task = Callable[[TrialEvaluator, T], R]


def config_key(evaluator: TrialEvaluator, params: Mapping[str, Any]) -> str | None:
    """A key equal for parameter points with the same ``ServingConfig`` (None if invalid)."""
    point = {k: v for k, v in params.items() if k != "model"}
    try:
        config = evaluator.config_for(point)
    except ValueError:
        return None
    return config.model_dump_json()


#: The metrics the planning's tier rows read (``planning._row``). A stored trial is reused
#: only if these are finite: the storage keeps a non-finite metric as null, so whether it
#: was infinite (a TTFT with rejected requests) or NaN is lost, and reports print the two
#: differently. Its other metrics come back as NaN where they were not finite.
ROW_METRICS = (
    "gpus",
    "usd_per_hour",
    "ttft_ms.p90",
    "hit_ratio.l1",
    "hit_ratio.l2",
    "hit_ratio.l3",
)


def stored_evaluations(
    evaluator: TrialEvaluator,
    records: Iterable[TrialRecord],
    exact: Collection[str] = ROW_METRICS,
) -> dict[str, Evaluation]:
    """The study's evaluated trials as evaluations, by configuration (``config_key``).

    ``records`` are ``optimizer.run.records_of`` snapshots (repeats already left out); a
    trial is left out unless every metric of ``exact`` it has is finite (``ROW_METRICS``).
    A trial PRUNED as infeasible (no objectives, a reason) is kept as a ``pruned`` evaluation.
    """
    stored: dict[str, Evaluation] = {}
    for record in records:
        pruned = not record.objectives and bool(record.infeasible_reason)
        if not record.metrics or (len(record.objectives) != len(evaluator.roles) and not pruned):
            continue  # not a trial of this evaluator's study shape
        if not all(math.isfinite(float(record.metrics.get(k, 0.0))) for k in exact):
            continue
        key = config_key(evaluator, record.params)
        if key is None or key in stored:
            continue
        stored[key] = Evaluation(
            values={role: float(v) for role, v in record.objectives.items()},
            constraints=[float(c) for c in record.constraints],
            metrics={k: float(v) for k, v in record.metrics.items()},
            infeasible_reason=record.infeasible_reason,
            pruned=pruned,
        )
    return stored


class ReusingEvaluator(TrialEvaluator):
    """``evaluator`` that answers from ``stored`` (``stored_evaluations``) before simulating."""

    def __init__(self, evaluator: TrialEvaluator, stored: Mapping[str, Evaluation]) -> None:
        # Same settings as ``evaluator`` (no re-validation of the input files), a fresh memo.
        self.__dict__.update(evaluator.__dict__)
        self._memo = {}
        self.stored = dict(stored)
        self.n_reused = 0
        """Evaluations answered from the stored trials."""

    def _evaluate(self, params: Mapping[str, Any]) -> Evaluation:
        key = config_key(self, params)
        hit = self.stored.get(key) if key is not None else None
        if hit is None:
            return super()._evaluate(params)
        self.n_reused += 1
        return hit


class PlanRunner(Protocol):
    """Runs planning tasks; ``map`` returns their results in the order of ``args``."""

    evaluator: TrialEvaluator
    """The evaluator of this process (for work that is not spread, such as the baseline)."""

    def map(self, task: Task[T, R], args: Sequence[T]) -> list[R]:
        """``[task(evaluator, a) for a in args]``, wherever it runs."""
        ...


#: ``progress(done, total)``: called after each finished task of a ``map``.
Progress = Callable[[int, int], None]


def _quiet(done: int, total: int) -> None:
    del done, total


class InProcess:
    """Every task in this process, in order."""

    def __init__(self, evaluator: TrialEvaluator, progress: Progress = _quiet) -> None:
        self.evaluator = evaluator
        self.progress = progress

    def map(self, task: Task[T, R], args: Sequence[T]) -> list[R]:
        """Run each task here."""
        out = []
        for arg in args:
            out.append(task(self.evaluator, arg))
            self.progress(len(out), len(args))
        return out


class WorkerPool:
    """Tasks spread over ``workers`` processes: this one and ``workers − 1`` spawned ones
    (``close`` them when done).

    Each spawned worker builds its evaluator once from ``setup`` and reuses ``stored``; this
    process works with ``evaluator``, ready at once (imported, its latency tables built), so
    planning starts while the spawned ones still import. Tasks are dealt one at a time: the
    spawned workers take them from the front (the long headroom searches come first), this
    process from the back, until they meet — so a long search holds no other task back.
    """

    def __init__(
        self,
        setup: OptimizeSetup,
        evaluator: TrialEvaluator,
        workers: int,
        stored: Mapping[str, Evaluation],
        progress: Progress = _quiet,
    ) -> None:
        if workers < 2:
            raise ValueError("WorkerPool needs workers >= 2 (use InProcess)")
        self.evaluator = evaluator
        self.progress = progress
        self.spawned = workers - 1
        self._pool = ProcessPoolExecutor(
            max_workers=self.spawned,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(setup, dict(stored)),
        )

    def map(self, task: Task[T, R], args: Sequence[T]) -> list[R]:
        """Run the tasks here and in the spawned workers; results in the order of ``args``."""
        remotes = [
            lambda job: self._pool.submit(_run_task, job).result() for _ in range(self.spawned)
        ]
        return _spread(task, args, self.evaluator, remotes, self.progress)

    def close(self, *, cancel: bool = False) -> None:
        """Stop the workers (after their tasks, or dropping queued ones with ``cancel``)."""
        self._pool.shutdown(wait=True, cancel_futures=cancel)


class _Deal:
    """Task indices ``0 … n − 1`` handed out from either end, and the finished count."""

    def __init__(self, n: int, progress: Progress) -> None:
        self._lock = threading.Lock()
        self._front, self._back, self._n, self._done = 0, n, n, 0
        self._progress = progress

    def take(self, *, front: bool) -> int | None:
        """The next task index from the front or the back (None: none left)."""
        with self._lock:
            if self._front >= self._back:
                return None
            if front:
                self._front += 1
                return self._front - 1
            self._back -= 1
            return self._back

    def finished(self) -> None:
        """One more task is done: tell ``progress``."""
        with self._lock:
            self._done += 1
            self._progress(self._done, self._n)

    def stop(self) -> None:
        """Hand out nothing more."""
        with self._lock:
            self._back = self._front


class CrewRunner:
    """Tasks spread over this process and the study's spawned trial workers, kept after the
    trials (``optimizer.run.StudyWorkers``): ready at once — imported, evaluators built,
    latency tables warm — where a fresh ``WorkerPool`` spends seconds starting up. Each worker
    first adopts ``stored``; tasks are dealt as in ``WorkerPool``."""

    def __init__(
        self,
        evaluator: TrialEvaluator,
        pool: Pool,
        stored: Mapping[str, Evaluation],
        progress: Progress = _quiet,
    ) -> None:
        self.evaluator = evaluator
        self.progress = progress
        self._pool = pool
        self._workers = pool.ready()
        adopted = dict(stored)
        for index in self._workers:
            self._call(index, _adopt_stored, adopted)

    def _call(self, index: int, fn: Callable[[TrialEvaluator, Any], Any], arg: Any) -> Any:
        try:
            return self._pool.call(index, fn, arg)
        except WorkerLostError as err:
            raise WorkerError(
                f"a worker failed during the planning ({err}); the study's trials are stored"
            ) from None

    def map(self, task: Task[T, R], args: Sequence[T]) -> list[R]:
        """Run the tasks here and in the kept workers; results in the order of ``args``."""
        remotes = [functools.partial(self._call, index, _run_kept_task) for index in self._workers]
        return _spread(task, args, self.evaluator, remotes, self.progress)


def _spread(
    task: Task[T, R],
    args: Sequence[T],
    evaluator: TrialEvaluator,
    remotes: Sequence[Callable[[tuple[Task[T, R], T]], R]],
    progress: Progress,
) -> list[R]:
    """``task`` over ``args``: ``remotes`` (one thread each, a job in flight at a time) take
    them from the front, this process with ``evaluator`` from the back; results in order."""
    deal = _Deal(len(args), progress)
    results: list[Any] = [None] * len(args)
    errors: list[BaseException] = []

    def feed(remote: Callable[[tuple[Task[T, R], T]], R]) -> None:
        try:
            while (index := deal.take(front=True)) is not None:
                results[index] = remote((task, args[index]))
                deal.finished()
        except BaseException as err:  # re-raised below once every feeder stopped
            deal.stop()
            errors.append(err)

    feeders = [threading.Thread(target=feed, args=(r,), daemon=True) for r in remotes]
    for feeder in feeders:
        feeder.start()
    try:
        while (index := deal.take(front=False)) is not None:
            results[index] = task(evaluator, args[index])
            deal.finished()
    finally:
        deal.stop()  # after an error here: the feeders take nothing more
        for feeder in feeders:
            feeder.join()
    if errors:
        raise errors[0]
    return results


@contextmanager
def planning_runner(
    setup: OptimizeSetup,
    evaluator: TrialEvaluator,
    records: Iterable[TrialRecord],
    *,
    workers: int = 1,
    progress: Progress = _quiet,
    kept: Pool | None = None,
) -> Iterator[PlanRunner]:
    """The runner for planning after a study: reusing ``records`` (the study's trials), in
    ``workers`` processes when more than one — the study's ``kept`` trial workers when given
    and ready (``StudyWorkers.pool``), else a pool spawned here and shut down on exit;
    ``progress`` hears of every finished task."""
    stored = stored_evaluations(evaluator, records)
    reusing = ReusingEvaluator(evaluator, stored)
    if workers <= 1:
        yield InProcess(reusing, progress)
        return
    if kept is not None and kept.ready():
        yield CrewRunner(reusing, kept, stored, progress)
        return
    pool = WorkerPool(setup, reusing, workers, stored, progress)
    try:
        yield pool
    except BaseException:
        pool.close(cancel=True)
        raise
    pool.close()


#: The evaluator of a planning worker process (set once by its initializer).
_WORKER: list[TrialEvaluator] = []


def _start_worker(setup: OptimizeSetup, stored: dict[str, Evaluation]) -> None:
    _WORKER.append(ReusingEvaluator(build_evaluator(setup), stored))


def _run_task(job: tuple[Task[Any, Any], Any]) -> Any:
    task, arg = job
    return task(_WORKER[0], arg)


def _adopt_stored(evaluator: TrialEvaluator, stored: dict[str, Evaluation]) -> None:
    """In a kept trial worker: plan with its trial evaluator, reusing ``stored``."""
    _WORKER[:] = [ReusingEvaluator(evaluator, stored)]


def _run_kept_task(evaluator: TrialEvaluator, job: tuple[Task[Any, Any], Any]) -> Any:
    del evaluator  # the one ``_adopt_stored`` wrapped
    return _run_task(job)
