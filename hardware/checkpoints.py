"""Quantised checkpoints: which base model a repository name serves, and its recipe.

A served checkpoint is a base model's shape plus a quantisation *recipe* that fixes the weight
precision and whether the checkpoint carries a quantised KV cache. The recipe, not the weight
precision alone, decides what an engine's ``--kv-cache-dtype auto`` gives (``kv_precision``):

======================  ==========  ========  =================================================
recipe                  weights     KV cache  what it is (source)
======================  ==========  ========  =================================================
``none``                bf16        bf16      the original checkpoint, served without
                                              ``--quantization``: weights and KV in its dtype
``modelopt_fp8``        fp8         fp8       NVIDIA TensorRT Model Optimizer FP8
                                              (``hf_quant_config.json`` ``quant_algo: FP8``,
                                              ``kv_cache_quant_algo: FP8``), e.g.
                                              ``nvidia/Llama-3.1-8B-Instruct-FP8``
``modelopt_nvfp4``      fp4         fp8       ModelOpt NVFP4 (``quant_algo: NVFP4``,
                                              ``kv_cache_quant_algo: FP8``), ``nvidia/*-NVFP4``
``fp8_block``           fp8         bf16      block-scaled FP8 published by the model's vendor
                                              (``Qwen/Qwen3-32B-FP8``, DeepSeek-V3's native
                                              FP8): ``quantization_config`` has no KV scheme
``fp8_dynamic``         fp8         bf16      compressed-tensors FP8 (``RedHatAI/*-FP8``,
                                              ``*-FP8-dynamic``) without a ``kv_cache_scheme``
``fp8_kv``              fp8         fp8       compressed-tensors FP8 with a ``kv_cache_scheme``
                                              (``*-FP8-KV``)
``mxfp4``               fp4         bf16      OpenAI's MXFP4 MoE weights (gpt-oss); KV in bf16
``int4``                int4        bf16      AWQ / GPTQ int4 (``*-AWQ``, ``*-GPTQ-Int4``)
``int4_experts``        int4        bf16      compressed-tensors int4 of the routed experts only,
                                              one scale per 32 weights (Kimi-K2-Thinking and
                                              Kimi-K2.5's native INT4: ``quantization_config``
                                              ``group_size: 32``, ``ignore`` lm_head, self_attn,
                                              shared_experts, the dense MLP); no KV scheme
``int8``                int8        bf16      W8A8 int8 (``*-W8A8``, ``*-quantized.w8a8``)
``int8_wo``             int8_wo     bf16      weight-only int8, W8A16 (``*-W8A16``; TensorRT-LLM's
                                              ``int8_wo``)
======================  ==========  ========  =================================================

``resolve_checkpoint(name, known)`` maps a repository name to ``(base key, recipe)`` by its
suffix: the organisation decides between ModelOpt (``nvidia/``) and the vendor's own FP8.
``known_key(name, known)`` finds the entry a name without a recipe suffix names: whole, by its
part after '/', or by that part without Llama's old ``Meta-`` prefix (Meta published Llama 3.1
as ``meta-llama/Meta-Llama-3.1-70B`` and renamed it ``meta-llama/Llama-3.1-70B``; benchmarks,
InferenceX's among them, still use the old name).
An engine whose ``auto`` ignores the checkpoint's KV scheme (vLLM before 0.13, see
``simulator/data/presets/vllm.yaml``) keeps the model dtype: ``kv_precision(recipe,
honours_checkpoint=False)``. Pure functions: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from hardware.precision import BYTES_PER_ELEMENT

__all__ = [
    "RECIPES",
    "Checkpoint",
    "Recipe",
    "known_key",
    "kv_precision",
    "resolve_checkpoint",
]


@dataclass(frozen=True, slots=True)
class Recipe:
    """One quantisation recipe (module doc)."""

    name: str
    weights: str
    #: KV-cache precision the checkpoint carries (its dtype when it carries none).
    kv_cache: str
    #: Block-scale bits stored per quantised weight: MXFP4 one E8M0 byte per 32 weights (OCP
    #: Microscaling spec), NVFP4 one FP8 E4M3 byte per 16 (NVIDIA ModelOpt); 0 where the scales
    #: are per tensor or per channel (under 0.1% of the weights).
    scale_bits: float = 0.0
    #: Whether the attention projections stay in bf16 (gpt-oss's MXFP4 quantises the experts
    #: only: ``quantization_config.modules_to_not_convert`` lists ``self_attn``; Kimi's INT4
    #: ``ignore`` lists ``self_attn`` and the shared experts, which count as quantised here).
    attention_bf16: bool = False
    #: The routed experts' format as the kernel profiles name it, where the weight precision
    #: alone does not say which kernel runs them (empty otherwise): ``fp8_block`` for FP8 with
    #: 128 × 128 block scales (``quantization_config.weight_block_size``), which the engines run
    #: in block-scaled kernels rather than per-tensor FP8 ones; ``mxfp4`` for OpenAI's MXFP4
    #: experts, which they run in MXFP4 kernels rather than NVFP4 ones.
    moe_format: str = ""

    def weight_bytes(self, precision: str, quantised: float, attention: float) -> float:
        """Bytes of ``quantised`` GEMM weight elements, ``attention`` of them in attention
        projections, stored at ``precision``: this recipe's layout when ``precision`` is its
        own (scales, bf16 attention), plain ``precision`` otherwise (a re-quantisation)."""
        per = BYTES_PER_ELEMENT[precision]
        if precision != self.weights:
            return quantised * per
        kept = attention if self.attention_bf16 else 0.0
        return (quantised - kept) * (per + self.scale_bits / 8) + kept * BYTES_PER_ELEMENT["bf16"]


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("none", "bf16", "bf16"),
        Recipe("modelopt_fp8", "fp8", "fp8"),
        Recipe("modelopt_nvfp4", "fp4", "fp8", scale_bits=8 / 16),
        Recipe("fp8_block", "fp8", "bf16", moe_format="fp8_block"),
        Recipe("fp8_dynamic", "fp8", "bf16"),
        Recipe("fp8_kv", "fp8", "fp8"),
        Recipe("mxfp4", "fp4", "bf16", scale_bits=8 / 32, attention_bf16=True, moe_format="mxfp4"),
        Recipe("int4", "int4", "bf16"),
        # One 16-bit scale per group of 32 weights: the checkpoints hold I32 (eight packed int4),
        # BF16 and F32 tensors only, so the group scales are bf16 (Hugging Face's tensor types
        # of these repositories; an inference, not a config field).
        Recipe("int4_experts", "int4", "bf16", scale_bits=16 / 32, attention_bf16=True),
        Recipe("int8", "int8", "bf16"),
        Recipe("int8_wo", "int8_wo", "bf16"),
    )
}

#: Name suffixes (case-insensitive, after the base name) → recipe; ``fp8`` depends on the org.
_SUFFIXES: tuple[tuple[str, str], ...] = (
    (r"-fp8-kv", "fp8_kv"),
    (r"-fp8-dynamic", "fp8_dynamic"),
    (r"-nvfp4", "modelopt_nvfp4"),
    (r"-fp4", "modelopt_nvfp4"),
    (r"-mxfp4", "mxfp4"),
    (r"-fp8", "fp8"),
    (r"-(?:awq|gptq-int4|w4a16|gptq)", "int4"),
    (r"-(?:w8a8|int8|quantized\.w8a8)", "int8"),
    (r"-(?:w8a16|quantized\.w8a16)", "int8_wo"),
)
#: What a publisher may append after the recipe suffix: a re-release of the same recipe
#: (``nvidia/DeepSeek-R1-0528-FP4-v2``) or a preview tag (``amd/*-MXFP4-Preview``).
_TRAILER = r"(?:-v\d+|-preview)?"
#: Organisations that publish ModelOpt checkpoints (their ``-FP8`` is ModelOpt FP8).
_MODELOPT_ORGS = ("nvidia",)
#: Organisations whose ``-FP8`` is compressed-tensors FP8.
_COMPRESSED_TENSORS_ORGS = ("redhatai", "neuralmagic")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A repository name resolved: the catalog key of its base model and its recipe."""

    name: str
    base: str
    recipe: Recipe


