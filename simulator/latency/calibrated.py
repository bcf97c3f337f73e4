"""Calibrated kernels: peak-rate roofline terms with non-negative coefficients fitted to profiles.

For every kernel class the time of one call is a non-negative combination of a few *terms*:

- ``compute``: FLOPs at the GPU's dense peak for the precision (seconds at 100% efficiency);
- ``memory``: bytes at the HBM peak (seconds at 100% efficiency);
- ``roofline``: ``max(compute, memory)``, the classic roofline;
- ``activation``: GEMM input bytes at the HBM peak (an activation-quantisation pass);
- ``overhead_m32_s``: a fixed cost only for GEMMs of ≥ 32 tokens: engines switch kernels above a
  small-batch cut-off (the H100 profile's block-FP8 rows: FlashInfer up to m = 17, DeepGEMM from
  m = 32 with a ~30 µs higher floor; the exact cut between 17 and 32 is not measured);
- ``overhead_s``: a fixed launch/latency cost; ``per_request_s``, ``per_request_kv_head_s``:
  costs per request and per (request, KV head) (attention kernels launch work per sequence and
  head); ``per_peer_s``: per extra GPU of an all-reduce;
- ``wire``: an all-reduce's ring traffic ``2(n-1)/n × bytes`` at the GPU link's peak, and
  ``wire_below_<size>`` = the same for ``min(bytes, size)``: extra cost per byte of small
  messages (NCCL's low-latency protocols reach less bandwidth).

``time = Σ coefficient × term``. With only ``roofline`` and ``overhead_s`` this is the familiar
"roofline × scale + overhead"; the other terms let a fit express what one factor cannot. Measured
on the H100 profiles: one factor and an overhead on the roofline leave 16–23% MAPE on prefill
attention (neither purely compute- nor memory-bound) and 18% on decode attention (which pays per
sequence); these terms bring every class under 10% on the catalog's shapes
(``bench/latency_accuracy.py``). FLOP and byte counts follow ``roofline.py``'s convention
(compulsory traffic) but are computed here, so a calibration file stays consistent with the
terms it was fitted on. Every term is non-decreasing in every size and every coefficient is
≥ 0, so a calibrated time never decreases when a batch grows. Coefficients of the dimensionless
terms are 1/efficiency.

Coefficients are per kernel class and *variant*: the GEMM weight precision, the KV-cache
precision for attention, one variant (``all_reduce``) for NCCL. They live in a calibration file
(YAML, ``Calibration``) written by ``kvplan calibrate`` (``fit.py``); one per GPU and engine
with shipped profiles ships in ``simulator/data/calibration/<gpu>_<engine>.yaml``. A calibration
is tied to the GPU it was fitted on: loading a file for another GPU is an ``InputError``; only
the registry's bare ``calibrated`` carries the shipped H100 coefficients to a GPU without its
own, with a warning.

Not a profile table (``table.py``) and not ``RooflineKernels`` (efficiency factors read off the
profiles by hand): a small fitted model, usable wherever the roofline is.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hardware.precision import gemm_compute_precision
from hardware.schema import BYTES_PER_ELEMENT, GpuSpec
from simulator.latency._cached import CachedKernels, Heads, float_heads
from simulator.latency.kernels import KERNEL_CLASSES, KernelClass
from simulator.latency.profile_files import DEFAULT_ENGINE
from simulator.latency.profiles import HEAD_COLUMNS
from slo.inputfile import InputError, load_input_file

__all__ = [
    "CLASS_TERMS",
    "DEFAULT_CALIBRATION_GPU",
    "NCCL_KNOTS_BYTES",
    "Calibration",
    "ClassSummary",
    "PeakRates",
    "ScaledKernels",
    "VariantFit",
    "calibrated_kernels",
    "default_calibration_path",
    "load_calibration",
    "term_matrix",
]

_Num = TypeVar("_Num", float, np.ndarray)

#: The GPU whose calibration ships (and stands in for GPUs without one).
DEFAULT_CALIBRATION_GPU = "h100_sxm"

#: Message sizes (bytes) below which all-reduce gets an extra per-byte term; NCCL switches
#: protocol (LL -> LL128 -> Simple) across roughly this range (see the H100 profile).
NCCL_KNOTS_BYTES: tuple[int, ...] = (128 << 10, 1 << 20, 8 << 20, 64 << 20)

#: The terms of each kernel class, in the order of ``term_matrix``'s columns.
CLASS_TERMS: dict[KernelClass, tuple[str, ...]] = {
    "gemm": ("overhead_s", "roofline", "compute", "memory", "activation", "overhead_m32_s"),
    "context_attention": ("overhead_s", "roofline", "compute", "memory", "per_request_s"),
    "generation_attention": (
        "overhead_s",
        "roofline",
        "compute",
        "memory",
        "per_request_s",
        "per_request_kv_head_s",
    ),
    "nccl": (
        "overhead_s",
        "per_peer_s",
        "wire",
        *(f"wire_below_{_kib}KiB" for _kib in (k >> 10 for k in NCCL_KNOTS_BYTES)),
    ),
}

#: Attention runs in bf16 on the tensor cores whatever the KV-cache precision.
_ATTENTION_COMPUTE_DTYPE = "bf16"
_ACTIVATION_BYTES = 2.0  # bf16 activations and outputs
_SMALL_GEMM_CUTOFF = 32  # tokens; the ``overhead_m32_s`` step (module doc)


def _pmax(a: _Num, b: _Num) -> _Num:
    """Element-wise max for arrays (the fit), plain ``max`` for floats (the hot path)."""
    if isinstance(a, np.ndarray):
        out: np.ndarray = np.maximum(a, b)
        return out
    return max(a, b)


def _pmin(a: _Num, b: float) -> _Num:
    """Element-wise min for arrays, plain ``min`` for floats."""
    if isinstance(a, np.ndarray):
        out: np.ndarray = np.minimum(a, b)
        return out
    return min(a, b)


@dataclass(frozen=True, slots=True)
class PeakRates:
    """A GPU's peaks in SI units: FLOP/s per precision, HBM and GPU-link bytes/s."""

    flops_per_s: dict[str, float]
    hbm_bytes_per_s: float
    link_bytes_per_s: float

    @classmethod
    def of(cls, gpu: GpuSpec) -> Self:
        """Peaks from the catalog entry (dense TFLOPS, HBM TB/s, GPU link GB/s per direction)."""
        return cls(
            flops_per_s={k: v * 1e12 for k, v in gpu.dense_tflops.items()},
            hbm_bytes_per_s=gpu.hbm_tb_per_s * 1e12,
            link_bytes_per_s=gpu.gpu_link_gb_per_s * 1e9,
        )

    def flops(self, dtype: str) -> float:
        """Peak FLOP/s at ``dtype`` ('fp8_block' runs at fp8, a weight-only precision at bf16
        (``hardware.precision.WEIGHT_ONLY``); an unsupported precision is timed at bf16 peak,
        deployments reject those before timing)."""
        base = "fp8" if dtype == "fp8_block" else gemm_compute_precision(dtype)
        return self.flops_per_s.get(base) or self.flops_per_s.get("bf16") or 1e12


