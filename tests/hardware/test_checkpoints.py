"""Quantised checkpoint names resolve to their base model and recipe (hardware/checkpoints.py)."""

from __future__ import annotations

import pytest

from hardware import shipped_catalog
from hardware.checkpoints import RECIPES, kv_precision, resolve_checkpoint
from slo.inputfile import InputError


@pytest.mark.parametrize(
    ("name", "base", "recipe", "weights", "kv"),
    [
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "meta-llama/Llama-3.1-8B-Instruct", "modelopt_fp8",
         "fp8", "fp8"),
        ("nvidia/Llama-3.1-70B-Instruct-FP8", "meta-llama/Llama-3.1-70B-Instruct",
         "modelopt_fp8", "fp8", "fp8"),
        ("nvidia/Qwen3-32B-NVFP4", "Qwen/Qwen3-32B", "modelopt_nvfp4", "fp4", "fp8"),
        ("nvidia/DeepSeek-R1-FP4", "deepseek-ai/DeepSeek-R1", "modelopt_nvfp4", "fp4", "fp8"),
        ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B", "fp8_block", "fp8", "bf16"),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "meta-llama/Llama-3.1-8B-Instruct",
         "fp8_dynamic", "fp8", "bf16"),
        ("Qwen/Qwen3-32B-AWQ", "Qwen/Qwen3-32B", "int4", "int4", "bf16"),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a16", "meta-llama/Llama-3.1-8B-Instruct",
         "int8_wo", "int8_wo", "bf16"),
        ("Qwen3-32B", "Qwen/Qwen3-32B", "none", "bf16", "bf16"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3", "fp8_block", "fp8", "bf16"),
        # re-releases under the names benchmarks use, and a publisher's re-release suffix
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1-0528", "fp8_block", "fp8",
         "bf16"),
        ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek-ai/DeepSeek-R1-0528", "modelopt_nvfp4",
         "fp4", "fp8"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B-Instruct-2507",
         "fp8_block", "fp8", "bf16"),
        # Llama 3.1's names before Meta renamed the repositories (InferenceX's llama70b rows)
        ("meta-llama/Meta-Llama-3.1-70B", "meta-llama/Llama-3.1-70B", "none", "bf16", "bf16"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "none",
         "bf16", "bf16"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "none",
         "bf16", "bf16"),
        ("Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B", "none", "bf16", "bf16"),
        # Kimi: native INT4 experts (K2.5, K2-Thinking), block FP8 (K2-Instruct), ModelOpt NVFP4
        ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.5", "int4_experts", "int4", "bf16"),
        ("moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2-Thinking", "int4_experts", "int4",
         "bf16"),
        ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct", "fp8_block", "fp8",
         "bf16"),
        ("nvidia/Kimi-K2.5-NVFP4", "moonshotai/Kimi-K2.5", "modelopt_nvfp4", "fp4", "fp8"),
        ("Qwen/Qwen3.5-397B-A17B", "Qwen/Qwen3.5-397B-A17B", "none", "bf16", "bf16"),
        ("Qwen/Qwen3.5-397B-A17B-FP8", "Qwen/Qwen3.5-397B-A17B", "fp8_block", "fp8", "bf16"),
        ("nvidia/Qwen3.5-397B-A17B-NVFP4", "Qwen/Qwen3.5-397B-A17B", "modelopt_nvfp4", "fp4",
         "fp8"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "Qwen/Qwen3-Coder-480B-A35B-Instruct",
         "fp8_block", "fp8", "bf16"),
        ("zai-org/GLM-4.7-FP8", "zai-org/GLM-4.7", "fp8_block", "fp8", "bf16"),
        ("zai-org/GLM-4.6", "zai-org/GLM-4.6", "none", "bf16", "bf16"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.1", "fp8_block", "fp8", "bf16"),
    ],
)  # fmt: skip
def test_names_resolve_to_base_and_recipe(
    name: str, base: str, recipe: str, weights: str, kv: str
) -> None:
    catalog = shipped_catalog()
    checkpoint = catalog.checkpoint(name)
    assert catalog.model(name).name == base
    assert checkpoint.recipe.name == recipe
    assert (checkpoint.recipe.weights, kv_precision(checkpoint.recipe)) == (weights, kv)


