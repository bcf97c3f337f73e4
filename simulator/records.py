"""What the engine records during one run: one ``RequestRecord`` per finished request, and the
``Recorder`` that collects them with inter-token gaps, rejections, queue-length samples and the
exact per-pool load integral (``simulator.metrics`` defines what the summary makes of them).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simulator.sampling import QueueSamples, SampleLog

__all__ = ["QueueSamples", "Recorder", "RequestRecord"]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What happened to one finished request (times in seconds from the workload start)."""

    index: int
    instance: int
    arrival_s: float
    first_token_s: float
    finish_s: float
    input_tokens: int
    output_tokens: int
    cached_l1_tokens: int
    cached_l2_tokens: int
    cached_l3_tokens: int
    prefetch_queue_s: float
    waiting_queue_s: float
    swapped_queue_s: float
    preemptions: int
    computed_tokens: int
    """Tokens the GPU processed for it (prefill, decode and any recomputation)."""
    max_itl_s: float
    """Its largest gap between two consecutive output tokens (0 for one token)."""

    @property
    def ttft_s(self) -> float:
        """Time to first token."""
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float:
        """Arrival to last token."""
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first; NaN for one-token outputs."""
        if self.output_tokens <= 1:
            return math.nan
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def queue_s(self) -> float:
        """Time spent in the prefetch, waiting and swapped queues."""
        return self.prefetch_queue_s + self.waiting_queue_s + self.swapped_queue_s


class Recorder:
    """Collects what the engine reports during one run (not thread-safe; one per run)."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.n_arrived = 0
        self.n_rejected = 0
        self.rejections: dict[str, int] = {}
        # Raw doubles, not a list of float objects: millions of gaps in an overloaded run, and
        # the array becomes numpy's without a conversion (``itl_values``).
        self._gaps = array("d")
        self._same: list[tuple[int, float, int]] = []
        """Runs of equal individual gaps (``same_gaps``), in order: ``(place, gap (s), how
        many)``, ``place`` being the number of ``_gaps`` recorded before the run. Expanded
        only by ``itl_values`` (a cohort step records one tuple, not ~100 doubles)."""
        self._repeated: list[NDArray[np.float64]] = []
        self._repeats: list[int] = []
        self._weights: list[float] = []
        """Per ``gaps`` call with repeated gaps: the gaps as given (kept, one concatenation
        at the end), how many, and the requests each stands for."""
        # ``itl_values`` once built: it is read twice at the end of a run (summary, result),
        # and turning millions of gaps into arrays costs as much as a tenth of an overloaded
        # run. Any new gap drops it.
        self._itl: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
        self._in_system = 0
        self._in_system_area = 0.0
        self._last_change_s = 0.0
        self.first_arrival_s = math.inf
        self.samples = SampleLog()
        self._loads = _LoadIntegral()

    # ----- called by the engine -----------------------------------------------------------------
    def arrived(self, now: float) -> None:
        """A request entered an instance."""
        self._in_system_change(now, +1)
        self.n_arrived += 1
        self.first_arrival_s = min(self.first_arrival_s, now)

    def rejected(self, reason: str) -> None:
        """A request was refused at arrival (``reason`` is a short category)."""
        self.n_rejected += 1
        self.rejections[reason] = self.rejections.get(reason, 0) + 1

    def finished(self, record: RequestRecord) -> None:
        """A request produced its last token."""
        self._in_system_change(record.finish_s, -1)
        self.records.append(record)

    def set_pools(self, pools: Sequence[Sequence[int]]) -> None:
        """Declare the instance indices of each pool (before the run), for load imbalance;
        without it, the instances that ever held a request form one pool."""
        self._loads.set_pools(pools)

    def load(self, now: float, instance: int, delta: int) -> None:
        """Requests outstanding on ``instance`` changed by ``delta`` at ``now``."""
        self._loads.change(now, instance, delta)

    def gap(self, gap_s: float) -> None:
        """One inter-token gap of one request."""
        self._gaps.append(gap_s)
        self._itl = None

    def same_gaps(self, gap_s: float, n: int) -> None:
        """``n`` individual gaps of ``gap_s`` each (a decode cohort's step), recorded as one
        run: ``itl_values`` puts them in their place, after the gaps recorded before."""
        self._same.append((len(self._gaps), gap_s, n))
        self._itl = None

    def gaps(self, gaps_s: Sequence[float], repeated: NDArray[np.float64], weight: int) -> None:
        """Individual gaps, plus gaps ``repeated`` that ``weight`` requests each experienced."""
        if type(gaps_s) is list:
            self._gaps.fromlist(gaps_s)  # one resize, then the items: half ``extend``'s cost
        else:
            self._gaps.extend(gaps_s)
        if len(repeated):
            self._repeated.append(repeated)
            self._repeats.append(len(repeated))
            self._weights.append(float(weight))
        self._itl = None

    def sample(self, now: float, queues: tuple[int, int, int, int], *, weight: float = 1.0) -> None:
        """Queue lengths (waiting, prefetch, running, swapped; summed over instances) at
        ``now``, standing for ``weight`` grid points (``QueueSamples``)."""
        self.samples.add(now, queues, weight)

    def _in_system_change(self, now: float, delta: int) -> None:
        self._in_system_area += self._in_system * (now - self._last_change_s)
        self._last_change_s = now
        self._in_system += delta

    # ----- read at the end ----------------------------------------------------------------------
    def in_system_area(self, until_s: float) -> float:
        """∫ (requests in the system) dt from 0 to ``until_s`` (request-seconds)."""
        return self._in_system_area + self._in_system * max(0.0, until_s - self._last_change_s)

    def load_imbalance(self, until_s: float) -> float:
        """Load imbalance up to ``until_s`` (module docstring); 1 when nothing was outstanding."""
        return self._loads.imbalance(until_s)

    def itl_values(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """All inter-token gaps (seconds) and their weights (read once the run is over): whole
        numbers, 1 for an individual gap and the request count of a repeated one.

        Built once and then shared: both arrays are read-only (a caller that needs to change
        them copies)."""
        if self._itl is None:
            singles = self._individual_gaps()
            values_all = np.concatenate([singles, *self._repeated])
            # Weight 1 for every individual gap, then each call's weight over its gaps.
            per_part = np.array([1.0, *self._weights])
            weights_all = np.repeat(per_part, [len(singles), *self._repeats])
            values_all.flags.writeable = False
            weights_all.flags.writeable = False
            self._itl = (values_all, weights_all)
        return self._itl

    def _individual_gaps(self) -> NDArray[np.float64]:
        """Every individual gap in the order recorded: ``_gaps`` with the runs of ``_same``
        expanded in their places. Without runs it is a view of ``_gaps``, which cannot grow
        while the view lives (``itl_values`` copies it at once)."""
        recorded = np.frombuffer(self._gaps, dtype=np.float64)
        if not self._same:
            return recorded
        places, gaps, counts = zip(*self._same, strict=True)
        # Each run's gap goes in before the recorded gap at its place (runs at one place in
        # the order recorded), then repeated: one count per entry, 1 for a recorded gap.
        entries = np.insert(recorded, places, gaps)
        repeats = np.insert(np.ones(len(recorded), dtype=np.intp), places, counts)
        return np.repeat(entries, repeats)

    def queue_samples(self, interval_s: float) -> QueueSamples:
        """The sampled queue lengths as arrays."""
        return self.samples.arrays(interval_s)


class _LoadIntegral:
    """Exact ∫ max and ∫ sum of per-instance outstanding requests, per pool.

    O(1) per change: each pool keeps its sum, its maximum and how many instances hold each
    count (the maximum drops only when no instance holds it any more).
    """

    def __init__(self) -> None:
        self._count: dict[int, int] = {}
        self._pool_of: dict[int, int] = {}
        self._undeclared = -1
        self._sizes: list[int] = []
        self._hist: list[dict[int, int]] = []
        self._sum: list[int] = []
        self._max: list[int] = []
        self._area_max: list[float] = []
        self._area_sum: list[float] = []
        self._last_s: list[float] = []

    def set_pools(self, pools: Sequence[Sequence[int]]) -> None:
        for members in pools:
            self._add_pool(list(members))

    def _add_pool(self, members: list[int]) -> int:
        pool = len(self._sizes)
        for instance in members:
            self._pool_of[instance] = pool
        self._sizes.append(len(members))
        self._hist.append({0: len(members)})
        self._sum.append(0)
        self._max.append(0)
        self._area_max.append(0.0)
        self._area_sum.append(0.0)
        self._last_s.append(0.0)
        return pool

    def change(self, now: float, instance: int, delta: int) -> None:
        pool = self._pool_of.get(instance)
        if pool is None:  # undeclared: the instances seen so far form one extra pool
            if self._undeclared < 0:
                self._undeclared = self._add_pool([])
            pool = self._undeclared
            self._pool_of[instance] = pool
            self._sizes[pool] += 1
            hist = self._hist[pool]
            hist[0] = hist.get(0, 0) + 1
        self._accumulate(pool, now)
        old = self._count.get(instance, 0)
        new = old + delta
        self._count[instance] = new
        hist = self._hist[pool]
        hist[old] -= 1
        hist[new] = hist.get(new, 0) + 1
        self._sum[pool] += delta
        top = max(self._max[pool], new)
        while top > 0 and not hist.get(top):
            top -= 1
        self._max[pool] = top

    def _accumulate(self, pool: int, now: float) -> None:
        elapsed = now - self._last_s[pool]
        if elapsed > 0:
            self._area_max[pool] += self._max[pool] * elapsed
            self._area_sum[pool] += self._sum[pool] * elapsed
            self._last_s[pool] = now

    def imbalance(self, until_s: float) -> float:
        worst = 1.0
        for pool, size in enumerate(self._sizes):
            self._accumulate(pool, until_s)
            if self._area_sum[pool] > 0:
                worst = max(worst, self._area_max[pool] * size / self._area_sum[pool])
        return worst