def _element_bytes(dtype: str) -> float:
    return BYTES_PER_ELEMENT.get("fp8" if dtype == "fp8_block" else dtype, 2.0)


# ----- terms per class (floats or numpy arrays) -------------------------------------------------
def gemm_terms(rates: PeakRates, m: _Num, n: _Num, k: _Num, dtype: str) -> list[_Num]:
    """Terms of ``[m, k] x [k, n]`` at weight precision ``dtype``.

    ``memory`` counts weights ``k·n`` and activations ``m·k`` at ``dtype`` (quantised GEMMs read
    quantised activations) and the bf16 output ``m·n``. ``activation`` is one more bf16 pass
    over the input ``m·k``: per-tensor FP8 quantises activations in a separate kernel, which the
    H100 profile's fp8 rows include (its fitted coefficient is 0 for bf16).
    """
    w = _element_bytes(dtype)
    act = min(w, _ACTIVATION_BYTES)
    compute = 2.0 * m * n * k / rates.flops(dtype)
    memory = (m * k * act + k * n * w + m * n * _ACTIVATION_BYTES) / rates.hbm_bytes_per_s
    activation = m * k * _ACTIVATION_BYTES / rates.hbm_bytes_per_s
    large = (m >= _SMALL_GEMM_CUTOFF) * 1.0
    return [1.0 + 0 * m, _pmax(compute, memory), compute, memory, activation, large]