#: DeepSeek Sparse Attention checkpoints -> (base, recipe): GLM-5's bf16 original, the vendor's
#: block FP8 and ModelOpt NVFP4 (FP8 KV); GLM-5.1; DeepSeek-V3.2's native block FP8.
SPARSE_ATTENTION_CHECKPOINTS = {
    "zai-org/GLM-5": ("zai-org/GLM-5", "none"),
    "zai-org/GLM-5-FP8": ("zai-org/GLM-5", "fp8_block"),
    "nvidia/GLM-5-NVFP4": ("zai-org/GLM-5", "modelopt_nvfp4"),
    "zai-org/GLM-5.1-FP8": ("zai-org/GLM-5.1", "fp8_block"),
    "deepseek-ai/DeepSeek-V3.2": ("deepseek-ai/DeepSeek-V3.2", "fp8_block"),
    "deepseek-ai/DeepSeek-V3.2-Exp": ("deepseek-ai/DeepSeek-V3.2-Exp", "fp8_block"),
    "nvidia/DeepSeek-V3.2-NVFP4": ("deepseek-ai/DeepSeek-V3.2", "modelopt_nvfp4"),
}


def test_sparse_attention_checkpoints_resolve() -> None:
    catalog = shipped_catalog()
    for name, (base, recipe) in SPARSE_ATTENTION_CHECKPOINTS.items():
        model = catalog.model(name)
        assert (model.name, catalog.checkpoint(name).recipe.name) == (base, recipe)
        assert model.index_topk == 2048


def test_re_releases_keep_the_architecture_and_their_own_context() -> None:
    catalog = shipped_catalog()
    r1, r1_0528 = catalog.model("DeepSeek-R1"), catalog.model("DeepSeek-R1-0528")
    assert r1_0528.model_dump(exclude={"name"}) == r1.model_dump(exclude={"name"})
    old, new = catalog.model("Qwen3-235B-A22B"), catalog.model("Qwen3-235B-A22B-Instruct-2507")
    assert new.model_dump(exclude={"name", "max_context_tokens"}) == old.model_dump(
        exclude={"name", "max_context_tokens"}
    )
    assert (old.max_context_tokens, new.max_context_tokens) == (40960, 262144)


def test_engines_that_ignore_the_checkpoint_keep_the_model_dtype() -> None:
    # vLLM before 0.13 (PR #29980): --kv-cache-dtype auto = model dtype even for ModelOpt.
    assert kv_precision(RECIPES["modelopt_fp8"], honours_checkpoint=False) == "bf16"


def test_unknown_bases_stay_unknown() -> None:
    catalog = shipped_catalog()
    assert resolve_checkpoint("nvidia/NotAModel-FP8", catalog.models) is None
    with pytest.raises(InputError, match="unknown model"):
        catalog.model("nvidia/NotAModel-FP8")


@pytest.mark.parametrize(
    "name",
    [
        # GLM-5.2: IndexShare (one indexer's top-k reused by the next layers) is not modelled
        "zai-org/GLM-5.2",
        "nvidia/GLM-5.2-NVFP4",
        # sliding window + compressed KV attention (DeepSeek-V4)
        "deepseek-ai/DeepSeek-V4-Pro",
        "sgl-project/DeepSeek-V4-Pro-FP8",
        # no config.json found in the stored public copies
        "MiniMaxAI/MiniMax-M3",
    ],
)
def test_models_left_out_stay_unknown(name: str) -> None:
    with pytest.raises(InputError, match="unknown model"):
        shipped_catalog().model(name)


def test_int4_experts_keeps_attention_in_bf16_and_stores_group_scales() -> None:
    recipe = RECIPES["int4_experts"]
    assert (recipe.weights, recipe.kv_cache, recipe.attention_bf16) == ("int4", "bf16", True)
    # one bf16 scale per 32 int4 weights: 4 + 16/32 = 4.5 bits per quantised weight
    assert recipe.weight_bytes("int4", 64.0, 0.0) == 64 * 4.5 / 8
    assert recipe.weight_bytes("int4", 64.0, 16.0) == 48 * 4.5 / 8 + 16 * 2
    # another precision is a plain re-quantisation: no scales, attention included
    assert recipe.weight_bytes("fp8", 64.0, 16.0) == 64.0


def test_blackwell_ultra_and_gb200_are_in_the_catalog() -> None:
    catalog = shipped_catalog()
    b200, b300, gb200 = (catalog.gpu(n) for n in ("b200_sxm", "b300_sxm", "gb200"))
    # Blackwell Ultra: B200's BF16/FP8 rates, 1.5x dense FP4, 288 GB of HBM3e.
    assert b300.dense_tflops["fp8"] == b200.dense_tflops["fp8"]
    assert b300.dense_tflops["fp4"] == 1.5 * b200.dense_tflops["fp4"]
    assert b300.hbm_gib > b200.hbm_gib
    # GB200 NVL72: one NVLink domain of 72 GPUs, so TP 16 needs no multi-node flag.
    assert gb200.gpus_per_node == 72
    assert gb200.supports("fp4")
