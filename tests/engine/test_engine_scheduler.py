"""The scheduling policies: which tokens each step carries."""

from __future__ import annotations

from typing import Any

import pytest
from engine_helpers import make_rig, request

from simulator.engine import SCHEDULERS, LinearLatency
from simulator.engine.instance import EngineInstance
from simulator.engine.scheduler import StepPlan
from simulator.records import Recorder


def _record_batches(instance: EngineInstance) -> list[dict[int, int]]:
    """Wrap the scheduler so every batch it returns is recorded as {request index: tokens}."""
    seen: list[dict[int, int]] = []
    schedule = instance.scheduler.schedule

    def spy(host: EngineInstance) -> StepPlan:
        plan = schedule(host)
        if plan.tokens:
            seen.append({req.index: n for req, n in plan.tokens.items()})
        return plan

    instance.scheduler.schedule = spy  # type: ignore[method-assign,assignment]
    return seen


def _run(scheduler: str, **params: Any) -> list[dict[int, int]]:
    return _run_rig(scheduler, **params)[0]


def _run_rig(scheduler: str, **params: Any) -> tuple[list[dict[int, int]], Recorder]:
    rig = make_rig(LinearLatency(0.01, 0.0001), l1=256, scheduler=scheduler, **params)
    batches = _record_batches(rig.instance)
    # Request 0 decodes for a while; request 1 (a 300-token prompt) arrives meanwhile.
    rig.arrive(request(0, 0.0, 32, 20), request(1, 0.05, 300, 3))
    rig.run()
    return batches, rig.recorder


def test_registry_lists_the_three_policies() -> None:
    assert set(SCHEDULERS) == {"chunked", "decode_first", "prefill_first"}


def test_chunked_mixes_decodes_with_capped_prefill_chunks() -> None:
    batches = _run("chunked", max_batched_tokens=128, chunk_tokens=100)
    mixed = [b for b in batches if 1 in b and 0 in b]
    # 300 tokens in chunks of at most 100, each step also carrying request 0's decode token.
    assert [b[1] for b in mixed][:3] == [100, 100, 100]
    assert all(b[0] == 1 for b in mixed)
    assert all(sum(b.values()) <= 128 for b in batches)


def test_decode_first_admits_only_whole_prompts_that_fit() -> None:
    batches = _run("decode_first", max_batched_tokens=512, chunk_tokens=512)
    assert {0: 1, 1: 300} in batches
    # 300 tokens next to a decode exceed 300: request 1 waits until request 0 is done.
    batches = _run("decode_first", max_batched_tokens=300, chunk_tokens=300)
    assert all(not (0 in b and 1 in b) for b in batches)
    assert {1: 300} in batches


def test_decode_first_rejects_a_prompt_longer_than_the_step_budget() -> None:
    # Without chunked prefill a 300-token context never fits a 128-token step (TensorRT-LLM
    # cannot serve it); the chunking policies split it instead.
    batches, recorder = _run_rig("decode_first", max_batched_tokens=128, chunk_tokens=128)
    assert all(1 not in b for b in batches)
    assert recorder.rejections == {
        "prompt longer than the step budget of an engine that does not chunk prefills "
        "(raise max_batched_tokens or use the chunked scheduler)": 1
    }
    for scheduler in ("chunked", "prefill_first"):
        batches, recorder = _run_rig(scheduler, max_batched_tokens=128, chunk_tokens=128)
        assert recorder.n_rejected == 0
        assert sum(b.get(1, 0) for b in batches) >= 300


def test_prefill_first_runs_prefill_only_steps() -> None:
    batches = _run("prefill_first", max_batched_tokens=512, chunk_tokens=512)
    assert {1: 300} in batches  # request 0's decode is paused for the prefill step
    assert all(not (0 in b and 1 in b and b[1] > 1) for b in batches)


def test_max_running_caps_admissions() -> None:
    rig = make_rig(LinearLatency(0.01, 0.0), l1=256, max_running=2)
    batches = _record_batches(rig.instance)
    rig.arrive(*(request(i, 0.0, 16, 5) for i in range(5)))
    recs = rig.run()
    assert max(len(b) for b in batches) == 2
    assert sorted(recs) == [0, 1, 2, 3, 4]
    assert recs[4].waiting_queue_s == pytest.approx(recs[2].finish_s)
