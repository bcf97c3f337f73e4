"""Routers: which instance of a pool serves an arriving request.

A router is a small class built once per run with the number of instances and the run's
random generator; ``route(request, instances)`` returns an index into ``instances``. Routers
read instances only through ``InstanceView`` (queue lengths now; a later cache-aware router
will also ask for prefix-match lengths), never their internals.

``ROUTERS`` is the registry (``round_robin``, ``least_load``); ``random``, ``cache_aware``,
``length_bucket`` and ``power_of_two`` (DESIGN.md) are added as further entries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Protocol

import numpy as np

from simulator.workload.request import TraceRequest

__all__ = ["ROUTERS", "InstanceView", "LeastLoadRouter", "RoundRobinRouter", "Router"]


class InstanceView(Protocol):
    """What a router may read about an instance."""

    @property
    def n_outstanding(self) -> int:
        """Requests queued or running on the instance."""
        ...


class Router(ABC):
    """Base class: subclasses set ``name`` and implement ``route``."""

    name: ClassVar[str]

    def __init__(self, n_instances: int, rng: np.random.Generator) -> None:
        if n_instances < 1:
            raise ValueError("a router needs at least one instance")
        self.n_instances = n_instances
        self.rng = rng

    @abstractmethod
    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        """Index of the instance that serves ``request`` (called once, at its arrival)."""


class RoundRobinRouter(Router):
    """Instances in turn, 0, 1, …, n-1, 0, … regardless of load."""

    name: ClassVar[str] = "round_robin"

    def __init__(self, n_instances: int, rng: np.random.Generator) -> None:
        super().__init__(n_instances, rng)
        self._next = 0

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        del request, instances
        index = self._next
        self._next = (index + 1) % self.n_instances
        return index


class LeastLoadRouter(Router):
    """The instance with the fewest outstanding requests; ties go to the lowest index."""

    name: ClassVar[str] = "least_load"

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        del request
        best, best_load = 0, instances[0].n_outstanding
        for index in range(1, len(instances)):
            load = instances[index].n_outstanding
            if load < best_load:
                best, best_load = index, load
        return best


#: Every router by name; ``ServingConfig.router`` takes one of these keys.
ROUTERS: dict[str, type[Router]] = {cls.name: cls for cls in (RoundRobinRouter, LeastLoadRouter)}
