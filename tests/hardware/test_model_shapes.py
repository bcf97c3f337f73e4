"""Derived model figures against hand calculations and published totals."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hardware import Catalog, InputError, ModelSpec, shipped_catalog


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return shipped_catalog()


def _dense_params(
    *,
    layers: int,
    h: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    ffn: int,
    vocab: int,
    qk_norm: bool = False,
) -> int:
    """Parameters of a dense GQA + SwiGLU decoder with untied embeddings, written out by hand
    (``qk_norm``: Qwen3's per-head Q/K RMSNorm; off by default, as in ``ModelSpec``)."""
    q_o = 2 * h * heads * head_dim
    k_v = 2 * h * kv_heads * head_dim
    norms = 2 * h + (2 * head_dim if qk_norm else 0)
    mlp = 3 * h * ffn
    return layers * (q_o + k_v + norms + mlp) + 2 * vocab * h + h


def test_llama_3_1_70b(catalog: Catalog) -> None:
    model = catalog.model("meta-llama/Llama-3.1-70B")
    expected = _dense_params(
        layers=80, h=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672, vocab=128256
    )
    assert expected == 70_553_706_496
    assert model.param_count() == expected
    assert model.active_param_count() == expected
    # 80 layers x (K + V) x 8 heads x 128 x 2 bytes = 327,680 bytes = 320 KiB.
    assert model.kv_bytes_per_token("bf16") == 320 * 1024
    assert model.kv_bytes_per_token("fp8") == 160 * 1024


def test_qwen3_32b(catalog: Catalog) -> None:
    model = catalog.model("Qwen/Qwen3-32B")
    expected = _dense_params(
        layers=64, h=5120, heads=64, kv_heads=8, head_dim=128, ffn=25600, vocab=151936, qk_norm=True
    )
    assert expected == 32_762_123_264
    assert model.param_count() == expected
    assert model.param_count() / 1e9 == pytest.approx(32.8, rel=0.01)  # published: 32.8B
    assert model.kv_bytes_per_token("bf16") == 256 * 1024


def test_llama_3_1_8b(catalog: Catalog) -> None:
    model = catalog.model("meta-llama/Llama-3.1-8B-Instruct")
    expected = _dense_params(
        layers=32, h=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256
    )
    assert expected == 8_030_261_248
    assert model.param_count() == expected
    assert model.kv_bytes_per_token("bf16") == 128 * 1024


def test_qwen3_8b(catalog: Catalog) -> None:
    model = catalog.model("Qwen/Qwen3-8B")
    expected = _dense_params(
        layers=36, h=4096, heads=32, kv_heads=8, head_dim=128, ffn=12288, vocab=151936, qk_norm=True
    )
    assert model.param_count() == expected
    assert model.param_count() / 1e9 == pytest.approx(8.2, rel=0.01)  # published: 8.2B


def test_deepseek_v3(catalog: Catalog) -> None:
    model = catalog.model("deepseek-ai/DeepSeek-V3")
    assert model.attention == "mla"
    assert model.param_count() / 1e9 == pytest.approx(671, rel=0.01)  # published: 671B
    assert model.active_param_count() / 1e9 == pytest.approx(37, rel=0.02)  # published: 37B
    # MLA caches one latent (kv_lora_rank) plus the shared RoPE key per layer.
    assert model.kv_elements_per_token() == 61 * (512 + 64)
    assert model.kv_bytes_per_token("bf16") == 61 * 576 * 2
    assert model.num_moe_layers == 61 - 3


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("Qwen/Qwen3-235B-A22B", 235, 22),
        ("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
    ],
)
def test_qwen3_moe_published_totals(
    catalog: Catalog, name: str, total_b: float, active_b: float
) -> None:
    model = catalog.model(name)
    assert model.param_count() / 1e9 == pytest.approx(total_b, rel=0.01)
    assert model.active_param_count() / 1e9 == pytest.approx(active_b, rel=0.02)


