"""Pydantic models of the hardware, storage and model catalog.

Every number in the shipped catalog (``hardware/data/*.yaml``) carries a comment naming its
source. Users extend or override entries with their own YAML file (``--catalog FILE``), validated
by these same models. Models are frozen after validation: a catalog entry never changes at run time.

Units are in field names: ``hbm_gib`` (GiB = 2**30 bytes), ``hbm_tb_per_s`` (10**12 bytes/s),
``*_gb_per_s`` (10**9 bytes/s, per direction), ``usd_per_hour``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Literal, Protocol, Self, TypeVar

from pydantic import Field, model_validator

from hardware._frozen import Frozen as _Frozen
from hardware.checkpoints import RECIPES, Checkpoint, known_key, resolve_checkpoint
from hardware.model_spec import ModelSpec
from hardware.precision import BYTES_PER_ELEMENT, Precision
from slo.inputfile import InputError
from slo.units import HOURS_PER_MONTH

__all__ = [
    "BYTES_PER_ELEMENT",
    "HOURS_PER_MONTH",
    "Catalog",
    "GpuSpec",
    "ModelSpec",
    "Precision",
    "StorageTierSpec",
    "closest_key",
]


class _HasName(Protocol):
    @property
    def name(self) -> str: ...


_Named = TypeVar("_Named", bound=_HasName)

#: Plausible ranges of catalog figures: a mistyped exponent (``hbm_tb_per_s: 1e-300`` made one
#: decode step last longer than the universe, and the simulation never ended) is refused at
#: load. The bounds are generous — a hundred times past any shipping part either way.
_MIN_TB_PER_S, _MAX_TB_PER_S = 0.01, 1_000.0
_MIN_GB_PER_S, _MAX_GB_PER_S = 0.01, 100_000.0
_MIN_TFLOPS, _MAX_TFLOPS = 0.01, 1_000_000.0
_MAX_HBM_GIB = 16_384.0
_MAX_USD_PER_HOUR = 10_000.0
_MAX_LATENCY_US = 10_000_000.0  # 10 s per transfer; 1e300 stopped the simulated clock (a hang)
_MAX_USD_PER_GIB_MONTH = 1_000.0
#: The largest KV tier a catalog entry or a config may give (1 PiB, GiB): past it a capacity's
#: bytes overflow to inf and its block count to NaN.
MAX_STORAGE_GIB = 1024.0**2


class GpuSpec(_Frozen):
    """One accelerator model, as sold, with the node it usually comes in."""

    name: str = Field(description="Catalog key, e.g. 'h100_sxm' (matched case-insensitively).")
    vendor: Literal["nvidia", "amd", "intel", "other"] = Field(description="Chip vendor.")
    description: str = Field(default="", description="Human-readable product name.")
    dense_tflops: dict[Precision, float] = Field(
        description="Dense (no sparsity) tensor-core peak in TFLOPS (1e12 FLOP/s) per precision; "
        "a precision absent here is not supported by the chip. 'fp32' is the dense TF32 "
        "tensor-core peak."
    )
    hbm_gib: float = Field(
        gt=0,
        le=_MAX_HBM_GIB,
        description="GPU memory per GPU in GiB as the driver reports it (nvidia-smi total / 1024), "
        "not the marketing figure read as decimal GB.",
    )
    hbm_tb_per_s: float = Field(
        ge=_MIN_TB_PER_S, le=_MAX_TB_PER_S, description="HBM bandwidth per GPU in TB/s."
    )
    gpu_link: Literal["nvlink", "infinity_fabric", "pcie"] = Field(
        description="Interconnect between GPUs of one node."
    )
    gpu_link_gb_per_s: float = Field(
        ge=_MIN_GB_PER_S,
        le=_MAX_GB_PER_S,
        description="GPU-to-GPU bandwidth per GPU per direction in GB/s.",
    )
    pcie_gb_per_s: float = Field(
        ge=_MIN_GB_PER_S,
        le=_MAX_GB_PER_S,
        description="Host PCIe bandwidth per direction in GB/s.",
    )
    nic_gb_per_s: float = Field(
        ge=_MIN_GB_PER_S,
        le=_MAX_GB_PER_S,
        description="Inter-node network bandwidth per GPU per direction in GB/s.",
    )
    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs in the usual server of this chip.")
    usd_per_gpu_hour: float = Field(
        ge=0,
        le=_MAX_USD_PER_HOUR,
        description="Default price per GPU-hour in USD: an assumption (typical on-demand cloud "
        "list price); override it with --catalog.",
    )
    aliases: tuple[str, ...] = Field(
        default=(),
        description="Other names this GPU goes by (e.g. aiconfigurator's system name "
        "'gb200_sxm'); looked up like the key, case-insensitively.",
    )
    cuda_capability: int | None = Field(
        default=None,
        ge=10,
        le=200,
        description="NVIDIA CUDA compute capability as one number (sm_90 -> 90), from NVIDIA's "
        "CUDA GPUs list; None for other vendors or unknown. The engines choose kernels, and "
        "with them weight layouts, by it (e.g. vLLM's MXFP4 MoE backend).",
    )
    kernel_profiles_from: str | None = Field(
        default=None,
        description="Catalog key of the GPU whose measured kernel profiles time this one where "
        "it has none of its own: the same silicon in another board or power envelope. The "
        "'auto' and 'table' latency models carry those tables over by the roofline ratio of "
        "the two specs (said in one line, as for any GPU without its own table).",
    )

    @model_validator(mode="after")
    def _positive_tflops(self) -> Self:
        if self.cuda_capability is not None and self.vendor != "nvidia":
            raise ValueError(
                f"cuda_capability is NVIDIA's compute capability; this GPU's vendor is "
                f"'{self.vendor}' (leave it out)"
            )
        for precision, tflops in self.dense_tflops.items():
            if not _MIN_TFLOPS <= tflops <= _MAX_TFLOPS:
                raise ValueError(
                    f"dense_tflops.{precision} must lie in [{_MIN_TFLOPS:g}, {_MAX_TFLOPS:g}] "
                    f"TFLOPS, got {tflops:g}"
                )
        return self

    def supports(self, precision: str) -> bool:
        """Whether the tensor cores run GEMMs natively at ``precision``."""
        return precision in self.dense_tflops

    @property
    def hbm_bytes(self) -> int:
        """HBM capacity per GPU in bytes."""
        return int(self.hbm_gib * 2**30)


class StorageTierSpec(_Frozen):
    """A KV-cache tier below HBM: host DRAM (L2), local SSD or a remote KV pool (L3)."""

    name: str = Field(description="Catalog key, e.g. 'dram', 'nvme_4tib', 'pool_16tib'.")
    kind: Literal["dram", "ssd", "remote_pool"] = Field(
        description="dram = host memory of the GPU server (L2); ssd = local NVMe (L3); "
        "remote_pool = RDMA-attached pool shared by instances (L3, Mooncake-store-like)."
    )
    description: str = Field(default="", description="What the entry models.")
    read_gb_per_s: float = Field(
        ge=_MIN_GB_PER_S,
        le=_MAX_GB_PER_S,
        description="Read bandwidth into the GPU server in GB/s (DRAM: per GPU).",
    )
    write_gb_per_s: float = Field(
        ge=_MIN_GB_PER_S, le=_MAX_GB_PER_S, description="Write bandwidth in GB/s (DRAM: per GPU)."
    )
    latency_us: float = Field(
        ge=0, le=_MAX_LATENCY_US, description="Fixed latency per transfer in microseconds."
    )
    capacity_gib_min: float = Field(
        ge=0, le=MAX_STORAGE_GIB, description="Smallest capacity offered, GiB."
    )
    capacity_gib_max: float = Field(
        gt=0, le=MAX_STORAGE_GIB, description="Largest capacity offered, GiB."
    )
    default_capacity_gib: float = Field(
        gt=0, le=MAX_STORAGE_GIB, description="Capacity used when none is given, GiB."
    )
    usd_per_gib_month: float = Field(
        ge=0, le=_MAX_USD_PER_GIB_MONTH, description="Price per GiB-month in USD (assumption)."
    )
    shared: bool = Field(
        default=False,
        description=(
            "Whether the whole deployment shares one store (a remote pool); otherwise an L3 "
            "tier is a local drive of each GPU server, shared by the instances on it."
        ),
    )

    @model_validator(mode="after")
    def _capacity_range(self) -> Self:
        if self.capacity_gib_min > self.capacity_gib_max:
            raise ValueError("capacity_gib_min must not exceed capacity_gib_max")
        if not self.capacity_gib_min <= self.default_capacity_gib <= self.capacity_gib_max:
            raise ValueError("default_capacity_gib must lie within the capacity range")
        return self

    def usd_per_hour(self, capacity_gib: float) -> float:
        """Cost of ``capacity_gib`` of this tier per hour (a month = 730 hours)."""
        return capacity_gib * self.usd_per_gib_month / HOURS_PER_MONTH


#: Hours in an average month (8760 / 12), used for every monthly price.


class Catalog(_Frozen):
    """Every GPU, storage tier and model kvplan knows, keyed by lower-cased name."""

    gpus: dict[str, GpuSpec] = Field(default_factory=dict, description="GPUs by key.")
    storage: dict[str, StorageTierSpec] = Field(
        default_factory=dict, description="Storage tiers by key."
    )
    models: dict[str, ModelSpec] = Field(default_factory=dict, description="Models by key.")

    @model_validator(mode="after")
    def _gpu_names(self) -> Self:
        owner: dict[str, str] = {}
        for key, gpu in self.gpus.items():
            for alias in gpu.aliases:
                lowered = alias.lower()
                other = owner.get(lowered, lowered if lowered in self.gpus else None)
                if other not in (None, key):
                    raise ValueError(f"gpus.{key}.aliases: '{alias}' already names GPU '{other}'")
                owner[lowered] = key
            stand_in = gpu.kernel_profiles_from
            if stand_in is not None and stand_in.lower() not in self.gpus:
                raise ValueError(
                    f"gpus.{key}.kernel_profiles_from: unknown GPU '{stand_in}'; known: "
                    + ", ".join(sorted(self.gpus))
                )
        return self

    def gpu(self, name: str) -> GpuSpec:
        """The GPU called ``name`` or one of its ``aliases`` (case-insensitive); ``InputError``
        naming the known ones."""
        key = name.lower()
        if key not in self.gpus:
            aliased = next((g for g in self.gpus.values() if key in _lowered(g.aliases)), None)
            if aliased is not None:
                return aliased
        return _lookup(self.gpus, name, "GPU")

    def model(self, name: str) -> ModelSpec:
        """The model called ``name`` (case-insensitive; the part after '/' also matches, and
        Llama's old ``Meta-Llama-3.1-*`` names give the ``Llama-3.1-*`` entries; a quantised
        checkpoint's name, e.g. ``nvidia/Llama-3.1-8B-Instruct-FP8``, gives its base model —
        ``checkpoint`` says with which recipe)."""
        key = known_key(name, self.models)
        if key:
            return self.models[key]
        resolved = resolve_checkpoint(name, self.models)
        if resolved is not None:
            return self.models[resolved.base]
        return _lookup(self.models, name, "model")

    def checkpoint(self, name: str) -> Checkpoint:
        """The base model and quantisation recipe of checkpoint ``name`` (``hardware/
        checkpoints.py``): a quantised repository's suffix names its recipe, any other known
        name is the original checkpoint (recipe ``none``). ``InputError`` when unknown."""
        resolved = resolve_checkpoint(name, self.models)
        if resolved is not None:
            return resolved
        model = self.model(name)
        return Checkpoint(name, model.name.lower(), RECIPES[model.checkpoint_recipe])

    def storage_tier(self, name: str) -> StorageTierSpec:
        """The storage tier called ``name`` (case-insensitive)."""
        return _lookup(self.storage, name, "storage tier")


def _lowered(names: Iterable[str]) -> frozenset[str]:
    return frozenset(n.lower() for n in names)


def closest_key(name: str, keys: Iterable[str]) -> str | None:
    """The catalog key most like ``name`` (for "did you mean"), or None when nothing is close.

    Besides whole keys, ``name`` is compared with the part of a model key after '/' and the part
    of a hardware key before '_', since people type "Qwen3-32B" and "h200" for short.
    """
    candidates: dict[str, str] = {}
    for key in sorted(keys):
        for form in (key, key.rsplit("/", 1)[-1], key.split("_", 1)[0]):
            candidates.setdefault(form, key)
    close = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.5)
    return candidates[close[0]] if close else None


def _lookup(table: dict[str, _Named], name: str, what: str) -> _Named:
    try:
        return table[name.lower()]
    except KeyError:
        close = closest_key(name, table)
        hint = f" (did you mean '{table[close].name}'?)" if close else ""
        known = ", ".join(table[key].name for key in sorted(table))
        raise InputError(f"unknown {what} {name!r}{hint}; known: {known}") from None
