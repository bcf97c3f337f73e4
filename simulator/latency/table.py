"""``ProfileKernels``: kernel times interpolated from measured profiles, roofline outside them.

Per primitive, measured times sit on grids (``profiles.ProfileSet``): GEMM over ``(m, n, k)`` per
weight dtype; prefill attention over ``(batch, new tokens)`` and decode attention over
``(batch, KV length)`` per head configuration ``(heads, KV heads, head dim, KV dtype)``;
all-reduce over message bytes per GPU count. A query is answered by multilinear interpolation of
log(time) in log(size) between the grid points around it: a power law between measured points
(kernel times are close to power laws in each size).

Where the measurements cannot answer, the fallback ``KernelTimer`` (the roofline) carries them
to the query: ``time = fallback(query) × table(anchor) / fallback(anchor)``, the roofline scaled
to agree with the table at an *anchor*:

- outside the measured range: the anchor is the query clamped onto the grid's edge;
- a head configuration or dtype the table lacks: the same query on the nearest measured
  configuration (log distance over heads, KV heads, head dim; same KV dtype first) or on bf16;
- another GPU than the profiled one: the same query, the anchor timed on the profiled GPU;
- gaps inside the grid (the profiles skip large batch × long sequence): filled once, when the
  table is built, from the nearest measured point the same way.

Each is said once per ``ProfileKernels`` instance and reason (``TableFallbackWarning``). A cached
prefix in prefill attention has no measured rows either (this is documented, not warned): the
table's time at zero prefix is scaled by ``fallback(new, cached) / fallback(new, 0)``.

**Monotone grids.** Measured times are not monotone in size (an m = 4097 GEMM is slower than
m = 4353: tile and alignment effects, and noise). The engine's latency contract is (a step never
gets cheaper when it grows), so by default each grid is made non-decreasing along the axes a
batch grows in (GEMM m; attention batch and length; all-reduce bytes; not GEMM n and k, which
the model fixes) by isotonic regression of log time along each such axis (pool adjacent
violators: a run that gets cheaper is replaced by its mean). Measured points outside such runs
are kept exactly, and a violation is averaged out rather than biased one way (a running maximum
would carry one slow outlier up to every larger size).
``monotone=False`` keeps the measurements verbatim (exact at every measured point; what the
accuracy bench uses).

Not a profiler and not a fitted model (``calibrated.py``); sizes are per GPU, times in seconds.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from hardware.catalog import shipped_catalog
from hardware.schema import GpuSpec
from simulator.latency.kernels import KernelTimer
from simulator.latency.profiles import ProfileSet, load_profiles, shipped_profiles_dir
from simulator.latency.roofline import RooflineKernels
from slo.inputfile import InputError

__all__ = [
    "DEFAULT_PROFILE_GPU",
    "ProfileKernels",
    "ProfileTable",
    "TableFallbackWarning",
    "table_kernels",
]

#: The GPU whose profiles ship (and stand in, scaled by the roofline, for other GPUs).
DEFAULT_PROFILE_GPU = "h100_sxm"

_HeadConfig = tuple[float, float, float, str]  # heads, KV heads, head dim, KV dtype (per GPU)
_Point = tuple[float, ...]
_CACHE_SIZE = 1 << 16
_HEADS = ("num_heads", "num_kv_heads", "head_dim", "kv_dtype")


class TableFallbackWarning(UserWarning):
    """A profile table answered from the roofline (scaled at an anchor) rather than from
    measurements alone; emitted once per ``ProfileKernels`` instance and reason."""


class _Grid:
    """Seconds on a complete rectangular grid, interpolated in log-log.

    ``roofline`` times a grid point on the profiled GPU; it fills unmeasured cells from their
    nearest measured cell (log distance) when the grid is built. ``monotone`` lists the axes
    made non-decreasing (module doc).
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        axes: Sequence[str],
        roofline: Callable[[_Point], float],
        *,
        monotone: Sequence[int],
    ) -> None:
        values = [np.unique(frame[a].to_numpy(dtype=float)) for a in axes]
        self.axes: list[list[float]] = [v.tolist() for v in values]
        self.log_axes: list[list[float]] = [np.log(v).tolist() for v in values]
        index = tuple(
            np.searchsorted(v, frame[a].to_numpy(dtype=float))
            for v, a in zip(values, axes, strict=True)
        )
        seconds = np.full(tuple(len(v) for v in values), np.nan)
        seconds[index] = frame["seconds"].to_numpy(dtype=float)
        self.measured = np.isfinite(seconds)
        _fill_gaps(seconds, self.measured, self.axes, roofline)
        log_seconds = np.log(seconds)
        if len(monotone):
            smoothed = log_seconds
            for axis in monotone:
                smoothed = np.apply_along_axis(_isotonic, axis, smoothed)
            changed = smoothed != log_seconds  # keep untouched points bit-exact
            seconds = np.where(changed, np.exp(smoothed), seconds)
            log_seconds = smoothed
        self.seconds = seconds
        self.log_seconds = log_seconds

    def lookup(self, point: Sequence[float]) -> tuple[float, _Point, bool, bool]:
        """``(seconds, anchor, inside, measured)``: interpolated at ``point`` clamped onto the
        grid (the anchor); ``inside`` if no clamping was needed; ``measured`` if every grid
        point used was measured (not a filled gap)."""
        anchor = tuple(min(max(x, ax[0]), ax[-1]) for x, ax in zip(point, self.axes, strict=True))
        inside = anchor == tuple(point)
        per_axis = [self._bracket(d, x) for d, x in enumerate(anchor)]
        corners = list(itertools.product(*per_axis))
        measured = all(self.measured[tuple(i for i, _ in c)] for c in corners)
        if len(corners) == 1:  # a grid point: its stored value, not exp(log(value))
            return float(self.seconds[tuple(i for i, _ in corners[0])]), anchor, inside, measured
        log_value = math.fsum(
            math.prod(w for _, w in c) * float(self.log_seconds[tuple(i for i, _ in c)])
            for c in corners
        )
        return math.exp(log_value), anchor, inside, measured

    def _bracket(self, dim: int, x: float) -> list[tuple[int, float]]:
        axis = self.axes[dim]
        i = bisect.bisect_left(axis, x)
        if axis[i] == x:
            return [(i, 1.0)]
        logs = self.log_axes[dim]
        t = (math.log(x) - logs[i - 1]) / (logs[i] - logs[i - 1])
        return [(i - 1, 1.0 - t), (i, t)]


