"""``model:NAME,BLOCK`` cost models: prefill FLOPs per block from a catalog model's shape."""

from __future__ import annotations

import pytest

from hardware.catalog import shipped_catalog
from simulator.kvcache.cost import CostModel, parse_cost_model
from simulator.kvcache.model_cost import model_block_cost
from slo.inputfile import InputError


def test_full_attention_cost_grows_linearly_with_depth() -> None:
    # Llama-3.1-8B, 512-token blocks: each block deeper adds 512 x 512 keys per query row
    # in each of 32 layers at 4 x 32 heads x 128 FLOPs per key.
    cost = parse_cost_model("model:meta-llama/Llama-3.1-8B-Instruct,512")
    step = 32 * 4 * 32 * 128 * 512 * 512 / 1e9
    assert cost.cost(11) - cost.cost(10) == pytest.approx(step, rel=1e-9)
    assert cost.cost(51) - cost.cost(50) == pytest.approx(step, rel=1e-9)
    model = shipped_catalog().model("meta-llama/Llama-3.1-8B-Instruct")
    embeddings = 2 * 128256 * 4096
    weights = 2 * (model.active_param_count() - embeddings) * 512 / 1e9
    attention = 32 * 4 * 32 * 128 * (512 * 513 // 2) / 1e9
    assert cost.cost(0) == pytest.approx(weights + attention, rel=1e-12)


def test_a_window_halves_how_fast_gpt_oss_blocks_grow() -> None:
    # 18 of 36 layers attend to 128 tokens only: past the first block their cost is flat, so
    # depth costs half of what it would with every layer full.
    model = shipped_catalog().model("openai/gpt-oss-120b")
    full = model.model_copy(update={"sliding_window": 0, "sliding_window_layers": 0})
    windowed = CostModel("w", model_block_cost(model, 512))
    every = CostModel("f", model_block_cost(full, 512))
    grow_w, grow_f = windowed.cost(40) - windowed.cost(2), every.cost(40) - every.cost(2)
    assert grow_w == pytest.approx(grow_f / 2, rel=1e-9)
    # So a hit on a deep block saves a smaller share of a long prompt's compute.
    assert windowed.cost(40) / windowed.total(41) < every.cost(40) / every.total(41)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("model:openai/gpt-oss-120b", "expected model:NAME,BLOCK_TOKENS"),
        ("model:openai/gpt-oss-120b,0", "expected model:NAME,BLOCK_TOKENS"),
        ("model:nobody/Nothing,16", "unknown model 'nobody/Nothing'"),
    ],
)
def test_bad_model_specs_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        parse_cost_model(spec)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("cost model")


def test_sparse_attention_blocks_grow_by_their_indexer_only_past_top_k() -> None:
    # GLM-5, 512-token blocks: past top-k (2048 tokens, 4 blocks) a query attends 2048 keys
    # however deep, so a deeper block adds only its indexer's keys: 512 more per query row in
    # each of 78 layers at 2 x 32 heads x 128 FLOPs per key.
    model = shipped_catalog().model("zai-org/GLM-5")
    sparse = CostModel("s", model_block_cost(model, 512))
    step = 78 * 2 * 32 * 128 * 512 * 512 / 1e9
    assert sparse.cost(11) - sparse.cost(10) == pytest.approx(step, rel=1e-9)
    # Within top-k attention is the dense model's; the indexer adds its weights and its keys.
    dense = model.model_copy(update={"index_topk": 0, "index_n_heads": 0, "index_head_dim": 0})
    full = CostModel("d", model_block_cost(dense, 512))
    keys = 512 * 512 + 512 * 513 // 2  # block 1: sum of t + 1 over tokens 512..1023
    extra = 2 * 78 * model.indexer_params_per_layer() * 512 + 78 * 2 * 32 * 128 * keys
    assert sparse.cost(1) - full.cost(1) == pytest.approx(extra / 1e9, rel=1e-9)
    assert full.cost(11) - full.cost(10) > 4 * (sparse.cost(11) - sparse.cost(10))
