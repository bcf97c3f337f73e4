"""Per-request state of sliding-window and linear-attention models: private L1 blocks every
admitted request holds (``KVManager.state_blocks``), swapped and freed with it."""

from __future__ import annotations

import pytest
from engine_helpers import BT, request
from test_engine_accounting import _chatty, _config

from hardware.schema import Catalog
from simulator.api import simulate
from simulator.build import request_state_blocks
from simulator.latency import Deployment
from simulator.workload.source import OpenLoopSource

#: A toy hybrid: 1 full-attention and 1 Gated DeltaNet layer. Its state per request is
#: 2 value heads · 64 · 64 fp32 recurrent + 3 · (2·2·64 + 2·64) bf16 conv = 32,768 + 2,304 bytes,
#: over the KV of one token, 2·2·64·2 = 512 bytes: 68.5 tokens = 4.28 blocks of 16 -> 4 blocks.
HYBRID = {
    "linear_attention": "gated_deltanet",
    "linear_attention_layers": 1,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 2,
    "linear_key_head_dim": 64,
    "linear_value_head_dim": 64,
    "linear_conv_kernel": 4,
}


@pytest.fixture
def hybrid_catalog(catalog: Catalog) -> Catalog:
    toy = catalog.models["toy/toy-1b"]
    hybrid = toy.model_copy(update={"name": "toy/Hybrid", **HYBRID})
    hybrid = type(toy).model_validate(hybrid.model_dump())
    return catalog.model_copy(update={"models": {**catalog.models, "toy/hybrid": hybrid}})


def test_state_blocks_by_hand(hybrid_catalog: Catalog) -> None:
    model = hybrid_catalog.models["toy/hybrid"]
    assert model.linear_state_bytes() == 2 * 64 * 64 * 4 + 3 * (2 * 2 * 64 + 2 * 64) * 2
    assert model.kv_bytes_per_token("bf16") == 2 * 2 * 64 * 2  # the one full layer
    d = Deployment(model, hybrid_catalog.gpus["toy_gpu"])
    assert request_state_blocks(d, BT) == 4  # 4.28 blocks, to the nearest
    assert request_state_blocks(d, 1) == 69  # 68.5 tokens, half up
    toy = Deployment(hybrid_catalog.models["toy/toy-1b"], hybrid_catalog.gpus["toy_gpu"])
    assert request_state_blocks(toy, BT) == 0
    # A bf16 recurrent state (SGLang --mamba-ssm-dtype bfloat16): 16,384 + 2,304 bytes,
    # 36.5 tokens = 2.28 blocks -> 2.
    bf16 = Deployment(model, hybrid_catalog.gpus["toy_gpu"], linear_state_precision="bf16")
    assert bf16.request_state_bytes_per_gpu() == 2 * 64 * 64 * 2 + 3 * (2 * 2 * 64 + 2 * 64) * 2
    assert request_state_blocks(bf16, BT) == 2


def test_linear_state_precision_reaches_the_deployment(hybrid_catalog: Catalog) -> None:
    # ServingConfig.linear_state_precision (else the preset's fp32) sizes the state blocks.
    reqs = [request(i, 0.0, 32, 8) for i in range(3)]
    ttft = {}
    for state in (None, "bf16"):
        config = _config(
            model="toy/Hybrid", kv_capacity_tokens=10 * BT, max_running_requests=8,
            linear_state_precision=state,
        )  # fmt: skip
        result = simulate(config, OpenLoopSource(reqs, BT), seed=0, catalog=hybrid_catalog)
        ttft[state] = sorted(r.ttft_s for r in result.records)
    # fp32: 4 state blocks a request, the second waits for the first; bf16: 2, so 2 + 2 = 4
    # each at admission and both of the first two run at once.
    assert ttft[None][1] > 2 * ttft[None][0]
    assert ttft["bf16"][1] < ttft[None][1]


def test_state_blocks_limit_how_many_requests_run_at_once(hybrid_catalog: Catalog) -> None:
    # 10 blocks of L1: a request of 2 prompt blocks + 1 output block holds 3 without state, so
    # all three run at once; with 4 state blocks a request is admitted with 2 + 4 = 6 and ends
    # with 7, so a second one (6 more) must wait for the first to finish.
    reqs = [request(i, 0.0, 32, 8) for i in range(3)]

    def run(model: str) -> list[float]:
        config = _config(model=model, kv_capacity_tokens=10 * BT, max_running_requests=8)
        result = simulate(
            config, OpenLoopSource(reqs, BT), seed=0, catalog=hybrid_catalog,
            check_invariants=True,
        )  # fmt: skip
        return sorted(r.ttft_s for r in result.records)

    plain, hybrid = run("toy/Toy-1B"), run("toy/Hybrid")
    assert plain[2] == pytest.approx(plain[0], rel=0.5)
    assert hybrid[1] > 2 * hybrid[0]
    assert hybrid[2] > hybrid[1]


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_accounting_holds_under_preemption(hybrid_catalog: Catalog, preemption: str) -> None:
    extra = {"l2_dram_gib": 1e-2} if preemption == "swap" else {}
    config = _config(model="toy/Hybrid", preemption=preemption, **extra)
    result = simulate(
        config, _chatty(seed=7), seed=1, catalog=hybrid_catalog, check_invariants=True
    )
    assert result.summary is not None
    assert result.summary.preemptions > 0  # the invariant checks ran through preemptions
    assert result.summary.n_requests == len(result.records) > 0
