"""KV admission control: what an engine sets aside for future decodes before it admits a request."""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import BT, built_params, make_rig, request

import simulator.engine.admission as admission_module
import simulator.engine.instance as instance_module
from simulator.config import ServingConfig
from simulator.engine import EngineRequest, LinearLatency
from simulator.engine.admission import (
    CLIP_OUTPUT_TOKENS,
    INIT_RATIO,
    MIN_RATIO,
    RATIO_POLICIES,
    AdmissionControl,
)
from simulator.records import RequestRecord
from simulator.workload.request import TraceRequest

STEP_S = 0.01  # every step takes 10 ms whatever it holds


def _run(policy: str, *requests_: TraceRequest, l1: int) -> dict[int, RequestRecord]:
    rig = make_rig(LinearLatency(STEP_S, 0.0), l1=l1, scheduler="decode_first", kv_admission=policy)
    rig.arrive(*requests_)
    return rig.run()


def _engine_request(prompt: int, output: int, *, processed: int = 0) -> EngineRequest:
    req = EngineRequest(request(0, 0.0, prompt, output), BT, 0, 0.0)
    req.processed = processed
    req.generated = max(0, processed - prompt + 1)
    return req


def test_reserve_full_admits_only_what_can_finish_and_never_preempts() -> None:
    # Each request peaks at 64 + 119 tokens = 12 blocks; L1 has 20, so both fit at first but
    # not to the end.
    reqs = (request(0, 0.0, 64, 120), request(1, 0.001, 64, 120))
    on_demand = _run("on_demand", *reqs, l1=20)
    reserved = _run("reserve_full", *reqs, l1=20)
    # vLLM-like: both start at once and the younger one is preempted when L1 runs out.
    assert on_demand[1].ttft_s < 0.05
    assert on_demand[0].preemptions + on_demand[1].preemptions > 0
    # GUARANTEED_NO_EVICT: the second waits until the first has finished and frees its blocks.
    assert reserved[1].arrival_s + reserved[1].ttft_s > reserved[0].finish_s
    assert reserved[0].preemptions == reserved[1].preemptions == 0


def test_reserve_full_admits_side_by_side_when_everything_fits() -> None:
    reqs = (request(0, 0.0, 64, 120), request(1, 0.001, 64, 120))
    reserved = _run("reserve_full", *reqs, l1=24)
    assert reserved[1].ttft_s < 0.05


def test_reserve_estimate_counts_the_new_request_in_full_and_running_ones_at_the_ratio() -> None:
    control = AdmissionControl("reserve_estimate", block_tokens=1)
    running = [_engine_request(100, 1000, processed=300)]  # 201 generated, 799 to go
    new = _engine_request(50, 10_000)
    # New: 20 prompt tokens after its first step of 30, plus its output clipped at 4096.
    expected = 20 + CLIP_OUTPUT_TOKENS + round(INIT_RATIO * 799)
    assert control.extra_blocks(running, new, 30) == expected
    # Ten decode steps later: the ratio and the remaining output both shrank.
    later = 20 + CLIP_OUTPUT_TOKENS + round(control._ratio_after(10) * 789)
    assert control.extra_blocks(running, new, 30, after_steps=10) == later


def test_reserve_estimate_ratio_decays_resets_when_idle_and_rises_after_a_preemption() -> None:
    control = AdmissionControl("reserve_estimate", block_tokens=16)
    control.on_decode_steps(300)
    assert control.ratio == pytest.approx((INIT_RATIO + MIN_RATIO) / 2)
    control.on_decode_steps(10_000)
    assert control.ratio == pytest.approx(MIN_RATIO)
    control.on_idle()
    assert control.ratio == INIT_RATIO
    # SGLang's retraction: (decoded + 20 per request) / (total output + 1) over those left.
    left = [_engine_request(10, 100, processed=59), _engine_request(10, 300, processed=9)]
    control.on_preempt(left)
    assert control.ratio == pytest.approx((50 + 0 + 40) / (400 + 1))


