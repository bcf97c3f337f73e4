"""DeepSeek Sparse Attention (GLM-5, DeepSeek-V3.2): a layer's attention reads at most
``index_topk`` cached tokens, its lightning indexer scores every earlier one, and every cached
token also holds the indexer's FP8 key."""

from __future__ import annotations

import warnings

import pytest

from hardware.catalog import shipped_catalog
from hardware.schema import ModelSpec
from simulator.latency import (
    ComposeParams,
    Deployment,
    OperatorPlanner,
    RooflineModel,
    make_latency_model,
    memory_fit,
)
from simulator.latency.model import ComposedLatencyModel
from simulator.latency.roofline import dsa_indexer_work
from simulator.latency.table import TableFallbackWarning
from simulator.presets import load_preset

NO_OVERHEAD = ComposeParams(step_overhead_s=0.0, request_overhead_s=0.0)
CATALOG = shipped_catalog()
GLM5 = CATALOG.model("zai-org/GLM-5")
DSV32 = CATALOG.model("deepseek-ai/DeepSeek-V3.2")
H200 = CATALOG.gpu("h200_sxm")
INDEXER_OPS = ("dsa_indexer", "dsa_indexer_proj")


def _dense(model: ModelSpec) -> ModelSpec:
    """The same model attending every cached token (no indexer)."""
    return model.model_copy(update={"index_topk": 0, "index_n_heads": 0, "index_head_dim": 0})


def _deployment(model: ModelSpec, tp: int = 8) -> Deployment:
    return Deployment(model, H200, tp=tp, weight_precision="fp8", kv_precision="fp8")


def _composed(spec: str, model: ModelSpec) -> ComposedLatencyModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableFallbackWarning)
        latency = make_latency_model(spec, _deployment(model), params=NO_OVERHEAD)
    assert isinstance(latency, ComposedLatencyModel)
    return latency


BATCHES = {
    "decode at top-k": [(2047, 1)] * 16,
    "short decodes": [(100, 1), (700, 1), (1500, 1)],
    "prefill of top-k": [(0, 2048)],
    "chunk after a prefix": [(1000, 1048)],
    "mixed": [(511, 1)] * 8 + [(0, 1024), (300, 200)],
}


