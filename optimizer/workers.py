"""Worker processes for ``--workers K``: started, watched, stopped, and tied to their parent.

- Each worker runs ``target(*args, report)`` in a spawned process; ``report(message)`` sends
  the parent one line when it fails (``worker_guard`` does that for any exception).
- A worker exits when its parent dies: Linux's ``PR_SET_PDEATHSIG`` sends it SIGTERM, and a
  watchdog thread that sees its parent change does the same elsewhere (or when the parent died
  before the worker was ready). SIGTERM and SIGINT both raise ``KeyboardInterrupt`` in the
  worker, so the trial in progress is marked FAILED on the way out.
- ``supervise`` waits until every worker has finished its first phase (the trials: it called
  ``serve``, or it exited); on ``KeyboardInterrupt`` it stops them (SIGTERM, then SIGKILL after
  ``STOP_GRACE_S``). ``failures`` gives one line per worker that failed: its own message, or
  how it ended (exit status or signal).
- A worker that calls ``serve(jobs, context)`` stays for more work: ``Pool.call(i, fn, arg)``
  runs ``fn(context, arg)`` in worker ``i`` and returns its result (or raises its exception),
  so the planning after a study runs in the trial workers, imported and with their latency
  tables built. ``close`` lets them exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as connection_wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from slo.inputfile import InputError

__all__ = [
    "EXIT_INTERRUPTED",
    "Pool",
    "WorkerLostError",
    "die_with_parent",
    "serve",
    "worker_guard",
]

#: Exit status of a worker stopped by SIGINT/SIGTERM (the shell's 128 + SIGINT).
EXIT_INTERRUPTED = 130
#: Seconds a stopped worker gets to mark its trial failed before it is killed.
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


def _interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    # Once: the parent-death signal and the watchdog (or Ctrl-C and the parent's SIGTERM) may
    # both come, and the second must not cut short the first one's marking the trial failed.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def die_with_parent(parent_pid: int) -> None:
    """Make this process get SIGTERM (a ``KeyboardInterrupt``) when ``parent_pid`` exits."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="kvplan-parent-watch", daemon=True).start()


@contextlib.contextmanager
def worker_guard(report: Connection) -> Iterator[None]:
    """Turn the way a worker ends into an exit status, and any error into one reported line."""
    try:
        yield
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except InputError as err:
        report.send(f"error: {err}")
        sys.exit(2)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        report.send(f"{type(err).__name__}: {first}" if first else type(err).__name__)
        sys.exit(1)


class WorkerLostError(Exception):
    """A worker ended while the parent waited for its answer; ``str(err)`` is one line."""


#: What a worker says on its job channel when its first phase is done (``serve``).
_READY = "ready"


def serve(jobs: Connection, context: Any) -> None:
    """Say ready on ``jobs``, then run each ``(fn, arg)`` received as ``fn(context, arg)`` and
    send back ``(True, result)`` or ``(False, exception)``, until ``None`` or the parent goes.
    ``KeyboardInterrupt`` (SIGTERM, SIGINT) is not caught: the worker ends as stopped."""
    jobs.send(_READY)
    while True:
        try:
            job = jobs.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        fn, arg = job
        try:
            answer: tuple[bool, Any] = (True, fn(context, arg))
        except Exception as err:
            answer = (False, err)
        try:
            jobs.send(answer)
        except Exception as err:  # an answer that does not pickle: say what it was
            jobs.send((False, RuntimeError(f"{type(err).__name__}: {err}")))


def _message(pipe: Connection) -> str:
    """What a worker reported, '' if nothing (its end of the pipe closed without a word)."""
    try:
        return str(pipe.recv()) if pipe.poll() else ""
    except (EOFError, OSError):
        return ""


@dataclass
class Pool:
    """``len(args)`` worker processes running ``target(*args[i], jobs_pipe, report_pipe)``,
    named ``worker first``, ``worker first + 1``, … in ``failures``."""

    target: Callable[..., None]
    args: Sequence[tuple[Any, ...]]
    first: int = 0
    _processes: list[BaseProcess] = field(default_factory=list)
    _pipes: list[Connection] = field(default_factory=list)
    _jobs: list[Connection] = field(default_factory=list)
    _ready: list[bool] = field(default_factory=list)

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        for args in self.args:
            receive, send = context.Pipe(duplex=False)
            jobs, their_jobs = context.Pipe(duplex=True)
            process = context.Process(
                target=self.target, args=(*args, their_jobs, send), daemon=True
            )
            process.start()
            send.close()
            their_jobs.close()
            self._processes.append(process)
            self._pipes.append(receive)
            self._jobs.append(jobs)
            self._ready.append(False)

    def alive(self) -> bool:
        return any(p.is_alive() for p in self._processes)

    def _busy(self) -> list[int]:
        """The workers still in their first phase (alive, not yet ready)."""
        busy = []
        for index, (process, jobs) in enumerate(zip(self._processes, self._jobs, strict=True)):
            if self._ready[index]:
                continue
            with contextlib.suppress(EOFError, OSError):
                if jobs.poll() and jobs.recv() == _READY:
                    self._ready[index] = True
                    continue
            if process.is_alive():
                busy.append(index)
        return busy

    def stop(self) -> None:
        """SIGTERM every worker; SIGKILL the ones still there after ``STOP_GRACE_S``."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self._processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(timeout=5)

    def close(self) -> None:
        """Tell the ready workers to exit and wait for them (``stop`` the ones that do not)."""
        for ready, jobs in zip(self._ready, self._jobs, strict=True):
            if ready:
                with contextlib.suppress(OSError):
                    jobs.send(None)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self._processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.alive():
            self.stop()

    def ready(self) -> list[int]:
        """Indices (from 0) of the workers waiting for jobs."""
        return [i for i, ready in enumerate(self._ready) if ready]

    def call(self, index: int, fn: Callable[[Any, Any], Any], arg: Any) -> Any:
        """``fn(context, arg)`` in ready worker ``index``: its result, or its exception raised
        here; ``WorkerLostError`` (one line) if the worker ends first."""
        jobs = self._jobs[index]
        try:
            jobs.send((fn, arg))
            ok, answer = jobs.recv()
        except (EOFError, OSError):
            self._processes[index].join(timeout=5)
            lines = self.failures()
            raise WorkerLostError(
                "; ".join(lines) or f"worker {self.first + index}: ended"
            ) from None
        if not ok:
            raise answer
        return answer

    def failures(self, *, interrupted: bool = False) -> list[str]:
        """One line per worker that ended without finishing cleanly (stopped ones too, unless
        ``interrupted``: then being stopped is expected); workers still running are not
        listed."""
        lines = []
        for index, (process, pipe) in enumerate(zip(self._processes, self._pipes, strict=True)):
            code = process.exitcode
            if code is None or code == 0:
                continue
            if interrupted and code in (EXIT_INTERRUPTED, -signal.SIGTERM):
                continue
            message = _message(pipe)
            if not message:
                message = (
                    f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
                )
            lines.append(f"worker {self.first + index}: {message}")
        return lines

    def supervise(self, on_tick: Callable[[], None] | None, tick_s: float = 1.0) -> None:
        """Wait until every worker is ready (``serve``) or has exited, calling ``on_tick``
        about every ``tick_s``; on ``KeyboardInterrupt`` stop them all and re-raise."""
        try:
            while busy := self._busy():
                if on_tick is not None:
                    on_tick()
                waited: list[Any] = [self._processes[i].sentinel for i in busy]
                connection_wait(waited + [self._jobs[i] for i in busy], timeout=tick_s)
        except KeyboardInterrupt:
            self.stop()
            raise
