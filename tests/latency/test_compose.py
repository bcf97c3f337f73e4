"""Operator composition: per-request attention, MoE expert counting, MLA shapes, LM head."""

from __future__ import annotations

import dataclasses
import math

import pytest

from hardware.catalog import shipped_catalog
from simulator.latency import (
    Batch,
    ComposedLatencyModel,
    ComposeParams,
    Deployment,
    KernelCall,
    OperatorPlanner,
    RooflineKernels,
    RooflineModel,
    make_latency_model,
)
from simulator.latency.roofline import generation_attention_work
from slo.inputfile import InputError

from .specs import B200, DEEPSEEK_V3, DEPLOYMENTS, H100, LLAMA_70B, QWEN3_MOE

NO_OVERHEAD = ComposeParams(step_overhead_s=0.0, request_overhead_s=0.0)


def test_prefill_over_long_prefix_costs_more(llama8b_h100: Deployment) -> None:
    model = RooflineModel(llama8b_h100)
    fresh = model.breakdown([(0, 4096)])
    cached = model.breakdown([(65536, 4096)])
    assert cached.total > fresh.total
    # Causal pairs: 4096·65536 + 4096·4097/2 vs 4096·4097/2 → ~33x the attention FLOPs.
    ratio = cached.seconds["attn_prefill"] / fresh.seconds["attn_prefill"]
    assert 25 < ratio < 34
    # Everything except attention is the same: same new tokens.
    assert cached.seconds["qkv_proj"] == fresh.seconds["qkv_proj"]


def test_mixed_batch_is_the_per_request_sum_not_the_average(llama8b_h100: Deployment) -> None:
    model = RooflineModel(llama8b_h100, params=NO_OVERHEAD)
    long_short = [(0, 8192), (0, 128)]
    averaged = [(0, 4160), (0, 4160)]  # same tokens, same requests, averaged shape
    attn = model.breakdown(long_short).seconds["attn_prefill"]
    alone = [model.breakdown([p]).seconds["attn_prefill"] for p in long_short]
    smallest = OperatorPlanner(llama8b_h100).prefill_floor()
    pair = KernelCall(smallest.op, smallest.kind, (2, *smallest.args[1:]), 1)
    # The fixed cost of one launch: one request's time extrapolated to none, 2·t(1) − t(2).
    floor = (2 * model.call_seconds(smallest) - model.call_seconds(pair)) * 32
    # One ragged launch: the sum of both requests' attention, paying the fixed cost once.
    assert attn == pytest.approx(sum(alone) - floor, rel=1e-12)
    # Causal cost is quadratic: 8192²/2 + 128²/2 ≫ 2·4160²/2, so averaging would be ~2x off.
    assert attn > 1.8 * model.breakdown(averaged).seconds["attn_prefill"]
    # The linear parts see only the token count, which is the same.
    assert model.breakdown(long_short).seconds["mlp_down"] == pytest.approx(
        model.breakdown(averaged).seconds["mlp_down"]
    )


def test_identical_prefills_share_one_call(llama8b_h100: Deployment) -> None:
    model = RooflineModel(llama8b_h100)
    calls = [c for c in model.plan([(100, 512)] * 3) if c.op == "attn_prefill"]
    assert [(c.args[0], c.count) for c in calls] == [(3, 32)]


def test_decode_groups_and_buckets(llama8b_h100: Deployment) -> None:
    model = RooflineModel(llama8b_h100, params=NO_OVERHEAD)
    lens = [37, 100, 1000, 1001, 5000, 33000, 120000]
    batch = [(c, 1) for c in lens]
    # The octave-bucketed hot path matches exact per-length groups for the roofline.
    exact = sum(c.count * model.call_seconds(c) for c in model.plan(batch))
    assert model.step_seconds(batch) == pytest.approx(exact, rel=1e-3)
    # Decode attention reads each request's whole KV: doubling every length nearly doubles it.
    doubled = [(2 * c, 1) for c in lens]
    a = model.breakdown(batch).seconds["attn_decode"]
    b = model.breakdown(doubled).seconds["attn_decode"]
    assert 1.8 < b / a < 2.0


