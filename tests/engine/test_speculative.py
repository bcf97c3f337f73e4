"""Speculative decoding as a step-time transformation: expected tokens per step, stretched steps."""

from __future__ import annotations

import pytest
from engine_helpers import built_params, make_rig, request

from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.engine import LinearLatency
from simulator.engine.speculative import SpeculativeTimer, tokens_per_step
from simulator.workload.closed_loop import closed_loop_workload

#: 10 ms per step plus 0.1 ms per new token: a verify of k + 1 tokens costs a little more.
BASE_S, PER_TOKEN_S = 0.010, 0.0001


def test_expected_tokens_per_step() -> None:
    assert tokens_per_step(0, 0.5) == 1.0
    assert tokens_per_step(3, 1.0) == 4.0
    assert tokens_per_step(2, 0.5) == pytest.approx(1 + 0.5 + 0.25)
    with pytest.raises(ValueError, match="acceptance"):
        tokens_per_step(2, 0.0)


def test_a_pure_decode_step_is_verify_plus_drafts_over_the_expected_tokens() -> None:
    inner = LinearLatency(BASE_S, PER_TOKEN_S)
    timer = SpeculativeTimer(inner, draft_tokens=3, acceptance=0.8, draft_fraction=0.1)
    batch = [(100, 1), (200, 1)]
    verify = BASE_S + PER_TOKEN_S * 2 * 4
    draft = 3 * 0.1 * (BASE_S + PER_TOKEN_S * 2)
    assert timer.step_seconds(batch) == pytest.approx((verify + draft) / tokens_per_step(3, 0.8))
    # A step that also prefills is not divided (its prefill does not speed up).
    mixed = [(100, 1), (0, 50)]
    verify = BASE_S + PER_TOKEN_S * (4 + 50)
    draft = 3 * 0.1 * (BASE_S + PER_TOKEN_S)
    assert timer.step_seconds(mixed) == pytest.approx(verify + draft)
    assert timer.step_seconds([(0, 50)]) == inner.step_seconds([(0, 50)])


def test_a_request_decodes_faster_by_the_expected_tokens_per_step() -> None:
    def tpot(timer: object) -> float:
        rig = make_rig(timer, l1=256)  # type: ignore[arg-type]
        rig.arrive(request(0, 0.0, 32, 201))
        record = rig.run()[0]
        return (record.finish_s - record.first_token_s) / 200

    plain = LinearLatency(BASE_S, 0.0)
    fast = SpeculativeTimer(plain, draft_tokens=2, acceptance=0.6, draft_fraction=0.0)
    assert tpot(plain) == pytest.approx(BASE_S)
    assert tpot(fast) == pytest.approx(BASE_S / tokens_per_step(2, 0.6))


def test_the_config_turns_it_on_and_checks_its_inputs() -> None:
    workload = closed_loop_workload(users=2, requests=4, input_tokens=256, output_tokens=64)

    def tpot_ms(**fields: object) -> float:
        config = ServingConfig(model="Qwen/Qwen3-8B", gpu="h100_sxm", **fields)  # type: ignore[arg-type]
        summary = simulate(config, workload, seed=0).summary
        assert summary is not None
        return summary.tpot_ms.mean

    plain, eagle = tpot_ms(), tpot_ms(spec_tokens=3, spec_acceptance=0.8)
    # Small batches are weight-bound: verifying 4 tokens costs about one step, 2.95 come out.
    assert eagle < plain / 2
    with pytest.raises(ValueError, match="spec_acceptance"):
        built_params(spec_tokens=2, spec_acceptance=1.5)
