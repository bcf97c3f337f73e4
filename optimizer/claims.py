"""Claims: how the trials of one study, run by any number of processes, agree who simulates what.

``--trials N`` is the study's total, whatever the number of ``kvplan optimize`` processes and
``--workers`` joining it: a budget of N whole-workload simulations. Each configuration the study
holds costs its ``simulation_share`` (``optimizer.objective``: 1 simulated in full, 0 ruled out
without simulating, the simulated share when given up part-way); one being simulated counts 1
until it ends (its cost is not known before). The study is spent when no further whole
simulation fits in what is left (cost > N − 1), so what it simulates never exceeds N
simulations; when every trial is simulated in full that is exactly N configurations.

The storage (SQLite, journal file, PostgreSQL) is the only thing they share, so every trial
states in it, as user attributes:

- ``worker``: the process running it (host, boot id, pid, process start time);
- ``heartbeat``: when that process last said it is alive (wall-clock seconds, every
  ``HEARTBEAT_S``), for workers on other machines;
- ``claim``: what it does, decided once, in trial-number order (the storage numbers trials
  atomically, in creation order):

  - ``repeat``: its configuration is a finished (COMPLETE, or PRUNED as infeasible) trial's;
    it copies that result (free);
  - ``surplus``: the study's budget is spent (above), counting the trials being simulated as
    whole simulations; it ends FAILED without simulating;
  - ``wait``: another trial (``claim_of``) is simulating this configuration now; it copies
    that result when it is done (or ends FAILED, ``abandoned``, if that trial fails);
  - ``new``: it simulates a configuration no other trial holds.

A trial decides only once every lower-numbered running trial has decided, so two trials never
decide on the same view: at most N simulations' worth is ever claimed, and no configuration is
simulated twice at once. A trial whose worker died (its process is gone on this machine, or
its heartbeat is older than ``GRACE_S``) is failed by whoever notices first (``fail_stale``),
which frees its claim; that is also how a resumed study clears the RUNNING trials of a killed
run, on every storage.

Limits: a running trial that names no worker (made by another tool, or by a process killed
within milliseconds of creating it) is waited for until ``UNCLAIMED_GRACE_S``; machines are
told apart by host name and boot id, and their clocks are assumed to agree within
``GRACE_S``; enqueued (WAITING) trials are not coordinated (kvplan enqueues none).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from optimizer.objective import is_evaluated, is_repeat, simulation_share

__all__ = [
    "CLAIM_ATTR",
    "CLAIM_OF_ATTR",
    "GRACE_S",
    "HEARTBEAT_ATTR",
    "HEARTBEAT_S",
    "WORKER_ATTR",
    "Decision",
    "Heartbeat",
    "Usage",
    "claimed",
    "decide",
    "fail_stale",
    "wait_for",
    "worker_identity",
]

#: User attribute holding a trial's decision (module docstring).
CLAIM_ATTR = "claim"
#: User attribute naming the trial a ``wait`` decision copies.
CLAIM_OF_ATTR = "claim_of"
WORKER_ATTR = "worker"
HEARTBEAT_ATTR = "heartbeat"
#: Seconds between heartbeats of a running trial.
HEARTBEAT_S = 15.0
#: A trial of another machine whose heartbeat is older than this is taken as dead (Optuna's
#: RDB heartbeat uses a grace period of the same kind; clocks of the machines may differ a bit).
GRACE_S = 120.0
#: A running trial that names no worker this long after it started is taken as dead.
UNCLAIMED_GRACE_S = 10.0
#: Seconds between looks at the storage while waiting for another trial.
POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Decision:
    """A trial's claim: ``kind`` is ``new``, ``repeat``, ``wait`` or ``surplus``."""

    kind: str
    of: int | None = None
    """The trial a ``wait`` decision waits for."""


def _proc_start(pid: int) -> int | None:
    """Start time of process ``pid`` (clock ticks since boot), None where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22; the command name (field 2) may hold spaces, so count from its closing ')'.
    return int(stat.rsplit(")", 1)[1].split()[19])


@cache
def _host() -> tuple[str, str]:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return socket.gethostname(), boot


def worker_identity() -> dict[str, Any]:
    """This process, as a trial's ``worker`` attribute."""
    host, boot = _host()
    pid = os.getpid()
    return {"host": host, "boot": boot, "pid": pid, "start": _proc_start(pid)}