def test_on_demand_and_reserve_full_ignore_the_ratio_hooks() -> None:
    for policy in ("on_demand", "reserve_full"):
        control = AdmissionControl(policy, block_tokens=16)  # type: ignore[arg-type]
        control.on_decode_steps(1000)
        control.on_preempt([_engine_request(10, 100, processed=59)])
        assert control.ratio == INIT_RATIO
    assert AdmissionControl("on_demand", 16).extra_blocks([], _engine_request(64, 500), 64) == 0
    with pytest.raises(ValueError, match="unknown KV admission"):
        AdmissionControl("greedy", 16)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "output_1", "l1", "earliest_s"),
    [
        # Request 1 is blocked at first (its 700 output tokens plus 0.7 of request 0's 1200 do
        # not fit in 100 blocks) and fits once the ratio has decayed for about 95 decode steps.
        ("reserve_estimate", 700, 100, 0.5),
        # Request 1 (1,100 left) cannot start beside request 0 (1,200 left) in 110 blocks; once
        # request 0 has fewer left than request 1 it finishes first in the timeline and the
        # requirement falls by two tokens a step while memory fills by one: about 900 steps in,
        # request 1 fits.
        ("reserve_timeline", 1100, 110, 5.0),
    ],
)
def test_a_ratio_policy_admits_inside_a_decode_run_where_step_by_step_would(
    policy: str, output_1: int, l1: int, earliest_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No event marks the moment the waiting request fits: the decode run must end there,
    # exactly as step by step.
    reqs = (request(0, 0.0, 64, 1200), request(1, 0.001, 64, output_1))
    runs = _run(policy, *reqs, l1=l1)
    monkeypatch.setattr(instance_module, "MAX_RUN_STEPS", 1)
    steps = _run(policy, *reqs, l1=l1)
    first_token = runs[1].arrival_s + runs[1].ttft_s
    assert earliest_s < first_token < runs[0].finish_s
    assert first_token == pytest.approx(steps[1].arrival_s + steps[1].ttft_s)
    assert [runs[i].finish_s for i in (0, 1)] == pytest.approx([steps[i].finish_s for i in (0, 1)])
    if policy == "reserve_timeline":
        assert runs[0].preemptions == runs[1].preemptions == 0


def test_admission_comes_from_the_preset_and_a_config_overrides_it() -> None:
    def admission(**fields: object) -> str:
        return built_params(**fields).kv_admission

    assert admission(backend="trtllm") == "reserve_full"
    assert admission(backend="sglang") == "reserve_estimate"
    assert admission(backend="vllm") == "on_demand"
    assert admission(backend="trtllm", kv_admission="on_demand") == "on_demand"
    with pytest.raises(ValueError, match="kv_admission"):
        ServingConfig(model="m", gpu="g", kv_admission="greedy")  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", sorted(RATIO_POLICIES))
@pytest.mark.parametrize("grid_cells", [200_000, 50])
def test_first_fit_step_agrees_with_step_by_step_reasoning(
    grid_cells: int, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admission_module, "_GRID_CELLS", grid_cells)  # 50 forces a stride
    control = AdmissionControl(policy, block_tokens=BT)  # type: ignore[arg-type]
    running = [_engine_request(64, 1200, processed=70), _engine_request(30, 900, processed=95)]
    head = _engine_request(64, 700)
    need, available, k = 4, 130, 800

    firsts = [(-r.processed) % BT or BT for r in running]

    def fits(j: int) -> bool:
        grown = sum(-(-(j - f) // BT) for f in firsts if j > f)
        return need + control.extra_blocks(running, head, 64, after_steps=j) <= available - grown

    expected = next((j for j in range(1, k) if fits(j)), k)
    assert 1 < expected < k
    found = control.first_fit_step(running, head, 64, need=need, available=available, k=k)
    assert found == expected


def test_schedule_conservativeness_scales_sglangs_ratios() -> None:
    control = AdmissionControl("reserve_estimate", block_tokens=1, conservativeness=0.5)
    assert control.ratio == pytest.approx(0.35)
    control.on_decode_steps(10_000)
    assert control.ratio == pytest.approx(0.35 * 0.14)
    assert AdmissionControl("reserve_estimate", 1, conservativeness=2.0).ratio == 1.0
    with pytest.raises(ValueError, match="conservativeness"):
        AdmissionControl("reserve_estimate", 1, conservativeness=0.0)


def test_a_less_conservative_sglang_admits_the_blocked_request_sooner() -> None:
    reqs = (request(0, 0.0, 64, 1200), request(1, 0.001, 64, 700))

    def first_token(conservativeness: float) -> float:
        rig = make_rig(
            LinearLatency(STEP_S, 0.0),
            l1=100,
            scheduler="decode_first",
            kv_admission="reserve_estimate",
            kv_conservativeness=conservativeness,
        )
        rig.arrive(*reqs)
        record = rig.run()[1]
        return record.arrival_s + record.ttft_s

    assert first_token(0.5) < first_token(1.0)
    assert first_token(0.1) == pytest.approx(0.02)  # fits at once: admitted in the next step


@pytest.mark.parametrize(
    "policy", ["on_demand", "reserve_full", "reserve_estimate", "reserve_timeline"]
)
@pytest.mark.parametrize("scheduler", ["chunked", "decode_first", "prefill_first"])
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_every_request_finishes_under_memory_pressure(
    policy: str, scheduler: str, preemption: str
) -> None:
    # Random prompts sharing prefixes, outputs up to 300 tokens, an L1 of 60 blocks: admission
    # blocks, preemptions and swaps happen; block accounting is checked at every step, and no
    # policy may strand a request (every one finishes: none is larger than L1).
    rng = np.random.default_rng(7)
    reqs = []
    for i in range(40):
        prompt = int(rng.integers(16, 400))
        shared = tuple(range(min(4, prompt // BT)))  # a common 4-block system prompt
        own = tuple(10_000 * (i + 1) + k for k in range(-(-prompt // BT) - len(shared)))
        output = int(rng.integers(1, 300))
        reqs.append(request(i, float(rng.uniform(0, 2.0)), prompt, output, shared + own))
    rig = make_rig(
        LinearLatency(STEP_S, 0.0001),
        l1=60,
        l2=200,
        scheduler=scheduler,
        kv_admission=policy,
        preemption=preemption,
        max_batched_tokens=512,
        chunk_tokens=512,
    )
    rig.arrive(*reqs)
    records = rig.run()
    assert rig.recorder.n_rejected + len(records) == len(reqs)
    assert rig.recorder.n_rejected == 0
    preemptions = sum(r.preemptions for r in records.values())
    if policy == "on_demand":
        assert preemptions > 0  # the workload does press on L1
    if policy in ("reserve_full", "reserve_timeline"):
        # Every simulated request runs to its stop_at, as one ignoring end-of-sequence tokens
        # does: the timeline's guarantee holds.
        assert preemptions == 0


def test_reserve_timeline_by_hand() -> None:
    # SGLang's add_one_req_ignore_eos: every request at its whole remaining output, sorted by
    # it; at each finish the free memory must exceed the growth of those still running, plus
    # one token each.
    control = AdmissionControl("reserve_timeline", block_tokens=1)
    a = _engine_request(100, 1000, processed=300)  # 201 generated: 799 left, holds 301
    b = _engine_request(50, 100, processed=120)  # 71 generated: 29 left, holds 121
    new = _engine_request(40, 200)  # its whole prompt in its first step: nothing pending
    # Sorted: b (29 left), new (200), a (799); three, two, one still running at their finishes.
    finishes = [(29 + 1) * 3 - 0, (200 + 1) * 2 - 121, (799 + 1) * 1 - (121 + 40)]
    assert finishes == [90, 281, 639]
    # The general path's first check (new prompt beside the others at the ratio) is lower.
    assert round(INIT_RATIO * (799 + 29)) == 580
    assert control.extra_blocks([a, b], new, 40) == 639 + 1
    # Ten decode steps on: b has 19 left and holds 131, a 789 and 311.
    later = max((19 + 1) * 3, (200 + 1) * 2 - 131, (789 + 1) - (131 + 40)) + 1
    assert control.extra_blocks([a, b], new, 40, after_steps=10) == later == 620
    # A prompt still to compute counts in full (the new one's beyond its first step, a running
    # one's unprocessed part); blocks round up.
    chunked = _engine_request(300, 50, processed=100)  # 200 prompt tokens to go, 50 left
    control16 = AdmissionControl("reserve_timeline", block_tokens=16)
    pending = (300 - 100) + (40 - 24)
    worst = max((50 + 1) * 2, (200 + 1) * 1 - 300)
    assert control16.extra_blocks([chunked], new, 24) == -(-(pending + worst + 1) // 16)


def test_reserve_timeline_counts_the_earlier_finishes_that_reserve_full_does_not() -> None:
    # Request 0 finishes 40 tokens in, request 1 runs 200: each peak alone fits the 20 blocks,
    # their peaks together (7 + 17 blocks) do not, but by the time request 1 needs its 17
    # request 0 is gone. GUARANTEED_NO_EVICT waits for that; SGLang's timeline does not.
    reqs = (request(0, 0.0, 64, 40), request(1, 0.001, 64, 200))
    full = _run("reserve_full", *reqs, l1=20)
    timeline = _run("reserve_timeline", *reqs, l1=20)
    assert full[1].arrival_s + full[1].ttft_s > full[0].finish_s
    assert timeline[1].ttft_s < 0.05
    assert all(r.preemptions == 0 for r in (*full.values(), *timeline.values()))


def test_reserve_timeline_keeps_the_ratio_clock_and_no_decode_cohort() -> None:
    control = AdmissionControl("reserve_timeline", block_tokens=16)
    control.on_decode_steps(300)
    assert control.ratio == pytest.approx((INIT_RATIO + MIN_RATIO) / 2)
    control.on_idle()
    assert control.ratio == INIT_RATIO
    rig = make_rig(LinearLatency(STEP_S, 0.0), l1=40, kv_admission="reserve_timeline")
    assert rig.instance.cohort is None
