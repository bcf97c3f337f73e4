"""Sliding-window and hybrid (linear-attention) models: shapes, published totals, KV by layer
family, and the one-line refusals of inconsistent shapes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hardware import Catalog, shipped_catalog
from hardware.schema import ModelSpec


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return shipped_catalog()


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        # openai.com/index/introducing-gpt-oss: 116.8B / 5.1B and 20.9B / 3.6B active; OpenAI's
        # active count leaves out the 0.58B embedding, ours counts it.
        ("openai/gpt-oss-120b", 116.8, 5.1 + 0.58),
        ("openai/gpt-oss-20b", 20.9, 3.6 + 0.58),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", 80, None),
    ],
)
def test_published_totals(
    catalog: Catalog, name: str, total_b: float, active_b: float | None
) -> None:
    model = catalog.model(name)
    assert model.param_count() / 1e9 == pytest.approx(total_b, rel=0.01)
    if active_b is not None:
        assert model.active_param_count() / 1e9 == pytest.approx(active_b, rel=0.02)


def test_gpt_oss_kv_by_layer_family(catalog: Catalog) -> None:
    model = catalog.model("openai/gpt-oss-120b")
    assert (model.full_attention_layers, model.sliding_window_layers) == (18, 18)
    per_layer = 2 * 8 * 64  # K and V of 8 KV heads of 64
    # A cached token holds the full layers' KV only ...
    assert model.kv_elements_per_token() == 18 * per_layer
    assert model.kv_bytes_per_token("bf16") == 18 * per_layer * 2
    # ... a running request also the last 128 tokens of the 18 sliding layers.
    assert model.window_kv_bytes("bf16") == 18 * 128 * per_layer * 2
    assert model.linear_state_bytes() == 0
    assert model.attention_context(100) == 100
    assert model.attention_context(100_000) == 128


def test_qwen3_next_state_by_hand(catalog: Catalog) -> None:
    model = catalog.model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert (model.full_attention_layers, model.linear_attention_layers) == (12, 36)
    assert model.kv_bytes_per_token("bf16") == 12 * 2 * 2 * 256 * 2
    recurrent = 32 * 128 * 128 * 4  # 32 value heads, 128 x 128 state each, fp32
    conv = 3 * (2 * 16 * 128 + 32 * 128) * 2  # kernel - 1 inputs of q, k and v, bf16
    assert model.linear_state_bytes() == 36 * (recurrent + conv)
    assert model.request_state_bytes("bf16") == model.linear_state_bytes()
    # Gated attention: q_proj is twice as wide as the heads (query and gate).
    plain = model.model_copy(update={"attention_output_gate": False})
    assert model.attention_params_per_layer() - plain.attention_params_per_layer() == (
        2048 * 16 * 256
    )


def test_full_attention_models_are_unchanged(catalog: Catalog) -> None:
    model = catalog.model("meta-llama/Llama-3.1-8B-Instruct")
    assert model.full_attention_layers == model.num_layers == 32
    assert model.kv_bytes_per_token("bf16") == 32 * 2 * 8 * 128 * 2
    assert model.request_state_bytes() == 0


BASE = {
    "name": "toy/T",
    "num_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 64,
    "ffn_size": 512,
    "vocab_size": 1000,
    "max_context_tokens": 4096,
}
LINEAR = {
    "linear_attention": "gated_deltanet",
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 64,
    "linear_value_head_dim": 64,
    "linear_conv_kernel": 4,
}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sliding_window": 128}, "sliding_window and sliding_window_layers go together"),
        ({"sliding_window_layers": 2}, "sliding_window and sliding_window_layers go together"),
        ({"linear_attention_layers": 2}, "linear_attention_layers need linear_attention"),
        ({"linear_attention": "mamba2"}, "linear_attention needs linear_attention_layers"),
        (
            {"sliding_window": 64, "sliding_window_layers": 2, "linear_attention_layers": 2}
            | LINEAR,
            "must leave at least one full-attention layer",
        ),
    ],
)
def test_inconsistent_layer_families_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ModelSpec.model_validate(BASE | fields)


def test_a_hybrid_shape_validates() -> None:
    model = ModelSpec.model_validate(BASE | LINEAR | {"linear_attention_layers": 3})
    assert model.full_attention_layers == 1


@pytest.mark.parametrize(
    ("name", "gib"),
    # The gpt-oss model card (OpenAI, Aug 2025) lists checkpoint sizes of 60.8 and 12.8 GiB.
    [("openai/gpt-oss-120b", 60.8), ("openai/gpt-oss-20b", 12.8)],
)
def test_mxfp4_weights_match_the_published_checkpoint(
    catalog: Catalog, name: str, gib: float
) -> None:
    model = catalog.model(name)
    assert model.weight_bytes("fp4") / 2**30 == pytest.approx(gib, rel=0.01)


def test_mxfp4_layout_by_hand(catalog: Catalog) -> None:
    # Experts at 4 bits + one E8M0 scale per 32; attention, embedding and LM head in bf16.
    model = catalog.model("openai/gpt-oss-120b")
    embeddings = 2 * 201088 * 2880
    attention = 36 * model.attention_params_per_layer()
    quantised = model.param_count() - embeddings - attention
    expected = quantised * (0.5 + 1 / 32) + (attention + embeddings) * 2
    assert model.weight_bytes("fp4") == pytest.approx(expected, abs=1)
    # Re-quantised to another precision, the plain count applies.
    assert model.weight_bytes("fp8") == (model.param_count() - embeddings) + 2 * embeddings
