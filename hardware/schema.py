"""Pydantic models of the hardware, storage and model catalog.

Every number in the shipped catalog (``hardware/data/*.yaml``) carries a comment naming its
source. Users extend or override entries with their own YAML file (``--catalog FILE``), validated
by these same models. Models are frozen after validation: a catalog entry never changes at run time.

Units are in field names: ``hbm_gib`` (GiB = 2**30 bytes), ``hbm_tb_per_s`` (10**12 bytes/s),
``*_gb_per_s`` (10**9 bytes/s, per direction), ``usd_per_hour``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Literal, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hardware.checkpoints import RECIPES, Checkpoint, resolve_checkpoint
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

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]

#: Bytes one element occupies at each precision (fp4/int4 pack two elements per byte).
BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}


#: Plausible ranges of catalog figures: a mistyped exponent (``hbm_tb_per_s: 1e-300`` made one
#: decode step last longer than the universe, and the simulation never ended) is refused at
#: load. The bounds are generous — a hundred times past any shipping part either way.
_MIN_TB_PER_S, _MAX_TB_PER_S = 0.01, 1_000.0
_MIN_GB_PER_S, _MAX_GB_PER_S = 0.01, 100_000.0
_MIN_TFLOPS, _MAX_TFLOPS = 0.01, 1_000_000.0
_MAX_HBM_GIB = 16_384.0
_MAX_USD_PER_HOUR = 10_000.0


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


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

    @model_validator(mode="after")
    def _positive_tflops(self) -> Self:
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
    latency_us: float = Field(ge=0, description="Fixed latency per transfer in microseconds.")
    capacity_gib_min: float = Field(ge=0, description="Smallest capacity offered, GiB.")
    capacity_gib_max: float = Field(gt=0, description="Largest capacity offered, GiB.")
    default_capacity_gib: float = Field(gt=0, description="Capacity used when none is given, GiB.")
    usd_per_gib_month: float = Field(ge=0, description="Price per GiB-month in USD (assumption).")
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


class ModelSpec(_Frozen):
    """A transformer LLM's shape: everything the latency and memory models need.

    Dense layers use a SwiGLU MLP (gate, up, down). MoE models replace the MLP of every layer after
    ``first_dense_layers`` with ``num_experts`` routed experts of ``expert_ffn_size`` (top
    ``experts_per_token``) plus ``num_shared_experts`` always-on experts of the same size.
    ``attention='mla'`` (DeepSeek) caches one compressed latent of ``kv_lora_rank +
    qk_rope_head_dim`` elements per token and layer instead of per-head K and V.
    """

    name: str = Field(description="Hugging Face id, e.g. 'Qwen/Qwen3-32B' (case-insensitive).")
    num_layers: int = Field(ge=1, description="Transformer layers.")
    hidden_size: int = Field(ge=1, description="Model (residual) width.")
    num_attention_heads: int = Field(ge=1, description="Query heads.")
    num_kv_heads: int = Field(ge=1, description="Key/value heads (GQA); = query heads for MHA.")
    head_dim: int = Field(ge=1, description="Width of one attention head (GQA models).")
    ffn_size: int = Field(ge=1, description="Intermediate size of the dense SwiGLU MLP.")
    vocab_size: int = Field(ge=1, description="Vocabulary size (embedding and LM-head rows).")
    tie_word_embeddings: bool = Field(
        default=False, description="Whether the LM head shares the embedding matrix."
    )
    qk_norm: bool = Field(default=False, description="Per-head RMSNorm on Q and K (Qwen3).")
    attention: Literal["gqa", "mla"] = Field(default="gqa", description="Attention kind.")
    max_context_tokens: int = Field(ge=1, description="Longest supported context in tokens.")
    num_experts: int = Field(
        default=0, ge=0, description="Routed experts per MoE layer (0 = dense)."
    )
    experts_per_token: int = Field(default=0, ge=0, description="Routed experts per token (top-k).")
    expert_ffn_size: int = Field(default=0, ge=0, description="Intermediate size of one expert.")
    num_shared_experts: int = Field(default=0, ge=0, description="Always-active shared experts.")
    first_dense_layers: int = Field(
        default=0, ge=0, description="Leading layers that use the dense MLP in an MoE model."
    )
    checkpoint_recipe: Literal[
        "none", "modelopt_fp8", "modelopt_nvfp4", "fp8_block", "fp8_dynamic", "fp8_kv",
        "mxfp4", "int4", "int8",
    ] = Field(
        default="none",
        description="Quantisation recipe of the checkpoint published under this name "
        "(hardware/checkpoints.py RECIPES; 'none' = weights in bf16, e.g. DeepSeek-V3 is "
        "'fp8_block').",
    )  # fmt: skip
    q_lora_rank: int = Field(default=0, ge=0, description="MLA query compression rank (0 = none).")
    kv_lora_rank: int = Field(default=0, ge=0, description="MLA KV latent width.")
    qk_nope_head_dim: int = Field(default=0, ge=0, description="MLA per-head non-RoPE Q/K width.")
    qk_rope_head_dim: int = Field(default=0, ge=0, description="MLA per-head RoPE Q/K width.")
    v_head_dim: int = Field(default=0, ge=0, description="MLA per-head value width.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_kv_heads")
        if self.num_experts:
            if not 0 < self.experts_per_token <= self.num_experts or not self.expert_ffn_size:
                raise ValueError(
                    "an MoE model needs 0 < experts_per_token <= num_experts and expert_ffn_size"
                )
            if self.first_dense_layers >= self.num_layers:
                raise ValueError("first_dense_layers must be smaller than num_layers")
        elif self.experts_per_token or self.num_shared_experts:
            raise ValueError("experts_per_token/num_shared_experts need num_experts > 0")
        if self.attention == "mla" and not (
            self.kv_lora_rank and self.qk_rope_head_dim and self.qk_nope_head_dim
        ):
            raise ValueError("MLA needs kv_lora_rank, qk_nope_head_dim and qk_rope_head_dim")
        return self

    # ----- derived figures -------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """Whether the model has routed experts."""
        return self.num_experts > 0

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    def attention_params_per_layer(self) -> int:
        """Weights of one attention block (projections and their norms), in elements."""
        h = self.hidden_size
        if self.attention == "mla":
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            v_head = self.v_head_dim or self.qk_nope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank  # down-projection + its norm
                q += self.q_lora_rank * self.num_attention_heads * qk_head
            else:
                q = h * self.num_attention_heads * qk_head
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv += self.kv_lora_rank * self.num_attention_heads * (self.qk_nope_head_dim + v_head)
            o = self.num_attention_heads * v_head * h
            return q + kv + o
        q_width = self.num_attention_heads * self.head_dim
        kv_width = self.num_kv_heads * self.head_dim
        params = h * q_width + 2 * h * kv_width + q_width * h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    def dense_mlp_params(self) -> int:
        """Weights of one dense SwiGLU MLP (gate, up, down), in elements."""
        return 3 * self.hidden_size * self.ffn_size

    def expert_params(self) -> int:
        """Weights of one expert (SwiGLU), in elements."""
        return 3 * self.hidden_size * self.expert_ffn_size

    def param_count(self) -> int:
        """Total parameters (all experts), in elements."""
        return self._count(all_experts=True)

    def active_param_count(self) -> int:
        """Parameters touched per token (top-k plus shared experts), in elements."""
        return self._count(all_experts=False)

    def _count(self, *, all_experts: bool) -> int:
        h = self.hidden_size
        embedding = self.vocab_size * h
        lm_head = 0 if self.tie_word_embeddings else self.vocab_size * h
        per_layer_common = self.attention_params_per_layer() + 2 * h  # + two RMSNorms
        dense_layers = self.num_layers - self.num_moe_layers
        experts = self.num_experts if all_experts else self.experts_per_token
        moe_mlp = (experts + self.num_shared_experts) * self.expert_params()
        moe_mlp += h * self.num_experts  # router
        total = embedding + lm_head + h  # + final norm
        total += self.num_layers * per_layer_common
        total += dense_layers * self.dense_mlp_params() + self.num_moe_layers * moe_mlp
        return total

    def weight_bytes(self, precision: str) -> int:
        """Bytes of all weights when the GEMM weights are stored at ``precision``.

        The embedding and LM head stay in bf16 (engines do not quantise them by default); norms and
        router are counted at ``precision`` too, a rounding error of under 0.01%.
        """
        h = self.hidden_size
        kept_bf16 = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        quantised = self.param_count() - kept_bf16
        return math.ceil(
            quantised * BYTES_PER_ELEMENT[precision] + kept_bf16 * BYTES_PER_ELEMENT["bf16"]
        )

    def kv_elements_per_token(self) -> int:
        """KV-cache elements stored per token over all layers (K and V, or the MLA latent)."""
        if self.attention == "mla":
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim)
        return self.num_layers * 2 * self.num_kv_heads * self.head_dim

    def kv_bytes_per_token(self, kv_precision: str = "bf16") -> float:
        """KV-cache bytes per token over all layers, for the whole model (all TP ranks)."""
        return self.kv_elements_per_token() * BYTES_PER_ELEMENT[kv_precision]


class Catalog(_Frozen):
    """Every GPU, storage tier and model kvplan knows, keyed by lower-cased name."""

    gpus: dict[str, GpuSpec] = Field(default_factory=dict, description="GPUs by key.")
    storage: dict[str, StorageTierSpec] = Field(
        default_factory=dict, description="Storage tiers by key."
    )
    models: dict[str, ModelSpec] = Field(default_factory=dict, description="Models by key.")

    def gpu(self, name: str) -> GpuSpec:
        """The GPU called ``name`` (case-insensitive); ``InputError`` naming the known ones."""
        return _lookup(self.gpus, name, "GPU")

    def model(self, name: str) -> ModelSpec:
        """The model called ``name`` (case-insensitive; the part after '/' also matches; a
        quantised checkpoint's name, e.g. ``nvidia/Llama-3.1-8B-Instruct-FP8``, gives its base
        model — ``checkpoint`` says with which recipe)."""
        key = name.lower()
        if key not in self.models:
            by_short = {k.rsplit("/", 1)[-1]: k for k in self.models}
            if key in by_short:
                return self.models[by_short[key]]
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