def _pid_alive(pid: int, start: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    # Same pid, other process (the pid was reused after the worker died)?
    return start is None or _proc_start(pid) in (start, None)


def _alive(trial: FrozenTrial, now: float) -> bool:
    """Whether the process running ``trial`` may still be working on it."""
    worker = trial.user_attrs.get(WORKER_ATTR)
    if isinstance(worker, dict) and (worker.get("host"), worker.get("boot")) == _host():
        return _pid_alive(int(worker["pid"]), worker.get("start"))
    beat = trial.user_attrs.get(HEARTBEAT_ATTR)
    if isinstance(beat, int | float):
        return now - float(beat) < GRACE_S
    # No owner recorded: a kvplan worker records itself right after creating the trial (with
    # SIGINT/SIGTERM held off), so only a process killed in those milliseconds leaves this.
    start = trial.datetime_start
    age = now - start.timestamp() if start is not None else 0.0
    return age < (UNCLAIMED_GRACE_S if worker is None else GRACE_S)


def fail_stale(
    study: optuna.Study, trials: list[FrozenTrial] | None = None, *, mine: bool = False
) -> list[int]:
    """Fail the RUNNING trials whose worker is gone — and, with ``mine``, those of this
    process (it runs none at that point: a run ending on Ctrl-C, whose own marking may have
    lost a race for the storage); returns their numbers."""
    now = time.time()
    stale = []
    for trial in trials if trials is not None else study.get_trials(deepcopy=False):
        if trial.state == TrialState.RUNNING and (
            not _alive(trial, now) or (mine and _owned_here(trial))
        ):
            with contextlib.suppress(Exception):  # another process may fail it first
                study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
            stale.append(trial.number)
    return stale


def _owned_here(trial: FrozenTrial) -> bool:
    """Whether this process is the worker ``trial`` names."""
    worker = trial.user_attrs.get(WORKER_ATTR)
    return (
        isinstance(worker, dict)
        and (worker.get("host"), worker.get("boot")) == _host()
        and worker.get("pid") == os.getpid()
    )


def _is_new(trial: FrozenTrial) -> bool:
    """Whether ``trial`` holds one of the study's N configurations (simulated or simulating)."""
    if is_evaluated(trial):  # COMPLETE, or PRUNED as infeasible
        return not is_repeat(trial)
    return trial.state == TrialState.RUNNING and trial.user_attrs.get(CLAIM_ATTR) == "new"


#: Slack of the budget comparison: shares are sums of fractions.
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Usage:
    """What a study's configurations cost so far (the trials being simulated count 1 each)."""

    configurations: int
    """Configurations held, done or being simulated (repeats are not)."""
    simulations: float
    """Their cost in whole-workload simulations."""

    def spent(self, n_target: int) -> bool:
        """Whether a budget of ``n_target`` simulations leaves no room for another whole one."""
        return self.simulations + 1.0 > n_target + _EPS

    def left(self, n_target: int) -> int:
        """Whole simulations the budget still allows (0 when spent)."""
        return max(0, math.floor(n_target - self.simulations + _EPS))


def _usage(trials: list[FrozenTrial]) -> Usage:
    new = [t for t in trials if _is_new(t)]
    cost = sum(simulation_share(t) if is_evaluated(t) else 1.0 for t in new)
    return Usage(configurations=len(new), simulations=cost)


def claimed(study: optuna.Study) -> Usage:
    """What the study holds, done or being simulated (stale trials failed first)."""
    trials = study.get_trials(deepcopy=False)
    stale = set(fail_stale(study, trials))
    return _usage([t for t in trials if t.number not in stale])


def decide(study: optuna.Study, number: int, params: dict[str, Any], n_target: int) -> Decision:
    """The claim of trial ``number`` (its parameters already sampled), by the module's rule.

    Waits (polling) until every lower-numbered running trial has decided, failing those whose
    worker is gone. The caller stores the decision before anything else.
    """
    while True:
        trials = study.get_trials(deepcopy=False)
        stale = set(fail_stale(study, trials))
        live = [t for t in trials if t.number not in stale and t.number != number]
        if any(
            t.number < number and t.state == TrialState.RUNNING and CLAIM_ATTR not in t.user_attrs
            for t in live
        ):
            time.sleep(POLL_S)
            continue
        same = [t for t in live if t.params == params and _is_new(t)]
        if any(is_evaluated(t) for t in same):
            return Decision("repeat")
        if _usage(live).spent(n_target):
            return Decision("surplus")
        if same:
            return Decision("wait", of=same[0].number)
        return Decision("new")


def wait_for(study: optuna.Study, number: int) -> bool:
    """Wait until trial ``number`` finishes; True if it stored a result to copy (COMPLETE, or
    PRUNED as infeasible)."""
    while True:
        trial = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
        if trial.state == TrialState.RUNNING:
            if fail_stale(study, [trial]):
                return False
            time.sleep(max(POLL_S, 0.5))
            continue
        return is_evaluated(trial)


class Heartbeat:
    """Marks ``trial`` as this process's (``start``) and keeps its heartbeat fresh until
    ``stop``."""

    def __init__(self, trial: optuna.Trial, interval_s: float = HEARTBEAT_S) -> None:
        self._trial = trial
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kvplan-heartbeat", daemon=True)

    def start(self) -> None:
        self._trial.set_user_attr(WORKER_ATTR, worker_identity())
        self._trial.set_user_attr(HEARTBEAT_ATTR, time.time())
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self._interval_s):
            # The trial may have been finished meanwhile (by this process or, if this process
            # was presumed dead, by another): nothing to keep alive then.
            with contextlib.suppress(Exception):
                self._trial.set_user_attr(HEARTBEAT_ATTR, time.time())
