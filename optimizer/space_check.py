"""Every value a space file (or a baseline, or a simulate config) names, checked before any trial.

A space's dimensions are sampled into configurations trial by trial; a value no configuration
can take — an unknown eviction policy, ``tp: 0``, a GPU the catalog lacks — used to surface
only as an infeasible trial ("widen the space") or as a traceback inside trial 0. Here each
value is checked once, at load, against what builds the configuration:

- catalog names (``gpu``, ``prefill_gpu``, ``decode_gpu``, ``l3``/``l3_tier``) with the catalog's
  own lookup (``Catalog.gpu``, ``Catalog.storage_tier``);
- ``backend`` with ``load_preset`` (a shipped preset or a preset file);
- ``latency_model`` with the latency-model registry's names and the analytic parser;
- ``prefill_share`` in (0, 1);
- every other setting with the ``ServingConfig`` field it sets — its type, bounds, ``Literal``
  choices and field validators (the scheduler, router and eviction registries) — one value at a
  time, so a combination that only some points violate (a chunk above the token budget) stays a
  property of those points (the objective records them infeasible), not a user error.

A numeric range is checked at both ends (the field bounds are intervals), and a range over an
integer setting must be an integer range. What this module is not: it does not sample, and it
does not judge whether a configuration fits in memory.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any, Union, get_args, get_origin

import pydantic

from hardware.schema import Catalog
from optimizer.configs import ALIASES, known_names
from optimizer.space import Dimension, Scalar, SearchSpace
from simulator.cluster.autoscale import FLAT_AUTOSCALE_KEYS, AutoscaleConfig
from simulator.config import ServingConfig
from simulator.engine.analytic import ANALYTIC_MODELS, parse_analytic
from simulator.latency import LATENCY_MODELS
from simulator.pool_config import FLAT_POOL_AUTOSCALE_KEYS, FLAT_POOL_KEYS, POOLS, PoolConfig
from simulator.presets import load_preset
from slo.inputfile import InputError

__all__ = ["check_latency_spec", "check_setting", "check_settings", "check_space_values"]

#: Settings named in the catalog, and the lookup that knows them.
_CATALOG_NAMES = {
    "gpu": "gpu",
    "prefill_gpu": "gpu",
    "decode_gpu": "gpu",
    "l3": "storage_tier",
    "l3_tier": "storage_tier",
}
#: Values of ``l3``/``l3_tier`` that mean "no L3 tier".
_NO_TIER = (None, "none", "off", "")


def check_latency_spec(spec: str, source: str) -> None:
    """``InputError`` unless ``spec`` names a known latency model: a registry name (``NAME`` or
    ``NAME:ARG``) or an analytic one (``constant:S``, ``linear:...``, checked as the builder
    parses them) with finite figures."""
    try:
        if parse_analytic(str(spec)) is not None:  # finite figures: the builder's own rule
            return
    except InputError as err:
        raise InputError(f"{source}: {err}") from None
    name = str(spec).partition(":")[0].strip().lower()
    if name not in LATENCY_MODELS:
        known = ", ".join([*sorted(LATENCY_MODELS), *(f"{a}:..." for a in ANALYTIC_MODELS)])
        raise InputError(f"{source}: unknown latency model '{spec}'; known: {known}")


def check_setting(name: str, value: Any, catalog: Catalog, source: str) -> None:
    """``InputError`` naming ``source`` and ``name`` if no configuration can take ``value``.

    ``name`` is a ``ServingConfig`` field or a space alias (``optimizer.configs.ALIASES``).
    """
    where = f"{source}: {name}"
    lookup = _CATALOG_NAMES.get(name)
    try:
        if lookup is not None:
            if lookup == "storage_tier" and value in _NO_TIER:
                return
            getattr(catalog, lookup)(str(value))
            return
        if name == "backend":
            load_preset(str(value))
            return
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    if name == "latency_model":
        check_latency_spec(str(value), where)
        return
    if name == "prefill_share":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise InputError(f"{where}: expected a share between 0 and 1, got {value!r}")
        return
    _check_field(name, value, where)


def _check_field(name: str, value: Any, where: str) -> None:
    """Validate ``value`` as the ``ServingConfig`` field(s) ``name`` sets (errors on them only)."""
    targets = ALIASES.get(name, (name,))
    data: dict[str, Any] = {"model": "m", "gpu": "g", **dict.fromkeys(targets, value)}
    try:
        ServingConfig.model_validate(data)
    except pydantic.ValidationError as err:
        for problem in err.errors():
            loc = problem["loc"]
            if not loc:
                continue
            # A flat key is validated in its nested place: ("prefill", "tp") is prefill_tp,
            # ("decode", "autoscale", "min_instances") decode_autoscale_min_instances.
            depth = 1
            while depth < len(loc) and loc[depth - 1] in (*POOLS, "autoscale"):
                depth += 1
            name_at = "_".join(str(part) for part in loc[:depth])
            if name_at in targets:
                message = problem["msg"].removeprefix("Value error, ")
                raise InputError(f"{where}: {message} (got {value!r})") from None


def _is_int_field(name: str) -> bool:
    targets = ALIASES.get(name, (name,))
    for target in targets:
        if target in FLAT_POOL_KEYS:
            field = PoolConfig.model_fields.get(target.partition("_")[2])
        elif target in FLAT_AUTOSCALE_KEYS:
            field = AutoscaleConfig.model_fields.get(target.removeprefix("autoscale_"))
        elif target in FLAT_POOL_AUTOSCALE_KEYS:
            field = AutoscaleConfig.model_fields.get(target.partition("_autoscale_")[2])
        else:
            field = ServingConfig.model_fields.get(target)
        if field is None:
            continue
        annotation = field.annotation
        if get_origin(annotation) in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
        else:
            args = [annotation]
        if args == [int]:
            return True
    return False


def _dimension_values(name: str, dim: Dimension, where: str) -> Iterable[Scalar]:
    if dim.choices is not None:
        return dim.choices
    if _is_int_field(name) and not dim.is_integer:
        raise InputError(
            f"{where}: {name} is an integer setting; give an integer range (integer low, high "
            "and step)"
        )
    assert dim.low is not None
    assert dim.high is not None
    return (dim.low, dim.high)


def check_space_values(space: SearchSpace, catalog: Catalog, source: str) -> None:
    """Check the model and every value of every dimension and fixed setting (module docstring)."""
    try:
        catalog.model(space.model)
    except InputError as err:
        raise InputError(f"{source}: model: {err}") from None
    for name, dim in space.dimensions.items():
        for value in _dimension_values(name, dim, source):
            check_setting(name, value, catalog, f"{source}: dimensions")
    check_settings(space.fixed, catalog, f"{source}: fixed")


def check_settings(settings: Mapping[str, Any], catalog: Catalog, source: str) -> None:
    """Check a mapping of settings (names as in a space file; unknown names refused)."""
    known = set(known_names())
    for name, value in settings.items():
        if name not in known:
            raise InputError(
                f"{source}: {name}: not a configuration setting; known: {', '.join(sorted(known))}"
            )
        check_setting(name, value, catalog, source)
