"""Where a ``table`` latency model's kernel source comes from: the profile files of the GPU and
engine simulated (a user's profile roots first, then the shipped ones; the H100 ones carried by
the roofline ratio for a GPU with none), built into one ``ProfileTable`` per process per set of
files and shared (``table.py`` interpolates them)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from hardware.catalog import shipped_catalog
from hardware.schema import GpuSpec
from simulator.latency.mla_table import load_mla_table
from simulator.latency.moe_table import load_moe_table
from simulator.latency.profile_files import (
    DEFAULT_ENGINE,
    MLA_KINDS,
    MOE_KIND,
    MOE_LENDERS,
    ProfileFiles,
    directory_files,
    lent_moe_kind,
    resolve_profile_files,
)
from simulator.latency.profiles import load_profile_files
from simulator.latency.roofline import RooflineKernels
from simulator.latency.table import (
    DEFAULT_PROFILE_GPU,
    KernelMemo,
    ProfileKernels,
    ProfileTable,
)
from simulator.latency.table_cache import cached_build, table_key
from slo.inputfile import InputError

__all__ = ["has_profile_table", "profile_source", "table_kernels", "with_gemm_table"]


def profile_source(
    gpu: GpuSpec, engine: str, roots: Sequence[str | Path] = ()
) -> ProfileFiles | None:
    """The measured profiles that time ``gpu`` under ``engine`` (user roots first, then
    shipped; ``profile_files.resolve_profile_files``): ``gpu``'s own where it has any, else
    those of its ``kernel_profiles_from`` stand-in (``ProfileFiles.gpu`` says which GPU was
    measured); None where neither has any."""
    for name in (gpu.name, gpu.kernel_profiles_from):
        located = resolve_profile_files(name, engine, roots) if name is not None else None
        if located is not None:
            return located
    return None


def with_gemm_table(located: ProfileFiles | None) -> ProfileFiles | None:
    """``located`` where it holds a GEMM profile (what makes a kernel table), else None."""
    return located if located is not None and "gemm" in located.files else None


def has_profile_table(gpu: GpuSpec, engine: str, roots: Sequence[str | Path] = ()) -> bool:
    """Whether measured GEMM profiles time ``gpu`` under ``engine`` (``profile_source``): the
    condition for the ``auto`` latency model to use the table."""
    return with_gemm_table(profile_source(gpu, engine, roots)) is not None


def table_kernels(
    gpu: GpuSpec,
    profiles_dir: str | Path | None = None,
    *,
    engine: str = DEFAULT_ENGINE,
    roots: Sequence[str | Path] = (),
    monotone: bool = True,
    warn_range: bool = True,
    cache_dir: str | Path | None = None,
) -> ProfileKernels:
    """The ``table[:DIR]`` kernel source for ``gpu`` under ``engine``, with ``RooflineKernels``
    as fallback.

    ``profiles_dir`` holds profiles measured on ``gpu`` itself (``engine``'s files, else
    engine-neutral ones). Without it: per kernel class, the profiles of ``gpu`` and ``engine``
    in the first of the user ``roots`` that has them, else the shipped ones
    (``profile_files.resolve_profile_files``); a GPU with none of its own gets those of its
    ``kernel_profiles_from`` stand-in (``profile_source``), else the H100 ones of the same
    engine, carried over by the roofline ratio of the two specs (warned on first use).
    ``warn_range=False`` keeps quiet about shapes outside or in gaps of a grid. ``cache_dir``:
    where built tables are kept between processes (``table_cache``; None: built here). The
    grids are built once per process per set of files and GPU and shared, and so are the
    kernel times interpolated from them (``KernelMemo``: a process building a model per
    simulation interpolates each shape once).
    """
    profiled = gpu
    if profiles_dir is not None:
        files = directory_files(profiles_dir, engine, moe=True)
        if not files:
            raise InputError(f"{profiles_dir}: no kernel profile CSV for engine '{engine}'")
        located: ProfileFiles | None = ProfileFiles(gpu.name, engine, files, str(profiles_dir))
    else:
        located = profile_source(gpu, engine, roots)
        if located is None:
            located = resolve_profile_files(DEFAULT_PROFILE_GPU, engine, roots)
        if located is not None and located.gpu != gpu.name.lower():
            # The measured GPU's shipped spec: it describes the hardware that was timed.
            profiled = shipped_catalog().gpu(located.gpu)
    if located is None:
        raise InputError(
            f"no kernel profiles for engine '{engine}' (not even {DEFAULT_PROFILE_GPU})"
        )
    table = _shared_table(
        engine,
        tuple(sorted((kind, str(path)) for kind, path in located.files.items())),
        located.source,
        profiled.model_dump_json(),
        monotone,
        str(cache_dir) if cache_dir is not None else None,
    )
    fallback = RooflineKernels(gpu)
    same = profiled is gpu
    memo = _shared_memo(
        table, gpu.model_dump_json(), None if same else profiled.model_dump_json(), warn_range
    )
    return ProfileKernels(
        table,
        fallback,
        gpu=gpu.name,
        profile_fallback=fallback if same else RooflineKernels(profiled),
        warn_range=warn_range,
        same_silicon=(gpu.kernel_profiles_from or "").lower() == profiled.name.lower(),
        memo=memo,
        hbm_bytes_per_s=gpu.hbm_tb_per_s * 1e12,
    )


@cache
def _shared_memo(
    table: ProfileTable, gpu_json: str, profiled_json: str | None, warn_range: bool
) -> KernelMemo:
    """One ``KernelMemo`` per process per table, modelled GPU, profiled GPU (None: the same)
    and warning mode: what determines every answer of a ``ProfileKernels`` and its warnings."""
    del table, gpu_json, profiled_json, warn_range  # the key
    return KernelMemo()


@cache
def _shared_table(  # noqa: PLR0917  (positional: functools.cache keys on the arguments)
    engine: str,
    files: tuple[tuple[str, str], ...],
    source: str,
    profiled_gpu_json: str,
    monotone: bool,
    cache_dir: str | None,
) -> ProfileTable:
    """One ``ProfileTable`` per process per set of files, GPU and mode (read-only once built),
    loaded from ``cache_dir`` when a process built it before (``table_cache``)."""
    profiled = GpuSpec.model_validate_json(profiled_gpu_json)
    located = ProfileFiles(profiled.name.lower(), engine, {k: Path(p) for k, p in files}, source)

    def build() -> ProfileTable:
        lent = tuple(
            (located.files[lent_moe_kind(lender.engine)], lender)
            for lender in MOE_LENDERS.get(engine, ())
            if lent_moe_kind(lender.engine) in located.files
        )
        moe = load_moe_table(located.files.get(MOE_KIND), monotone=monotone, lent=lent)
        mla_files = {kind: located.files[kind] for kind in MLA_KINDS if kind in located.files}
        return ProfileTable(
            load_profile_files(located),
            RooflineKernels(profiled),
            monotone=monotone,
            moe=moe,
            mla=load_mla_table(mla_files, monotone=monotone),
        )

    if cache_dir is None:
        return build()
    ordered = [located.files[kind] for kind in sorted(located.files)]
    inputs = {
        "engine": engine,
        "source": source,
        "kinds": sorted(located.files),
        "gpu": profiled_gpu_json,
        "monotone": monotone,
    }
    try:
        key = table_key(ordered, inputs)
    except OSError:  # a profile file that cannot be read: the build says so, in its words
        return build()
    return cached_build(Path(cache_dir), key, build, ProfileTable)
