"""Queue-length samples: one record per run of grid points at which nothing changed.

The driver samples the queues every ``interval_s`` of simulated time from 0 while events are
pending; between two events the queues cannot change, so the grid points up to the next event
share one record and its weight (``simulator.cluster.driver``). Memory is one record per
event gap, not per simulated second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["QueueSamples", "SampleLog"]


@dataclass(frozen=True, slots=True)
class QueueSamples:
    """Queue lengths summed over instances, sampled every ``interval_s`` from time 0.

    Sample i was taken at ``time_s[i]`` and stands for ``weight[i]`` consecutive grid points
    (``time_s[i] + k·interval_s``) at which the queues were the same because no event happened
    between them (an idle gap is one sample): time averages weigh by ``weight``.
    """

    interval_s: float
    time_s: NDArray[np.float64]
    waiting: NDArray[np.int64]
    prefetch: NDArray[np.int64]
    running: NDArray[np.int64]
    swapped: NDArray[np.int64]
    weight: NDArray[np.float64]
    """Grid points each sample stands for (integral, ≥ 1)."""

    def mean(self, values: NDArray[np.int64]) -> float:
        """Time average of ``values`` (one of the queue arrays) over the grid points."""
        return float(np.sum(values * self.weight) / np.sum(self.weight)) if len(values) else 0.0


class SampleLog:
    """The records of one run, appended in time order (``QueueSamples`` at the end)."""

    def __init__(self) -> None:
        self._rows: list[tuple[float, int, int, int, int]] = []
        self._weights: list[float] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, now: float, queues: tuple[int, int, int, int], weight: float) -> None:
        """Queues (waiting, prefetch, running, swapped) at ``now`` for ``weight`` grid points."""
        self._rows.append((now, *queues))
        self._weights.append(weight)

    def arrays(self, interval_s: float) -> QueueSamples:
        """The records as arrays."""
        data = np.asarray(self._rows, dtype=np.float64).reshape(-1, 5)
        ints = data[:, 1:].astype(np.int64)
        weight = np.asarray(self._weights, dtype=np.float64)
        return QueueSamples(
            interval_s, data[:, 0], ints[:, 0], ints[:, 1], ints[:, 2], ints[:, 3], weight
        )
