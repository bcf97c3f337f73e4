"""Pipeline parallelism: a hand-checked Llama-3.1-70B deployment, the bubble, bad layouts, cost.

The deployment: Llama-3.1-70B (catalog entry: 80 layers, hidden 8192, 64 heads, 8 KV heads of
128, FFN 28672, vocabulary 128256, untied) in bf16 on one 8-GPU H100 SXM node, as TP4 x PP2
(vLLM ``--tensor-parallel-size 4 --pipeline-parallel-size 2``) against TP8 on the same GPUs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hardware.catalog import load_catalog
from simulator.cluster.pd import PoolSpec, place_on_nodes
from simulator.config import ServingConfig
from simulator.cost import deployment_cost, l3_stores
from simulator.latency import Deployment
from simulator.latency.batch import Batch
from simulator.latency.memory import memory_fit, weight_bytes_per_gpu
from simulator.latency.pipeline import PipelineModel, leading_micro_batch
from simulator.latency.registry import make_latency_model
from slo.inputfile import InputError

CATALOG = load_catalog()
LLAMA_70B = CATALOG.model("meta-llama/Llama-3.1-70B")
H100 = CATALOG.gpu("h100_sxm")
DECODE_64 = [(4096, 1)] * 64


def tp4_pp2() -> Deployment:
    return Deployment(LLAMA_70B, H100, tp=4, pp=2)


def test_stage_split_follows_vllm() -> None:
    assert tp4_pp2().stage_layers() == (40, 40)
    assert tp4_pp2().num_gpus == 8
    # 80 layers in 3 stages: 26 each, the 2 left over to the stages before the last (vLLM's
    # get_pp_indices: the last stage also holds the final norm and the LM head).
    assert Deployment(LLAMA_70B, H100, tp=2, pp=3).stage_layers() == (27, 27, 26)
    # DeepSeek-V3's 61 layers in 2 stages: the first gets the odd one, and its 3 dense layers.
    dsv3 = CATALOG.model("deepseek-ai/DeepSeek-V3")
    d = Deployment(dsv3, H100, tp=8, pp=2, weight_precision="fp8", allow_multi_node=True)
    assert d.stage_layers() == (31, 30)
    assert (d.stage(0).model.num_moe_layers, d.stage(1).model.num_moe_layers) == (28, 30)


def test_weights_per_gpu_by_hand() -> None:
    # Per GPU of a TP4 stage of 40 layers (elements):
    #   Q + O   2 · 8192 · 8192 / 4            =  33,554,432
    #   K + V   2 · 8192 · (8/4 heads) · 128   =   4,194,304  (counted per GPU)
    #   MLP     3 · 8192 · 28672 / 4           = 176,160,768
    #   norms   2 · 8192                       =      16,384
    #   a layer                                = 213,925,888;  x 40 = 8,557,035,520
    # stage 1 adds the final norm (8,192) and the LM head 128256 · 8192 / 4 = 262,668,288:
    #   8,819,712,000 elements x 2 B = 17,639,424,000 bytes (the heavier stage);
    # stage 0 adds the embedding only: 8,192 elements fewer.
    assert weight_bytes_per_gpu(tp4_pp2()) == 17_639_424_000
    # TP8: a layer is 106,971,136 per GPU, x 80 = 8,557,690,880, + the final norm + both
    # vocabulary matrices / 8 (262,668,288) = 8,820,367,360 x 2 B.
    assert weight_bytes_per_gpu(Deployment(LLAMA_70B, H100, tp=8)) == 17_640_734_720


def test_kv_capacity_by_hand() -> None:
    # KV per token per GPU: 40 layers · 2 (K, V) · 2 heads · 128 · 2 B = 40,960 B (TP8: 80
    # layers · 1 head, the same). Default MemoryParams (vLLM accounting, 0.90, 1 GiB framework
    # reserve, 8192-token activation peak, 16-token blocks). The last stage's reserve:
    #   1 GiB + 4 · 8192 · 8192 · 2 B (hidden buffers)          536,870,912
    #         + 3 · 8192 · 28672 / 4 · 2 B (MLP intermediates)  352,321,536
    #         + 1024 · 128256 · 4 B (fp32 logits)               525,336,576  = 2,488,270,848 B
    # KV = 0.9 · 85,523,536,281 − 17,639,424,000 − 2,488,270,848 = 56,843,487,804 B
    #    = 86,736 blocks of 655,360 B = 1,387,776 tokens. Stage 0 (no logits buffer, 16 KiB
    #    less weights) holds more, so stage 1 bounds the instance.
    fit = memory_fit(tp4_pp2())
    assert fit.fits
    assert fit.kv_bytes_per_token_per_gpu == 40_960
    assert fit.kv_tokens == 1_387_776
    assert "PP2 (stage 1: layers 40-79, LM head)" in fit.reason
    # The same 4 GPUs per stage without PP hold every layer's KV and all the weights: PP2
    # holds 2.9x as many tokens (more than 2x: the weights per GPU halve as well).
    tp4 = memory_fit(Deployment(LLAMA_70B, H100, tp=4))
    assert tp4.kv_tokens == 478_560
    assert fit.kv_tokens > 2 * tp4.kv_tokens


def test_decode_step_by_hand() -> None:
    pipeline = make_latency_model("roofline", tp4_pp2())
    assert isinstance(pipeline, PipelineModel)
    group = make_latency_model("roofline", Deployment(LLAMA_70B, H100, tp=4))
    # 64 decoding requests: 2 micro-batches of 32; a step is one micro-batch's traversal of
    # both stages = the whole model on TP4 at 32 requests (22.500 ms) + one NVLink hop of
    # 32 tokens · 2 tensors (hidden, residual) · 8192 · 2 B / 4 GPUs = 262,144 B per GPU:
    #   10 µs + 262,144 B / (450 GB/s · 0.8) = 10.728 µs.
    hop = 10e-6 + 32 * 2 * 8192 * 2 / 4 / (450e9 * 0.8)
    assert pipeline.step_seconds(DECODE_64) == pytest.approx(
        group.step_seconds(DECODE_64[:32]) + hop, rel=1e-12
    )
    assert pipeline.breakdown(DECODE_64).total == pytest.approx(pipeline.step_seconds(DECODE_64))
    # 22.51 ms: faster than TP4 alone on all 64 (27.36 ms), slower than TP8 on the same 8
    # GPUs (18.14 ms: every GPU reads 1/8 of the weights per step, not 1/4 per micro-batch).
    tp8 = make_latency_model("roofline", Deployment(LLAMA_70B, H100, tp=8))
    assert tp8.step_seconds(DECODE_64) < pipeline.step_seconds(DECODE_64)
    assert pipeline.step_seconds(DECODE_64) < group.step_seconds(DECODE_64)


def test_the_bubble_with_fewer_requests_than_stages() -> None:
    pipeline = make_latency_model("roofline", tp4_pp2())
    group = make_latency_model("roofline", Deployment(LLAMA_70B, H100, tp=4))
    assert isinstance(pipeline, PipelineModel)
    # One request (decode, or a single long prefill): one micro-batch, nothing to overlap —
    # the whole model on TP4 plus the hop; PP gains nothing.
    for batch in ([(4096, 1)], [(0, 8192)]):
        assert pipeline.micro_batches(len(batch)) == 1
        tokens = Batch.of(batch).num_tokens
        assert pipeline.step_seconds(batch) == pytest.approx(
            group.step_seconds(batch) + pipeline.hop_seconds(tokens), rel=1e-12
        )
        assert pipeline.step_seconds(batch) > group.step_seconds(batch)
    assert pipeline.step_seconds([]) == 0.0


def test_leading_micro_batch_takes_the_first_of_every_round() -> None:
    batch = Batch.of([(100, 1), (5000, 1), (300, 1), (0, 2048), (8000, 512), (40, 64)])
    lead = leading_micro_batch(batch, 2)
    # Decodes by KV length 5001, 301, 101: the 1st and 3rd. Prefills: new tokens 2048, 512,
    # 64 and cached lengths 8000, 40, 0: ranks 1 and 3 of each, paired (2048 with 8000).
    assert sorted(lead.decode_kv_lens.tolist()) == [101, 5001]
    assert lead.prefill_groups == ((0, 64, 1), (8000, 2048, 1))
    assert lead.size == 4
    assert leading_micro_batch(batch, 1) is batch
    # Growing the 300-token decode to 6000 makes it the longest: KV lengths 6001, 5001, 101,
    # ranks 1 and 3 = 6001 and 101; element by element, no lighter than 5001 and 101.
    grown = Batch.of([(100, 1), (5000, 1), (6000, 1), (0, 2048), (8000, 512), (40, 64)])
    assert sorted(leading_micro_batch(grown, 2).decode_kv_lens.tolist()) == [101, 6001]


def test_stages_across_nodes_hop_over_the_nic() -> None:
    cross = Deployment(LLAMA_70B, H100, tp=4, pp=4, allow_multi_node=True)
    # Two TP4 stages per 8-GPU node: only the middle boundary leaves the node.
    assert [cross.boundary_crosses_node(i) for i in range(3)] == [False, True, False]
    model = make_latency_model("roofline", cross)
    assert isinstance(model, PipelineModel)
    assert [link.name for link in model.links] == [
        "h100_sxm nvlink",
        "h100_sxm nic",
        "h100_sxm nvlink",
    ]
    assert Deployment(LLAMA_70B, H100, tp=8, pp=2, allow_multi_node=True).boundary_crosses_node(0)


def test_pp1_is_the_deployment_itself() -> None:
    d = Deployment(LLAMA_70B, H100, tp=8)
    assert d.stage(0) is d
    assert d.tp_group() is d
    assert not isinstance(make_latency_model("roofline", d), PipelineModel)


@pytest.mark.parametrize(
    ("model", "kwargs", "message"),
    [
        (LLAMA_70B, {"tp": 1, "pp": 81, "allow_multi_node": True}, "pp=81 must be a positive"),
        (LLAMA_70B, {"tp": 4, "pp": 3}, "tp x pp = 12 GPUs exceed the 8 GPUs"),
        (
            CATALOG.model("deepseek-ai/DeepSeek-V3"),
            {"tp": 8, "pp": 2, "attention_dp": 8, "weight_precision": "fp8"},
            "pp=2 with attention_dp=8 is not modelled",
        ),
        (
            # 36 of 48 layers are linear attention: 48 one-layer stages leave some without KV.
            CATALOG.model("Qwen/Qwen3-Next-80B-A3B-Instruct"),
            {"tp": 1, "pp": 48, "allow_multi_node": True},
            "leaves stage 1 (layers 1-1) without a full-attention layer",
        ),
    ],
)
def test_bad_layouts_are_one_line(model: object, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        Deployment(model, H100, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_cli_refuses_a_layout_wider_than_a_node(tmp_path: Path) -> None:
    config = tmp_path / "pp.yaml"
    config.write_text("model: meta-llama/Llama-3.1-70B\ngpu: h100_sxm\ntp: 8\npp: 2\n")
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
    assert "tp x pp = 16 GPUs exceed the 8 GPUs of one h100_sxm node" in lines[0]


def test_cost_counts_tp_times_pp_gpus() -> None:
    base = {"model": "meta-llama/Llama-3.1-70B", "gpu": "h100_sxm"}
    pp = deployment_cost(ServingConfig(**base, tp=4, pp=2, instances=3), CATALOG)
    tp = deployment_cost(ServingConfig(**base, tp=4, instances=3), CATALOG)
    assert (pp.gpus, tp.gpus) == (24, 12)
    assert pp.gpu_usd_per_hour == pytest.approx(24 * H100.usd_per_gpu_hour)
    pd = ServingConfig(
        **base,
        tp=4,
        pd_mode="disaggregated",
        prefill={"instances": 2},
        decode={"instances": 1, "pp": 2},
    )
    assert (pd.pool_pp("prefill"), pd.pool_pp("decode")) == (1, 2)
    assert deployment_cost(pd, CATALOG).gpus == 2 * 4 + 1 * 8
    pools = {"prefill": {"instances": 1}, "decode": {"instances": 1}}
    flat = ServingConfig.model_validate(
        {**base, "pd_mode": "disaggregated", "prefill_pp": 2, **pools}
    )
    assert flat.pool_pp("prefill") == 2


def test_instances_wider_than_a_node_take_whole_nodes() -> None:
    # TP4 x PP2 fills one node; TP8 x PP2 spans two, and the next instance starts after them.
    assert place_on_nodes([PoolSpec(H100, 4, 2, pp=2)]) == [("h100_sxm", 0), ("h100_sxm", 1)]
    wide = [PoolSpec(H100, 8, 2, pp=2)]
    assert place_on_nodes(wide) == [("h100_sxm", 0), ("h100_sxm", 2)]
    # A local-drive L3 is paid per server: 2 instances x 2 nodes.
    assert l3_stores(wide, CATALOG.storage_tier("nvme_4tib")).servers == 4


def test_models_show_says_the_stage_split() -> None:
    command = [sys.executable, "-m", "optimizer.cli", "models", "show", "Llama-3.1-70B"]
    proc = subprocess.run(
        [*command, "--gpu", "h100_sxm", "--tp", "4", "--pp", "2", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    figures = json.loads(proc.stdout)
    assert figures["deployment"]["pp"] == 2
    assert figures["deployment"]["stage_layers"] == [40, 40]
    assert "PP2 (stage 1: layers 40-79, LM head)" in figures["fit"]["reason"]
    assert figures["fit"]["kv_tokens"] > 0
