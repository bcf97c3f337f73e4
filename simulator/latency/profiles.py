"""Measured kernel profiles: loading, validation, normalisation, and their interpolation grids.

A profile directory holds up to four gzipped (or plain) CSV files, one per kernel class, named by
what they contain (the shipped H100 set, ``hardware/data/profiles/h100_sxm/``, keeps the names of
its source, aiconfigurator-core's performance database):

=====================  ===============================  ==========================================
class                  file name contains               required columns
=====================  ===============================  ==========================================
gemm                   ``gemm``                         gemm_dtype, m, n, k, latency
context_attention      ``context_attention``            batch_size, isl, num_heads,
                                                        num_key_value_heads, head_dim,
                                                        kv_cache_dtype, latency
generation_attention   ``generation_attention``         batch_size, step, num_heads,
                                                        num_key_value_heads, head_dim,
                                                        kv_cache_dtype, latency
nccl                   ``nccl``                         op_name, nccl_dtype, num_gpus,
                                                        message_size (elements), latency
=====================  ===============================  ==========================================

``latency`` is milliseconds per call; heads are per GPU. Loading normalises this into one
``ProfileSet`` of four small DataFrames with canonical columns and **seconds**:

- dtype names are normalised (``bfloat16`` -> ``bf16``, ``half`` -> ``fp16``, ...);
- where several kernel implementations measured the same shape (``kernel_source``), one is kept
  by a documented preference (what vLLM runs on Hopper), never an average of different kernels.
  In the shipped H100 set the sources never overlap: each shape was measured with the kernel
  vLLM dispatches to (block-FP8 GEMMs: FlashInfer for m ≤ 17, DeepGEMM above, CUTLASS where
  DeepGEMM lacks the shape; attention: FA3, FA4 for head dim 512), so all rows are kept;
- rows the kernel primitives cannot use are dropped: sliding-window attention
  (``window_size`` != 0), context rows with a cached prefix (``step`` != 0; the shipped rows have
  none), NCCL ops other than all-reduce and all-reduce in a 1-byte dtype (activations are 2-byte).

``Grid`` holds one kernel configuration's times (a GEMM dtype; attention heads, KV heads, head
dim and KV dtype; an all-reduce GPU count) on sorted axes, gaps filled, for
``table.ProfileKernels`` to interpolate; ``table.ProfileTable`` builds one per configuration.

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

Loading and gridding are not a hot path (``ProfileKernels`` caches lookups); the DataFrames
also feed the calibration fit. This is NOT a profiler.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
import zlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from slo.inputfile import InputError

__all__ = [
    "HEAD_COLUMNS",
    "PROFILE_KINDS",
    "Grid",
    "ProfileSet",
    "grid_key_int",
    "head_config_args",
    "load_profiles",
    "normalise_dtype",
    "shipped_profiles",
    "shipped_profiles_dir",
]

#: The kernel classes a profile directory can hold, in report order (= ``KERNEL_CLASSES``).
PROFILE_KINDS: tuple[str, ...] = ("gemm", "context_attention", "generation_attention", "nccl")
#: The head-configuration columns of both attention kinds, in ``KernelTimer`` argument order.
HEAD_COLUMNS: tuple[str, ...] = ("num_heads", "num_kv_heads", "head_dim", "kv_dtype")

_DTYPE_ALIASES: dict[str, str] = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float8": "fp8",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "float8_e4m3fn": "fp8",
    "fp8_block": "fp8_block",
    "int8": "int8",
    "nvfp4": "fp4",
    "fp4": "fp4",
    "int4": "int4",
}

#: Bytes per element of the NCCL dtypes we keep (message sizes are given in elements).
_NCCL_ELEMENT_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2}

# Which implementation to keep if several measured the same shape (a user profile may): what vLLM
# selects on Hopper. DeepGEMM is vLLM's block-FP8 path on H100 for the shapes it supports; FA3 is
# the Hopper FlashAttention (FA4 targets Blackwell). Unlisted sources rank after, alphabetically.
_SOURCE_PREFERENCE: tuple[str, ...] = (
    "deepgemmfp8blockscaledmmkernel",
    "cutlassfp8blockscaledmmkernel",
    "flashinferfp8blockscaledmmkernel",
    "vllm_flash_attn_fa3",
    "vllm_flash_attn_fa4",
)


@dataclass(frozen=True, slots=True)
class _Spec:
    """How to read one kind of profile file into canonical columns."""

    columns: Mapping[str, str]  # canonical name -> CSV column
    dtype_columns: tuple[str, ...]  # canonical names holding dtype strings
    keys: tuple[str, ...]  # canonical columns that identify a shape


_SPECS: dict[str, _Spec] = {
    "gemm": _Spec(
        columns={"dtype": "gemm_dtype", "m": "m", "n": "n", "k": "k"},
        dtype_columns=("dtype",),
        keys=("dtype", "m", "n", "k"),
    ),
    "context_attention": _Spec(
        columns={
            "batch_size": "batch_size",
            "new_tokens": "isl",
            "num_heads": "num_heads",
            "num_kv_heads": "num_key_value_heads",
            "head_dim": "head_dim",
            "kv_dtype": "kv_cache_dtype",
        },
        dtype_columns=("kv_dtype",),
        keys=(*HEAD_COLUMNS, "batch_size", "new_tokens"),
    ),
    "generation_attention": _Spec(
        columns={
            "batch_size": "batch_size",
            "kv_len": "step",
            "num_heads": "num_heads",
            "num_kv_heads": "num_key_value_heads",
            "head_dim": "head_dim",
            "kv_dtype": "kv_cache_dtype",
        },
        dtype_columns=("kv_dtype",),
        keys=(*HEAD_COLUMNS, "batch_size", "kv_len"),
    ),
    "nccl": _Spec(
        columns={
            "op": "op_name",
            "dtype": "nccl_dtype",
            "num_gpus": "num_gpus",
            "message_size": "message_size",
        },
        dtype_columns=("dtype",),
        keys=("num_gpus", "message_bytes"),
    ),
}


@dataclass(frozen=True)
class ProfileSet:
    """Normalised measured kernel times of one GPU (seconds per call; heads per GPU).

    Each frame has its class's canonical key columns plus ``seconds``, one row per shape:

    - ``gemm``: dtype, m, n, k;
    - ``context_attention``: num_heads, num_kv_heads, head_dim, kv_dtype, batch_size, new_tokens
      (no cached prefix);
    - ``generation_attention``: num_heads, num_kv_heads, head_dim, kv_dtype, batch_size, kv_len;
    - ``nccl``: num_gpus, message_bytes (all-reduce of 2-byte elements).

    A kind the directory lacked is an empty frame with those columns. ``gpu`` is the catalog key
    of the GPU the rows were measured on; ``source`` says where they came from.
    """

    gpu: str
    source: str
    gemm: pd.DataFrame
    context_attention: pd.DataFrame
    generation_attention: pd.DataFrame
    nccl: pd.DataFrame

    def frame(self, kind: str) -> pd.DataFrame:
        """The frame of kernel class ``kind`` (one of ``PROFILE_KINDS``)."""
        if kind not in PROFILE_KINDS:
            raise KeyError(kind)
        frame: pd.DataFrame = getattr(self, kind)
        return frame

    def replace(self, **frames: pd.DataFrame) -> ProfileSet:
        """A copy with some frames replaced (used to split fitting and held-out rows)."""
        current = {kind: self.frame(kind) for kind in PROFILE_KINDS}
        current.update(frames)
        return ProfileSet(gpu=self.gpu, source=self.source, **current)

    def __len__(self) -> int:
        return sum(len(self.frame(kind)) for kind in PROFILE_KINDS)


def normalise_dtype(name: str) -> str:
    """Canonical precision name: 'bfloat16' -> 'bf16', 'half' -> 'fp16', ...; unknown names are
    kept, lower-cased (a user profile may carry a variant we do not know)."""
    key = str(name).strip().lower()
    return _DTYPE_ALIASES.get(key, key)


def shipped_profiles_dir(gpu: str = "h100_sxm") -> Path:
    """Directory of the profiles that ship with kvplan for ``gpu`` (``InputError`` if none)."""
    # The package is installed as plain files (editable or wheel), so the data is a real path.
    root = Path(str(resources.files("hardware") / "data" / "profiles"))
    directory = root / gpu.lower()
    if not directory.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise InputError(
            f"no shipped kernel profiles for GPU '{gpu}'; shipped: {', '.join(known) or 'none'}"
        )
    return directory


@cache
def shipped_profiles(gpu: str = "h100_sxm") -> ProfileSet:
    """The shipped profiles of ``gpu``, loaded once per process (treat the frames as read-only)."""
    return load_profiles(shipped_profiles_dir(gpu), gpu=gpu.lower())


def load_profiles(directory: str | Path, *, gpu: str | None = None) -> ProfileSet:
    """Load every profile CSV in ``directory`` (see the module docstring for the format).

    ``gpu`` names the GPU the rows were measured on; by default the directory's name. Raises
    ``InputError`` (one line naming the file, column or row) for a missing directory, a directory
    without any profile file, or a malformed file.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such profile directory")
    files = sorted(p for p in directory.iterdir() if re.search(r"\.csv(\.gz)?$", p.name))
    frames: dict[str, pd.DataFrame] = {}
    for kind in PROFILE_KINDS:
        matches = [p for p in files if kind in p.name.lower()]
        if len(matches) > 1:
            names = ", ".join(p.name for p in matches)
            raise InputError(f"{directory}: more than one {kind} profile ({names}); keep one")
        frames[kind] = _read(matches[0], kind) if matches else _empty(kind)
    if not any(len(f) for f in frames.values()):
        raise InputError(
            f"{directory}: no kernel profile CSV found; expected files whose names contain "
            f"{', '.join(PROFILE_KINDS)} (.csv or .csv.gz)"
        )
    return ProfileSet(gpu=(gpu or directory.name).lower(), source=str(directory), **frames)


