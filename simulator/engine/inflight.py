"""The step or decode run in progress on one instance, handled as one kernel event at its end.

A step of ``batch`` that starts now ends when the step timer says. Decode runs: when a step is
pure decode and nothing can change until a request finishes, L1 runs out or an event arrives,
the instance plans ``k`` steps at once (``steps.quiescent_decode_steps``), ending at the last of
their cumulative step ends (``steps.decode_run_durations``); an event arriving meanwhile cuts
the run at the end of the step in progress (``cut``). Evictions that decode growth causes
during a run are applied when the run ends. What this module is not: it does not choose
batches or run lengths, and it does not apply what the steps did (``progress.py``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from simulator.core import Kernel
from simulator.engine.scheduler import Batch, StepSplit
from simulator.engine.steps import StepPricer

__all__ = ["InFlight"]

_accumulate = np.add.accumulate

#: ``InFlight.ends`` of a single step (its end is ``end_s``).
_NO_ENDS: NDArray[np.float64] = np.empty(0)


class InFlight:
    """``k`` steps of ``batch`` from ``start_s``; ``on_end`` is called when the last ends."""

    __slots__ = ("_kernel", "_on_end", "_token", "batch", "end_s", "ends", "k", "start_s")

    def __init__(
        self,
        kernel: Kernel,
        pricer: StepPricer,
        batch: Batch,
        k: int,
        on_end: Callable[[], None],
        *,
        split: StepSplit | None = None,
        cache_lens: Sequence[int] | None = None,
    ) -> None:
        """``split``: ``batch``'s shapes if the scheduler gathered them (priced from them);
        ``cache_lens``: a run's processed tokens per request where they are not the
        requests' ``processed`` (``StepPricer.decode_run``)."""
        now = kernel.now
        if k == 1:
            # One step (half the events): a float, no array (``ends`` is empty).
            end_s = now + pricer.step(batch, split)
            ends = _NO_ENDS
        else:
            # ``now + cumsum``, bit for bit, without numpy's function dispatch (µs per call):
            # the ufunc's accumulate is the method's own loop, reached in fewer steps.
            ends = _accumulate(pricer.decode_run(batch, k, cache_lens))
            ends += now
            end_s = ends.item(k - 1)
        self.batch = batch
        self.ends: NDArray[np.float64] = ends
        """Absolute end time (s) of each planned step of a run (k > 1 when planned; empty for
        a single step); the first ``k`` are still planned."""
        self.end_s = end_s
        """End (s) of the last step still planned."""
        self.start_s = now
        self.k = k
        self._kernel, self._on_end = kernel, on_end
        self._token = kernel.at(end_s, on_end)

    def cut(self) -> None:
        """Something changed now: end the run with the step in progress (a no-op when that
        is its last step)."""
        if self.k == 1:
            return
        kernel = self._kernel
        # ``searchsorted(ends[:k], now, side="left")``: a bisection costs less than its dispatch.
        m = bisect_left(self.ends, kernel.now, 0, self.k) + 1
        if m < self.k:
            kernel.cancel(self._token)
            self.k = m
            self.end_s = float(self.ends[m - 1])
            self._token = kernel.at(self.end_s, self._on_end)

    def step_ends(self) -> NDArray[np.float64]:
        """End times (s) of the steps that run, in order (a run's; see ``end_s``)."""
        ends = self.ends
        if not len(ends):
            return np.array([self.end_s])
        # A run that was not cut: all its ends (a slice costs a numpy call per run).
        return ends if len(ends) == self.k else ends[: self.k]