def context_attention_terms(  # noqa: PLR0917  (KernelTimer's positional signature)
    rates: PeakRates,
    batch_size: _Num,
    new_tokens: _Num,
    cached_tokens: _Num,
    num_heads: _Num,
    num_kv_heads: _Num,
    head_dim: _Num,
    kv_dtype: str,
) -> list[_Num]:
    """Terms of causal prefill: each new token attends to the cached prefix and to itself and the
    new tokens before it (``n·c + n(n+1)/2`` query-key pairs per request and head, 2 FLOPs per
    multiply-add in QKᵀ and in PV); bytes = bf16 Q read and O written + K and V of prefix and
    new tokens read once at the KV precision."""
    pairs = new_tokens * cached_tokens + new_tokens * (new_tokens + 1) / 2
    compute = 4.0 * batch_size * num_heads * head_dim * pairs
    compute = compute / rates.flops(_ATTENTION_COMPUTE_DTYPE)
    q_and_o = 2 * new_tokens * num_heads * head_dim * _ACTIVATION_BYTES
    k_and_v = 2 * (new_tokens + cached_tokens) * num_kv_heads * head_dim * _element_bytes(kv_dtype)
    memory = batch_size * (q_and_o + k_and_v) / rates.hbm_bytes_per_s
    return [1.0 + 0 * batch_size, _pmax(compute, memory), compute, memory, batch_size]


def generation_attention_terms(  # noqa: PLR0917  (KernelTimer's positional signature)
    rates: PeakRates,
    batch_size: _Num,
    kv_len: _Num,
    num_heads: _Num,
    num_kv_heads: _Num,
    head_dim: _Num,
    kv_dtype: str,
) -> list[_Num]:
    """Terms of decode attention: one query token per request over ``kv_len`` cached tokens;
    bytes = K and V read once per KV head + bf16 Q read and O written."""
    compute = 4.0 * batch_size * num_heads * head_dim * kv_len
    compute = compute / rates.flops(_ATTENTION_COMPUTE_DTYPE)
    k_and_v = 2 * kv_len * num_kv_heads * head_dim * _element_bytes(kv_dtype)
    q_and_o = 2 * num_heads * head_dim * _ACTIVATION_BYTES
    memory = batch_size * (k_and_v + q_and_o) / rates.hbm_bytes_per_s
    return [
        1.0 + 0 * batch_size,
        _pmax(compute, memory),
        compute,
        memory,
        batch_size,
        batch_size * num_kv_heads,
    ]


def nccl_terms(rates: PeakRates, message_bytes: _Num, num_gpus: _Num) -> list[_Num]:
    """Terms of a ring all-reduce: each GPU sends and receives ``2(n-1)/n`` of the message."""
    ring = 2.0 * (num_gpus - 1) / num_gpus / rates.link_bytes_per_s
    terms: list[_Num] = [1.0 + 0 * num_gpus, num_gpus - 1, ring * message_bytes]
    terms += [ring * _pmin(message_bytes, float(knot)) for knot in NCCL_KNOTS_BYTES]
    return terms


#: Each class's term function and the profile columns it takes after ``rates``, in order
#: (``KernelTimer``'s argument order, canonical ``profiles.ProfileSet`` column names).
_TERM_FUNCTIONS: dict[KernelClass, tuple[Callable[..., list[Any]], tuple[str, ...]]] = {
    "gemm": (gemm_terms, ("m", "n", "k", "dtype")),
    "context_attention": (
        context_attention_terms,
        ("batch_size", "new_tokens", "cached_tokens", *HEAD_COLUMNS),
    ),
    "generation_attention": (generation_attention_terms, ("batch_size", "kv_len", *HEAD_COLUMNS)),
    "nccl": (nccl_terms, ("message_bytes", "num_gpus")),
}