def _empty(kind: str) -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=object) for col in (*_SPECS[kind].keys, "seconds")})


def _read(path: Path, kind: str) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path, keep_default_na=False)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise InputError(f"{path}: cannot read CSV: {str(err).splitlines()[0]}") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file; expected a header row") from None
    spec = _SPECS[kind]
    wanted = {**spec.columns, "seconds": "latency"}
    missing = [col for col in wanted.values() if col not in raw.columns]
    if missing:
        raise InputError(
            f"{path}: missing column '{missing[0]}' (a {kind} profile needs "
            f"{', '.join(wanted.values())})"
        )
    raw = _filter_rows(raw, path)
    out = pd.DataFrame(index=raw.index)
    for canonical, column in wanted.items():
        if canonical in spec.dtype_columns or canonical == "op":
            out[canonical] = raw[column].astype(str).str.strip()
        else:
            out[canonical] = _numbers(raw[column], path, column)
    for canonical in spec.dtype_columns:
        names = out[canonical]
        out[canonical] = names.map({name: normalise_dtype(name) for name in names.unique()})
    out["seconds"] = out["seconds"] / 1e3  # the CSVs give milliseconds
    out["_source"] = raw["kernel_source"].astype(str) if "kernel_source" in raw.columns else ""
    if kind == "nccl":
        out = _nccl_bytes(out)
    return _one_row_per_shape(out, spec.keys)


