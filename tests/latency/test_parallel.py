"""Attention data parallelism: a hand-checked DeepSeek-V3 deployment, rank dealing, bad input.

The deployment: DeepSeek-V3 (catalog entry) fp8 weights and fp8 KV on H100 SXM, one instance of
TP16 over two 8-GPU nodes, attention DP16 (one GPU per rank: attention TP 1), experts EP16
(expert TP 1): SGLang ``--tp 16 --enable-dp-attention --dp-size 16 --ep-size 16``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hardware.catalog import load_catalog
from simulator.api import simulate
from simulator.build import Pool, build_pool
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.engine.params import EngineParams
from simulator.latency import Deployment
from simulator.latency.batch import Batch
from simulator.latency.data_parallel import AttentionDpModel, heaviest_rank
from simulator.latency.memory import MemoryParams, memory_fit, weight_bytes_per_gpu
from simulator.latency.model import RooflineModel
from simulator.latency.registry import make_latency_model
from simulator.presets import load_preset
from simulator.records import Recorder
from simulator.workload.closed_loop import closed_loop_workload
from slo.inputfile import InputError

CATALOG = load_catalog()
DSV3 = CATALOG.model("deepseek-ai/DeepSeek-V3")
QWEN_MOE = CATALOG.model("Qwen/Qwen3-30B-A3B")
H100 = CATALOG.gpu("h100_sxm")
MS = 1e-3


def dsv3_dp16() -> Deployment:
    return Deployment(
        DSV3,
        H100,
        tp=16,
        ep=16,
        attention_dp=16,
        weight_precision="fp8",
        kv_precision="fp8",
        allow_multi_node=True,
    )


def test_dsv3_weights_per_gpu_by_hand() -> None:
    # Per GPU (attention TP 1: a rank holds everything but its 1/16 of the routed experts),
    # h = 7168, 61 layers (3 dense + 58 MoE), parameters (elements):
    #   MLA per layer: down = h(512+64) + 512 + h·1536 + 1536            =  15,140,864
    #                  up   = 512·128·(128+128) + 128·128·h + 1536·128·192 = 171,966,464
    #   norms 2·h·61 + h = 881,664; router 58·h·256 = 106,430,464
    #   dense MLP 3 · 3·h·18432 = 1,189,085,184; shared experts 58 · 3·h·2048 = 2,554,331,136
    #   routed experts 58 · 256 · 3·h·2048 / 16 = 40,869,298,176
    # quantised (fp8, 1 byte) = 881,664 + 61·15,140,864 + 106,430,464 + 61·171,966,464
    #   + 1,189,085,184 + 2,554,331,136 + 40,869,298,176 = 56,133,573,632 bytes;
    # embedding + LM head kept bf16: 2 · 129,280 · 7168 · 2 B = 3,706,716,160 bytes.
    assert weight_bytes_per_gpu(dsv3_dp16()) == 56_133_573_632 + 3_706_716_160
    # Without attention DP (TP16 EP16) the rank's share is split 16 ways: far less per GPU.
    tp16 = Deployment(DSV3, H100, tp=16, ep=16, weight_precision="fp8", allow_multi_node=True)
    assert weight_bytes_per_gpu(tp16) < weight_bytes_per_gpu(dsv3_dp16()) - 15 * 2**30


def test_dsv3_kv_tokens_per_rank_by_hand() -> None:
    d = dsv3_dp16()
    # MLA latent (512 + 64) x 61 layers x 1 byte (fp8), on every GPU of the rank (one GPU).
    assert d.kv_bytes_per_token_per_gpu() == 35_136
    params = MemoryParams(
        hbm_utilization=0.85,
        accounting="reserve_outside",
        max_batched_tokens=2048,
        max_running_requests=64,
    )
    fit = memory_fit(d, params)
    # 0.85 x 85,523,536,281 B (79.65 GiB) = 72,695,005,838.85 B, minus 59,840,289,792 B of
    # weights = 12,854,716,046.85 B; / (35,136 B x 16-token blocks = 562,176 B) = 22,865.99
    # -> 22,865 blocks = 365,840 tokens per rank; the instance holds 16 ranks' worth.
    assert fit.fits, fit.reason
    assert fit.kv_tokens == 16 * 365_840
    assert fit.kv_blocks == 16 * 22_865
    assert "per rank x 16 ranks" in fit.reason


def test_dsv3_decode_step_by_hand() -> None:
    d = dsv3_dp16()
    model = make_latency_model("roofline", d)
    assert isinstance(model, AttentionDpModel)
    batch = [(2047, 1)] * 1024  # 64 decodes per rank, each reading 2,048 tokens of KV
    parts = model.breakdown(batch).seconds
    # Routed experts on all 1,024 tokens: 8,192 assignments touch all 256 experts (expected
    # untouched 256·(255/256)^8192 ~ 1e-12), 16 per GPU with 8192/256 = 32 tokens each, as one
    # fp8 GEMM 16 experts wide (roofline: fp8 memory efficiency 0.60 of 3.35 TB/s = 2.01 TB/s,
    # 5 µs fixed; FLOPs are 28 µs at 0.55 x 1979 TFLOPS, so memory bound):
    #   gate+up m=32 n=65,536 k=7168: 229,376 + 469,762,048 + 4,194,304 B -> 235.92 + 5 µs
    #   down    m=32 n=7168 k=32,768: 1,048,576 + 234,881,024 + 458,752 B -> 117.61 + 5 µs
    #   permute: (3·512·2048 + 4·512·7168) · 2 B at 0.8 x 3.35 TB/s + 3 x 2.5 µs = 20.80 µs
    # = 384.33 µs per layer x 58 MoE layers = 22.29 ms.
    assert parts["moe_experts"] == pytest.approx(22.29 * MS, rel=2e-3)
    # Exchange: an all-gather and a reduce-scatter of 1,024 x 7168 x 2 B = 14,680,064 B over
    # 16 GPUs, each moving 15/16 of it per GPU = an all-reduce of 7,340,032 B: 2·15/16 x
    # 7,340,032 = 13,762,560 B over min(NVLink 450 x 0.64, NICs 8 x 50 x 0.8) = 288 GB/s ->
    # 47.79 µs, + floor 4.65 + 1.55 x 7 = 15.5 µs, + 20 µs across nodes = 83.29 µs; two per
    # layer x 58 = 9.661 ms.
    assert parts["moe_exchange"] == pytest.approx(9.661 * MS, rel=1e-3)
    # Decode attention of the heaviest rank only (64 requests, not 1,024): absorbed MLA = 256
    # "heads" of 288 over one latent; FLOPs 4 x 64 x 256 x 288 x 2048 = 38.65 G at 0.60 x
    # 989.5 TFLOPS = 65.09 µs (KV bytes 64 x (2048 x 576 + 2 x 256 x 288 x 2) = 94.4 MB take
    # 31.3 µs: compute bound) + 10 µs = 75.09 µs x 61 layers = 4.58 ms.
    assert parts["attn_decode"] == pytest.approx(4.58 * MS, rel=2e-3)
    # The rest is one rank's step (attention TP 1) on its 64 requests, without its own experts.
    rank = RooflineModel(d.rank())
    rest = rank.step_seconds([(2047, 1)] * 64) - rank.routed_expert_seconds(64)
    total = model.step_seconds(batch)
    assert total == pytest.approx(rest + 22.29 * MS + 9.661 * MS, rel=1e-3)
    assert total == pytest.approx(sum(parts.values()), rel=1e-9)
    # 50.8 ms in all: 16 ranks of 64 cost about what one rank of 64 costs plus the shared MoE.
    assert 48 * MS < total < 54 * MS


def test_heaviest_rank_deals_round_robin() -> None:
    pairs = [(0, n) for n in (100, 200, 300, 400, 500)] + [(c, 1) for c in range(10, 80, 10)]
    rank = heaviest_rank(Batch.of(pairs), 4)
    # Prefills 500, 400, 300, 200, 100 take positions 0-4: rank 0 gets 500 and 100; decodes
    # (KV 71, 61, ..., 11) take positions 5-11: rank 0 gets position 8, the fourth longest.
    assert rank.prefill_groups == ((0, 100, 1), (0, 500, 1))
    assert rank.decode_kv_lens.tolist() == [41]
    assert rank.num_tokens == 601
    one = Batch.of(pairs)
    assert heaviest_rank(one, 1) is one


def test_dp_step_grows_with_the_batch() -> None:
    model = make_latency_model("roofline", dsv3_dp16())
    steps = [model.step_seconds([(1000, 1)] * n) for n in (1, 8, 16, 17, 64, 256)]
    assert steps == sorted(steps)
    assert model.step_seconds([]) == 0.0
    # One rank's worth of requests per rank: attention does not grow from 16 to 256 requests
    # as it would on one rank (256 decodes on one rank read 16x the KV).
    assert steps[-1] < 2 * steps[2]


def test_without_attention_dp_the_model_is_the_plain_composition() -> None:
    d = Deployment(QWEN_MOE, H100, tp=4, ep=4)
    assert d.rank() is d
    assert d.attention_tp == 4
    model = make_latency_model("roofline", d)
    assert type(model) is RooflineModel


@pytest.mark.parametrize(
    ("model", "kwargs", "message"),
    [
        (QWEN_MOE, {"tp": 4, "attention_dp": 3}, "attention_dp=3 must be a positive divisor"),
        (QWEN_MOE, {"tp": 6, "attention_dp": 2}, "(tp/attention_dp)=3 does not divide the 32"),
        (QWEN_MOE, {"tp": 6, "attention_dp": 6, "ep": 3}, "ep=3 does not divide the 128"),
        (
            CATALOG.model("MiniMaxAI/MiniMax-M2.5"),  # 48 heads, 8 KV heads
            {"tp": 12, "attention_dp": 2, "allow_multi_node": True},
            "(tp/attention_dp)=6 must divide the 8 KV heads",
        ),
        (QWEN_MOE, {"tp": 16, "attention_dp": 4}, "exceeds the 8 GPUs of one h100_sxm node"),
        (CATALOG.model("Qwen/Qwen3-32B"), {"tp": 2, "attention_dp": 2}, "needs an MoE model"),
    ],
)
def test_bad_layouts_are_one_line(model: object, kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        Deployment(model, H100, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_serving_config_checks_the_split() -> None:
    with pytest.raises(ValueError, match=r"attention_dp \(3\) must divide tp \(4\)"):
        ServingConfig(model="m", gpu="g", tp=4, attention_dp=3)
    pools = {"instances": 1, "tp": 8}
    with pytest.raises(ValueError, match=r"decode.attention_dp \(3\) must divide decode.tp"):
        ServingConfig(
            model="m",
            gpu="g",
            pd_mode="disaggregated",
            prefill={**pools, "attention_dp": 8},
            decode={**pools, "attention_dp": 3},
        )
    # The flat twin key (prefill_attention_dp) folds into the nested pool like the others.
    flat = {"prefill_attention_dp": 8, "prefill": pools, "decode": pools}
    ok = ServingConfig.model_validate(
        {"model": "m", "gpu": "g", "pd_mode": "disaggregated", **flat}
    )
    assert (ok.pool_attention_dp("prefill"), ok.pool_attention_dp("decode")) == (8, 1)


def test_each_pool_may_split_its_experts_its_own_way() -> None:
    pools = {"instances": 1, "tp": 8}
    common = {"model": "m", "gpu": "g", "tp": 8, "pd_mode": "disaggregated"}
    cfg = ServingConfig.model_validate(
        {**common, "ep": 8, "prefill": {**pools, "ep": 4}, "decode": pools}
    )
    assert (cfg.pool_ep("prefill"), cfg.pool_ep("decode"), cfg.pool_ep(None)) == (4, 8, 8)
    with pytest.raises(ValueError, match=r"prefill.ep \(3\) must divide prefill.tp \(8\)"):
        ServingConfig.model_validate({**common, "prefill": {**pools, "ep": 3}, "decode": pools})
    with pytest.raises(ValueError, match=r"prefill.ep is set but pd_mode is 'aggregated'"):
        ServingConfig.model_validate({"model": "m", "gpu": "g", "prefill": {"ep": 4}})
    # Each pool's engine gets its own split: the decode pool's MoE layers priced at EP8, the
    # prefill pool's at EP4 (an EP4 prefill of 8 GPUs holds twice the experts per GPU).
    qwen = {
        **common, "model": "Qwen/Qwen3-235B-A22B-FP8", "gpu": "h100_sxm", "tp": 8, "ep": 8,
        "weight_precision": "fp8", "latency_model": "roofline", "decode": pools,
    }  # fmt: skip
    same = ServingConfig.model_validate({**qwen, "prefill": pools})
    split = ServingConfig.model_validate({**qwen, "prefill": {**pools, "ep": 4}})
    spec = closed_loop_workload(users=4, requests=8, input_tokens=1024, output_tokens=16)
    a, b = simulate(same, spec, seed=0), simulate(split, spec, seed=0)
    # Only the prefill pool changed: the same decode steps, other prefill steps.
    assert [r.ttft_s for r in a.records] != pytest.approx([r.ttft_s for r in b.records])


def test_cli_refuses_a_dense_model_with_attention_dp(tmp_path: Path) -> None:
    config = tmp_path / "dense.yaml"
    config.write_text("model: Qwen/Qwen3-32B\ngpu: h100_sxm\ntp: 2\nattention_dp: 2\n")
    workload = Path(__file__).parents[2] / "examples" / "workloads" / "closed_loop.yaml"
    command = [sys.executable, "-m", "optimizer.cli", "simulate", "--config", str(config)]
    proc = subprocess.run(
        [*command, "--workload", str(workload)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1
    assert "attention_dp=2 needs an MoE model" in lines[0]


def _engine_params(**fields: object) -> EngineParams:
    pool = build_pool(
        ServingConfig.model_validate(fields),
        CATALOG,
        block_tokens=16,
        kernel=Kernel(),
        recorder=Recorder(),
        seed=np.random.SeedSequence(0),
    )
    assert isinstance(pool, Pool), pool
    return pool.params


DSV3_DP16 = {
    "model": "deepseek-ai/DeepSeek-V3",
    "gpu": "h200_sxm",
    "tp": 16,
    "attention_dp": 16,
    "ep": 16,
    "allow_multi_node": True,
    "weight_precision": "fp8",
}


def test_sglang_dp_ranks_share_the_prefill_chunk() -> None:
    """SGLang divides its chunk among the DP ranks: the H200's 8,192-token chunk is 512
    tokens per rank, so a step prefills 16 x 512 tokens in all; a --max-running-requests of
    256 is the server's (16 per rank); decode steps are bounded by the running limit."""
    params = _engine_params(**DSV3_DP16, backend="sglang")
    assert params.chunk_tokens == 8192 // 16
    assert params.max_batched_tokens == 16 * (8192 // 16)
    assert params.max_running == 16 * 4096  # the preset's cap is per rank
    given = _engine_params(**DSV3_DP16, backend="sglang", max_running_requests=256)
    assert given.max_running == 256
    # ... and its schedule_conservativeness is scaled by 0.3 with DP attention.
    assert params.kv_conservativeness == pytest.approx(0.3)
    # Without attention DP the same settings are the instance's own.
    tp16 = {**DSV3_DP16, "attention_dp": 1}
    plain = _engine_params(**tp16, backend="sglang", max_running_requests=256)
    assert (plain.max_batched_tokens, plain.max_running) == (16384, 256)
    assert plain.kv_conservativeness == 1.0


def test_vllm_and_trtllm_dp_ranks_keep_their_own_limits() -> None:
    """vLLM (one engine core per DP rank) and TensorRT-LLM (attention DP) give every rank the
    full limits: the instance's are the rank's times the ranks."""
    for backend in ("vllm", "trtllm"):
        preset = load_preset(backend)
        params = _engine_params(**DSV3_DP16, backend=backend)
        assert params.max_batched_tokens == 16 * preset.max_batched_tokens
        assert params.max_running == 16 * min(
            preset.max_running_requests, preset.max_batched_tokens
        )
        assert params.kv_conservativeness == 1.0


def test_a_dp_rank_at_its_prefill_chunk_still_decodes_every_running_request() -> None:
    """With 512-token prefill steps per rank, more than 512 running requests per rank still
    decode in one step (SGLang's decode batch is every running request)."""
    users = 16 * 600
    spec = closed_loop_workload(users=users, requests=users, input_tokens=64, output_tokens=4)
    config = ServingConfig.model_validate(
        {
            **DSV3_DP16,
            "backend": "sglang",
            "latency_model": "constant:0.01",
            "frontend_us": (0.0, 0.0, 0.0),  # every prompt at the engine at once: no tokeniser
        }
    )
    result = simulate(config, spec, seed=0)
    assert result.summary is not None
    assert result.summary.n_requests == users
    # 9,600 prompts of 64 tokens at 8,192 tokens a step: 75 prefill steps, then 3 decode
    # steps with all 9,600 requests (the first token comes from the prefill).
    assert result.diagnostics["steps"] == 75 + 3
