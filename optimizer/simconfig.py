"""A ``ServingConfig`` from a config file and command-line flags.

``kvplan simulate`` takes a config file (YAML/TOML/JSON; keys are ``ServingConfig`` field
names) and/or flags for the common fields; a flag that is given overrides the file's value.
The flags speak the friendlier names of the search space: ``precision`` is
``weight_precision``, ``latency`` is ``latency_model``, ``l2_gib`` is ``l2_dram_gib``, ``l3``
is ``l3_tier`` (``none`` = no L3) and ``eviction`` sets the policy of every tier.

What this module is not: it does not look names up in the catalog (``simulate`` does, so a
user catalog can add GPUs and models) and it never runs the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hardware.checkpoints import kv_precision
from hardware.schema import Catalog
from simulator.config import ServingConfig
from simulator.pool_config import fold_pool_keys
from slo.inputfile import InputError, load_mapping, validate

__all__ = ["FLAG_FIELDS", "merge_config"]

#: Command-line flag (its Python name) → the ``ServingConfig`` fields it sets.
FLAG_FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("model",),
    "gpu": ("gpu",),
    "tp": ("tp",),
    "instances": ("instances",),
    "precision": ("weight_precision",),
    "kv_precision": ("kv_precision",),
    "backend": ("backend",),
    "scheduler": ("scheduler",),
    "latency": ("latency_model",),
    "l2_gib": ("l2_dram_gib",),
    "l3": ("l3_tier",),
    "eviction": ("l1_policy", "l2_policy", "l3_policy"),
}

#: ``--l3`` values that mean "no L3 tier".
_NO_TIER = ("none", "off", "")


def merge_config(
    path: str | Path | None,
    flags: Mapping[str, Any],
    catalog: Catalog | None = None,
    *,
    on_note: Callable[[str], None] | None = None,
) -> ServingConfig:
    """The validated config: the file's keys (if ``path``), then every flag that is not None.

    With ``catalog``, a weight or KV precision that neither the file nor a flag sets follows
    the model's checkpoint (``Catalog.checkpoint``): ``nvidia/Llama-3.1-8B-Instruct-FP8`` runs
    FP8 weights with the FP8 KV cache its recipe carries, a plain name bf16 for both.

    A file that uses the flat PD keys written before ``PoolConfig`` (``prefill_tp``, ...) is
    read as the nested form; ``on_note`` (if given) receives one line naming those keys.

    ``flags`` maps names of ``FLAG_FIELDS`` to values (None = not given). Raises ``InputError``
    (one line naming the file or "command line" and the field) for unknown keys, bad values, or
    a missing model or GPU.
    """
    unknown = sorted(set(flags) - set(FLAG_FIELDS))
    if unknown:
        raise ValueError(f"merge_config: unknown flag names {unknown}")  # a programming error
    data: dict[str, Any] = load_mapping(path) if path is not None else {}
    try:
        data, flat = fold_pool_keys(data)
    except ValueError as err:
        raise InputError(f"{path}: {err}") from None
    if flat and on_note is not None:
        on_note(
            f"{path}: {', '.join(flat)}: flat PD keys are deprecated (still read); write "
            f"them nested, e.g. {flat[0].split('_', 1)[0]}: {{{flat[0].split('_', 1)[1]}: …}}"
        )
    given = {name: value for name, value in flags.items() if value is not None}
    for name, given_value in given.items():
        value = given_value
        if name == "l3" and str(value).strip().lower() in _NO_TIER:
            value = None
            data.pop("l3_capacity_gib", None)  # a capacity without a tier is meaningless
        for field in FLAG_FIELDS[name]:
            data[field] = value
    if catalog is not None and "model" in data:
        _checkpoint_precisions(data, catalog, str(path) if path is not None else "command line")
    if path is None:
        source = "command line"
    elif given:
        source = f"{path} (with command-line flags)"
    else:
        source = str(path)
    for field, flag in (("model", "--model"), ("gpu", "--gpu")):
        if field not in data:
            where = f"give {flag}" if path is None else f"give {flag} or set '{field}' in {path}"
            raise InputError(f"{source}: {field}: required; {where}")
    return validate(ServingConfig, data, source)


def _checkpoint_precisions(data: dict[str, Any], catalog: Catalog, source: str) -> None:
    """Fill the precisions ``data`` leaves unset from its model's checkpoint recipe."""
    try:
        recipe = catalog.checkpoint(str(data["model"])).recipe
    except InputError as err:
        raise InputError(f"{source}: model: {err}") from None
    data.setdefault("weight_precision", recipe.weights)
    data.setdefault("kv_precision", kv_precision(recipe))
