"""L3 → L2 prefetch policies: wait_complete, best_effort, timeout.

Setup: a 160-token prompt (10 blocks of 16) whose blocks all sit in L3 only; the prefetch
channel moves one block per 0.1 s (1 s for the whole prefix); L2 → L1 loads are instantaneous;
every step takes a constant 10 ms unless a test says otherwise; any L3 hit of 16 tokens or more
is prefetched.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_helpers import Rig, make_rig, request

from simulator.engine import ConstantLatency, LinearLatency
from simulator.engine.steps import StepTimer

BLOCKS = tuple(range(1, 11))
STEP = 0.01


def _rig(policy: str, timer: StepTimer | None = None, **params: Any) -> Rig:
    params.setdefault("prefetch_threshold_tokens", 16)
    return make_rig(
        timer or ConstantLatency(STEP),
        l1=64,
        l2=64,
        l3=64,
        l3_blocks=BLOCKS,
        prefetch_s_per_block=0.1,
        prefetch_policy=policy,
        **params,
    )


def test_wait_complete_starts_prefill_only_after_the_whole_prefetch() -> None:
    rig = _rig("wait_complete")
    rig.arrive(request(0, 0.0, 160, 1, BLOCKS))
    rec = rig.run()[0]
    assert rec.prefetch_queue_s == pytest.approx(1.0)
    assert rec.first_token_s == pytest.approx(1.0 + STEP)
    # Everything but the last token came from L3 (the last token is always computed).
    assert (rec.cached_l1_tokens, rec.cached_l2_tokens, rec.cached_l3_tokens) == (0, 0, 159)
    assert rec.computed_tokens == 1


def test_best_effort_uses_what_arrived_when_the_gpu_is_ready() -> None:
    # Request 0 (no L3 hit) keeps the GPU busy until 0.55 s: 55 steps of 10 ms.
    rig = _rig("best_effort")
    rig.arrive(request(0, 0.0, 16, 55), request(1, 0.0, 160, 1, BLOCKS))
    recs = rig.run()
    second = recs[1]
    # Admitted at once (the GPU is shared in continuous batching): 0 blocks had arrived.
    assert second.cached_l3_tokens == 0
    assert second.computed_tokens == 160

    rig = _rig("best_effort", max_running=1)
    rig.arrive(request(0, 0.0, 16, 55), request(1, 0.0, 160, 1, BLOCKS))
    second = rig.run()[1]
    # One request at a time: admitted at 0.55 s, when 5 of the 10 blocks have arrived; the
    # rest of the read is cancelled and those tokens are prefilled.
    assert second.waiting_queue_s == pytest.approx(0.55)
    assert second.cached_l3_tokens == 5 * 16
    assert second.computed_tokens == 160 - 5 * 16


@pytest.mark.parametrize(("base", "per_1k"), [(0.3, 0.0), (0.1, 1.28)])
def test_timeout_leaves_the_prefetch_queue_at_base_plus_per_1k_allowance(
    base: float, per_1k: float
) -> None:
    rig = _rig("timeout", prefetch_timeout_base_s=base, prefetch_timeout_per_1k_tokens_s=per_1k)
    rig.arrive(request(0, 0.0, 160, 1, BLOCKS))
    rec = rig.run()[0]
    allowance = base + per_1k * 160 / 1024  # 0.3 s in both cases
    assert rec.prefetch_queue_s == pytest.approx(allowance)
    arrived = int(10 * allowance / 1.0)
    assert rec.cached_l3_tokens == arrived * 16
    assert rec.first_token_s == pytest.approx(allowance + STEP)


def test_timeout_longer_than_the_prefetch_behaves_like_wait_complete() -> None:
    rig = _rig("timeout", prefetch_timeout_base_s=5.0)
    rig.arrive(request(0, 0.0, 160, 1, BLOCKS))
    rec = rig.run()[0]
    assert rec.prefetch_queue_s == pytest.approx(1.0)
    assert rec.cached_l3_tokens == 159


def test_hits_below_the_threshold_are_recomputed_not_prefetched() -> None:
    rig = _rig("wait_complete", prefetch_threshold_tokens=161)
    rig.arrive(request(0, 0.0, 160, 1, BLOCKS))
    rec = rig.run()[0]
    assert rec.prefetch_queue_s == 0.0
    assert rec.cached_l3_tokens == 0
    assert rec.computed_tokens == 160


def test_prefetches_of_one_instance_are_serialised() -> None:
    rig = _rig("wait_complete", timer=LinearLatency(0.01, 0.0))
    other = tuple(range(101, 111))
    l3 = rig.instance.kv.l3
    assert l3 is not None
    for block in other:
        l3.insert(block)
    rig.arrive(request(0, 0.0, 160, 1, BLOCKS), request(1, 0.0, 160, 1, other))
    recs = rig.run()
    assert recs[0].prefetch_queue_s == pytest.approx(1.0)
    assert recs[1].prefetch_queue_s == pytest.approx(2.0)