def term_matrix(rates: PeakRates, kind: KernelClass, shapes: dict[str, Any]) -> np.ndarray:
    """Rows of terms (columns in ``CLASS_TERMS[kind]`` order) for columns of shapes.

    ``shapes`` maps the canonical profile column names (``profiles.ProfileSet``) to arrays and
    the dtype column to one string: the vectorised form the calibration fit uses. Prefill rows
    without a ``cached_tokens`` column have no cached prefix.
    """
    if kind == "context_attention" and "cached_tokens" not in shapes:
        shapes = {**shapes, "cached_tokens": 0 * shapes["new_tokens"]}
    terms, columns = _TERM_FUNCTIONS[kind]
    cols = terms(rates, *(shapes[column] for column in columns))
    return np.column_stack([np.asarray(c, dtype=float) for c in cols])


# ----- the calibration file ---------------------------------------------------------------------
class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VariantFit(_Frozen):
    """Fitted coefficients of one kernel class and variant, with the fit's quality."""

    coefficients: dict[str, float] = Field(
        description="Term name -> coefficient (≥ 0): seconds for '*_s' terms, 1/efficiency for "
        "the dimensionless peak-rate terms (roofline, compute, memory, activation, wire*)."
    )
    fit_mape_pct: float = Field(ge=0, description="MAPE on the fitting rows, in percent.")
    holdout_mape_pct: float | None = Field(
        default=None,
        ge=0,
        description="MAPE on the held-out rows, in percent (none held out: null).",
    )
    n_fit: int = Field(ge=0, description="Profile rows the coefficients were fitted on.")
    n_holdout: int = Field(default=0, ge=0, description="Held-out profile rows.")


class ClassSummary(_Frozen):
    """Fit quality of one kernel class over all its variants."""

    fit_mape_pct: float = Field(ge=0, description="MAPE on the fitting rows, in percent.")
    holdout_mape_pct: float | None = Field(
        default=None, ge=0, description="MAPE on the held-out rows, in percent (null if none)."
    )
    n_fit: int = Field(ge=0, description="Fitting rows.")
    n_holdout: int = Field(default=0, ge=0, description="Held-out rows.")


class Calibration(_Frozen):
    """A calibration file: per-class, per-variant coefficients for one GPU."""

    format_version: Literal[1] = Field(default=1, description="Calibration file format version.")
    gpu: str = Field(description="Catalog key of the GPU the profiles were measured on.")
    model_scope: str = Field(
        default="any",
        description="'any', or the models whose kernel shapes the fit was restricted to.",
    )
    shapes: str = Field(default="all", description="Which profile rows were used, in words.")
    source: str = Field(description="Where the measurements came from.")
    method: str = Field(description="How the coefficients were fitted, in words.")
    holdout_fraction: float = Field(
        ge=0, lt=1, description="Fraction of rows held out (by grid value) to measure the fit."
    )
    seed: int = Field(description="Seed of the held-out split.")
    classes: dict[KernelClass, dict[str, VariantFit]] = Field(
        description="Kernel class -> variant (GEMM dtype, KV dtype, 'all_reduce') -> fit."
    )
    summary: dict[KernelClass, ClassSummary] = Field(
        default_factory=dict, description="Fit quality per kernel class over all variants."
    )
    end_to_end: dict[str, float] = Field(
        default_factory=dict,
        description="Reserved for end-to-end factors fitted against serving benchmarks (e.g. a "
        "per-step overhead in seconds); empty when fitted from kernel profiles only.",
    )

    @field_validator("gpu")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()

    @model_validator(mode="after")
    def _known_terms(self) -> Self:
        for kind, variants in self.classes.items():
            allowed = CLASS_TERMS[kind]
            for variant, fit in variants.items():
                for term, value in fit.coefficients.items():
                    if term not in allowed:
                        raise ValueError(
                            f"classes.{kind}.{variant}: unknown term '{term}'; "
                            f"expected {', '.join(allowed)}"
                        )
                    if not (value >= 0 and math.isfinite(value)):
                        raise ValueError(
                            f"classes.{kind}.{variant}.{term}: coefficient must be finite and ≥ 0"
                        )
        return self