def test_qwen3_30b_a3b_by_hand(catalog: Catalog) -> None:
    model = catalog.model("Qwen3-30B-A3B")
    h, layers, vocab = 2048, 48, 151936
    attention = 2 * h * 32 * 128 + 2 * h * 4 * 128 + 2 * 128
    expert = 3 * h * 768
    router = h * 128
    per_layer = attention + 2 * h + 128 * expert + router
    assert model.param_count() == layers * per_layer + 2 * vocab * h + h
    per_layer_active = attention + 2 * h + 8 * expert + router
    assert model.active_param_count() == layers * per_layer_active + 2 * vocab * h + h


def test_weight_bytes_by_precision(catalog: Catalog) -> None:
    model = catalog.model("meta-llama/Llama-3.1-70B")
    params = model.param_count()
    embeddings = 2 * 128256 * 8192  # embedding + LM head, kept in bf16
    assert model.weight_bytes("bf16") == 2 * params
    assert model.weight_bytes("fp8") == (params - embeddings) + 2 * embeddings
    assert model.weight_bytes("fp4") == math.ceil((params - embeddings) / 2) + 2 * embeddings
    assert model.weight_bytes("fp8") < model.weight_bytes("bf16") < 2.1 * model.weight_bytes("fp8")


def test_alias_entries_share_the_shape(catalog: Catalog) -> None:
    pairs = [
        ("meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1"),
        ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3.1"),
        ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2-Thinking"),
        ("zai-org/GLM-4.7", "zai-org/GLM-4.6"),
    ]
    for base, alias in pairs:
        a, b = catalog.model(base), catalog.model(alias)
        # The same shape; a quantised entry differs only in its checkpoint recipe.
        same = {"name", "checkpoint_recipe"}
        assert a.model_dump(exclude=same) == b.model_dump(exclude=same)
        assert b.name == alias


def test_model_lookup_is_case_insensitive_and_accepts_short_names(catalog: Catalog) -> None:
    spec = catalog.model("Qwen/Qwen3-32B")
    assert catalog.model("qwen/qwen3-32b") is spec
    assert catalog.model("Qwen3-32B") is spec
    assert catalog.model("QWEN3-32B") is spec


def test_unknown_model_names_the_closest(catalog: Catalog) -> None:
    with pytest.raises(InputError) as err:
        catalog.model("Qwen3-33B")
    message = str(err.value)
    assert message.startswith("unknown model 'Qwen3-33B' (did you mean 'Qwen/Qwen3-32B'?); known: ")
    assert "meta-llama/Llama-3.1-70B" in message
    assert "\n" not in message


# ----- properties of the parameter formula -------------------------------------------------------
_dense_shapes = st.fixed_dictionaries(
    {
        "num_layers": st.integers(1, 8),
        "hidden_size": st.integers(1, 64),
        "num_kv_heads": st.integers(1, 4),
        "group": st.integers(1, 4),
        "head_dim": st.integers(1, 32),
        "ffn_size": st.integers(1, 128),
        "vocab_size": st.integers(1, 500),
        "qk_norm": st.booleans(),
    }
)


@settings(max_examples=50, deadline=None)
@given(shape=_dense_shapes)
def test_dense_param_count_matches_the_closed_form(shape: dict[str, int]) -> None:
    heads = shape["num_kv_heads"] * shape["group"]
    model = ModelSpec(
        name="x/y",
        num_layers=shape["num_layers"],
        hidden_size=shape["hidden_size"],
        num_attention_heads=heads,
        num_kv_heads=shape["num_kv_heads"],
        head_dim=shape["head_dim"],
        ffn_size=shape["ffn_size"],
        vocab_size=shape["vocab_size"],
        qk_norm=bool(shape["qk_norm"]),
        max_context_tokens=4096,
    )
    expected = _dense_params(
        layers=shape["num_layers"],
        h=shape["hidden_size"],
        heads=heads,
        kv_heads=shape["num_kv_heads"],
        head_dim=shape["head_dim"],
        ffn=shape["ffn_size"],
        vocab=shape["vocab_size"],
        qk_norm=bool(shape["qk_norm"]),
    )
    assert model.param_count() == expected == model.active_param_count()


