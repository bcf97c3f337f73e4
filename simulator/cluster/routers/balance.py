"""Load-only routers: they look at how busy instances are (or at nothing), never at prefixes.

- ``random``: uniform over instances, drawn from the run's generator.
- ``round_robin``: 0, 1, …, n-1, 0, … whatever the load.
- ``least_load``: fewest outstanding tokens (``routers.base.least_loaded``).
- ``power_of_two``: two distinct instances drawn at random, the less loaded of the two.
- ``length_bucket``: by prompt length into groups of instances, least loaded within the group.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import Field, field_validator

from simulator.cluster.routers.base import InstanceView, Router, RouterParams, least_loaded
from simulator.workload.request import TraceRequest

__all__ = [
    "LeastLoadRouter",
    "LengthBucketParams",
    "LengthBucketRouter",
    "PowerOfTwoRouter",
    "RandomRouter",
    "RoundRobinRouter",
]


class RandomRouter(Router):
    """A uniformly random instance per request (deterministic for the run's seed)."""

    name: ClassVar[str] = "random"

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        del request
        return int(self.rng.integers(len(instances)))


class RoundRobinRouter(Router):
    """Instances in turn, 0, 1, …, n-1, 0, … regardless of load."""

    name: ClassVar[str] = "round_robin"

    def __init__(
        self, n_instances: int, rng: np.random.Generator, params: RouterParams | None = None
    ) -> None:
        super().__init__(n_instances, rng, params)
        self._next = 0

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        del request
        index = self._next % len(instances)  # the pool may have shrunk (autoscaling)
        self._next = (index + 1) % len(instances)
        return index


class LeastLoadRouter(Router):
    """The instance with the fewest outstanding tokens (prompt tokens not yet prefilled plus
    output tokens not yet generated); ties go to fewer outstanding requests, then to the lowest
    index."""

    name: ClassVar[str] = "least_load"

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        del request
        return least_loaded(instances, range(len(instances)))


class PowerOfTwoRouter(Router):
    """Two distinct instances drawn uniformly at random; the one with fewer outstanding tokens
    (ties as ``least_load``). With one instance, that one. It never picks the strictly most
    loaded instance of a pool of two or more."""

    name: ClassVar[str] = "power_of_two"

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        del request
        n = len(instances)
        if n == 1:
            return 0
        first = int(self.rng.integers(n))
        # A uniform draw from the other n-1 instances: skip over ``first``.
        second = int(self.rng.integers(n - 1))
        second += second >= first
        return least_loaded(instances, (first, second))


class LengthBucketParams(RouterParams):
    """Parameters of ``length_bucket``."""

    boundaries: tuple[int, ...] = Field(
        default=(8192,),
        description="Prompt-length bucket boundaries in tokens, strictly increasing; k "
        "boundaries make k+1 buckets, a prompt of exactly a boundary goes to the upper one. "
        "In a spec string, separate them with '/': 'length_bucket:boundaries=2048/16384'.",
    )

    @field_validator("boundaries", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split("/"))
        if isinstance(value, int):
            return (value,)
        return value

    @field_validator("boundaries")
    @classmethod
    def _increasing(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value:
            raise ValueError("needs at least one boundary")
        if value[0] < 1 or any(b <= a for a, b in itertools.pairwise(value)):
            raise ValueError(f"must be positive and strictly increasing, got {list(value)}")
        return value


class LengthBucketRouter(Router):
    """Requests by prompt length into ``len(boundaries) + 1`` buckets; bucket ``b`` of ``B``
    owns instances ``[b·n // B, (b+1)·n // B)`` (split evenly, in order), and the request goes
    to the least loaded of them (as ``least_load``). With fewer instances than buckets,
    neighbouring buckets share an instance (bucket ``b`` gets instance ``b·n // B``).

    Why: short and long prompts on separate instances keep long prefills from stalling short
    requests (head-of-line blocking), at the price of balancing only within a group.
    """

    name: ClassVar[str] = "length_bucket"
    params_model: ClassVar[type[RouterParams]] = LengthBucketParams

    def __init__(
        self, n_instances: int, rng: np.random.Generator, params: RouterParams | None = None
    ) -> None:
        super().__init__(n_instances, rng, params)
        self.boundaries = self.typed_params(LengthBucketParams).boundaries
        self.groups = self._groups(n_instances)
        """Instance indices of each bucket, shortest prompts first."""
        self._groups_of: dict[int, tuple[range, ...]] = {n_instances: self.groups}

    def _groups(self, n: int) -> tuple[range, ...]:
        buckets = len(self.boundaries) + 1
        return tuple(
            range(b * n // buckets, max(b * n // buckets + 1, (b + 1) * n // buckets))
            for b in range(buckets)
        )

    def bucket(self, input_length: int) -> int:
        """Bucket of a prompt of ``input_length`` tokens (0 = shortest)."""
        return bisect.bisect_right(self.boundaries, input_length)

    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        n = len(instances)
        groups = self._groups_of.get(n)
        if groups is None:  # an autoscaled pool changed size: split what is routable now
            groups = self._groups_of[n] = self._groups(n)
        return least_loaded(instances, groups[self.bucket(request.input_length)])