def _filter_rows(raw: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Drop the rows no kernel primitive can use (see the module docstring)."""
    keep = pd.Series(True, index=raw.index)
    if "window_size" in raw.columns:
        keep &= _numbers(raw["window_size"], path, "window_size") == 0
    if "isl" in raw.columns and "step" in raw.columns and "context" in path.name:
        keep &= _numbers(raw["step"], path, "step") == 0
    return raw[keep]


def _numbers(column: pd.Series, path: Path, name: str) -> pd.Series:
    """``column`` as floats; ``InputError`` naming the first row that is not a positive number
    (sizes and latencies are positive; ``window_size`` and ``step`` may be 0)."""
    values = column if pd.api.types.is_numeric_dtype(column) else None
    if values is None:
        values = pd.to_numeric(column, errors="coerce")
    bad = values.isna() | (values < 0)
    if name not in ("window_size", "step"):
        bad |= values <= 0
    if bad.any():
        position = int(np.argmax(bad.to_numpy()))
        line = int(column.index[position]) + 2  # read_csv numbers data rows from 0; + header
        raise InputError(
            f"{path}: line {line}: column '{name}': expected a positive number, "
            f"got '{column.iloc[position]}'"
        )
    return values.astype(float)


def _nccl_bytes(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep 2-byte all-reduce rows and turn element counts into bytes."""
    frame = frame[
        (frame["op"].str.lower() == "all_reduce") & frame["dtype"].isin(_NCCL_ELEMENT_BYTES)
    ]
    frame = frame.assign(
        message_bytes=frame["message_size"] * frame["dtype"].map(_NCCL_ELEMENT_BYTES)
    )
    return frame.drop(columns=["op", "dtype", "message_size"])


def _one_row_per_shape(frame: pd.DataFrame, keys: tuple[str, ...]) -> pd.DataFrame:
    """One row per shape: the preferred kernel source, then the median of repeated rows."""
    rank = {name: i for i, name in enumerate(_SOURCE_PREFERENCE)}
    lowered = frame["_source"].astype(str).str.lower()
    ranks = {name: rank.get(name, len(rank)) for name in lowered.unique()}
    frame = frame.assign(_rank=lowered.map(ranks), _name=lowered)
    frame = frame.sort_values(["_rank", "_name"], kind="stable")
    best = frame.groupby(list(keys), sort=False)["_name"].transform("first")
    chosen = frame[frame["_name"] == best]
    result = chosen.groupby(list(keys), as_index=False).agg(seconds=("seconds", "median"))
    return result.sort_values(list(keys), ignore_index=True)


# ----- grids -------------------------------------------------------------------------------------
_Point = tuple[float, ...]


class Grid:
    """Seconds of one kernel configuration on a complete rectangular grid, interpolated in
    log(time) over log(size).

    ``measured`` marks the cells that hold a measurement (the others were filled); ``monotone``
    lists the axes made non-decreasing by isotonic regression (module doc).
    """

    def __init__(
        self,
        axes: list[list[float]],
        seconds: np.ndarray,
        measured: np.ndarray,
        *,
        monotone: Sequence[int],
    ) -> None:
        self.axes = axes
        self.log_axes: list[list[float]] = [np.log(a).tolist() for a in axes]
        self.measured = measured
        log_seconds = np.log(seconds)
        if len(monotone):
            smoothed = log_seconds
            for axis in monotone:
                smoothed = np.apply_along_axis(_isotonic, axis, smoothed)
            changed = smoothed != log_seconds  # keep untouched points bit-exact
            seconds = np.where(changed, np.exp(smoothed), seconds)
            log_seconds = smoothed
        self.monotone = tuple(monotone)
        self.seconds = seconds
        self.log_seconds = log_seconds

    @classmethod
    def measure(
        cls,
        frame: pd.DataFrame,
        axes: Sequence[str],
        roofline: Callable[[_Point], float],
        *,
        monotone: Sequence[int],
    ) -> Grid:
        """The grid of ``frame``'s rows; ``roofline`` (profiled GPU) fills unmeasured cells."""
        values = [np.unique(frame[a].to_numpy(dtype=float)) for a in axes]
        grid_axes: list[list[float]] = [v.tolist() for v in values]
        index = tuple(
            np.searchsorted(v, frame[a].to_numpy(dtype=float))
            for v, a in zip(values, axes, strict=True)
        )
        seconds = np.full(tuple(len(v) for v in values), np.nan)
        seconds[index] = frame["seconds"].to_numpy(dtype=float)
        measured = np.isfinite(seconds)
        _fill_gaps(seconds, measured, grid_axes, roofline)
        return cls(grid_axes, seconds, measured, monotone=monotone)

    def carried(self, ratio: Callable[[_Point], float]) -> Grid:
        """This grid with every cell multiplied by ``ratio(cell)`` (then made monotone again):
        measurements carried to another configuration or GPU."""
        seconds = self.seconds.copy()
        for cell in np.ndindex(seconds.shape):
            seconds[cell] *= ratio(tuple(self.axes[d][i] for d, i in enumerate(cell)))
        return Grid(self.axes, seconds, self.measured, monotone=self.monotone)

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
    """Fill unmeasured cells in place: roofline(cell) × measured(anchor) / roofline(anchor).

    The anchor is the nearest measured cell (log distance) with the same first coordinate (GEMM
    m, attention batch), else the nearest measured cell overall: searching one slice at a time
    keeps sparse grids (a few GEMM (n, k) pairs) cheap to build.
    """
    if measured.all():
        return
    log_axes = [np.log(np.asarray(a)) for a in axes]

    def logs(cells: np.ndarray) -> np.ndarray:
        return np.column_stack([log_axes[d][cells[:, d]] for d in range(len(axes))])

    everywhere = np.argwhere(measured)
    for first in range(seconds.shape[0]):
        missing = np.argwhere(~measured[first])
        if not len(missing):
            continue
        missing = np.column_stack([np.full(len(missing), first), missing])
        known = np.argwhere(measured[first])
        known = np.column_stack([np.full(len(known), first), known]) if len(known) else everywhere
        distances = ((logs(missing)[:, None, :] - logs(known)[None, :, :]) ** 2).sum(axis=2)
        for cell, near in zip(missing, known[np.argmin(distances, axis=1)], strict=True):
            point = tuple(axes[d][i] for d, i in enumerate(cell))
            anchor = tuple(axes[d][i] for d, i in enumerate(near))
            ratio = seconds[tuple(near)] / max(roofline(anchor), 1e-12)
            seconds[tuple(cell)] = roofline(point) * ratio


def grid_key_int(value: Hashable) -> int:
    """A grid key's number (pandas group keys are typed ``Hashable``; these are floats)."""
    return int(cast(float, value))


def head_config_args(key: tuple[Hashable, ...]) -> tuple[int, int, int, str]:
    heads, kv_heads, head_dim, kv_dtype = key
    return grid_key_int(heads), grid_key_int(kv_heads), grid_key_int(head_dim), str(kv_dtype)