def test_lm_head_only_for_sampling_rows(llama8b_h100: Deployment) -> None:
    model = RooflineModel(llama8b_h100)
    partial = Batch.of([(0, 2048)], logit_tokens=0)  # a chunk that does not finish the prompt
    final = Batch.of([(0, 2048)])
    assert "lm_head" not in model.breakdown(partial).seconds
    assert model.breakdown(final).seconds["lm_head"] > 0
    lm = [c for c in model.plan(Batch.of([(5, 1)] * 7)) if c.op == "lm_head"]
    assert lm[0].args[:3] == (7, 128256, 4096)


def test_tp_all_reduces_twice_per_layer() -> None:
    d = Deployment(LLAMA_70B, H100, tp=4)
    model = RooflineModel(d)
    reduces = [c for c in model.plan([(0, 100)]) if c.op == "all_reduce"]
    # Embedding (vocab-parallel) once, then after attention and after the MLP in 80 layers.
    assert sum(c.count for c in reduces) == 1 + 2 * 80
    assert all(c.args == (100 * 8192 * 2.0, 4) for c in reduces)
    qkv = next(c for c in model.plan([(0, 100)]) if c.op == "qkv_proj")
    assert qkv.args == (100, (64 + 2 * 8) * 128 // 4, 8192, "bf16")


def test_moe_touches_expected_distinct_experts() -> None:
    planner = OperatorPlanner(Deployment(QWEN3_MOE, H100, tp=2))  # ep = tp = 2
    # Expert i (by popularity) takes a share of the picks proportional to i^-1.01.
    share = [i**-1.01 for i in range(1, 129)]
    popularity = [s / sum(share) for s in share]
    for tokens in (1, 16, 4096):
        expected = sum(1 - (1 - p) ** (tokens * 8) for p in popularity)
        uniform = 128 * (1 - (1 - 1 / 128) ** (tokens * 8))
        assert expected < uniform or tokens == 4096  # every expert touched either way
        calls = [c for c in planner.token_calls(tokens) if c.op == "moe_experts"]
        gate_up, down = calls
        # One grouped GEMM per layer over this GPU's expected/2 experts, side by side.
        width = round(expected / 2 * 768)
        rows = max(1, round(tokens * 8 / expected))
        assert gate_up.count == down.count == 48
        assert gate_up.args == (rows, 2 * width, 2048, "bf16")
        assert down.args == (rows, 2048, width, "bf16")
    # One token reads under 8 experts' weights (skew: 6.8), 4096 tokens nearly all 128.
    assert next(c for c in planner.token_calls(4096) if c.op == "moe_experts").args[0] == 256
    # 16 tokens: 51 experts instead of uniform routing's 81, so fewer weights read per GPU.
    assert (
        next(c for c in planner.token_calls(16) if c.op == "moe_experts").args[1]
        == round(sum(1 - (1 - p) ** 128 for p in popularity) / 2 * 768) * 2
    )


def test_a_balanced_router_touches_the_uniform_count_of_experts() -> None:
    """``expert_routing: balanced`` (DeepSeek-V3's auxiliary-loss-free router): a batch's
    picks spread as uniform ones, ``E·(1 - (1 - 1/E)^(T·k))`` distinct experts, more weights
    read at decode batch sizes than the skewed default, the same when every expert is hit."""
    balanced = QWEN3_MOE.model_copy(update={"expert_routing": "balanced"})
    even = OperatorPlanner(Deployment(balanced, H100, tp=2))
    skewed = OperatorPlanner(Deployment(QWEN3_MOE, H100, tp=2))
    for tokens in (1, 16, 64):
        uniform = 128 * (1 - (1 - 1 / 128) ** (tokens * 8))
        gate_up = next(c for c in even.token_calls(tokens) if c.op == "moe_experts")
        assert gate_up.args[1] == round(uniform / 2 * 768) * 2
        assert gate_up.args[0] == max(1, round(tokens * 8 / uniform))
        skew_up = next(c for c in skewed.token_calls(tokens) if c.op == "moe_experts")
        assert skew_up.args[1] < gate_up.args[1]
    assert shipped_catalog().model("deepseek-ai/DeepSeek-R1").expert_routing == "balanced"
    # MiniMax-M2's config: use_routing_bias (the same per-expert score bias).
    assert shipped_catalog().model("MiniMaxAI/MiniMax-M2.5").expert_routing == "balanced"
    assert shipped_catalog().model("Qwen/Qwen3-235B-A22B").expert_routing == "skewed"


def test_moe_expert_parallel_vs_tensor_parallel_experts() -> None:
    ep = OperatorPlanner(Deployment(QWEN3_MOE, H100, tp=2, ep=2)).token_calls(64)
    tp = OperatorPlanner(Deployment(QWEN3_MOE, H100, tp=2, ep=1)).token_calls(64)
    ep_up = next(c for c in ep if c.op == "moe_experts")
    tp_up = next(c for c in tp if c.op == "moe_experts")
    # Half the experts at full width or all of them at half width: the same weights per GPU.
    assert ep_up.args[1] == pytest.approx(tp_up.args[1], abs=2)
    assert ep_up.args[0] == tp_up.args[0]


def test_grouped_expert_gemm_pays_one_launch() -> None:
    d = Deployment(QWEN3_MOE, H100, tp=2)
    model = RooflineModel(d)
    calls = [c for c in model.plan([(0, 4096)]) if c.op == "moe_experts"]
    assert [c.count for c in calls] == [48, 48]  # one gate+up and one down launch per layer
    assert model.breakdown([(0, 4096)]).seconds["moe_experts"] > 0


def test_mla_decode_reads_the_latent_once() -> None:
    d = Deployment(DEEPSEEK_V3, B200, tp=8)
    planner = OperatorPlanner(d)
    args = planner.decode_args(4, 1000)
    assert args == (4, 1000, 2 * 16, 1, 288, "bf16")
    w = generation_attention_work(*args)
    latent_bytes = 4 * 1000 * (512 + 64) * 2
    assert w.bytes - latent_bytes == pytest.approx(4 * 2 * 32 * 288 * 2)  # + Q and O
    # Prefill runs as MHA over decompressed K/V: head_dim = (192 + 128) / 2 = 160.
    assert planner.prefill_args(1, 100, 50) == (1, 100, 50, 16, 16, 160, "bf16")
    calls = planner.prefill_calls(((50, 100, 1),))
    decompress = next(c for c in calls if c.op == "mla_kv_decompress")
    assert decompress.args == (150, 16 * (128 + 128), 512, "bf16")
    assert [c.op for c in planner.decode_token_calls(8)] == ["mla_absorb", "mla_absorb"]


def test_breakdown_sums_to_step_seconds() -> None:
    batch = [(c, 1) for c in range(100, 20000, 97)] + [(0, 3000), (512, 64), (512, 64)]
    for d in DEPLOYMENTS.values():
        model = RooflineModel(d)
        assert model.breakdown(batch).total == pytest.approx(model.step_seconds(batch), rel=1e-12)


def test_overheads_are_charged_per_step_and_request(llama8b_h100: Deployment) -> None:
    base = RooflineModel(llama8b_h100, params=NO_OVERHEAD)
    params = ComposeParams(step_overhead_s=1e-3, request_overhead_s=1e-5)
    model = RooflineModel(llama8b_h100, params=params)
    batch = [(10, 1)] * 20
    assert model.step_seconds(batch) - base.step_seconds(batch) == pytest.approx(1e-3 + 20e-5)


def test_registry_builds_and_rejects(llama8b_h100: Deployment) -> None:
    model = make_latency_model("roofline", llama8b_h100)
    assert model.name == "roofline"
    assert isinstance(model.deployment, Deployment)
    with pytest.raises(
        InputError, match=r"unknown latency model 'rooflin'.*did you mean 'roofline'"
    ):
        make_latency_model("rooflin", llama8b_h100)
    with pytest.raises(InputError, match="takes no argument"):
        make_latency_model("roofline:x.yaml", llama8b_h100)


def test_roofline_kernels_expose_their_gpu() -> None:
    k = RooflineKernels(H100)
    assert k.gpu is H100
    assert math.isclose(k.params.gemm_memory_efficiency, 0.80)


def test_small_all_reduces_use_the_engines_custom_kernel_where_faster() -> None:
    """Below 8 MiB on NVLink, an all-reduce costs min(NCCL, custom one-shot kernel); the custom
    floor is the SGLang H100 measurement's 3.7 / 4.4 / 5.9 us on 2 / 4 / 8 GPUs."""
    catalog = shipped_catalog()
    model = catalog.model("meta-llama/Llama-3.1-8B")
    params = ComposeParams()
    for tp, floor_us in ((2, 3.67), (4, 4.41), (8, 5.89)):
        deployment = Deployment(model, catalog.gpu("h100_sxm"), tp=tp)
        custom = RooflineModel(deployment)
        nccl = RooflineModel(
            deployment, params=dataclasses.replace(params, custom_all_reduce=False)
        )
        kernels = RooflineKernels(catalog.gpu("h100_sxm"))
        small = custom.call_seconds(KernelCall("all_reduce", "nccl", (1024.0, tp), 1))
        assert small * 1e6 == pytest.approx(
            floor_us + 2 * (tp - 1) / tp * 1024 / 126e9 * 1e6, abs=0.05
        )
        assert small < kernels.all_reduce(1024.0, tp)  # NCCL's floor is 6.2 / 9.3 / 15.5 us
        big = 64.0 * (1 << 20)  # beyond the custom kernel's buffer: NCCL
        assert custom.call_seconds(
            KernelCall("all_reduce", "nccl", (big, tp), 1)
        ) == kernels.all_reduce(big, tp)
        batch = [(1000, 1)] * 4
        assert custom.step_seconds(batch) < nccl.step_seconds(batch)
    # no NVLink (L40S over PCIe): NCCL only
    l40s = Deployment(model, catalog.gpu("l40s"), tp=4)
    off = dataclasses.replace(params, custom_all_reduce=False)
    assert RooflineModel(l40s).step_seconds([(1000, 1)]) == RooflineModel(
        l40s, params=off
    ).step_seconds([(1000, 1)])
    with pytest.raises(ValueError, match="custom_all_reduce_link_efficiency"):
        ComposeParams(custom_all_reduce_link_efficiency=0.0)


class _OneAtATime(RooflineKernels):
    """The roofline, not the exact type: a model on it prices token counts one at a time."""


@pytest.mark.parametrize(
    ("model_name", "gpu", "tp", "precision"),
    [
        ("meta-llama/Llama-3.1-70B", "h100_sxm", 4, "fp8"),  # bench/sim_speed.py's
        ("meta-llama/Llama-3.1-8B", "h100_sxm", 1, "bf16"),
        ("meta-llama/Llama-3.1-8B", "h100_sxm", 8, "bf16"),  # custom all-reduce up to 8 MiB
        ("meta-llama/Llama-3.1-8B", "h100_sxm", 16, "bf16"),  # two nodes
        ("Qwen/Qwen3-32B", "b200_sxm", 2, "fp8"),
        ("Qwen/Qwen3-8B", "l40s", 4, "bf16"),  # PCIe: NCCL only
    ],
)
def test_token_counts_priced_by_the_block_are_the_one_at_a_time_seconds(
    model_name: str, gpu: str, tp: int, precision: str
) -> None:
    catalog = shipped_catalog()
    deployment = Deployment(
        catalog.model(model_name),
        catalog.gpu(gpu),
        tp=tp,
        weight_precision=precision,
        kv_precision=precision,
        allow_multi_node=True,
    )
    blocks = RooflineModel(deployment)
    single = ComposedLatencyModel(deployment, _OneAtATime(catalog.gpu(gpu)), name="single")
    counts = [*range(1, 1100), 2047, 2048, 4095, 4096, 5000, 8191, 8192, 8193, 16384, 70001]
    for tokens in counts:  # a prefill of ``tokens``: every token-count part of the step
        assert blocks.step_seconds([(0, tokens)]) == single.step_seconds([(0, tokens)]), tokens
    assert blocks.step_seconds([(5, 1)] * 3) == single.step_seconds([(5, 1)] * 3)
