"""Measured kernel profiles: reading, validation and normalisation into a ``ProfileSet``.

A profile directory (``profile_files.py``: naming, engines, shipped and user locations) holds
up to four gzipped (or plain) CSV files per engine, one per kernel class, in the format of
aiconfigurator-core's performance database:

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

``latency`` is milliseconds per call (positive); sizes are positive; heads are per GPU. Loading
normalises this into one ``ProfileSet`` of four small DataFrames with canonical columns and
**seconds**:

- dtype names are normalised (``bfloat16`` -> ``bf16``, ``nvfp4`` -> ``fp4``, TensorRT-LLM's
  ``sq`` (SmoothQuant W8A8) -> ``int8``, ``int4_wo`` -> ``int4``); a name outside
  ``KNOWN_DTYPES`` is an ``InputError`` naming the file, line and column;
- where several kernel implementations measured the same shape (``kernel_source``), one is kept
  by a documented preference (what the engine dispatches to by default), never an average of
  different kernels: block-FP8 GEMMs DeepGEMM > CUTLASS > FlashInfer (vLLM on Hopper);
  attention TRT-LLM MHA (SGLang's Blackwell default) > FA3 (Hopper) > FlashInfer (Ampere/Ada)
  > Triton. Rows measured with FP8 attention math (``attn_dtype`` fp8, TensorRT-LLM's FP8
  context FMHA) give way to bf16 ones of the same shape: the kernel primitives model bf16
  queries;
- rows the kernel primitives cannot use are dropped: sliding-window attention
  (``window_size`` != 0), context rows with a cached prefix (``step`` != 0; the shipped rows have
  none), NCCL ops other than all-reduce and all-reduce in a 1-byte dtype (activations are 2-byte).

Loading is not a hot path (``table.ProfileKernels`` grids and caches lookups); the DataFrames
also feed the calibration fit. This is NOT a profiler.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.latency.profile_files import (
    DEFAULT_ENGINE,
    PROFILE_KINDS,
    ProfileFiles,
    directory_files,
    shipped_profiles_dir,
)
from slo.inputfile import InputError

__all__ = [
    "HEAD_COLUMNS",
    "KNOWN_DTYPES",
    "PROFILE_KINDS",
    "ProfileSet",
    "load_profile_files",
    "load_profiles",
    "normalise_dtype",
    "profile_csv",
    "profile_numbers",
    "shipped_profiles",
    "shipped_profiles_dir",
    "source_rank",
]

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
    "sq": "int8",  # TensorRT-LLM SmoothQuant: W8A8 int8 GEMMs
    "int8_wo": "int8_wo",  # weight-only int8 (activations stay 16-bit)
    "nvfp4": "fp4",
    "fp4": "fp4",
    "int4": "int4",
    "int4_wo": "int4",  # the catalog's int4 is weight-only
}
#: Canonical precision names a profile may carry.
KNOWN_DTYPES: frozenset[str] = frozenset(_DTYPE_ALIASES.values())

#: Bytes per element of the NCCL dtypes we keep (message sizes are given in elements).
_NCCL_ELEMENT_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2}

# Which implementation to keep if several measured the same shape (module doc). Unlisted sources
# rank after, alphabetically.
_SOURCE_PREFERENCE: tuple[str, ...] = (
    "deepgemmfp8blockscaledmmkernel",
    "cutlassfp8blockscaledmmkernel",
    "flashinferfp8blockscaledmmkernel",
    "trtllm_mha",
    "vllm_flash_attn_fa3",
    "fa3",
    "vllm_flash_attn_fa4",
    "flashinfer",
    "triton",
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
    of the GPU the rows were measured on, ``engine`` the engine whose kernels they are (one of
    ``profile_files.ENGINES``); ``source`` says where they came from.
    """

    gpu: str
    source: str
    gemm: pd.DataFrame
    context_attention: pd.DataFrame
    generation_attention: pd.DataFrame
    nccl: pd.DataFrame
    engine: str = DEFAULT_ENGINE

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
        return ProfileSet(gpu=self.gpu, source=self.source, engine=self.engine, **current)

    def __len__(self) -> int:
        return sum(len(self.frame(kind)) for kind in PROFILE_KINDS)