def _isotonic(values: np.ndarray) -> np.ndarray:
    """Least-squares non-decreasing fit of a sequence (pool adjacent violators): runs that
    decrease are replaced by their mean; every other value is returned unchanged."""
    blocks: list[list[float]] = []  # [sum, count] per pooled block
    for value in values.tolist():
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    out = values.copy()
    start = 0
    for total, count in blocks:
        end = start + int(count)
        if count > 1:
            out[start:end] = total / count
        start = end
    return out


def _fill_gaps(
    seconds: np.ndarray,
    measured: np.ndarray,
    axes: list[list[float]],
    roofline: Callable[[_Point], float],
) -> None:
    """Fill unmeasured cells in place: roofline(cell) × measured(nearest) / roofline(nearest)."""
    missing = np.argwhere(~measured)
    if not len(missing):
        return
    known = np.argwhere(measured)
    log_axes = [np.log(np.asarray(a)) for a in axes]

    def logs(cells: np.ndarray) -> np.ndarray:
        return np.column_stack([log_axes[d][cells[:, d]] for d in range(len(axes))])

    distances = ((logs(missing)[:, None, :] - logs(known)[None, :, :]) ** 2).sum(axis=2)
    nearest = known[np.argmin(distances, axis=1)]
    for cell, near in zip(missing, nearest, strict=True):
        point = tuple(axes[d][i] for d, i in enumerate(cell))
        anchor = tuple(axes[d][i] for d, i in enumerate(near))
        ratio = seconds[tuple(near)] / max(roofline(anchor), 1e-12)
        seconds[tuple(cell)] = roofline(point) * ratio


