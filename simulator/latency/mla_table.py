"""Measured MLA attention: DeepSeek-style attention cores priced from profile tables.

A ``*_context_mla.csv.gz`` / ``*_generation_mla.csv.gz`` profile (aiconfigurator-core's
performance database format, README of ``shared/data/profiles``) times an engine's MLA attention
kernel for one layer on one GPU — the attention core only (the projections, absorption GEMMs
and latent decompression stay composed, ``compose.py``):

- ``context_mla``: ``batch_size`` prompts of ``isl`` new tokens each, no cached prefix
  (``step`` 0), ``num_heads`` query heads on the GPU;
- ``generation_mla``: ``batch_size`` decodes each reading ``step`` cached tokens.

Columns: ``kv_cache_dtype``, ``num_heads``, ``batch_size``, ``isl``, ``step``, ``latency``
(ms); ``mla_dtype`` (the activations, bfloat16 in every shipped file), ``tp_size`` (the split
the heads came from; the kernel sees only the heads, so rows are keyed by them) and
``kernel_source`` are read for nothing else. Repeated measurements of one cell: the median.

**Which models.** The tables do not record the latent's shape: every row is DeepSeek-V2/V3's
(``kv_lora_rank`` 512, rope 64, nope 128, value 128 per head), so only a model with exactly that
shape is priced from them (``MLA_SHAPE``); any other MLA model keeps the composed estimate.

**The lookup rule** (``MlaTable``): a grid per ``(kv dtype, heads per GPU)``, interpolated in
log time over log batch and log length (``profile_grid.Grid``, made non-decreasing in both);
heads per GPU must be measured exactly (no interpolation between head counts — the kernels tile
by heads). Outside the measured range, and for a prefill chunk over a cached prefix (the tables
measure none), the caller scales the nearest measurement by its own composition's growth
(``model.py``), as the fused-MoE table does.

Why it matters: on H200 under SGLang the measured MLA prefill of a 16 k-token prompt with 128
heads takes 62.8 ms per layer where the generic attention table carried over by FLOPs gave
16.9 ms (a 192-wide QK head runs far below the FLOP rate of the 128-wide heads the generic
tables measure); decode agrees within 0.8-1.4×.

Times are seconds per layer per GPU. Not a profiler.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from hardware.schema import ModelSpec
from simulator.latency.profile_grid import Grid
from simulator.latency.profiles import (
    KNOWN_DTYPES,
    normalise_dtype,
    profile_csv,
    profile_numbers,
)
from slo.inputfile import InputError

__all__ = [
    "MLA_PHASES",
    "MLA_SHAPE",
    "MlaTable",
    "MlaTimer",
    "load_mla_table",
    "measured_mla_shape",
    "read_mla_profile",
]

Phase = Literal["context", "generation"]

#: Profile classes (file-name parts) of the MLA tables, and the phase each times.
MLA_PHASES: dict[str, Phase] = {"context_mla": "context", "generation_mla": "generation"}

#: (kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim) the tables were measured at.
MLA_SHAPE: tuple[int, int, int, int] = (512, 64, 128, 128)

#: The length column of each phase: new tokens of a prompt, or cached tokens a decode reads.
_LENGTH: dict[Phase, str] = {"context": "isl", "generation": "step"}
_NUMERIC = ("num_heads", "batch_size", "latency")


def measured_mla_shape(model: ModelSpec) -> bool:
    """Whether ``model``'s MLA attention has the shape the MLA tables measured."""
    if model.attention != "mla":
        return False
    value = model.v_head_dim or model.qk_nope_head_dim  # the catalog's default for value width
    shape = (model.kv_lora_rank, model.qk_rope_head_dim, model.qk_nope_head_dim, value)
    return shape == MLA_SHAPE


@runtime_checkable
class MlaTimer(Protocol):
    """A kernel source that can time MLA attention cores (``table.ProfileKernels``)."""

    def mla_attention(
        self, phase: Phase, batch_size: int, length: int, heads: int, kv_dtype: str
    ) -> tuple[float, tuple[int, int]] | None:
        """``(seconds per layer, (batch, length) anchor)`` measured at the point clamped onto
        the measured range, or None where the source has no such table or heads. Seconds on
        the profiled GPU: ``carry`` takes them to the GPU modelled."""
        ...

    def carry(self, kind: str, *args: Any) -> float:
        """Roofline time of the ``kind`` kernel call ``args`` on the GPU modelled over the GPU
        profiled (1.0 where they are the same)."""
        ...