def resolve_checkpoint(name: str, known: Collection[str]) -> Checkpoint | None:
    """The base model (a key of ``known``, lower case, matched whole or after '/') and the
    recipe of checkpoint ``name``; None when no suffix rule names a known base."""
    key = name.strip().lower()
    org, _, repo = key.rpartition("/")
    by_short = {k.rsplit("/", 1)[-1]: k for k in known}
    for pattern, recipe in _SUFFIXES:
        match = re.search(pattern + _TRAILER + "$", repo)
        if match is None:
            continue
        stem = repo[: match.start()]
        base = _base_key(org, stem, known, by_short)
        if not base:
            return None
        return Checkpoint(name, base, RECIPES[_org_recipe(recipe, org)])
    return None


def known_key(name: str, known: Collection[str]) -> str:
    """The key of ``known`` (lower case) that ``name`` names without a recipe suffix: itself,
    its part after '/', or that part without Llama's old "Meta-" prefix (module doc); "" if
    none."""
    key = name.strip().lower()
    if key in known:
        return key
    by_short = {k.rsplit("/", 1)[-1]: k for k in known}
    return _by_short_name(key.rsplit("/", 1)[-1], by_short)


def _base_key(org: str, stem: str, known: Collection[str], by_short: dict[str, str]) -> str:
    """The catalog key of ``stem`` (under ``org`` first, then by its short name; "" if none)."""
    if org and f"{org}/{stem}" in known:
        return f"{org}/{stem}"
    return _by_short_name(stem, by_short)


def _by_short_name(short: str, by_short: dict[str, str]) -> str:
    # Re-publishers spell Llama with its old "Meta-" prefix (RedHatAI/Meta-Llama-3.1-8B-...).
    return by_short.get(short, "") or by_short.get(short.removeprefix("meta-"), "")


def _org_recipe(recipe: str, org: str) -> str:
    if recipe != "fp8":
        return recipe
    if org in _MODELOPT_ORGS:
        return "modelopt_fp8"
    if org in _COMPRESSED_TENSORS_ORGS:
        return "fp8_dynamic"
    return "fp8_block"


def kv_precision(recipe: Recipe, *, honours_checkpoint: bool = True) -> str:
    """What ``--kv-cache-dtype auto`` gives for ``recipe``: the checkpoint's KV quantisation
    when the engine honours it, else the model dtype (bf16)."""
    return recipe.kv_cache if honours_checkpoint else "bf16"