def normalise_dtype(name: str) -> str:
    """Canonical precision name: 'bfloat16' -> 'bf16', 'half' -> 'fp16', 'nvfp4' -> 'fp4', ...;
    an unknown name is returned lower-cased (the loader rejects it, see ``KNOWN_DTYPES``)."""
    key = str(name).strip().lower()
    return _DTYPE_ALIASES.get(key, key)


@cache
def shipped_profiles(gpu: str = "h100_sxm", engine: str = DEFAULT_ENGINE) -> ProfileSet:
    """The shipped profiles of ``gpu`` for ``engine``, loaded once per process (treat the frames
    as read-only)."""
    return load_profiles(shipped_profiles_dir(gpu), gpu=gpu.lower(), engine=engine)


def load_profiles(
    directory: str | Path, *, gpu: str | None = None, engine: str = DEFAULT_ENGINE
) -> ProfileSet:
    """Load the profile CSVs of ``directory`` that serve ``engine`` (``profile_files``: the
    engine's own files, else engine-neutral ones; the newest version of each class).

    ``gpu`` names the GPU the rows were measured on; by default the directory's name. Raises
    ``InputError`` (one line naming the file, line and column) for a missing directory, a
    directory without any profile file for ``engine``, or a malformed file.
    """
    directory = Path(directory)
    files = directory_files(directory, engine)
    if not files:
        raise InputError(
            f"{directory}: no kernel profile CSV for engine '{engine}'; expected files whose "
            f"names contain {', '.join(PROFILE_KINDS)} (.csv or .csv.gz), prefixed '{engine}_' "
            f"or with no engine prefix"
        )
    located = ProfileFiles((gpu or directory.name).lower(), engine, files, str(directory))
    return load_profile_files(located)


def load_profile_files(located: ProfileFiles) -> ProfileSet:
    """Read the files ``located`` names into a ``ProfileSet`` (absent classes: empty frames)."""
    frames = {
        kind: _read(located.files[kind], kind) if kind in located.files else _empty(kind)
        for kind in PROFILE_KINDS
    }
    return ProfileSet(gpu=located.gpu, source=located.source, engine=located.engine, **frames)


def _empty(kind: str) -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=object) for col in (*_SPECS[kind].keys, "seconds")})


#: Largest profile CSV read (bytes, after decompression): the largest measured table is 26 MB;
#: the cap keeps a gzip bomb from filling memory.
MAX_PROFILE_BYTES = 1 << 30


def _contents(path: Path) -> bytes:
    """The file's bytes, gunzipped where its name ends ``.gz``; at most ``MAX_PROFILE_BYTES``.

    Read here in Python, not by pandas' C reader: a signal (Ctrl-C, a worker's SIGTERM) that
    lands inside pandas' read callback comes out as a ``ParserError`` ("Calling read(nbytes) on
    source failed"), which would turn an interrupt into a bad-file error. Parsing from memory
    leaves no Python code for a signal handler to run in.
    """
    with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as stream:
        data = stream.read(MAX_PROFILE_BYTES + 1)
    if len(data) > MAX_PROFILE_BYTES:
        raise InputError(f"{path}: larger than {MAX_PROFILE_BYTES >> 20} MiB; not a profile table")
    return data


def profile_csv(path: Path) -> pd.DataFrame:
    """A profile file's rows as read (strings kept, nothing validated); ``InputError`` for a
    file that is not a readable, non-empty CSV (gzipped where its name ends ``.gz``)."""
    try:
        return pd.read_csv(io.BytesIO(_contents(path)), keep_default_na=False)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise InputError(f"{path}: cannot read CSV: {str(err).splitlines()[0]}") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file; expected a header row") from None


def _read(path: Path, kind: str) -> pd.DataFrame:
    raw = profile_csv(path)
    spec = _SPECS[kind]
    wanted = {**spec.columns, "seconds": "latency"}
    missing = [col for col in wanted.values() if col not in raw.columns]
    if missing:
        raise InputError(
            f"{path}: line 1: missing column '{missing[0]}' (a {kind} profile needs "
            f"{', '.join(wanted.values())})"
        )
    raw = _filter_rows(raw, path)
    out = pd.DataFrame(index=raw.index)
    for canonical, column in wanted.items():
        if canonical in spec.dtype_columns or canonical == "op":
            out[canonical] = raw[column].astype(str).str.strip()
        else:
            out[canonical] = profile_numbers(raw[column], path, column)
    for canonical in spec.dtype_columns:
        out[canonical] = _dtypes(out[canonical], path, spec.columns[canonical])
    out["seconds"] = out["seconds"] / 1e3  # the CSVs give milliseconds
    out["_source"] = raw["kernel_source"].astype(str) if "kernel_source" in raw.columns else ""
    attention = raw["attn_dtype"] if "attn_dtype" in raw.columns else None
    out["_attn"] = 0 if attention is None else (_dtypes(attention, path, "attn_dtype") != "bf16")
    if kind == "nccl":
        out = _nccl_bytes(out)
    return _one_row_per_shape(out, spec.keys)