class ProfileTable:
    """The grids of one ``ProfileSet``, built once (seconds; per GPU; see the module doc).

    ``roofline`` times the *profiled* GPU; it fills the grids' gaps. Building costs about a
    second for the shipped H100 set, so share one table between models of the same GPU.
    """

    def __init__(
        self, profiles: ProfileSet, roofline: KernelTimer, *, monotone: bool = True
    ) -> None:
        self.gpu = profiles.gpu
        self.source = profiles.source
        self.monotone = monotone
        self.gemm = _grids(
            profiles.gemm,
            ("dtype",),
            ("m", "n", "k"),
            lambda key, p: roofline.gemm(int(p[0]), int(p[1]), int(p[2]), str(key[0])),
            (0,) if monotone else (),
        )
        self.context = _grids(
            profiles.context_attention,
            _HEADS,
            ("batch_size", "new_tokens"),
            lambda key, p: roofline.context_attention(int(p[0]), int(p[1]), 0, *_ints(key)),
            (0, 1) if monotone else (),
        )
        self.decode = _grids(
            profiles.generation_attention,
            _HEADS,
            ("batch_size", "kv_len"),
            lambda key, p: roofline.generation_attention(int(p[0]), int(p[1]), *_ints(key)),
            (0, 1) if monotone else (),
        )
        self.nccl = _grids(
            profiles.nccl,
            ("num_gpus",),
            ("message_bytes",),
            lambda key, p: roofline.all_reduce(p[0], _int(key[0])),
            (0,) if monotone else (),
        )


def _int(value: Hashable) -> int:
    """A grid key's number (pandas group keys are typed ``Hashable``; these are floats)."""
    return int(cast(float, value))


def _ints(key: tuple[Hashable, ...]) -> tuple[int, int, int, str]:
    heads, kv_heads, head_dim, kv_dtype = key
    return _int(heads), _int(kv_heads), _int(head_dim), str(kv_dtype)


def _grids(
    frame: pd.DataFrame,
    keys: Sequence[str],
    axes: Sequence[str],
    roofline: Callable[[tuple[Hashable, ...], _Point], float],
    monotone: Sequence[int],
) -> dict[Hashable, _Grid]:
    """One grid per distinct ``keys``; a single key is stored bare (not as a 1-tuple)."""
    grids: dict[Hashable, _Grid] = {}
    if not len(frame):
        return grids
    for key, rows in frame.groupby(list(keys), sort=True):
        at = tuple(key)

        def timer(point: _Point, at: tuple[Hashable, ...] = at) -> float:
            return roofline(at, point)

        grids[at[0] if len(keys) == 1 else at] = _Grid(rows, axes, timer, monotone=monotone)
    return grids


def _nearest_config(wanted: _HeadConfig, known: Sequence[_HeadConfig]) -> _HeadConfig:
    def distance(cfg: _HeadConfig) -> tuple[bool, float]:
        shape = sum(abs(math.log(a / b)) for a, b in zip(wanted[:3], cfg[:3], strict=True))
        return cfg[3] != wanted[3], shape

    return min(known, key=distance)


