"""The router base class, what a router may read about an instance, and router parameters.

A router is built once per run with the number of instances in its pool, the run's random
generator and its (validated) parameters; ``route(request, instances)`` is called once per
arriving request and returns an index into ``instances``. It reads instances only through
``InstanceView``; any memory of its own (a round-robin cursor, cache-aware prefix trees) lives
in the router object and is fed only by its own routing decisions, as a real router in front
of real engines would be.

Load measures (both read at the moment of routing, as of the instance's last committed step;
during a multi-step decode run the token count lags by up to the run's length):

- ``n_outstanding``: requests queued or running on the instance (SGLang's router counts these);
- ``outstanding_tokens``: prompt tokens not yet prefilled plus output tokens not yet generated,
  over the same requests. A queued request counts its whole prompt even when part of it will
  hit the cache: a router does not know the hits before admission.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import ClassVar, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from simulator.workload.request import TraceRequest

__all__ = [
    "InstanceView",
    "NoParams",
    "Router",
    "RouterParams",
    "least_loaded",
    "least_requests",
]


class InstanceView(Protocol):
    """What a router may read about an instance (see the module docstring for the measures)."""

    @property
    def n_outstanding(self) -> int:
        """Requests queued or running on the instance."""
        ...

    @property
    def outstanding_tokens(self) -> int:
        """Prompt tokens not yet prefilled plus output tokens not yet generated."""
        ...


class RouterParams(BaseModel):
    """Base of every router's parameters: frozen, unknown keys rejected, every field described.

    Parameters come from the router spec string ``name:key=value,key=value`` (values as text,
    converted by pydantic's lax mode); a router without parameters uses ``NoParams``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")


class NoParams(RouterParams):
    """A router without parameters."""


P = TypeVar("P", bound=RouterParams)


class Router(ABC):
    """Base class: subclasses set ``name`` (and ``params_model`` if they take parameters) and
    implement ``route``.

    Constructed as ``cls(n_instances, rng, params)``; ``params`` must be an instance of the
    class's ``params_model`` (None = its defaults). Not thread-safe; one router per run.
    """

    name: ClassVar[str]
    params_model: ClassVar[type[RouterParams]] = NoParams

    def __init__(
        self, n_instances: int, rng: np.random.Generator, params: RouterParams | None = None
    ) -> None:
        if n_instances < 1:
            raise ValueError("a router needs at least one instance")
        self.n_instances = n_instances
        self.rng = rng
        self.params = self.params_model() if params is None else params
        if type(self.params) is not self.params_model:
            raise TypeError(
                f"router {self.name!r} takes {self.params_model.__name__}, "
                f"got {type(self.params).__name__}"
            )

    def typed_params(self, model: type[P]) -> P:
        """``self.params`` as ``model`` (what a subclass reads its own parameters through)."""
        if not isinstance(self.params, model):
            raise TypeError(f"router {self.name!r} has no {model.__name__}")
        return self.params

    @abstractmethod
    def route(self, request: TraceRequest, instances: Sequence[InstanceView]) -> int:
        """Index of the instance that serves ``request`` (called once, at its arrival).

        ``instances`` are the routable instances: the first ``len(instances)`` of the pool's
        ``n_instances`` (all of them unless the pool is autoscaled, ``cluster/autoscale.py``),
        so the answer is below ``len(instances)``. The router may keep state between calls (it
        is told about every request of its pool), but it never changes the instances.
        """

    def forget(self, index: int) -> None:
        """Instance ``index`` stopped (autoscaling drained it): drop what the router believes
        it holds. Routers without per-instance state ignore it."""
        del index


def least_loaded(instances: Sequence[InstanceView], candidates: Iterable[int]) -> int:
    """Among ``candidates``, the instance with the fewest outstanding tokens; ties go to fewer
    outstanding requests, then to the lowest index. ``candidates`` must not be empty."""
    best, best_key = -1, (0, 0)
    for index in candidates:
        view = instances[index]
        key = (view.outstanding_tokens, view.n_outstanding)
        if best < 0 or key < best_key or (key == best_key and index < best):
            best, best_key = index, key
    if best < 0:
        raise ValueError("no candidate instance")
    return best


def least_requests(instances: Sequence[InstanceView]) -> int:
    """The instance with the fewest outstanding requests; ties go to fewer outstanding tokens,
    then to the lowest index (SGLang's shortest-queue choice, made deterministic)."""
    best, best_key = 0, (instances[0].n_outstanding, instances[0].outstanding_tokens)
    for index in range(1, len(instances)):
        view = instances[index]
        key = (view.n_outstanding, view.outstanding_tokens)
        if key < best_key:
            best, best_key = index, key
    return best
