"""Where kernel profiles live and which file of a directory serves a GPU, engine and kernel class.

A *profile directory* holds the measurements of one GPU: gzipped (or plain) CSV files named
``<engine>_<version>_<class>.csv.gz`` (``vllm_0.24.0_gemm.csv.gz``,
``sglang_0.5.14_generation_attention.csv.gz``) or without an engine prefix for kernels every
engine shares (``nccl_2.27.3.csv.gz``, or a user's ``gemm.csv``). The classes are those of
``PROFILE_KINDS``, plus the optional layer tables, only where asked for with ``moe=True``: the
fused-MoE layer (``MOE_KIND``: ``*_moe.csv.gz``, read by ``moe_table.py``) and the MLA attention
cores (``MLA_KINDS``: ``*_context_mla`` / ``*_generation_mla``, read by ``mla_table.py``), and
another engine's MoE file where it times a kernel the engine runs (``MOE_LENDERS``); other
files (whole MLA modules) are ignored. For an
engine and a class the directory's file is the one with that engine's prefix, else the
engine-neutral one; of several, the newest version (the numbers in the name compared as
integers: ``nccl_2.29.2`` over ``nccl_2.27.3``).

Two places hold profile directories, one per GPU named by its catalog key:

- the *shipped* ones, ``hardware/data/profiles/<gpu>/`` (catalog shapes of six GPUs × three
  engines; the README there says how they were made);
- a *user* root (``kvplan profiles import`` writes ``<root>/<gpu>/``): the CLI passes its
  location in explicitly; the simulator never looks for it on its own.

``resolve_profile_files`` picks, per class, the user's file over the shipped one. Nothing here
reads a file's contents (``profiles.py`` does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from slo.inputfile import InputError

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "LAYER_KINDS",
    "MLA_KINDS",
    "MOE_KIND",
    "MOE_LENDERS",
    "PROFILE_KINDS",
    "MoeLender",
    "ProfileFiles",
    "directory_files",
    "engine_of",
    "file_engine",
    "lent_moe_kind",
    "resolve_profile_files",
    "shipped_profiles_dir",
    "shipped_profiles_root",
]

#: The kernel classes a profile directory can hold, in report order (= ``KERNEL_CLASSES``).
PROFILE_KINDS: tuple[str, ...] = ("gemm", "context_attention", "generation_attention", "nccl")
#: The optional class of whole fused-MoE layers (``moe_table.py``); not one of the kernel
#: primitives, so not in ``PROFILE_KINDS`` (calibration and import iterate those).
MOE_KIND = "moe"
_MOE_NAME = re.compile(r"(^|_)moe\.csv(\.gz)?$", re.IGNORECASE)
#: The MLA attention-core tables (``mla_table.py``), by the name part that marks them.
MLA_KINDS: tuple[str, ...] = ("context_mla", "generation_mla")
#: Every optional layer table a directory may add to the kernel primitives.
LAYER_KINDS: tuple[str, ...] = (MOE_KIND, *MLA_KINDS)


@dataclass(frozen=True, slots=True)
class MoeLender:
    """Rows an engine's MoE table borrows from another engine's profile (``MOE_LENDERS``)."""

    #: The engine whose MoE profile lends them.
    engine: str
    #: The table dtypes lent (``moe_table`` names).
    dtypes: tuple[str, ...]
    #: A part of the lent rows' ``kernel_source``.
    kernel: str
    #: Whether the kernel is the borrowing engine's default: its rows then price the shapes
    #: its own profile lacks; otherwise they are only there for a deployment naming the
    #: kernel (``ServingConfig.moe_kernel``).
    default: bool = True


#: The MoE table dtypes of MXFP4 experts, with bf16 and with MXFP8 activations
#: (``moe_table.MXFP4_MXFP8``; spelt out here: ``moe_table`` imports ``profiles``, which imports
#: this module).
_MXFP4_KINDS: tuple[str, ...] = ("mxfp4", "mxfp4_mxfp8")

#: Fused-MoE layers an engine runs in a kernel that another engine's profile times and its own does
#: not, by engine. Where the engine's own MoE file lacks a shape, the lender's rows of those dtypes
#: and that kernel price it (``moe_table.load_moe_table``; only as an alternative a deployment names
#: where the kernel is not the engine's default, ``MoeLender.default``); the lender's file is found
#: like the engine's own, under ``lent_moe_kind``. TensorRT-LLM runs gpt-oss's MXFP4 experts in its
#: TRTLLM MoE backend on Blackwell (trtllm-gen kernels, MXFP8 activations) and in its TRITON backend
#: on Hopper (OpenAI's ``triton_kernels``, bf16 activations): its gpt-oss deployment guide, "MoE
#: Backend Support Matrix" ("For Blackwell, the default MoE backend is TRTLLM. For Hopper, the
#: default MoE backend is TRITON."). FlashInfer's ``trtllm_fp4_block_scale_moe`` that SGLang runs on
#: SM100 is that trtllm-gen kernel (SGLang's B200/B300 rows, ``sglang_flashinfer_trtllm_moe``, with
#: bf16 and with MXFP8 activations), and vLLM's Hopper rows time ``triton_kernels``' ``matmul_ogs``
#: (``..._oaitritonmxfp4experts...``); no TensorRT-LLM profile times either at gpt-oss's shapes,
#: where its layer was composed from NVFP4 GEMMs (on B200 1.5-2× the measured trtllm-gen layer at
#: 64-1,024 tokens). SGLang runs gpt-oss's experts in the same ``triton_kernels`` on Hopper
#: (``server_args``: GptOss, MoE runner ``auto`` → ``triton_kernel``); its own Hopper rows time its
#: fused-MoE Triton kernel, which it does not run there (``moe_table.NOT_THE_ENGINES_PATH``), so it
#: borrows vLLM's. vLLM runs the trtllm-gen kernel with MXFP8 activations under
#: ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`` (``moe_table.MXFP4_MXFP8``), which its own profile
#: times at other shapes than gpt-oss's, and INT4 experts there under
#: ``VLLM_USE_FLASHINFER_MOE_INT4=1`` (its default is Marlin, which its profile times: the lent rows
#: are an alternative a deployment names, ``ServingConfig.moe_kernel``; SGLang's B200 rows at
#: Kimi-K2's shape are 0.33-0.38× its Marlin rows at 4,096-16,384 tokens).
MOE_LENDERS: dict[str, tuple[MoeLender, ...]] = {
    "trtllm": (
        MoeLender("sglang", _MXFP4_KINDS, "flashinfer_trtllm"),
        MoeLender("vllm", _MXFP4_KINDS, "oaitriton"),
    ),
    "sglang": (MoeLender("vllm", _MXFP4_KINDS, "oaitriton"),),
    "vllm": (
        MoeLender("sglang", ("mxfp4_mxfp8",), "flashinfer_trtllm"),
        MoeLender("sglang", ("int4",), "flashinfer_trtllm", default=False),
    ),
}


def lent_moe_kind(lender: str) -> str:
    """The ``ProfileFiles.files`` key of the MoE file ``lender`` lends (``MOE_LENDERS``)."""
    return f"{MOE_KIND}@{lender}"


_MLA_NAME = {kind: re.compile(rf"(^|_){kind}\.csv(\.gz)?$", re.IGNORECASE) for kind in MLA_KINDS}
#: Engines whose kernels profiles can describe: the shipped backend presets' names.
ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm")
#: The engine assumed for a preset that names none of ``ENGINES`` (a user preset file).
DEFAULT_ENGINE = "vllm"

_CSV = re.compile(r"\.csv(\.gz)?$", re.IGNORECASE)


def engine_of(backend: str) -> str:
    """The engine whose kernels ``backend`` (a preset name or a preset file's stem) runs: the
    engine it names or starts with ('sglang', 'trtllm_tuned' -> 'trtllm'), else
    ``DEFAULT_ENGINE``."""
    key = Path(str(backend)).stem.strip().lower()
    for engine in ENGINES:
        if key == engine or key.startswith((f"{engine}_", f"{engine}-")):
            return engine
    return DEFAULT_ENGINE


def file_engine(name: str) -> str | None:
    """The engine a profile file name is for (its prefix before the first '_'), or None."""
    prefix = name.lower().split("_", 1)[0]
    return prefix if prefix in ENGINES else None


def _kind(name: str) -> str | None:
    lowered = name.lower()
    found = next((kind for kind in PROFILE_KINDS if kind in lowered), None)
    found = found or next((k for k, name in _MLA_NAME.items() if name.search(lowered)), None)
    return found or (MOE_KIND if _MOE_NAME.search(lowered) else None)


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name))


@dataclass(frozen=True, slots=True)
class ProfileFiles:
    """The file of each kernel class that serves one GPU and engine (classes without one are
    absent), and where the files came from, in words."""

    gpu: str
    engine: str
    files: dict[str, Path]
    source: str

    def key(self) -> tuple[str, ...]:
        """A hashable identity (for caching tables built from these files)."""
        lent = tuple(sorted(k for k in self.files if k not in (*PROFILE_KINDS, *LAYER_KINDS)))
        kinds = (*PROFILE_KINDS, *LAYER_KINDS, *lent)
        return (self.gpu, self.engine, *(str(self.files.get(k, "")) for k in kinds))


def directory_files(
    directory: str | Path, engine: str, *, moe: bool = False, lent: bool = True
) -> dict[str, Path]:
    """Per class, the file of ``directory`` that serves ``engine`` (module doc); with ``moe``
    also its layer tables (``LAYER_KINDS``: fused MoE, MLA) and, unless ``lent`` is False, the
    MoE files other engines lend it (``MOE_LENDERS``, under ``lent_moe_kind``). ``InputError``
    for a missing directory or two candidates of the same version."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such profile directory")
    chosen: dict[str, Path] = {}
    for kind in (*PROFILE_KINDS, *LAYER_KINDS) if moe else PROFILE_KINDS:
        files = [p for p in directory.iterdir() if _CSV.search(p.name) and _kind(p.name) == kind]
        own = [p for p in files if file_engine(p.name) == engine]
        candidates = own or [p for p in files if file_engine(p.name) is None]
        if not candidates:
            continue
        candidates.sort(key=lambda p: (_version(p.name), p.name))
        newest = candidates[-1]
        if len(candidates) > 1 and _version(candidates[-2].name) == _version(newest.name):
            names = ", ".join(p.name for p in candidates)
            raise InputError(
                f"{directory}: more than one {kind} profile for {engine} ({names}); keep one"
            )
        chosen[kind] = newest
    lenders = {lender.engine for lender in MOE_LENDERS.get(engine, ())} if moe and lent else ()
    for lender in sorted(lenders):
        lent_file = directory_files(directory, lender, moe=True, lent=False).get(MOE_KIND)
        if lent_file is not None and file_engine(lent_file.name) == lender:
            chosen[lent_moe_kind(lender)] = lent_file
    return chosen


