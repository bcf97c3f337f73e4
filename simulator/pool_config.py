"""``PoolConfig``: one pool of a PD-disaggregated deployment, nested in ``ServingConfig``.

A disaggregated deployment has a ``prefill`` and a ``decode`` pool, each with its own instance
count, GPU type, TP and engine limits; a ``None`` field means the deployment's top-level value
(``gpu``, ``tp``, ``pp``, ``attention_dp``, ``max_running_requests``, ``max_batched_tokens``,
``router``)::

    pd_mode: disaggregated
    prefill: {instances: 2, tp: 4, max_batched_tokens: 16384}
    decode: {instances: 4, gpu: h200_sxm, router: least_loaded}

A pool may carry its own ``autoscale`` policy (``simulator/cluster/autoscale.py``; its
``instances`` is then the most it may run): the prefill and decode pools scale separately, each
on its own signal — the prefill pool on TTFT (its queue and prefills make it), the decode pool
on TPOT (the hand-off wait and the decode steps make it).

Config files written before the nesting used flat twin keys (``prefill_tp``, ``decode_router``,
...). ``fold_pool_keys`` moves them into the nested form, so those files keep working;
``ServingConfig`` applies it to every input and the CLI prints a deprecation note naming the
keys it folded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from simulator.cluster.autoscale import AutoscaleConfig, fold_autoscale_keys
from simulator.cluster.router import parse_router_spec

__all__ = [
    "FLAT_POOL_AUTOSCALE_KEYS",
    "FLAT_POOL_KEYS",
    "POOLS",
    "POOL_FIELDS",
    "PoolConfig",
    "PoolName",
    "fold_pool_keys",
]

PoolName = Literal["prefill", "decode"]

#: The two pools of a disaggregated deployment, in the order requests meet them.
POOLS: tuple[PoolName, PoolName] = ("prefill", "decode")


class PoolConfig(BaseModel):
    """Instances, hardware and engine limits of one PD pool (``None`` = the deployment's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instances: int | None = Field(default=None, ge=0, description="Instances of the pool.")
    gpu: str | None = Field(default=None, description="Catalog GPU of the pool (None = gpu).")
    tp: int | None = Field(default=None, ge=1, description="TP of an instance (None = tp).")
    pp: int | None = Field(
        default=None, ge=1, description="Pipeline stages of an instance (None = pp)."
    )
    attention_dp: int | None = Field(
        default=None,
        ge=1,
        description="Attention data-parallel ranks of an instance (None = attention_dp).",
    )
    ep: int | None = Field(
        default=None,
        ge=1,
        description="Expert parallelism of an instance's MoE layers (None = ep): large MoE "
        "deployments split experts differently per role (e.g. DeepSeek-R1 on InferenceX's "
        "B200 recipes: prefill EP4, decode EP8).",
    )
    max_running_requests: int | None = Field(
        default=None,
        ge=1,
        description="Most requests an instance admits at once (None = max_running_requests).",
    )
    max_batched_tokens: int | None = Field(
        default=None, ge=1, description="Token budget of a step (None = max_batched_tokens)."
    )
    router: str | None = Field(
        default=None,
        description="Decode pool only: router spec that picks the decode instance when a "
        "prefill finishes (None = router).",
    )
    autoscale: AutoscaleConfig | None = Field(
        default=None,
        description="Autoscaling of this pool; 'instances' is then the most it may run "
        "(simulator/cluster/autoscale.py).",
    )

    @field_validator("router")
    @classmethod
    def _known_router(cls, value: str | None) -> str | None:
        if value is not None:
            parse_router_spec(value)  # one-line ValueError naming the router and parameter
        return value

    def given(self) -> list[str]:
        """Names of the fields that are set, in declaration order."""
        return [name for name in type(self).model_fields if getattr(self, name) is not None]


#: The fields of a pool given flat (``prefill_<field>``); the nested ``autoscale`` policy is
#: flattened a level further (``FLAT_POOL_AUTOSCALE_KEYS``).
POOL_FIELDS: tuple[str, ...] = tuple(f for f in PoolConfig.model_fields if f != "autoscale")

#: ``prefill_autoscale_target_concurrency``, ...: a pool's autoscaling fields by flat name (a
#: search space's dimensions are flat, so ``optimize`` can search each pool's policy).
FLAT_POOL_AUTOSCALE_KEYS: tuple[str, ...] = tuple(
    f"{pool}_autoscale_{field}"
    for pool in ("prefill", "decode")
    for field in AutoscaleConfig.model_fields
)

#: The flat per-pool keys a config file or a search space may use (``prefill_tp``, ...); the
#: prefill pool has no router of its own.
FLAT_POOL_KEYS: tuple[str, ...] = tuple(
    f"{pool}_{field}"
    for pool in POOLS
    for field in POOL_FIELDS
    if (pool, field) != ("prefill", "router")
)


def fold_pool_keys(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with its flat per-pool keys moved into the nested pools, and those keys.

    ``prefill_tp: 4`` becomes ``prefill: {tp: 4}``, merged into a ``prefill`` mapping the data
    may already have; the returned list names the flat keys found, in the data's order (for a
    deprecation note). A field given both ways with different values raises ``ValueError``
    naming both keys. Anything that is not a flat pool key is passed through untouched (a
    nested value that is not a mapping is left for the model's own validation to reject).
    """
    out = dict(data)
    folded: list[str] = []
    for key in list(data):
        pool, _, field = key.partition("_")
        if pool not in POOLS or field not in POOL_FIELDS:
            continue
        nested = out.get(pool)
        if nested is None:
            nested = {}
        elif isinstance(nested, PoolConfig):
            nested = nested.model_dump(exclude_none=True)
        elif not isinstance(nested, Mapping):
            continue
        nested = dict(nested)
        value = out.pop(key)
        if value is None:  # "the default", which is what an absent nested field means too
            continue
        if field in nested and nested[field] is not None and nested[field] != value:
            raise ValueError(
                f"{key} ({value!r}) and {pool}.{field} ({nested[field]!r}) are both given; "
                f"keep {pool}.{field} only"
            )
        nested[field] = value
        out[pool] = nested
        folded.append(key)
    return _fold_pool_autoscale_keys(out), folded


def _fold_pool_autoscale_keys(data: dict[str, Any]) -> dict[str, Any]:
    """``decode_autoscale_<field>`` moved into ``decode.autoscale`` (likewise for prefill);
    a field given both ways differently raises ``ValueError`` naming both."""
    for pool in POOLS:
        prefix = f"{pool}_"
        flat = {
            k: v for k, v in data.items() if k in FLAT_POOL_AUTOSCALE_KEYS and k.startswith(prefix)
        }
        if not flat:
            continue
        nested = data.get(pool)
        if isinstance(nested, PoolConfig):
            nested = nested.model_dump(exclude_none=True)
        if nested is not None and not isinstance(nested, Mapping):
            continue  # left for the model's own validation to reject
        inner = {k.removeprefix(prefix): v for k, v in flat.items()}
        try:
            merged = fold_autoscale_keys({**dict(nested or {}), **inner})
        except ValueError as err:
            raise ValueError(f"{pool}: {err}") from None
        data = {k: v for k, v in data.items() if k not in flat}
        data[pool] = merged
    return data
