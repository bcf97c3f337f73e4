"""The latency-model family: spec string → model, through one plain dict.

A spec is ``NAME`` or ``NAME:ARG`` (``auto``, ``roofline``, ``table``, ``calibrated:fit.yaml``).
``make_latency_model`` splits it at the first ':' and calls ``LATENCY_MODELS[NAME]`` with the
deployment, the argument (``None`` without ':'), the framework overheads and a
``LatencyContext`` (which engine's kernels run, where user-imported profiles live). Adding a
model is adding one entry here; CLI choices and search-space names derive from the dict's keys.

``auto`` (the default of ``ServingConfig``) is the ``table`` model wherever measured kernel
profiles of the GPU and engine exist (shipped or imported), else the ``roofline``;
``latency_note`` says so in one line for the CLI to print.

A deployment with attention DP gets an ``AttentionDpModel`` over the factory's model and a
model of one rank on the same kernel source (``data_parallel.py``). A deployment with
pipeline parallelism gets a ``PipelineModel`` over the factory's model of one stage's TP group
running the whole model (``pipeline.py``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hardware.catalog import shipped_catalog
from hardware.schema import GpuSpec
from simulator.latency.base import LatencyModel
from simulator.latency.calibrated import calibrated_kernels
from simulator.latency.compose import ComposeParams
from simulator.latency.data_parallel import AttentionDpModel
from simulator.latency.deployment import Deployment
from simulator.latency.model import ComposedLatencyModel, RooflineModel
from simulator.latency.pipeline import PipelineModel
from simulator.latency.profile_files import DEFAULT_ENGINE, engine_of, resolve_profile_files
from simulator.latency.table import DEFAULT_PROFILE_GPU
from simulator.latency.table_source import (
    has_profile_table,
    profile_source,
    table_kernels,
    with_gemm_table,
)
from slo.inputfile import InputError

__all__ = [
    "LATENCY_MODELS",
    "LatencyContext",
    "LatencyModelFactory",
    "latency_note",
    "make_latency_model",
]


@dataclass(frozen=True, slots=True)
class LatencyContext:
    """What a latency model needs beyond the deployment.

    ``engine``: whose kernels run (one of ``profile_files.ENGINES``; ``engine_of`` maps a
    backend preset name to it). ``profile_roots``: directories of user-imported profiles
    (``<root>/<gpu>/``), searched before the shipped ones; passed in by the caller (the CLI
    gives the user's cache), never looked up here. ``table_cache``: where built kernel tables
    are kept between processes (``table_cache.py``; None: each process builds its own).
    """

    engine: str = DEFAULT_ENGINE
    profile_roots: tuple[Path, ...] = ()
    table_cache: Path | None = None

    @classmethod
    def of(
        cls,
        backend: str,
        profile_roots: Sequence[str | Path] = (),
        table_cache: str | Path | None = None,
    ) -> LatencyContext:
        """The context of a backend preset name (or preset file), user profile roots and the
        table cache."""
        cache = Path(table_cache) if table_cache is not None else None
        return cls(engine_of(backend), tuple(Path(r) for r in profile_roots), cache)


class LatencyModelFactory(Protocol):
    """Builds a latency model for ``deployment``; ``arg`` is the spec's part after ':'."""

    def __call__(
        self,
        deployment: Deployment,
        arg: str | None,
        params: ComposeParams,
        context: LatencyContext,
    ) -> LatencyModel:
        """A ready model; ``InputError`` (one line) for a bad ``arg``."""
        ...


def _no_arg(name: str, arg: str | None) -> None:
    if arg is not None:
        raise InputError(f"latency model '{name}' takes no argument (got '{name}:{arg}')")


def _roofline(
    deployment: Deployment,
    arg: str | None,
    params: ComposeParams,
    context: LatencyContext,  # noqa: ARG001  (the factory signature; the roofline needs none)
) -> LatencyModel:
    _no_arg("roofline", arg)
    return RooflineModel(deployment, params=params)


def _table(
    deployment: Deployment, arg: str | None, params: ComposeParams, context: LatencyContext
) -> LatencyModel:
    """``table`` (imported, else shipped profiles) or ``table:DIR`` (profiles of this GPU)."""
    timer = table_kernels(
        deployment.gpu,
        arg or None,
        engine=context.engine,
        roots=context.profile_roots,
        cache_dir=context.table_cache,
    )
    name = "table" if arg is None else f"table:{arg}"
    return ComposedLatencyModel(deployment, timer, name=name, params=params)


def _auto(
    deployment: Deployment, arg: str | None, params: ComposeParams, context: LatencyContext
) -> LatencyModel:
    """``table`` where the GPU and engine have measured profiles, else ``roofline``. Shapes
    past a grid's edge (the LM head is wider than any profiled GEMM) are routine for a default
    model, so they are not warned about; a missing configuration or dtype still is."""
    _no_arg("auto", arg)
    if not has_profile_table(deployment.gpu, context.engine, context.profile_roots):
        return RooflineModel(deployment, params=params)
    timer = table_kernels(
        deployment.gpu,
        engine=context.engine,
        roots=context.profile_roots,
        warn_range=False,
        cache_dir=context.table_cache,
    )
    return ComposedLatencyModel(deployment, timer, name="table", params=params)


def _calibrated(
    deployment: Deployment, arg: str | None, params: ComposeParams, context: LatencyContext
) -> LatencyModel:
    """``calibrated`` (shipped calibration) or ``calibrated:FILE`` (from ``kvplan calibrate``)."""
    timer = calibrated_kernels(deployment.gpu, arg or None, engine=context.engine)
    name = "calibrated" if arg is None else f"calibrated:{arg}"
    return ComposedLatencyModel(deployment, timer, name=name, params=params)


#: Latency models by name.
LATENCY_MODELS: dict[str, LatencyModelFactory] = {
    "auto": _auto,
    "roofline": _roofline,
    "table": _table,
    "calibrated": _calibrated,
}


def make_latency_model(
    spec: str,
    deployment: Deployment,
    *,
    params: ComposeParams | None = None,
    context: LatencyContext | None = None,
) -> LatencyModel:
    """The model named by ``spec`` (``NAME`` or ``NAME:ARG``) for ``deployment``.

    Raises ``InputError`` naming the known models for an unknown name.
    """
    name, sep, arg = spec.partition(":")
    key = name.strip().lower()
    factory = LATENCY_MODELS.get(key)
    if factory is None:
        known = sorted(LATENCY_MODELS)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise InputError(f"unknown latency model '{spec}'{hint}; known: {', '.join(known)}")
    argument, compose, ctx = arg.strip() if sep else None, params or ComposeParams(), context
    if deployment.pp > 1:
        # PP: the whole model on one stage's GPUs prices a micro-batch's traversal.
        group = factory(deployment.tp_group(), argument, compose, ctx or LatencyContext())
        return PipelineModel(deployment, group)
    model = factory(deployment, argument, compose, ctx or LatencyContext())
    if deployment.attention_dp == 1:
        return model
    # Attention DP: the same kernel source prices one rank and the shared MoE
    # (``data_parallel.py``); every factory above composes, so the rank is one more composition.
    if not isinstance(model, ComposedLatencyModel):
        raise InputError(f"latency model '{spec}' cannot price attention_dp > 1")
    rank = ComposedLatencyModel(deployment.rank(), model.timer, name=model.name, params=compose)
    return AttentionDpModel(model, rank)


def latency_note(
    spec: str, gpu: GpuSpec | str, backend: str, profile_roots: Sequence[str | Path] = ()
) -> str | None:
    """One line for the CLI when a GPU without measured kernel tables of its own is timed by a
    model that would use them: ``auto`` and ``table`` carry its ``kernel_profiles_from``
    stand-in's tables over; otherwise ``auto`` falls back to the roofline and ``table`` carries
    the H100 tables. None otherwise. A GPU given by name is looked up in the shipped catalog
    (a name it lacks is a GPU with no stand-in)."""
    name, _, arg = spec.partition(":")
    name = name.strip().lower()
    if name not in ("auto", "table") or arg.strip():
        return None
    engine = engine_of(backend)
    known = _shipped_gpu(gpu) if isinstance(gpu, str) else gpu
    key = known.name.lower() if known is not None else str(gpu).lower()
    located = with_gemm_table(
        profile_source(known, engine, profile_roots)
        if known is not None
        else resolve_profile_files(key, engine, profile_roots)
    )
    if located is not None and located.gpu == key:
        return None
    missing = f"no measured kernel table for {key} / {engine}"
    add = "`kvplan profiles import DIR` adds one"
    if located is not None:
        return (
            f"latency: {name} model times {key} with the {located.gpu} / {engine} kernel "
            f"tables, carried over by the roofline ratio ({missing}; {add})"
        )
    if name == "auto":
        return f"latency: roofline model for {key} ({missing}; {add})"
    return (
        f"latency: table model carries the {DEFAULT_PROFILE_GPU} / {engine} table to "
        f"{key} by the roofline ratio ({missing}; {add})"
    )


def _shipped_gpu(name: str) -> GpuSpec | None:
    """The shipped catalog's GPU called ``name`` (or an alias of it), None where it has none."""
    try:
        return shipped_catalog().gpu(name)
    except InputError:
        return None