def shipped_profiles_root() -> Path:
    """The directory holding the shipped profile directories, one per GPU."""
    # The package is installed as plain files (editable or wheel), so the data is a real path.
    return Path(str(resources.files("hardware") / "data" / "profiles"))


def shipped_profiles_dir(gpu: str = "h100_sxm") -> Path:
    """Directory of the profiles that ship with kvplan for ``gpu`` (``InputError`` if none)."""
    root = shipped_profiles_root()
    directory = root / gpu.lower()
    if not directory.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        raise InputError(
            f"no shipped kernel profiles for GPU '{gpu}'; shipped: {', '.join(known) or 'none'}"
        )
    return directory


def resolve_profile_files(
    gpu: str, engine: str, roots: Sequence[str | Path] = ()
) -> ProfileFiles | None:
    """The files that time ``gpu`` under ``engine``: per class (``MOE_KIND`` included), from
    the first of ``roots`` (user roots, each holding ``<gpu>/`` directories) that has one, else
    the shipped one. None when no root and nothing shipped has any file for this GPU and
    engine."""
    gpu = gpu.lower()
    files: dict[str, Path] = {}
    sources: list[str] = []
    for root in [*map(Path, roots), shipped_profiles_root()]:
        directory = root / gpu
        if not directory.is_dir():
            continue
        found = directory_files(directory, engine, moe=True)
        new = {kind: path for kind, path in found.items() if kind not in files}
        if new:
            files.update(new)
            sources.append(str(directory))
    if not files:
        return None
    return ProfileFiles(gpu=gpu, engine=engine, files=files, source=" + ".join(sources))