def read_mla_profile(path: Path, phase: Phase) -> pd.DataFrame:
    """One row per measured cell (``kv_dtype``, ``heads``, ``batch``, ``length``, ``seconds``),
    repeats merged by their median. ``InputError`` naming the file, line and column for a
    missing column, a non-positive number or an unknown KV dtype."""
    raw = profile_csv(path)
    length = _LENGTH[phase]
    needed = ("kv_cache_dtype", *_NUMERIC, length)
    missing = [col for col in needed if col not in raw.columns]
    if missing:
        raise InputError(
            f"{path}: line 1: missing column '{missing[0]}' (an MLA profile needs "
            f"{', '.join(needed)})"
        )
    if phase == "context" and "step" in raw.columns:
        raw = raw[pd.to_numeric(raw["step"], errors="coerce") == 0]  # no cached prefix
    out = pd.DataFrame(index=raw.index)
    columns = {"num_heads": "heads", "batch_size": "batch", length: "length", "latency": "seconds"}
    for column, name in columns.items():
        out[name] = profile_numbers(raw[column], path, column)
    names = raw["kv_cache_dtype"].astype(str)
    out["kv_dtype"] = names.map(normalise_dtype)
    unknown = ~out["kv_dtype"].isin(KNOWN_DTYPES)
    if unknown.any():
        position = int(np.argmax(unknown.to_numpy()))
        raise InputError(
            f"{path}: line {int(raw.index[position]) + 2}: column 'kv_cache_dtype': unknown "
            f"dtype '{names.iloc[position]}'"
        )
    out["seconds"] = out["seconds"] / 1e3  # the CSVs give milliseconds
    keys = ["kv_dtype", "heads", "batch", "length"]
    merged = out.groupby(keys, as_index=False).agg(seconds=("seconds", "median"))
    return merged.sort_values(keys, ignore_index=True)


def _work(phase: Phase) -> Callable[[tuple[float, ...]], float]:
    """A stand-in cost that fills a grid's unmeasured cells from measured neighbours: the
    attention's FLOPs grow as batch × length² for a prompt, its bytes as batch × length for a
    decode (``Grid`` only uses the ratio between cells)."""

    def cost(point: tuple[float, ...]) -> float:
        batch, length = point
        return batch * length * (length if phase == "context" else 1.0)

    return cost


class MlaTable:
    """MLA attention cores per ``(kv dtype, heads per GPU)``, interpolated in batch and length
    (module doc).

    Args:
        frames: ``read_mla_profile``'s rows per phase (one may be missing).
        source: where they came from, in words.
        monotone: make each grid non-decreasing in batch and length (isotonic, as the other
            grids); False keeps them verbatim.
    """

    def __init__(
        self, frames: dict[Phase, pd.DataFrame], source: str = "", *, monotone: bool = True
    ) -> None:
        self.source = source
        self._phases: dict[Phase, dict[tuple[Hashable, ...], Grid]] = {}
        for phase, frame in frames.items():
            grids: dict[tuple[Hashable, ...], Grid] = {}
            for key, rows in frame.groupby(["kv_dtype", "heads"], sort=True):
                grids[tuple(key)] = Grid.measure(
                    rows, ("batch", "length"), _work(phase), monotone=(0, 1) if monotone else ()
                )
            self._phases[phase] = grids

    def phases(self) -> tuple[Phase, ...]:
        """The phases the table measured."""
        return tuple(self._phases)

    def lookup(
        self, phase: Phase, batch_size: int, length: int, heads: int, kv_dtype: str
    ) -> tuple[float, tuple[int, int]] | None:
        """``(seconds, (batch, length) anchor)`` of one layer at the point clamped onto the
        measured range (the anchor equals the point inside it), or None where the phase or the
        ``(kv_dtype, heads)`` configuration was not measured."""
        found = self._phases.get(phase)
        if found is None or batch_size <= 0 or length <= 0:
            return None
        grid = found.get((normalise_dtype(kv_dtype), float(heads)))
        if grid is None:
            return None
        seconds, (batch, at), _, _ = grid.lookup((float(batch_size), float(length)))
        return seconds, (int(batch), int(at))


def load_mla_table(paths: dict[str, Path], *, monotone: bool = True) -> MlaTable | None:
    """The ``MlaTable`` of the MLA files in ``paths`` (keyed by ``MLA_PHASES``; None when there
    are none)."""
    frames = {
        phase: read_mla_profile(paths[kind], phase)
        for kind, phase in MLA_PHASES.items()
        if kind in paths
    }
    if not frames:
        return None
    source = " + ".join(str(paths[kind]) for kind in MLA_PHASES if kind in paths)
    return MlaTable(frames, source, monotone=monotone)