def default_calibration_path(gpu: str, engine: str = DEFAULT_ENGINE) -> Path:
    """Where the shipped calibration of ``gpu`` under ``engine``'s kernels lives (the file may
    not exist): ``simulator/data/calibration/<gpu>_<engine>.yaml``."""
    root = Path(str(resources.files("simulator") / "data" / "calibration"))
    return root / f"{gpu.lower()}_{engine.lower()}.yaml"


def load_calibration(
    path: str | Path | None = None, *, gpu: str | None = None, engine: str = DEFAULT_ENGINE
) -> Calibration:
    """Read a calibration file; ``path=None`` = the shipped one for ``gpu`` and ``engine``.

    When ``gpu`` is given, a file fitted on another GPU is an ``InputError`` (efficiencies do not
    carry over between chips; fit one from that GPU's profiles with ``kvplan calibrate``).
    """
    if path is None:
        if gpu is None:
            raise InputError("load_calibration needs a file or a GPU name")
        path = default_calibration_path(gpu, engine)
        if not path.is_file():
            raise InputError(
                f"no shipped calibration for GPU '{gpu}' and engine '{engine}'; fit one with "
                f"`kvplan calibrate --gpu {gpu.lower()} --engine {engine} --out FILE`"
            )
    calibration = load_input_file(path, Calibration)
    if gpu is not None and calibration.gpu != gpu.lower():
        raise InputError(
            f"{path}: gpu: fitted on '{calibration.gpu}', cannot be used for '{gpu.lower()}'; "
            f"fit one from profiles of that GPU with `kvplan calibrate`"
        )
    return calibration


def calibrated_kernels(
    gpu: GpuSpec, path: str | Path | None = None, *, engine: str = DEFAULT_ENGINE
) -> ScaledKernels:
    """The ``calibrated[:FILE]`` kernel source for ``gpu``.

    With ``path``: that file, which must have been fitted on ``gpu`` (else ``InputError``).
    Without: the shipped calibration of ``gpu`` under ``engine``'s kernels (one ships for every
    GPU and engine with shipped profiles); for a GPU without one, that of its catalog stand-in
    (``GpuSpec.kernel_profiles_from``: the same silicon, so its efficiencies) carried over to
    ``gpu``'s peaks; else the H100 calibration of the same engine carried over, with a
    ``UserWarning`` saying so (an approximation: fit one from that GPU's profiles with
    ``kvplan calibrate`` to do better).
    """
    if path is not None:
        return ScaledKernels(gpu, load_calibration(path, gpu=gpu.name))
    if default_calibration_path(gpu.name, engine).is_file():
        return ScaledKernels(gpu, load_calibration(gpu=gpu.name, engine=engine))
    stand_in = gpu.kernel_profiles_from
    if stand_in is not None and default_calibration_path(stand_in, engine).is_file():
        calibration = load_calibration(gpu=stand_in, engine=engine)
        return ScaledKernels(gpu, calibration, allow_other_gpu=True)
    warnings.warn(
        f"no calibration for '{gpu.name}' / {engine}; using the {DEFAULT_CALIBRATION_GPU} one "
        f"with {gpu.name}'s peaks (efficiencies assumed to carry over)",
        UserWarning,
        stacklevel=2,
    )
    calibration = load_calibration(gpu=DEFAULT_CALIBRATION_GPU, engine=engine)
    return ScaledKernels(gpu, calibration, allow_other_gpu=True)


