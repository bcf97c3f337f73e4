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
- a head configuration or dtype the table lacks: the same sizes on the nearest measured
  configuration (log distance over heads, KV heads, head dim; same KV dtype first) or on bf16;
- another GPU than the profiled one: the same sizes timed on the profiled GPU. These two carry
  a whole grid at once (every cell scaled by its roofline ratio, then made monotone again), so
  a carried table is as monotone as a measured one;
- gaps inside the grid (the profiles skip large batch × long sequence): filled once, when the
  table is built, the same way from the nearest measured point of the same GEMM m or attention
  batch (else the nearest overall).

Each is said once per ``ProfileKernels`` instance and reason (``TableFallbackWarning``). A cached
prefix in prefill attention has no measured rows either (this is documented, not warned): the
table's time at zero prefix is scaled by ``fallback(new, cached) / fallback(new, 0)``, and never
taken below the measured decode-attention time over the same ``cached + new`` tokens (both
kernels read the whole prefix; mixing two measured kernels must not make a 2-token chunk
cheaper than a 1-token decode step).

Grids are monotone in the sizes a batch grows in (``profiles.Grid``).

**Decode attention and GEMMs are never faster than reading their operands from HBM**
(``hbm_bytes_per_s``, the modelled GPU's peak; a GEMM's weights, activations and output, a decode
call's KV): a serving step reads every layer's weights and KV between two uses of one layer's,
so nothing of them stays in L2, whatever a microbenchmark timing one call in a loop sees.
Rows that beat the floor: L40S's GEMMs at up to 16 tokens with 4-128 MB of weights (2.6-4.2× its
864 GB/s: its 96 MB L2 kept them warm; H100's reach at most 0.94×), small decode calls whose KV
fits in L2 (L40S: up to 4.7×), and A100's TensorRT-LLM 1.0 decode rows, at up to 1.69× the HBM
peak on calls reading 0.5-4 GB (half of those rows; no other table's rows above 512 MB exceed
1.07×) — not an L2 effect at that size, a collector artefact (e.g. every sequence's block table
pointing at the same pages), not investigated further. The floor is the roofline's memory term at
100% of the peak, not fitted.

Where the profile directory has a fused-MoE file (or another engine's lends it rows of a kernel
the engine runs, ``profile_files.MOE_LENDERS``), ``ProfileKernels.fused_moe`` also answers whole
routed-expert layers from it (``moe_table.py``: exact shape, interpolated in tokens), and
``mla_attention`` MLA attention cores; a shape the file lacks gets ``None`` and the latency
model composes the layer from GEMMs. They are carried to another GPU only where it is the same
silicon (a catalog stand-in, ``same_silicon``), by the rooflines' ratio of a representative
kernel call (``carry``); elsewhere the layer is composed from the carried primitives.
``marlin_moe`` answers a layer in vLLM's Marlin MoE kernel, carried from the file's Marlin
layers of another shape (``MoeTable.marlin_layer``), on the profiled GPU only.

Not a profiler and not a fitted model (``calibrated.py``); sizes are per GPU, times in seconds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import pandas as pd

from simulator.latency._cached import CachedKernels, Heads, float_heads
from simulator.latency.kernels import KernelTimer
from simulator.latency.mla_table import MlaTable, Phase
from simulator.latency.moe_table import MoeShape, MoeTable
from simulator.latency.profile_grid import CellTimes, Grid, grid_key_int, head_config_args
from simulator.latency.profiles import HEAD_COLUMNS, ProfileSet
from simulator.latency.roofline import (
    RooflineKernels,
    Work,
    gemm_work,
    generation_attention_work,
)

__all__ = [
    "DEFAULT_PROFILE_GPU",
    "KernelMemo",
    "ProfileKernels",
    "ProfileTable",
    "TableFallbackWarning",
    "decode_rows_beyond_hbm",
]

#: KV reads from this size up cannot be served from any GPU's L2 (``decode_rows_beyond_hbm``).
L2_PROOF_BYTES = 512e6


def decode_rows_beyond_hbm(frame: pd.DataFrame, hbm_bytes_per_s: float) -> tuple[int, float]:
    """How many rows of a loaded generation-attention profile (``profiles.ProfileSet``'s
    canonical columns, seconds) read more than ``L2_PROOF_BYTES`` of KV faster than
    ``hbm_bytes_per_s`` allows, and the largest multiple of it any such row reaches (0 when
    none reads that much): rows ``ProfileKernels`` answers at the HBM floor instead (module
    doc)."""
    big = 0.0
    count = 0
    sizes = frame[["batch_size", "kv_len", "num_heads", "num_kv_heads", "head_dim"]].to_numpy()
    dtypes = frame["kv_dtype"].astype(str).to_numpy()
    seconds = frame["seconds"].to_numpy(dtype=float)
    for (batch, kv_len, heads, kv_heads, dim), dtype, took in zip(
        sizes.astype(int).tolist(), dtypes.tolist(), seconds.tolist(), strict=True
    ):
        work = generation_attention_work(batch, kv_len, heads, kv_heads, dim, dtype)
        if work.bytes < L2_PROOF_BYTES:
            continue
        share = work.bytes / took / hbm_bytes_per_s
        big = max(big, share)
        count += share > 1.0
    return count, big


#: The GPU whose profiles ship (and stand in, scaled by the roofline, for other GPUs).
DEFAULT_PROFILE_GPU = "h100_sxm"

_HeadConfig = tuple[float, float, float, str]  # heads, KV heads, head dim, KV dtype (per GPU)
_Point = tuple[float, ...]


class TableFallbackWarning(UserWarning):
    """A profile table answered from the roofline (scaled at an anchor) rather than from
    measurements alone; emitted once per ``ProfileKernels`` instance and reason."""


#: What one warning says: its reason (said once per instance) and its text.
_Said = tuple[str, str]


class KernelMemo:
    """The answers every ``ProfileKernels`` of one table, modelled GPU and warning mode computes
    alike, kept across instances: each primitive's seconds per distinct call and each carried
    grid, with the warnings said while computing it.

    Why: a latency model is built per simulation (an optimize run builds hundreds), and an
    instance's own caches start empty, so without this every trial interpolated the same shapes
    again. An instance answering from here says the
    warnings recorded with the answer, so it warns as if it had computed it (once per reason).
    Bounded: past ``max_answers`` the answers are dropped and recomputed alike.
    """

    __slots__ = ("answers", "carried", "max_answers")

    def __init__(self, max_answers: int = 1 << 17) -> None:
        self.max_answers = max_answers
        #: ``(primitive, *args) -> (seconds, warnings said computing it)``
        self.answers: dict[tuple[Hashable, ...], tuple[float, tuple[_Said, ...]]] = {}
        #: ``(kind, configuration) -> (carried grid, warnings said building it)``
        self.carried: dict[tuple[str, Hashable], tuple[Grid, tuple[_Said, ...]]] = {}


def _nearest_config(wanted: _HeadConfig, known: Sequence[_HeadConfig]) -> _HeadConfig:
    def distance(cfg: _HeadConfig) -> tuple[bool, float]:
        shape = sum(abs(math.log(a / b)) for a, b in zip(wanted[:3], cfg[:3], strict=True))
        return cfg[3] != wanted[3], shape

    return min(known, key=distance)


# ----- one grid cell timed by a ``KernelTimer``: ``(timer, grid key, cell) -> seconds`` ---------
# Grid keys are as ``_grids`` stores them: the dtype (GEMM), the GPU count (all-reduce), or the
# head configuration ``(heads, KV heads, head dim, KV dtype)`` (attention).
_CellTime = Callable[[KernelTimer, Hashable, _Point], float]


def _gemm_cell(timer: KernelTimer, key: Hashable, p: _Point) -> float:
    return timer.gemm(int(p[0]), int(p[1]), int(p[2]), str(key))


def _gemm_cells(timer: KernelTimer, key: Hashable) -> CellTimes | None:
    """Many GEMM cells per call where the timer can (the roofline: the same seconds)."""
    if not isinstance(timer, RooflineKernels):
        return None
    roofline, dtype = timer, str(key)
    return lambda cells: roofline.gemm_many(cells[:, 0], cells[:, 1], cells[:, 2], dtype)


def _context_cell(timer: KernelTimer, key: Hashable, p: _Point) -> float:
    heads = head_config_args(cast(tuple[Hashable, ...], key))
    return timer.context_attention(int(p[0]), int(p[1]), 0, *heads)


def _decode_cell(timer: KernelTimer, key: Hashable, p: _Point) -> float:
    heads = head_config_args(cast(tuple[Hashable, ...], key))
    return timer.generation_attention(int(p[0]), int(p[1]), *heads)


def _nccl_cell(timer: KernelTimer, key: Hashable, p: _Point) -> float:
    return timer.all_reduce(p[0], grid_key_int(key))


class ProfileTable:
    """The grids of one ``ProfileSet``, built once (seconds; per GPU; see the module doc).

    ``roofline`` times the *profiled* GPU; it fills the grids' gaps. Building costs about a
    second for the shipped H100 set, so share one table between models of the same GPU.
    """

    def __init__(
        self,
        profiles: ProfileSet,
        roofline: KernelTimer,
        *,
        monotone: bool = True,
        moe: MoeTable | None = None,
        mla: MlaTable | None = None,
    ) -> None:
        self.gpu = profiles.gpu
        #: Measured fused-MoE layers of the same GPU and engine, if the directory had them.
        self.moe = moe
        #: Measured MLA attention cores of the same GPU and engine, if the directory had them.
        self.mla = mla
        self.source = profiles.source
        self.monotone = monotone
        # Axes a batch grows along, made non-decreasing: GEMM m, attention batch and length,
        # all-reduce message size (none when ``monotone`` is off).
        first, both = ((0,), (0, 1)) if monotone else ((), ())
        self.gemm = _grids(
            profiles.gemm,
            ("dtype",),
            ("m", "n", "k"),
            roofline,
            _gemm_cell,
            monotone=first,
            many=_gemm_cells,
        )
        self.context = _grids(
            profiles.context_attention,
            HEAD_COLUMNS,
            ("batch_size", "new_tokens"),
            roofline,
            _context_cell,
            monotone=both,
        )
        self.decode = _grids(
            profiles.generation_attention,
            HEAD_COLUMNS,
            ("batch_size", "kv_len"),
            roofline,
            _decode_cell,
            monotone=both,
        )
        self.nccl = _grids(
            profiles.nccl, ("num_gpus",), ("message_bytes",), roofline, _nccl_cell, monotone=first
        )


def _grids(
    frame: pd.DataFrame,
    keys: Sequence[str],
    axes: Sequence[str],
    roofline: KernelTimer,
    cell_time: _CellTime,
    *,
    monotone: Sequence[int],
    many: Callable[[KernelTimer, Hashable], CellTimes | None] | None = None,
) -> dict[Hashable, Grid]:
    """One grid per distinct ``keys``; a single key is stored bare (not as a 1-tuple). Gaps are
    filled from ``cell_time(roofline, key, cell)``, or from ``many(roofline, key)`` a slice of
    cells per call where it gives a timer; ``monotone`` axes are made non-decreasing."""
    grids: dict[Hashable, Grid] = {}
    if not len(frame):
        return grids
    for key, rows in frame.groupby(list(keys), sort=True):
        at = tuple(key)
        stored = at[0] if len(keys) == 1 else at

        def timer(point: _Point, stored: Hashable = stored) -> float:
            return cell_time(roofline, stored, point)

        cells = many(roofline, stored) if many is not None else None
        grids[stored] = Grid.measure(rows, axes, timer, monotone=monotone, roofline_cells=cells)
    return grids


class ProfileKernels(CachedKernels):
    """``KernelTimer`` interpolating measured profiles, falling back to a scaled roofline.

    Args:
        table: the grids (``ProfileTable``), shareable between instances.
        fallback: times the GPU being modelled (``gpu``; by default the profiled one).
        gpu: catalog key of the modelled GPU.
        profile_fallback: times the profiled GPU with the same model as ``fallback``; required
            when ``gpu`` is another GPU, so that ``fallback / profile_fallback`` carries the
            measurements over.
        warn_range: whether to warn (once) about shapes outside a grid or in its gaps, and
            about timing another GPU than the one profiled.
        same_silicon: ``gpu`` is the profiled GPU's silicon in another board (a catalog
            stand-in, ``GpuSpec.kernel_profiles_from``): the measured layer tables (fused MoE,
            MLA cores) are carried to it too. On any other GPU those layers are composed from
            the carried primitives (a fused kernel's tiling is the chip's own).
        memo: answers shared with the other instances of the same table, ``gpu``,
            ``profile_fallback`` and ``warn_range`` (``KernelMemo``); default: this
            instance's own.

    A configuration the table lacks (or every configuration, on another GPU) is answered from a
    *carried* grid: the nearest measured grid with each cell multiplied by
    ``fallback(cell, wanted) / profile_fallback(cell, measured)``, made monotone again; built on
    first use and kept. Results are cached per distinct call; warnings are said once per
    instance and reason.
    """

    def __init__(
        self,
        table: ProfileTable,
        fallback: KernelTimer,
        *,
        gpu: str | None = None,
        profile_fallback: KernelTimer | None = None,
        warn_range: bool = True,
        same_silicon: bool = False,
        memo: KernelMemo | None = None,
        hbm_bytes_per_s: float | None = None,
    ) -> None:
        self.table = table
        #: The modelled GPU's HBM peak, bytes/s: no decode-attention time below the KV it must
        #: read at that rate (``_decode_uncached``); None = no floor.
        self._hbm_bytes_per_s = hbm_bytes_per_s
        self.gpu = (gpu or table.gpu).lower()
        self._same_gpu = self.gpu == table.gpu
        self._layers = self._same_gpu or same_silicon
        if not self._same_gpu and profile_fallback is None:
            raise ValueError("timing another GPU than the profiled one needs profile_fallback")
        self._fallback = fallback
        self._profile_fallback = profile_fallback or fallback
        self._warned: set[str] = set()
        self._warn_range = warn_range
        self._memo = memo if memo is not None else KernelMemo()
        #: One list per computation in progress (a prefill bound computes a decode time
        #: inside): the warnings said meanwhile, stored with its answer.
        self._saying: list[list[_Said]] = []
        super().__init__(
            self._memoised("gemm", self._gemm_uncached),
            self._memoised("context", self._context_uncached),
            self._memoised("decode", self._decode_uncached),
            self._memoised("all_reduce", self._all_reduce_uncached),
        )

    @property
    def memo(self) -> KernelMemo:
        """The answers this instance shares (``KernelMemo``)."""
        return self._memo

    def _memoised(self, primitive: str, compute: Callable[..., float]) -> Callable[..., float]:
        """``compute`` answered from the shared memo when another instance (or this one)
        computed the same call, its warnings said again (``KernelMemo``)."""
        memo = self._memo

        def answer(*args: Hashable) -> float:
            key = (primitive, *args)
            hit = memo.answers.get(key)
            if hit is not None:
                seconds, said = hit
                for reason, detail in said:
                    self._warn(reason, detail)
                return seconds
            self._saying.append([])
            try:
                seconds = compute(*args)
            finally:
                said = tuple(self._saying.pop())
            if len(memo.answers) >= memo.max_answers:
                memo.answers.clear()
            memo.answers[key] = (seconds, said)
            return seconds

        return answer

    # ----- grids in the modelled GPU's terms ------------------------------------------------------
    def _warn(self, reason: str, detail: str) -> None:
        for said in self._saying:
            said.append((reason, detail))
        if reason in self._warned:
            return
        self._warned.add(reason)
        warnings.warn(
            f"profile table ({self.table.gpu}) timing {self.gpu}: {detail}; using the roofline "
            f"scaled to agree with the nearest measurement (said once per model)",
            TableFallbackWarning,
            stacklevel=6,
        )

    def _grid(
        self,
        kind: str,
        grids: dict[Hashable, Grid],
        key: Hashable,
        *,
        nearest: Callable[[Hashable], Hashable],
        time: _CellTime,
        describe: Callable[[Hashable], str] = str,
    ) -> Grid:
        """The grid for ``key`` in the modelled GPU's terms: measured, or carried (class doc).
        ``time(timer, key, cell)`` times one grid cell of configuration ``key``."""
        if self._same_gpu and key in grids:
            return grids[key]
        hit = self._memo.carried.get((kind, key))
        if hit is None:
            anchor = key if key in grids else nearest(key)
            said: list[_Said] = []
            if anchor != key:
                what = f"{kind} {describe(key)} not profiled (nearest: {describe(anchor)})"
                said.append((f"{kind} {key}", what))
            if not self._same_gpu and self._warn_range:
                # (``auto`` carries only a catalog's declared stand-in; its CLI note says so.)
                said.append(("gpu", "no profiles of this GPU"))

            def ratio(cell: _Point) -> float:
                measured = time(self._profile_fallback, anchor, cell)
                return time(self._fallback, key, cell) / measured if measured > 0 else 1.0

            hit = (grids[anchor].carried(ratio), tuple(said))
            self._memo.carried[(kind, key)] = hit
        carried, said_building = hit
        for reason, detail in said_building:
            self._warn(reason, detail)
        return carried

    def _check(self, kind: str, inside: bool, measured: bool, what: str) -> None:
        if not self._warn_range:
            return
        if not inside:
            self._warn(f"{kind} range", f"{what} outside the measured grid")
        elif not measured:
            self._warn(f"{kind} gap", f"{what} in a gap of the measured grid")

    @staticmethod
    def _beyond(seconds: float, at_query: float, at_anchor: float) -> float:
        """Outside the grid: the roofline scaled to agree at the edge (``at_*`` = roofline)."""
        return at_query * seconds / at_anchor if at_anchor > 0 else seconds

    # ----- the primitives ----------------------------------------------------------------------
    def _gemm_uncached(self, m: int, n: int, k: int, dtype: str) -> float:
        """The measured GEMM time, never below its operands' HBM floor (module doc)."""
        if m <= 0:
            return 0.0
        return self._hbm_floor(self._gemm_measured(m, n, k, dtype), gemm_work(m, n, k, dtype))

    def _gemm_measured(self, m: int, n: int, k: int, dtype: str) -> float:
        grids = self.table.gemm
        if not grids:
            self._warn("gemm none", "no GEMM profiles")
            return self._fallback.gemm(m, n, k, dtype)

        def nearest(_: Hashable) -> Hashable:
            return "bf16" if "bf16" in grids else next(iter(grids))

        def describe(key: Hashable) -> str:
            return f"dtype '{key}'"

        grid = self._grid("GEMM", grids, dtype, nearest=nearest, time=_gemm_cell, describe=describe)
        seconds, anchor, inside, measured = grid.lookup((m, n, k))
        self._check("gemm", inside, measured, f"GEMM m={m} n={n} k={k} ({dtype})")
        if inside:
            return seconds
        edge = self._fallback.gemm(int(anchor[0]), int(anchor[1]), int(anchor[2]), dtype)
        return self._beyond(seconds, self._fallback.gemm(m, n, k, dtype), edge)

    def _head_grid(
        self, kind: str, grids: dict[Hashable, Grid], config: _HeadConfig, time: _CellTime
    ) -> Grid:
        def nearest(key: Hashable) -> Hashable:
            return _nearest_config(cast(_HeadConfig, key), cast(list[_HeadConfig], list(grids)))

        def describe(key: Hashable) -> str:
            h, kv, d, dtype = head_config_args(cast(tuple[Hashable, ...], key))
            return f"(heads {h}, KV heads {kv}, head dim {d}, KV {dtype})"

        return self._grid(kind, grids, config, nearest=nearest, time=time, describe=describe)

    def _context_uncached(
        self, batch_size: int, new_tokens: int, cached_tokens: int, heads: Heads
    ) -> float:
        if batch_size <= 0 or new_tokens <= 0:
            return 0.0
        if not self.table.context:
            self._warn("context none", "no context-attention profiles")
            return self._fallback.context_attention(batch_size, new_tokens, cached_tokens, *heads)
        config = float_heads(heads)
        grid = self._head_grid("context attention", self.table.context, config, _context_cell)
        seconds, (ab, an), inside, measured = grid.lookup((batch_size, new_tokens))
        what = f"context attention batch={batch_size} new_tokens={new_tokens}"
        self._check("context", inside, measured, what)
        if inside and cached_tokens == 0:
            return seconds
        at_query = self._fallback.context_attention(batch_size, new_tokens, cached_tokens, *heads)
        at_anchor = self._fallback.context_attention(int(ab), int(an), 0, *heads)
        estimate = self._beyond(seconds, at_query, at_anchor)
        if cached_tokens <= 0:
            return estimate
        # A chunk over a cached prefix reads all of its KV, as decoding one token over it does;
        # two different measured kernels must not make the chunk the cheaper of the two.
        return max(estimate, self._decode(batch_size, cached_tokens + new_tokens, heads))

    def _hbm_floor(self, seconds: float, work: Work) -> float:
        """``seconds``, never below ``work``'s bytes at the modelled GPU's HBM peak (module
        doc); as they are without ``hbm_bytes_per_s``."""
        if self._hbm_bytes_per_s is None:
            return seconds
        return max(seconds, work.bytes / self._hbm_bytes_per_s)

    def _decode_uncached(self, batch_size: int, kv_len: int, heads: Heads) -> float:
        """The measured decode-attention time, never below the HBM floor (module doc)."""
        if batch_size <= 0:
            return 0.0
        work = generation_attention_work(batch_size, max(kv_len, 1), *heads)
        return self._hbm_floor(self._decode_measured(batch_size, kv_len, heads), work)

    def _decode_measured(self, batch_size: int, kv_len: int, heads: Heads) -> float:
        if not self.table.decode:
            self._warn("decode none", "no generation-attention profiles")
            return self._fallback.generation_attention(batch_size, kv_len, *heads)
        config = float_heads(heads)
        grid = self._head_grid("generation attention", self.table.decode, config, _decode_cell)
        seconds, (ab, al), inside, measured = grid.lookup((batch_size, max(kv_len, 1)))
        what = f"generation attention batch={batch_size} kv_len={kv_len}"
        self._check("decode", inside and kv_len >= 1, measured, what)
        if inside and kv_len >= 1:
            return seconds
        at_query = self._fallback.generation_attention(batch_size, kv_len, *heads)
        at_anchor = self._fallback.generation_attention(int(ab), int(al), *heads)
        return self._beyond(seconds, at_query, at_anchor)

    def fused_moe(self, tokens: int, shape: MoeShape) -> tuple[float, int] | None:
        """``(seconds, anchor tokens)`` of one routed-expert layer from the measured fused-MoE
        table (``MoeTable.lookup``), or None: no table, a shape it lacks, or a GPU of other
        silicon. On a stand-in GPU (``same_silicon``) the shape's grid is carried first, every
        token count by the roofline ratio of the layer's grouped gate-up GEMM
        (``MoeShape.routing``), and made monotone again (class doc)."""
        moe = self.table.moe
        if moe is None or not self._layers:
            return None
        if self._same_gpu:
            return moe.lookup(tokens, shape)
        hit = self._memo.carried.get(("moe", shape))
        if hit is None:
            grid = moe.grid(shape)
            if grid is None:
                return None

            def ratio(cell: _Point) -> float:
                each, width, _ = shape.routing(int(cell[0]))
                gemm = (each, 2 * width, shape.hidden, shape.dtype)
                return self.carry("gemm", *gemm)

            hit = (grid.carried(ratio), ())
            self._memo.carried[("moe", shape)] = hit
        return MoeTable.routed(hit[0], tokens, shape)

    def marlin_moe(self, tokens: int, shape: MoeShape) -> float | None:
        """Seconds of one routed-expert layer in vLLM's Marlin MoE kernel, carried from the
        table's nearest Marlin layer of the same weight format and split
        (``MoeTable.marlin_layer``), or None: no table, no such layer, or another GPU than the
        profiled one (a kernel's efficiency is its chip's own; stand-ins compose the layer)."""
        moe = self.table.moe
        if moe is None or not self._same_gpu:
            return None
        return moe.marlin_layer(tokens, shape)

    def carry(self, kind: str, *args: Any) -> float:
        """The ``kind`` kernel call ``args`` (``gemm``, ``context_attention``,
        ``generation_attention``) on the modelled GPU over the profiled one, by their rooflines:
        what carries a measured layer (fused MoE, MLA core) to another GPU, as the primitive
        grids are carried (class doc). 1.0 on the profiled GPU itself."""
        if self._same_gpu:
            return 1.0
        theirs = getattr(self._profile_fallback, kind)(*args)
        return getattr(self._fallback, kind)(*args) / theirs if theirs > 0 else 1.0

    def mla_attention(
        self, phase: Phase, batch_size: int, length: int, heads: int, kv_dtype: str
    ) -> tuple[float, tuple[int, int]] | None:
        """``(seconds, (batch, length) anchor)`` of one MLA attention core on the profiled GPU
        from the measured MLA table (``MlaTable.lookup``), or None: no table, unmeasured heads
        or KV dtype, or a GPU of other silicon. On a stand-in GPU (``same_silicon``) the caller
        carries it over (``carry``)."""
        if self.table.mla is None or not self._layers:
            return None
        return self.table.mla.lookup(phase, batch_size, length, heads, kv_dtype)

    def _all_reduce_uncached(self, message_bytes: float, num_gpus: int) -> float:
        if num_gpus <= 1 or message_bytes <= 0:
            return 0.0
        grids = self.table.nccl
        if not grids:
            self._warn("nccl none", "no all-reduce profiles")
            return self._fallback.all_reduce(message_bytes, num_gpus)

        def nearest(key: Hashable) -> Hashable:
            wanted = float(cast(float, key))
            counts = [float(cast(float, g)) for g in grids]
            return min(counts, key=lambda g: (abs(math.log(g / wanted)), g))

        def describe(key: Hashable) -> str:
            return f"over {grid_key_int(key)} GPUs"

        grid = self._grid(
            "all-reduce",
            grids,
            float(num_gpus),
            nearest=nearest,
            time=_nccl_cell,
            describe=describe,
        )
        seconds, (anchor,), inside, measured = grid.lookup((float(message_bytes),))
        self._check("nccl", inside, measured, f"all-reduce of {message_bytes:.0f} bytes")
        if inside:
            return seconds
        at_query = self._fallback.all_reduce(message_bytes, num_gpus)
        return self._beyond(seconds, at_query, self._fallback.all_reduce(anchor, num_gpus))
