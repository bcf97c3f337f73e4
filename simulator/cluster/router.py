"""Routers: which instance of a pool serves an arriving request — the registry and router specs.

``ROUTERS`` maps each name to its class (members in ``simulator/cluster/routers/``):
``random``, ``round_robin``, ``least_load``, ``power_of_two``, ``length_bucket``,
``cache_aware``. ``ServingConfig.router`` is a *router spec*: a name, optionally with
parameters, ``name:key=value,key=value`` — e.g. ``cache_aware:cache_threshold=0.5,
balance_abs=32`` or ``length_bucket:boundaries=2048/16384`` (list items separated by ``/``).
Each router documents its parameters as a pydantic model (``params_model``); ``parse_router_spec``
validates a spec against it and ``make_router`` builds the router a run uses.
"""

from __future__ import annotations

import numpy as np
from pydantic import ValidationError

from simulator.cluster.routers.balance import (
    LeastLoadRouter,
    LengthBucketRouter,
    PowerOfTwoRouter,
    RandomRouter,
    RoundRobinRouter,
)
from simulator.cluster.routers.base import InstanceView, Router, RouterParams
from simulator.cluster.routers.cache_aware import CacheAwareRouter

__all__ = [
    "ROUTERS",
    "InstanceView",
    "LeastLoadRouter",
    "RoundRobinRouter",
    "Router",
    "RouterParams",
    "make_router",
    "parse_router_spec",
]

#: Every router by name; ``ServingConfig.router`` takes one of these keys (plus parameters).
ROUTERS: dict[str, type[Router]] = {
    cls.name: cls
    for cls in (
        RandomRouter,
        RoundRobinRouter,
        LeastLoadRouter,
        PowerOfTwoRouter,
        LengthBucketRouter,
        CacheAwareRouter,
    )
}


def parse_router_spec(spec: str) -> tuple[type[Router], RouterParams]:
    """The router class and validated parameters of ``spec`` (``name[:key=value,...]``).

    Raises ``ValueError`` with one line naming the router, the parameter and what was expected
    (``ServingConfig`` turns it into the file's ``InputError``).
    """
    name, _, rest = spec.partition(":")
    name = name.strip()
    cls = ROUTERS.get(name)
    if cls is None:
        raise ValueError(f"unknown router {name!r}; known: {', '.join(ROUTERS)}")
    raw: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"router {name!r}: expected key=value, got {item!r}")
        if key in raw:
            raise ValueError(f"router {name!r}: parameter {key!r} given twice")
        raw[key] = value.strip()
    known = cls.params_model.model_fields
    for key in raw:
        if key not in known:
            hint = f"known: {', '.join(known)}" if known else "it takes no parameters"
            raise ValueError(f"router {name!r}: unknown parameter {key!r}; {hint}")
    try:
        params = cls.params_model.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "parameters"
        raise ValueError(f"router {name!r}: {where}: {first['msg']}") from None
    return cls, params


def make_router(spec: str, n_instances: int, rng: np.random.Generator) -> Router:
    """The router of ``spec`` for a pool of ``n_instances``, drawing from ``rng``."""
    cls, params = parse_router_spec(spec)
    return cls(n_instances, rng, params)
