"""Capacity search: the highest arrival rate at which a configuration still meets a predicate.

The load is varied by ``time_scale``, a factor on every arrival timestamp of an open-loop
workload (0.5 = the same requests at twice the rate; the workload is built from the same seed
each time, so only the timing changes). ``capacity_search`` bisects ``time_scale`` in log space
over ``[min_time_scale, max_time_scale]`` until the bracket is within ``step`` (2.5%):

1. the lowest load (``max_time_scale``) is simulated first; if it fails the configuration is
   **infeasible even at the lowest load** (``Capacity.time_scale is None``). A caller that
   already knows it passes (``passes_at_max``: the optimizer's picks met the SLO at the
   nominal load in their trial) skips it, and it is simulated at the end only if it is the
   answer (its result is returned);
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
from simulator.config import ServingConfig
from simulator.give_up import Decided, MissRule, Watched
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource, RequestSource
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
    given_up: int = 0
    """Simulations (among ``simulations``) abandoned as failing (``give_up``)."""

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
    passes_at_max: bool = False,
    give_up: MissRule | None = None,
) -> Capacity:
    """The smallest ``time_scale`` in the bracket at which ``meets(simulate(...))`` holds.

    ``workload`` must build an open-loop source (a ``WorkloadSpec`` of a trace, open-loop or
    sessions shape); it is rebuilt from ``seed`` for every simulation. An infeasible
    configuration (``SimResult.feasible`` False) never passes and costs one simulation.
    ``drop_overlong_requests`` is passed to every ``simulate``.
    ``passes_at_max``: the caller knows ``max_time_scale`` passes (module docstring, step 1);
    the answer is the same, one simulation fewer unless ``max_time_scale`` is the answer.
    ``give_up``: the attainment floor and bars that ``meets`` requires; a simulation above the
    lowest load is then abandoned as failing once the floor is out of reach (``give_up.py``,
    judging each request at its first token as well as at its finish; the answer is the same,
    the simulation shorter). ``Capacity.given_up`` counts them.
    """
    if not 0 < min_time_scale <= max_time_scale:
        raise ValueError("need 0 < min_time_scale <= max_time_scale")
    if not step > 0:
        raise ValueError("step must be > 0")
    search = _Search(
        config,
        workload,
        meets,
        seed=seed,
        catalog=catalog,
        give_up=give_up,
        drop_overlong_requests=drop_overlong_requests,
    )
    lowest: SimResult | None = None
    if not passes_at_max:
        ok, lowest = search.run(max_time_scale)
        if not ok:
            return Capacity(None, None, search.simulations, lowest)
    if min_time_scale == max_time_scale:
        if lowest is None:
            lowest = search.run(max_time_scale)[1]
        return search.found(max_time_scale, lowest, at_limit=True)
    ok, highest = search.probe(min_time_scale)
    if ok:
        assert highest is not None
        return search.found(min_time_scale, highest, at_limit=True)
    lo, hi, best = min_time_scale, max_time_scale, lowest
    while hi / lo > 1 + step:
        mid = math.sqrt(lo * hi)
        ok, result = search.probe(mid)
        if ok:
            hi, best = mid, result
        else:
            lo = mid
    if best is None:  # nothing above the lowest load passed: simulate it for its result
        best = search.run(max_time_scale)[1]
    return search.found(hi, best, at_limit=False)


class _Search:
    """The simulations of one capacity search, and what they cost."""

    def __init__(
        self,
        config: ServingConfig,
        workload: WorkloadBuilder,
        meets: Callable[[SimResult], bool],
        *,
        seed: int,
        catalog: Catalog | None,
        give_up: MissRule | None,
        drop_overlong_requests: bool,
    ) -> None:
        self.config, self.workload, self.meets = config, workload, meets
        self.seed, self.catalog = seed, catalog
        self.drop_overlong_requests = drop_overlong_requests
        # A TTFT bar alone decides misses too: at the first token (``WatchedSource``).
        self.give_up = (
            give_up
            if give_up is not None and (give_up.bounded or give_up.ttft_s is not None)
            else None
        )
        self.simulations = 0
        self.given_up = 0
        self._counts: list[int] = []  # requests per simulation, counted once (``Watched``)

    def run(self, scale: float) -> tuple[bool, SimResult]:
        """Simulate at ``scale``: whether ``meets`` holds, and the result."""
        return self._judge(self._simulate(TimeScaled(self.workload, scale)))

    def probe(self, scale: float) -> tuple[bool, SimResult | None]:
        """``run`` above the lowest load, given up (None) once the floor is out of reach."""
        if self.give_up is None:
            return self.run(scale)
        # Built here, not in ``simulate``, to hand its first-token hook to the run: TTFT misses
        # are then decided at the first token instead of at the finish (``give_up.py``).
        watched = Watched(TimeScaled(self.workload, scale), self.give_up, self._counts)
        source = watched.source(self.seed)
        try:
            result = self._simulate(source, on_first_token=source.first_token_hook())
        except Decided:
            self.given_up += 1
            return False, None
        return self._judge(result)

    def found(self, scale: float, result: SimResult, *, at_limit: bool) -> Capacity:
        """The answer ``scale`` with the simulation at it."""
        rate = result.summary.requests_per_s if result.summary is not None else None
        return Capacity(scale, rate, self.simulations, result, at_limit, self.given_up)

    def _simulate(
        self,
        workload: WorkloadBuilder | RequestSource,
        on_first_token: Callable[[TraceRequest, float, float], None] | None = None,
    ) -> SimResult:
        self.simulations += 1
        return simulate(
            self.config,
            workload,
            seed=self.seed,
            catalog=self.catalog,
            drop_overlong_requests=self.drop_overlong_requests,
            on_first_token=on_first_token,
        )

    def _judge(self, result: SimResult) -> tuple[bool, SimResult]:
        return result.feasible and self.meets(result), result