# ----- the kernel source ------------------------------------------------------------------------
class ScaledKernels(CachedKernels):
    """``KernelTimer`` from a calibration: ``Σ coefficient × term`` per call (seconds).

    A variant the calibration lacks (a GEMM dtype it never saw, say fp4) uses the class's 'bf16'
    variant (or its first) with that dtype's own peak; this is said once per instance with a
    ``UserWarning``. A class the calibration lacks entirely is an ``InputError`` at construction,
    and so is a calibration of another GPU unless ``allow_other_gpu`` (then its coefficients,
    i.e. efficiencies and fixed costs, are assumed to carry over to ``gpu``'s peaks).
    Results are cached per distinct call (the engine repeats shapes millions of times).
    """

    def __init__(
        self, gpu: GpuSpec, calibration: Calibration, *, allow_other_gpu: bool = False
    ) -> None:
        if calibration.gpu != gpu.name.lower() and not allow_other_gpu:
            raise InputError(
                f"calibration fitted on '{calibration.gpu}' cannot time '{gpu.name}'; fit one "
                f"from profiles of that GPU with `kvplan calibrate`"
            )
        missing = [kind for kind in KERNEL_CLASSES if not calibration.classes.get(kind)]
        if missing:
            raise InputError(f"calibration for '{calibration.gpu}' lacks class '{missing[0]}'")
        self.gpu = gpu
        self.calibration = calibration
        self._rates = PeakRates.of(gpu)
        self._coefficients = {
            kind: {
                variant: tuple(fit.coefficients.get(t, 0.0) for t in CLASS_TERMS[kind])
                for variant, fit in calibration.classes[kind].items()
            }
            for kind in KERNEL_CLASSES
        }
        self._warned: set[tuple[str, str]] = set()
        super().__init__(
            self._gemm_uncached,
            self._context_uncached,
            self._decode_uncached,
            self._all_reduce_uncached,
        )

    def coefficients(self, kind: KernelClass, variant: str) -> tuple[float, ...]:
        """Coefficients of ``kind`` for ``variant`` (or the documented stand-in), term order."""
        table = self._coefficients[kind]
        if variant in table:
            return table[variant]
        stand_in = "bf16" if "bf16" in table else next(iter(table))
        if (kind, variant) not in self._warned:
            self._warned.add((kind, variant))
            warnings.warn(
                f"calibration for {self.calibration.gpu} has no {kind} variant '{variant}'; "
                f"using the '{stand_in}' coefficients",
                UserWarning,
                stacklevel=3,
            )
        return table[stand_in]

    # ----- the primitives, uncached (sizes as floats: the terms are float arithmetic) ----------
    def _gemm_uncached(self, m: int, n: int, k: int, dtype: str) -> float:
        if m <= 0:
            return 0.0
        terms = gemm_terms(self._rates, float(m), float(n), float(k), dtype)
        return _dot(self.coefficients("gemm", dtype), terms)

    def _context_uncached(
        self, batch_size: int, new_tokens: int, cached_tokens: int, heads: Heads
    ) -> float:
        if batch_size <= 0 or new_tokens <= 0:
            return 0.0
        b, n, c = float(batch_size), float(new_tokens), float(cached_tokens)
        terms = context_attention_terms(self._rates, b, n, c, *float_heads(heads))
        return _dot(self.coefficients("context_attention", heads[3]), terms)

    def _decode_uncached(self, batch_size: int, kv_len: int, heads: Heads) -> float:
        if batch_size <= 0:
            return 0.0
        b, length = float(batch_size), float(kv_len)
        terms = generation_attention_terms(self._rates, b, length, *float_heads(heads))
        return _dot(self.coefficients("generation_attention", heads[3]), terms)

    def _all_reduce_uncached(self, message_bytes: float, num_gpus: int) -> float:
        if num_gpus <= 1 or message_bytes <= 0:
            return 0.0
        terms = nccl_terms(self._rates, float(message_bytes), float(num_gpus))
        return _dot(self.coefficients("nccl", "all_reduce"), terms)


def _dot(coefficients: tuple[float, ...], terms: list[float]) -> float:
    return math.fsum(c * t for c, t in zip(coefficients, terms, strict=True))