@settings(max_examples=50, deadline=None)
@given(
    experts=st.integers(1, 16),
    top_k=st.integers(1, 16),
    shared=st.integers(0, 2),
    dense_layers=st.integers(0, 3),
)
def test_moe_active_params_grow_with_top_k(
    experts: int, top_k: int, shared: int, dense_layers: int
) -> None:
    top_k = min(top_k, experts)

    def build(k: int) -> ModelSpec:
        return ModelSpec(
            name="x/moe",
            num_layers=4,
            hidden_size=16,
            num_attention_heads=4,
            num_kv_heads=2,
            head_dim=8,
            ffn_size=32,
            vocab_size=100,
            max_context_tokens=4096,
            num_experts=experts,
            experts_per_token=k,
            expert_ffn_size=8,
            num_shared_experts=shared,
            first_dense_layers=dense_layers,
        )

    model = build(top_k)
    one_expert_all_layers = (4 - dense_layers) * 3 * 16 * 8
    assert model.param_count() - model.active_param_count() == (
        (experts - top_k) * one_expert_all_layers
    )
    assert build(experts).active_param_count() == model.param_count()


def test_minimax_m25_published_totals(catalog: Catalog) -> None:
    # Published 230B total, 10B active; the derived active count includes the 1.23B of
    # embedding + LM head (2 x 200,064 x 3072), the published one rounds it away.
    model = catalog.model("MiniMaxAI/MiniMax-M2.5")
    assert model.param_count() / 1e9 == pytest.approx(230, rel=0.01)
    active_without_embeddings = model.active_param_count() - 2 * 200_064 * 3072
    assert active_without_embeddings / 1e9 == pytest.approx(10, rel=0.03)


# ----- models the InferenceX / aiconfigurator benchmarks name ------------------------------------
def _mla_moe_params(
    *,
    layers: int,
    dense_layers: int,
    h: int,
    heads: int,
    q_rank: int,
    kv_rank: int,
    nope: int,
    rope: int,
    v: int,
    ffn: int,
    experts: int,
    shared: int,
    expert_ffn: int,
    vocab: int,
) -> int:
    """Parameters of a DeepSeek-V3-style decoder (MLA + MoE after ``dense_layers`` dense
    layers, untied embeddings), written out by hand: all experts counted."""
    q = h * q_rank + q_rank + q_rank * heads * (nope + rope)  # down-projection, norm, up
    kv = h * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
    attention = q + kv + heads * v * h
    moe = (experts + shared) * 3 * h * expert_ffn + h * experts  # experts + router
    per_layer = attention + 2 * h
    return (
        layers * per_layer
        + dense_layers * 3 * h * ffn
        + (layers - dense_layers) * moe
        + 2 * vocab * h
        + h
    )


def test_kimi_k2_5_by_hand(catalog: Catalog) -> None:
    model = catalog.model("moonshotai/Kimi-K2.5")
    expected = _mla_moe_params(
        layers=61, dense_layers=1, h=7168, heads=64, q_rank=1536, kv_rank=512, nope=128,
        rope=64, v=128, ffn=18432, experts=384, shared=1, expert_ffn=2048, vocab=163840,
    )  # fmt: skip
    assert model.param_count() == expected == 1_026_408_209_408
    # Published: 1T total, 32B active (model card).
    assert model.param_count() / 1e12 == pytest.approx(1.0, rel=0.03)
    assert model.active_param_count() / 1e9 == pytest.approx(32, rel=0.03)
    # MLA: one 512-wide latent plus the 64-wide RoPE key per layer and token.
    assert model.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2
    assert model.num_moe_layers == 60


def test_kimi_int4_expert_checkpoint_weight_bytes(catalog: Catalog) -> None:
    model = catalog.model("moonshotai/Kimi-K2.5")
    embeddings = 2 * 163840 * 7168  # embedding + LM head, bf16
    attention = 61 * model.attention_params_per_layer()  # kept bf16 (ignore: self_attn)
    rest = model.param_count() - embeddings - attention  # int4 + one bf16 scale per 32
    assert model.weight_bytes("int4") == math.ceil(rest * 4.5 / 8 + (attention + embeddings) * 2)
    assert model.weight_bytes("int4") / 1e9 == pytest.approx(590, rel=0.01)
    # Kimi-K2-Instruct: the same shape in block FP8, with a 128K context.
    instruct = catalog.model("moonshotai/Kimi-K2-Instruct")
    same = {"name", "checkpoint_recipe", "max_context_tokens"}
    assert instruct.model_dump(exclude=same) == model.model_dump(exclude=same)
    assert (instruct.max_context_tokens, model.max_context_tokens) == (131072, 262144)