class ProfileKernels:
    """``KernelTimer`` interpolating measured profiles, falling back to a scaled roofline.

    Args:
        table: the grids (``ProfileTable``), shareable between instances.
        fallback: times the GPU being modelled (``gpu``; by default the profiled one).
        gpu: catalog key of the modelled GPU.
        profile_fallback: times the profiled GPU with the same model as ``fallback``; required
            when ``gpu`` is another GPU, so that ``fallback / profile_fallback`` carries the
            measurements over.

    Results are cached per distinct call; warnings are said once per instance and reason.
    """

    def __init__(
        self,
        table: ProfileTable,
        fallback: KernelTimer,
        *,
        gpu: str | None = None,
        profile_fallback: KernelTimer | None = None,
    ) -> None:
        self.table = table
        self.gpu = (gpu or table.gpu).lower()
        self._same_gpu = self.gpu == table.gpu
        if not self._same_gpu and profile_fallback is None:
            raise ValueError("timing another GPU than the profiled one needs profile_fallback")
        self._fallback = fallback
        self._profile_fallback = profile_fallback or fallback
        self._warned: set[str] = set()
        self._gemm = lru_cache(maxsize=_CACHE_SIZE)(self._gemm_uncached)
        self._context = lru_cache(maxsize=_CACHE_SIZE)(self._context_uncached)
        self._decode = lru_cache(maxsize=_CACHE_SIZE)(self._decode_uncached)
        self._all_reduce = lru_cache(maxsize=_CACHE_SIZE)(self._all_reduce_uncached)

    # ----- KernelTimer ---------------------------------------------------------------------------
    def gemm(self, m: int, n: int, k: int, dtype: str) -> float:
        """Seconds of ``[m, k] x [k, n]`` at weight precision ``dtype``."""
        return self._gemm(m, n, k, dtype)

    def context_attention(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        new_tokens: int,
        cached_tokens: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """Seconds of causal prefill attention (see ``KernelTimer``)."""
        return self._context(
            batch_size, new_tokens, cached_tokens, num_heads, num_kv_heads, head_dim, kv_dtype
        )

    def generation_attention(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        kv_len: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        """Seconds of decode attention (see ``KernelTimer``)."""
        return self._decode(batch_size, kv_len, num_heads, num_kv_heads, head_dim, kv_dtype)

    def all_reduce(self, message_bytes: float, num_gpus: int) -> float:
        """Seconds of an all-reduce of ``message_bytes`` over ``num_gpus`` GPUs."""
        return self._all_reduce(message_bytes, num_gpus)

    # ----- implementation ------------------------------------------------------------------------
    def _warn(self, reason: str, detail: str) -> None:
        if reason in self._warned:
            return
        self._warned.add(reason)
        warnings.warn(
            f"profile table ({self.table.gpu}) timing {self.gpu}: {detail}; using the roofline "
            f"scaled to agree with the nearest measurement (said once per model)",
            TableFallbackWarning,
            stacklevel=5,
        )

    def _carry(
        self,
        seconds: float,
        exact: bool,
        at_query: Callable[[KernelTimer], float],
        at_anchor: Callable[[KernelTimer], float],
    ) -> float:
        """``seconds`` when the anchor is the query on the profiled GPU, else scaled by the
        fallback's ratio between query and anchor."""
        if exact and self._same_gpu:
            return seconds
        if not self._same_gpu:
            self._warn("gpu", "no profiles of this GPU")
        anchor_seconds = at_anchor(self._profile_fallback)
        if anchor_seconds <= 0:
            return seconds
        return at_query(self._fallback) * seconds / anchor_seconds

    def _check(self, kind: str, inside: bool, measured: bool, what: str) -> None:
        if not inside:
            self._warn(f"{kind} range", f"{what} outside the measured grid")
        elif not measured:
            self._warn(f"{kind} gap", f"{what} in a gap of the measured grid")

    def _gemm_uncached(self, m: int, n: int, k: int, dtype: str) -> float:
        grids = self.table.gemm
        if m <= 0:
            return 0.0
        if not grids:
            self._warn("gemm none", "no GEMM profiles")
            return self._fallback.gemm(m, n, k, dtype)
        table_dtype = dtype
        if dtype not in grids:
            table_dtype = "bf16" if "bf16" in grids else str(next(iter(grids)))
            self._warn(f"gemm {dtype}", f"GEMM dtype '{dtype}' not profiled ({table_dtype} used)")
        seconds, anchor, inside, measured = grids[table_dtype].lookup((m, n, k))
        self._check("gemm", inside, measured, f"GEMM m={m} n={n} k={k} ({dtype})")
        am, an, ak = (int(a) for a in anchor)
        return self._carry(
            seconds,
            inside and table_dtype == dtype,
            lambda t: t.gemm(m, n, k, dtype),
            lambda t: t.gemm(am, an, ak, table_dtype),
        )

    def _head_grid(
        self, grids: dict[Hashable, _Grid], kind: str, config: _HeadConfig
    ) -> tuple[_HeadConfig, _Grid]:
        if config in grids:
            return config, grids[config]
        known: list[_HeadConfig] = list(grids)  # type: ignore[arg-type]
        nearest = _nearest_config(config, known)
        self._warn(
            f"{kind} {config}",
            f"{kind} with (heads, KV heads, head dim, KV dtype) = {config} not profiled "
            f"(nearest: {nearest})",
        )
        return nearest, grids[nearest]

    def _context_uncached(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        new_tokens: int,
        cached_tokens: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        heads = (num_heads, num_kv_heads, head_dim, kv_dtype)
        if batch_size <= 0 or new_tokens <= 0:
            return 0.0
        if not self.table.context:
            self._warn("context none", "no context-attention profiles")
            return self._fallback.context_attention(batch_size, new_tokens, cached_tokens, *heads)
        wanted = (float(num_heads), float(num_kv_heads), float(head_dim), kv_dtype)
        config, grid = self._head_grid(self.table.context, "context attention", wanted)
        seconds, (ab, an), inside, measured = grid.lookup((batch_size, new_tokens))
        what = f"context attention batch={batch_size} new_tokens={new_tokens}"
        self._check("context", inside, measured, what)
        anchor_heads = _ints(config)
        return self._carry(
            seconds,
            inside and config == wanted and cached_tokens == 0,
            lambda t: t.context_attention(batch_size, new_tokens, cached_tokens, *heads),
            lambda t: t.context_attention(int(ab), int(an), 0, *anchor_heads),
        )

    def _decode_uncached(  # noqa: PLR0917  (KernelTimer's positional signature)
        self,
        batch_size: int,
        kv_len: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        kv_dtype: str,
    ) -> float:
        heads = (num_heads, num_kv_heads, head_dim, kv_dtype)
        if batch_size <= 0:
            return 0.0
        if not self.table.decode:
            self._warn("decode none", "no generation-attention profiles")
            return self._fallback.generation_attention(batch_size, kv_len, *heads)
        wanted = (float(num_heads), float(num_kv_heads), float(head_dim), kv_dtype)
        config, grid = self._head_grid(self.table.decode, "generation attention", wanted)
        seconds, (ab, al), inside, measured = grid.lookup((batch_size, max(kv_len, 1)))
        what = f"generation attention batch={batch_size} kv_len={kv_len}"
        self._check("decode", inside and kv_len >= 1, measured, what)
        anchor_heads = _ints(config)
        return self._carry(
            seconds,
            inside and kv_len >= 1 and config == wanted,
            lambda t: t.generation_attention(batch_size, kv_len, *heads),
            lambda t: t.generation_attention(int(ab), int(al), *anchor_heads),
        )

    def _all_reduce_uncached(self, message_bytes: float, num_gpus: int) -> float:
        if num_gpus <= 1 or message_bytes <= 0:
            return 0.0
        grids = self.table.nccl
        if not grids:
            self._warn("nccl none", "no all-reduce profiles")
            return self._fallback.all_reduce(message_bytes, num_gpus)
        counts = [float(g) for g in grids]  # type: ignore[arg-type]
        table_gpus = min(counts, key=lambda g: (abs(math.log(g / num_gpus)), g))
        if table_gpus != num_gpus:
            self._warn(
                f"nccl {num_gpus}",
                f"all-reduce over {num_gpus} GPUs not profiled (nearest: {int(table_gpus)})",
            )
        seconds, (anchor,), inside, measured = grids[table_gpus].lookup((float(message_bytes),))
        self._check("nccl", inside, measured, f"all-reduce of {message_bytes:.0f} bytes")
        return self._carry(
            seconds,
            inside and table_gpus == num_gpus,
            lambda t: t.all_reduce(message_bytes, num_gpus),
            lambda t: t.all_reduce(anchor, int(table_gpus)),
        )


def table_kernels(
    gpu: GpuSpec, profiles_dir: str | Path | None = None, *, monotone: bool = True
) -> ProfileKernels:
    """The ``table[:DIR]`` kernel source for ``gpu``, with ``RooflineKernels`` as fallback.

    ``profiles_dir`` holds profiles measured on ``gpu`` itself. Without it: the shipped profiles
    of ``gpu`` if there are any, else the H100 ones carried over by the roofline ratio (warned
    on first use). The grids are built once per process per directory and GPU and shared.
    """
    if profiles_dir is not None:
        directory, profiled = Path(profiles_dir), gpu
    else:
        try:
            directory, profiled = shipped_profiles_dir(gpu.name), gpu
        except InputError:
            directory = shipped_profiles_dir(DEFAULT_PROFILE_GPU)
            profiled = shipped_catalog().gpu(DEFAULT_PROFILE_GPU)
    table = _shared_table(str(directory), profiled.model_dump_json(), monotone)
    fallback = RooflineKernels(gpu)
    same = profiled is gpu
    return ProfileKernels(
        table,
        fallback,
        gpu=gpu.name,
        profile_fallback=fallback if same else RooflineKernels(profiled),
    )


@cache
def _shared_table(directory: str, profiled_gpu_json: str, monotone: bool) -> ProfileTable:
    """One ``ProfileTable`` per process per directory, GPU and mode (read-only once built)."""
    profiled = GpuSpec.model_validate_json(profiled_gpu_json)
    profiles = load_profiles(directory, gpu=profiled.name)
    return ProfileTable(profiles, RooflineKernels(profiled), monotone=monotone)