@pytest.mark.parametrize("spec", ["roofline", "table"])
@pytest.mark.parametrize("model", [GLM5, DSV32], ids=["GLM-5", "DeepSeek-V3.2"])
@pytest.mark.parametrize("batch", list(BATCHES.values()), ids=list(BATCHES))
def test_up_to_top_k_a_sparse_layer_is_the_dense_layer_plus_its_indexer(
    spec: str, model: ModelSpec, batch: list[tuple[int, int]]
) -> None:
    sparse, dense = _composed(spec, model), _composed(spec, _dense(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableFallbackWarning)
        parts = dict(sparse.breakdown(batch).seconds)
        indexer = sum(parts.pop(op) for op in INDEXER_OPS)
        # Every other operator (attention, decompression, projections, MoE) is the dense one.
        assert parts == dict(dense.breakdown(batch).seconds)
        assert indexer > 0
        total = sparse.step_seconds(batch)
        assert total == pytest.approx(dense.step_seconds(batch) + indexer, rel=1e-12)
        assert total == pytest.approx(sparse.breakdown(batch).total, rel=1e-12)


def _decode(model: ComposedLatencyModel, kv_len: int) -> dict[str, float]:
    return dict(model.breakdown([(kv_len - 1, 1)] * 32).seconds)


def test_past_top_k_decode_attention_stops_growing_and_the_indexer_grows_linearly() -> None:
    model = RooflineModel(_deployment(GLM5), params=NO_OVERHEAD)
    attention = [_decode(model, kv)["attn_decode"] for kv in (4096, 65536, 131072)]
    assert attention[0] == attention[1] == attention[2]
    assert _decode(model, 1024)["attn_decode"] < attention[0]
    # The indexer reads every cached key (memory-bound at 32 decodes): equal steps, equal growth.
    indexer = [_decode(model, kv)["dsa_indexer"] for kv in (32768, 65536, 98304)]
    assert indexer[2] - indexer[1] == pytest.approx(indexer[1] - indexer[0], rel=1e-9)
    assert indexer[1] > indexer[0]
    # The dense model keeps growing.
    dense = RooflineModel(_deployment(_dense(GLM5)), params=NO_OVERHEAD)
    assert _decode(dense, 131072)["attn_decode"] > 10 * attention[2]


def test_past_top_k_prefill_attention_stops_growing() -> None:
    model = RooflineModel(_deployment(GLM5), params=NO_OVERHEAD)
    near, far = (dict(model.breakdown([(c, 1024)]).seconds) for c in (8192, 65536))
    assert near["attn_prefill"] == far["attn_prefill"]
    assert far["dsa_indexer"] > 5 * near["dsa_indexer"]  # 65.5k vs 8.2k keys per query
    # A chunk longer than top-k: its queries attend min(position, 2048) keys, in equal chunks.
    planner = OperatorPlanner(_deployment(GLM5))
    (call,) = [c for c in planner.prefill_calls(((0, 6000, 1),)) if c.op == "attn_prefill"]
    batch, size, prefix = call.args[0], call.args[1], call.args[2]
    pairs = batch * (size * prefix + size * (size + 1) / 2)
    assert pairs == pytest.approx(sum(min(i + 1, 2048) for i in range(6000)), rel=0.01)
    assert call.count == 78


def test_indexer_work_by_hand() -> None:
    # FP8 dot products: 2 x heads x width FLOPs per pair; bytes: each key (128 FP8 + one fp32
    # scale), each query head (128 FP8 + one fp32 weight), each pair's fp32 score written and
    # read back by the top-k.
    work = dsa_indexer_work(4, 10_000, 9_000, 32, 128)
    assert work.flops == 2 * 32 * 128 * 10_000
    assert work.bytes == 9_000 * 132 + 4 * 32 * 132 + 8 * 10_000
    planner = OperatorPlanner(_deployment(GLM5))
    # All decodes of a step are one call: 3 requests reading 3000 keys in all.
    decode = planner.indexer_decode_call(3, 3000)
    assert (decode.kind, decode.args, decode.count) == ("dsa_indexer", (3, 3000, 3000, 32, 128), 78)
    # Two prefills of 10 tokens after 100: each token scores every earlier one and itself.
    prefill = planner.indexer_prefill_call(100, 10, 2)
    assert prefill.args == (20, 2 * (10 * 100 + 55), 220, 32, 128)
    # H200 roofline: memory-bound at one decode over 100k keys.
    roofline = RooflineModel(_deployment(GLM5), params=NO_OVERHEAD)
    seconds = roofline.call_seconds(planner.indexer_decode_call(1, 100_000))
    moved = dsa_indexer_work(1, 100_000, 100_000, 32, 128).bytes
    assert seconds == pytest.approx(moved / (H200.hbm_tb_per_s * 1e12 * 0.9) + 10e-6, rel=1e-12)


@pytest.mark.parametrize("tp", [4, 8])
def test_the_indexer_is_replicated_not_split_by_tensor_parallelism(tp: int) -> None:
    planner = OperatorPlanner(_deployment(GLM5, tp=tp))
    projections = [c for c in planner.token_calls(16) if c.op == "dsa_indexer_proj"]
    gemms = sorted(c.args for c in projections if c.kind == "gemm")
    # wq_b (compressed query to 32 x 128) at the weights' precision; wk + weights_proj in bf16.
    assert gemms == [(16, 128 + 32, 6144, "bf16"), (16, 32 * 128, 2048, "fp8")]
    assert all(c.count == 78 for c in projections)


@pytest.mark.parametrize("spec", ["roofline", "table"])
def test_fast_pricers_are_the_step_seconds_bit_for_bit(spec: str) -> None:
    model = _composed(spec, GLM5)
    cache = [100, 1500, 4000, 70_000]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableFallbackWarning)
        pricer = model.decode_step_pricer(cache)
        for k in (0, 1, 700):
            assert pricer(k) == model.step_seconds([(c + k, 1) for c in cache])
        split = model.split_step_seconds([101, 70_001], [(0, 512)], 514)
        assert split == model.step_seconds([(100, 1), (70_000, 1), (0, 512)])


def test_each_cached_token_holds_the_latent_and_the_indexer_key_on_every_gpu() -> None:
    # 78 layers x (576-element latent + 128 FP8 + 4-byte scale): replicated across TP ranks.
    for kv, latent in (("fp8", 576), ("bf16", 2 * 576)):
        d = Deployment(GLM5, H200, tp=8, weight_precision="fp8", kv_precision=kv)
        assert d.kv_bytes_per_token_per_gpu() == 78 * (latent + 132)
    assert GLM5.kv_bytes_per_token("fp8") == 78 * (576 + 132)
    assert DSV32.kv_bytes_per_token("bf16") == 61 * (2 * 576 + 132)
    # The memory fit sizes the KV pool with it.
    d = _deployment(GLM5)
    fit = memory_fit(d, load_preset("sglang").memory_params(1))
    assert fit.kv_bytes_per_token_per_gpu == 78 * 708