@pytest.mark.parametrize(
    ("name", "total_b", "active_b", "active_rel"),
    [
        ("Qwen/Qwen3.5-397B-A17B", 397, 17, 0.03),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct", 480, 35, 0.02),
        ("deepseek-ai/DeepSeek-V3.1", 671, 37, 0.02),
    ],
)
def test_new_moe_published_totals(
    catalog: Catalog, name: str, total_b: float, active_b: float, active_rel: float
) -> None:
    model = catalog.model(name)
    assert model.param_count() / 1e9 == pytest.approx(total_b, rel=0.01)
    assert model.active_param_count() / 1e9 == pytest.approx(active_b, rel=active_rel)


def test_glm_4_7_published_totals(catalog: Catalog) -> None:
    # Published 355B total, 32B active; the active figure leaves out the 1.55B of embedding +
    # LM head (2 x 151,552 x 5120), as MiniMax-M2.5's does.
    for name in ("zai-org/GLM-4.7", "zai-org/GLM-4.6"):
        model = catalog.model(name)
        assert model.param_count() / 1e9 == pytest.approx(355, rel=0.01)
        active = model.active_param_count() - 2 * 151_552 * 5120
        assert active / 1e9 == pytest.approx(32, rel=0.01)
        assert (model.num_moe_layers, model.max_context_tokens) == (89, 202752)


def test_qwen3_5_hybrid_layers(catalog: Catalog) -> None:
    model = catalog.model("Qwen/Qwen3.5-397B-A17B")
    # layer_types: 3 x linear_attention then full_attention, 15 times.
    assert (model.full_attention_layers, model.linear_attention_layers) == (15, 45)
    assert model.kv_bytes_per_token("bf16") == 15 * 2 * 2 * 256 * 2
    # Per request: 64 value heads x 128 x 128 fp32 state + 3 conv inputs of 2x16x128 + 64x128.
    per_layer = 64 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 64 * 128) * 2
    assert model.linear_state_bytes() == 45 * per_layer
    # SGLang's --mamba-ssm-dtype bfloat16: the recurrent state in 2 bytes, the conv inputs alike.
    bf16 = 64 * 128 * 128 * 2 + 3 * (2 * 16 * 128 + 64 * 128) * 2
    assert model.linear_state_bytes("bf16") == 45 * bf16


# ----- DeepSeek Sparse Attention: GLM-5, GLM-5.1, DeepSeek-V3.2 ----------------------------------
def _indexer_params(*, h: int, q_rank: int, heads: int, width: int) -> int:
    """One lightning indexer by hand: wq_b, wk, the key's LayerNorm (weight, bias), weights_proj."""
    return q_rank * heads * width + h * width + 2 * width + h * heads


#: GLM-5's config.json in ``_mla_moe_params``'s terms (hardware/data/models.yaml cites it).
GLM_5_SHAPE = {
    "layers": 78, "dense_layers": 3, "h": 6144, "heads": 64, "q_rank": 2048, "kv_rank": 512,
    "nope": 192, "rope": 64, "v": 256, "ffn": 12288, "experts": 256, "shared": 1,
    "expert_ffn": 2048, "vocab": 154880,
}  # fmt: skip


