"""Sampled parameters → a frozen ``ServingConfig``, and the names a space may use.

A space dimension (or ``fixed`` key) is either a ``ServingConfig`` field under its own name, or
one of the friendlier aliases below, which is how the issue-level space file speaks:

- ``precision`` → ``weight_precision`` (``kv_precision`` stays a field of its own);
- ``hbm_utilisation`` → ``hbm_utilization``;
- ``eviction`` → the policy of every tier (``l1_policy``, ``l2_policy``, ``l3_policy``) unless a
  tier's own policy is also given;
- ``l3`` → ``l3_tier`` with the catalog entry's default capacity (``none`` = no L3);
  ``l3_capacity_gib`` still overrides it;
- ``prefill_share`` (with ``pd_mode: disaggregated``) splits ``instances`` into a prefill pool
  of ``max(1, round(instances × share))`` and a decode pool of the rest (at least one), both on
  the trial's ``gpu`` and ``tp`` unless ``prefill_gpu``/``decode_gpu``/... are given.

What this module is not: it does not judge feasibility (memory fit, budget) — the objective
does that — and it never runs the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from optimizer.space import SearchSpace
from simulator.cluster.autoscale import FLAT_AUTOSCALE_KEYS
from simulator.config import ServingConfig
from simulator.pool_config import FLAT_POOL_AUTOSCALE_KEYS, FLAT_POOL_KEYS, POOLS
from slo.inputfile import InputError, format_validation_error

__all__ = ["ALIASES", "known_names", "pd_pools", "to_config", "validate_space_names"]

#: Space names that are not ``ServingConfig`` fields, and the field(s) they set.
ALIASES: dict[str, tuple[str, ...]] = {
    "precision": ("weight_precision",),
    "hbm_utilisation": ("hbm_utilization",),
    "eviction": ("l1_policy", "l2_policy", "l3_policy"),
    "l3": ("l3_tier",),
    "prefill_share": (),
}


def known_names() -> list[str]:
    """Every name a space file may use as a dimension or fixed setting."""
    # The PD pools and the autoscaling policy are searched through their flat keys.
    nested = {"model", "autoscale", *POOLS}
    flat = {*FLAT_POOL_KEYS, *FLAT_AUTOSCALE_KEYS, *FLAT_POOL_AUTOSCALE_KEYS}
    return sorted(set(ServingConfig.model_fields) - nested | flat | set(ALIASES))


def _fields(model: str, params: Mapping[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {"model": model}
    for name, value in params.items():
        if name == "l3":
            fields["l3_tier"] = None if value in (None, "none") else value
        elif name == "prefill_share":
            continue  # applied by _split_pools
        elif name in ALIASES:
            for target in ALIASES[name]:
                fields.setdefault(target, value)
        else:
            fields[name] = value
    # A tier's own policy wins over the ``eviction`` alias whatever the order of the keys.
    for tier in ("l1_policy", "l2_policy", "l3_policy"):
        if tier in params:
            fields[tier] = params[tier]
    if fields.get("l2_dram_gib") in (None, 0, 0.0):
        fields["l2_dram_gib"] = 0.0
        fields["l3_tier"] = None  # an L3 needs an L2 to land in
    if fields.get("scheduler") != "chunked":
        fields.pop("chunk_tokens", None)
    if fields.get("pd_mode") == "disaggregated" and "prefill_instances" not in fields:
        _split_pools(fields, float(params.get("prefill_share", 0.5)))
    return fields


def _split(total: int, share: float) -> tuple[int, int]:
    """(prefill, decode) instances of ``total`` split by ``share`` (module docstring)."""
    if total < 2:
        raise ValueError("configuration: a disaggregated deployment needs instances >= 2")
    prefill = min(total - 1, max(1, round(total * share)))
    return prefill, total - prefill


def _split_pools(fields: dict[str, Any], share: float) -> None:
    """Divide ``instances`` into prefill and decode pools by ``share`` (module docstring)."""
    fields["prefill_instances"], fields["decode_instances"] = _split(
        int(fields.get("instances", 1)), share
    )
    fields.pop("instances", None)


#: Per-pool settings a disaggregated point may give flat (``prefill_tp``, ``decode_gpu``, …)
#: that change how one of the pool's instances is launched.
_POOL_LAUNCH_KEYS = ("gpu", "tp", "pp", "attention_dp", "max_running_requests",
                     "max_batched_tokens")  # fmt: skip


def pd_pools(params: Mapping[str, Any]) -> dict[str, dict[str, Any]] | None:
    """Each pool of a disaggregated point as the parameters of its own instance group, or
    None for an aggregated one.

    ``{"prefill": {..., "instances": 2, "tp": 4}, "decode": {..., "instances": 6}}``: the
    point's parameters with ``instances`` the pool's count (``prefill_instances`` /
    ``decode_instances`` when given, else the ``prefill_share`` split ``to_config`` simulates)
    and the pool's own ``gpu``/``tp``/... where given. What the launch lines and deployment
    manifests of a PD pick are built from, so they describe the deployment simulated.
    """
    if params.get("pd_mode") != "disaggregated":
        return None
    prefill = params.get("prefill_instances")
    decode = params.get("decode_instances")
    if prefill is None or decode is None:
        prefill, decode = _split(
            int(params.get("instances", 2)), float(params.get("prefill_share", 0.5))
        )
    shared = {
        k: v
        for k, v in params.items()
        if k not in ("pd_mode", "prefill_share") and not k.startswith(("prefill_", "decode_"))
    }
    pools: dict[str, dict[str, Any]] = {}
    for pool, count in (("prefill", prefill), ("decode", decode)):
        own = {k: params[f"{pool}_{k}"] for k in _POOL_LAUNCH_KEYS if f"{pool}_{k}" in params}
        pools[pool] = {**shared, **own, "instances": int(count)}
    return pools


def to_config(model: str, params: Mapping[str, Any]) -> ServingConfig:
    """The configuration for one trial; ``ValueError`` with a one-line reason if invalid.

    Invalid combinations (a chunk larger than the token budget, say) are a property of the
    sampled point, not a user error: the objective records them as infeasible.
    """
    try:
        return ServingConfig.model_validate(_fields(model, params))
    except pydantic.ValidationError as err:
        raise ValueError(format_validation_error(err, "configuration")) from None


def validate_space_names(space: SearchSpace, source: str) -> None:
    """``InputError`` if the space names a setting that is neither a field nor an alias."""
    known = set(known_names())
    for name in [*space.dimensions, *space.fixed]:
        if name not in known:
            raise InputError(
                f"{source}: {name}: not a configuration setting; known: {', '.join(sorted(known))}"
            )
