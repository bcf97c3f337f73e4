"""Capacity search: the highest arrival rate at which a configuration still meets a predicate.

The load is varied by ``time_scale``, a factor on every arrival timestamp of an open-loop
workload (0.5 = the same requests at twice the rate; the workload is built from the same seed
each time, so only the timing changes). ``capacity_search`` bisects ``time_scale`` in log space
over ``[min_time_scale, max_time_scale]`` until the bracket is within ``step`` (2.5%):

1. the lowest load (``max_time_scale``) is simulated first; if it fails the configuration is
   **infeasible even at the lowest load** (``Capacity.time_scale is None``);
2. then the highest load (``min_time_scale``); if it passes the search stops there
   (``Capacity.at_limit``: the capacity is at least that);
3. otherwise ``lo`` (fails) and ``hi`` (passes) close in: ``mid = sqrt(lo · hi)`` until
   ``hi / lo ≤ 1 + step``; the answer is ``hi``, the smallest scale known to pass, so the true
   threshold lies in ``(hi / (1 + step), hi]``.

The predicate is a plain callable ``meets(result) -> bool`` (the simulator does not import
``slo``; the optimizer passes SLO evaluation in). The search assumes it is monotone — more load
never helps — as queueing makes it in practice; a non-monotone predicate gives *a* passing
scale next to a failing one, not necessarily the smallest.

What this is not: closed-loop workloads are refused (``InputError``): N users set their own
rate, and scaling their timestamps changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from hardware.schema import Catalog
from simulator.api import SimResult, WorkloadBuilder, simulate
from simulator.cluster.source import OpenLoopSource, RequestSource
from simulator.config import ServingConfig
from simulator.workload.request import TraceRequest
from slo.inputfile import InputError

__all__ = [
    "DEFAULT_STEP",
    "MAX_TIME_SCALE",
    "MIN_TIME_SCALE",
    "Capacity",
    "TimeScaled",
    "capacity_search",
]

#: Relative granularity of the search (2.5%).
DEFAULT_STEP = 0.025
#: Default bracket: from 8x the workload's rate (1/8) down to 1/8 of it (8).
MIN_TIME_SCALE = 0.125
MAX_TIME_SCALE = 8.0


@dataclass(frozen=True, slots=True)
class Capacity:
    """Outcome of a capacity search (see the module docstring)."""

    time_scale: float | None
    """Smallest factor on the timestamps found to pass (the highest load); None when even
    ``max_time_scale`` fails."""
    requests_per_s: float | None
    """Finished requests per second of the simulation at ``time_scale``."""
    simulations: int
    """Simulations run."""
    result: SimResult
    """The simulation at ``time_scale``, or the failing one at the lowest load."""
    at_limit: bool = False
    """True when the highest load searched (``min_time_scale``) still passed."""

    @property
    def feasible(self) -> bool:
        """Whether some load in the bracket passes."""
        return self.time_scale is not None

    @property
    def load_scale(self) -> float | None:
        """Arrival-rate multiplier of the capacity (1 / ``time_scale``)."""
        return None if self.time_scale is None else 1.0 / self.time_scale


class TimeScaled:
    """A workload builder whose arrival timestamps are multiplied by ``time_scale``."""

    def __init__(self, workload: WorkloadBuilder, time_scale: float) -> None:
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self.workload = workload
        self.time_scale = time_scale

    def build(self, rng: np.random.Generator) -> RequestSource:
        """The inner workload's source with scaled timestamps; ``InputError`` if it is not an
        open-loop source."""
        source = self.workload.build(rng)
        if not isinstance(source, OpenLoopSource):
            raise InputError(
                "capacity search needs an open-loop workload (a trace, open_loop or sessions "
                "file): a closed loop of users sets its own arrival rate"
            )
        return OpenLoopSource(_Scaled(source, self.time_scale), source.block_tokens)


class _Scaled:
    """Re-iterable scaled view of a source's requests."""

    def __init__(self, source: OpenLoopSource, factor: float) -> None:
        self._source = source
        self._factor = factor

    def __iter__(self) -> Iterator[TraceRequest]:
        factor = self._factor
        for request in self._source.start():
            yield replace(request, timestamp_s=request.timestamp_s * factor)


def capacity_search(
    config: ServingConfig,
    workload: WorkloadBuilder,
    meets: Callable[[SimResult], bool],
    *,
    seed: int,
    catalog: Catalog | None = None,
    min_time_scale: float = MIN_TIME_SCALE,
    max_time_scale: float = MAX_TIME_SCALE,
    step: float = DEFAULT_STEP,
    drop_overlong_requests: bool = True,
) -> Capacity:
    """The smallest ``time_scale`` in the bracket at which ``meets(simulate(...))`` holds.

    ``workload`` must build an open-loop source (a ``WorkloadSpec`` of a trace, open-loop or
    sessions shape); it is rebuilt from ``seed`` for every simulation. An infeasible
    configuration (``SimResult.feasible`` False) never passes and costs one simulation.
    ``drop_overlong_requests`` is passed to every ``simulate``.
    """
    if not 0 < min_time_scale <= max_time_scale:
        raise ValueError("need 0 < min_time_scale <= max_time_scale")
    if not step > 0:
        raise ValueError("step must be > 0")
    runs: list[SimResult] = []

    def run(scale: float) -> tuple[bool, SimResult]:
        result = simulate(
            config,
            TimeScaled(workload, scale),
            seed=seed,
            catalog=catalog,
            drop_overlong_requests=drop_overlong_requests,
        )
        runs.append(result)
        return result.feasible and meets(result), result

    ok, lowest = run(max_time_scale)
    if not ok:
        return Capacity(None, None, len(runs), lowest)
    if min_time_scale == max_time_scale:
        return _found(max_time_scale, lowest, len(runs), at_limit=True)
    ok, highest = run(min_time_scale)
    if ok:
        return _found(min_time_scale, highest, len(runs), at_limit=True)
    lo, hi, best = min_time_scale, max_time_scale, lowest
    while hi / lo > 1 + step:
        mid = math.sqrt(lo * hi)
        ok, result = run(mid)
        if ok:
            hi, best = mid, result
        else:
            lo = mid
    return _found(hi, best, len(runs), at_limit=False)


def _found(scale: float, result: SimResult, simulations: int, *, at_limit: bool) -> Capacity:
    rate = result.summary.requests_per_s if result.summary is not None else None
    return Capacity(scale, rate, simulations, result, at_limit)