def test_glm_5_by_hand_and_published_totals(catalog: Catalog) -> None:
    model = catalog.model("zai-org/GLM-5")
    dense_mla = _mla_moe_params(**GLM_5_SHAPE)
    indexer = _indexer_params(h=6144, q_rank=2048, heads=32, width=128)
    assert indexer == model.indexer_params_per_layer() == 9_371_904
    assert model.param_count() == dense_mla + 78 * indexer == 743_911_199_232
    # Published: 744B total, 40B active (the active figure without embedding and LM head).
    assert model.param_count() / 1e9 == pytest.approx(744, rel=0.001)
    active = model.active_param_count() - 2 * 154880 * 6144
    assert active / 1e9 == pytest.approx(40, rel=0.01)
    # GLM-5.1's checkpoint (its weight list: 753,864,139,008 parameters) adds the MTP layer —
    # one more MoE decoder layer with its indexer, eh_proj (2h -> h) and three norms — and the
    # 76 routers' 256 fp32 score biases: the derived count matches it to the parameter.
    h = 6144
    mtp_layer = model.attention_params_per_layer() + 2 * h + 257 * 3 * h * 2048 + h * 256
    mtp = mtp_layer + 2 * h * h + 3 * h
    glm_5_1 = catalog.model("zai-org/GLM-5.1")
    assert glm_5_1.param_count() + mtp + 76 * 256 == 753_864_139_008
    assert (model.num_moe_layers, model.sparse_attention_layers) == (75, 78)
    assert (model.max_context_tokens, model.index_topk) == (202752, 2048)


def test_deepseek_v3_2_is_deepseek_v3_with_an_indexer_per_layer(catalog: Catalog) -> None:
    v3, v32 = catalog.model("deepseek-ai/DeepSeek-V3"), catalog.model("deepseek-ai/DeepSeek-V3.2")
    indexer = _indexer_params(h=7168, q_rank=1536, heads=64, width=128)
    assert v32.param_count() - v3.param_count() == 61 * indexer == 61 * 13_959_424
    assert v32.active_param_count() - v3.active_param_count() == 61 * indexer
    # Published 671B total, 37B active (the DeepSeek-V3 figures; the 0.85B of indexers are in
    # the derived 671.9B and 38.4B).
    assert v32.param_count() / 1e9 == pytest.approx(671, rel=0.01)
    assert v32.active_param_count() / 1e9 == pytest.approx(37, rel=0.04)
    same = {"name", "index_topk", "index_n_heads", "index_head_dim"}
    assert v32.model_dump(exclude=same) == v3.model_dump(exclude=same | {"name"})
    assert (v32.index_topk, v32.index_n_heads, v32.index_head_dim) == (2048, 64, 128)


@pytest.mark.parametrize(
    ("base", "alias"),
    [
        ("zai-org/GLM-5", "zai-org/GLM-5.1"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.2"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.2-Speciale"),
    ],
)
def test_sparse_attention_re_releases_share_the_shape(
    catalog: Catalog, base: str, alias: str
) -> None:
    assert catalog.model(base).model_dump(exclude={"name"}) == catalog.model(alias).model_dump(
        exclude={"name"}
    )


def test_sparse_attention_kv_holds_the_fp8_indexer_key(catalog: Catalog) -> None:
    # Per layer and token: the 576-element latent at the KV precision, plus the indexer key's
    # 128 FP8 bytes and one fp32 scale whatever that precision.
    model = catalog.model("zai-org/GLM-5")
    assert model.index_key_bytes_per_layer_token() == 132
    assert model.kv_elements_per_token() == 78 * 576
    assert model.kv_bytes_per_token("bf16") == 78 * (2 * 576 + 132)
    assert model.kv_bytes_per_token("fp8") == 78 * (576 + 132)
    dense = catalog.model("deepseek-ai/DeepSeek-V3")
    assert dense.index_key_bytes_per_layer_token() == dense.indexer_params_per_layer() == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"index_topk": 2048}, "index_topk, index_n_heads and index_head_dim go together"),
        ({"index_n_heads": 0}, "index_topk, index_n_heads and index_head_dim go together"),
        ({"attention": "gqa"}, "modelled for MLA attention with q_lora_rank > 0"),
        ({"q_lora_rank": 0}, "modelled for MLA attention with q_lora_rank > 0"),
    ],
)
def test_inconsistent_sparse_attention_is_refused(
    catalog: Catalog, fields: dict[str, object], message: str
) -> None:
    glm = catalog.model("zai-org/GLM-5").model_dump()
    if "index_topk" in fields:  # only one of the three fields, on a dense MLA model
        glm |= {"index_n_heads": 0, "index_head_dim": 0}
    with pytest.raises(ValidationError, match=message):
        ModelSpec.model_validate(glm | fields)