def source_rank(kernel_source: str) -> int:
    """Preference of a ``kernel_source`` among several that measured one shape (lower wins;
    module doc)."""
    name = str(kernel_source).strip().lower()
    return _SOURCE_PREFERENCE.index(name) if name in _SOURCE_PREFERENCE else len(_SOURCE_PREFERENCE)


def _dtypes(column: pd.Series, path: Path, name: str) -> pd.Series:
    """Canonical dtype names of ``column``; ``InputError`` naming the first unknown one."""
    names = column.astype(str).str.strip()
    mapping = {value: normalise_dtype(value) for value in names.unique()}
    unknown = [value for value, canonical in mapping.items() if canonical not in KNOWN_DTYPES]
    if unknown:
        position = int(np.argmax((names == unknown[0]).to_numpy()))
        line = int(column.index[position]) + 2  # read_csv numbers data rows from 0; + header
        raise InputError(
            f"{path}: line {line}: column '{name}': unknown dtype '{unknown[0]}'; known: "
            f"{', '.join(sorted(_DTYPE_ALIASES))}"
        )
    return names.map(mapping)


def _filter_rows(raw: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Drop the rows no kernel primitive can use (see the module docstring)."""
    keep = pd.Series(True, index=raw.index)
    if "window_size" in raw.columns:
        keep &= profile_numbers(raw["window_size"], path, "window_size") == 0
    if "isl" in raw.columns and "step" in raw.columns and "context" in path.name:
        keep &= profile_numbers(raw["step"], path, "step") == 0
    return raw[keep]


#: The largest number a profile column may hold (sizes in elements or bytes, latencies in ms):
#: 1e12 is past any kernel's shape or time, while 1e300 ms once made a step that no longer
#: moved the simulated clock.
MAX_PROFILE_NUMBER = 1e12


def profile_numbers(column: pd.Series, path: Path, name: str) -> pd.Series:
    """``column`` as floats; ``InputError`` naming the first row that is not a positive number
    (sizes and latencies are positive; ``window_size`` and ``step`` may be 0)."""
    values = column if pd.api.types.is_numeric_dtype(column) else None
    if values is None:
        values = pd.to_numeric(column, errors="coerce")
    bad = ~values.abs().lt(np.inf) | (values < 0)  # NaN (unparsed) and inf too
    if name not in ("window_size", "step"):
        bad |= values <= 0
    huge = ~bad & (values > MAX_PROFILE_NUMBER)
    for rows, expected in ((bad, "a positive number"), (huge, f"at most {MAX_PROFILE_NUMBER:.0e}")):
        if rows.any():
            position = int(np.argmax(rows.to_numpy()))
            line = int(column.index[position]) + 2  # read_csv numbers data rows from 0; + header
            raise InputError(
                f"{path}: line {line}: column '{name}': expected {expected}, "
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
    """One row per shape: bf16 attention math first, the preferred kernel source next, then the
    median of repeated rows of that one kernel."""
    lowered = frame["_source"].astype(str).str.lower()
    ranks = {name: source_rank(name) for name in lowered.unique()}
    choice = lowered + "|" + frame["_attn"].astype(int).astype(str)
    frame = frame.assign(_rank=lowered.map(ranks), _name=lowered, _choice=choice)
    frame = frame.sort_values(["_attn", "_rank", "_name"], kind="stable")
    best = frame.groupby(list(keys), sort=False)["_choice"].transform("first")
    chosen = frame[frame["_choice"] == best]
    result = chosen.groupby(list(keys), as_index=False).agg(seconds=("seconds", "median"))
    return result.sort_values(list(keys), ignore_index=True)
