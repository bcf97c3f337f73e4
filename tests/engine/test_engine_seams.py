"""The engine's typed seams: PrefixMatch, StepPlan, InstanceStats."""

from __future__ import annotations

import numpy as np
from engine_helpers import make_rig, request

from simulator.engine import CacheTier, KVManager, LinearLatency
from simulator.engine.instance import EngineInstance
from simulator.engine.scheduler import StepPlan
from simulator.kvcache.policies import POLICIES


def test_prefix_match_names_where_each_block_is_and_stops_at_the_first_miss() -> None:
    rng = np.random.default_rng(0)
    l1 = CacheTier("L1", POLICIES["lru"](8, rng=rng))
    l2 = CacheTier("L2", POLICIES["lru"](8, rng=rng))
    kv = KVManager(l1, l2, None, block_tokens=16, write_through=True)
    l1.insert(1)
    l2.insert(2)
    l1.insert(3)
    l2.insert(5)  # past the miss at block 4: not matched
    match = kv.match_l12([1, 2, 3, 4, 5])
    assert match.from_l2 == (False, True, False)
    assert (match.n_blocks, match.n_l2_blocks, match.loads) == (3, 1, True)
    only_l1 = kv.match_l12([1, 3])
    assert (only_l1.n_blocks, only_l1.loads) == (2, False)
    assert kv.match_l12([9]).n_blocks == 0


def _plans(instance: EngineInstance) -> list[StepPlan]:
    seen: list[StepPlan] = []
    schedule = instance.scheduler.schedule

    def spy(host: EngineInstance) -> StepPlan:
        plan = schedule(host)
        seen.append(plan)
        return plan

    instance.scheduler.schedule = spy  # type: ignore[method-assign,assignment]
    return seen


def test_step_plans_name_the_requests_preempted_while_building_them() -> None:
    # 12 L1 blocks; three 64-token prompts with long outputs outgrow L1: vLLM-style on-demand
    # allocation preempts from the tail of the running queue.
    rig = make_rig(LinearLatency(0.01, 0.0001), l1=12)
    plans = _plans(rig.instance)
    rig.arrive(*(request(i, 0.0, 64, 80) for i in range(3)))
    records = rig.run()
    preempted = [index for plan in plans for index in plan.preempted]
    assert preempted  # the scenario does preempt
    for plan in plans:
        scheduled = {req.index for req in plan.tokens}
        assert not scheduled & set(plan.preempted)
    stats = rig.instance.stats(max(r.finish_s for r in records.values()))
    assert stats.preemptions == sum(r.preemptions for r in records.values()) > 0
    assert set(preempted) <= set(records)


def test_instance_stats_add_up_to_the_tokens_computed() -> None:
    rig = make_rig(LinearLatency(0.01, 0.0001), l1=64)
    rig.arrive(request(0, 0.0, 100, 20), request(1, 0.05, 300, 5))
    records = rig.run()
    end = max(r.finish_s for r in records.values())
    stats = rig.instance.stats(end)
    computed = sum(r.computed_tokens for r in records.values())
    assert stats.prefill_tokens + stats.decode_tokens == computed
    assert stats.decode_tokens == (20 - 1) + (5 - 1)  # every output token after the first
    assert 0 < stats.busy_s <= end
    assert 0 < stats.kv_utilization < 1
    assert stats.steps >= 20
    assert (stats.l2_to_l1_blocks, stats.l3_to_l2_blocks, stats.preemptions) == (0, 0, 0)
