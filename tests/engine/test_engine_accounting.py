"""Conservation and invariants: tokens computed once, blocks balanced, preemption only when
L1 is exhausted, decode runs equal step-by-step simulation, determinism for a seed."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from engine_helpers import BT, request

from hardware.schema import Catalog
from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.engine import instance as instance_module
from simulator.engine import tiers as tiers_module
from simulator.engine.instance import EngineInstance
from simulator.engine.request import EngineRequest
from simulator.kvcache.policies import POLICIES
from simulator.records import RequestRecord
from simulator.workload.source import OpenLoopSource
from simulator.workload.spec import WorkloadSpec
from simulator.workload.synthetic import PoissonArrivals, SessionShape, Uniform, sessions


def _chatty(seed: int, n_sessions: int = 40, rate: float = 4.0) -> OpenLoopSource:
    """Multi-turn sessions with shared system prompts: real prefix reuse and overlap."""
    shape = SessionShape(
        turns=Uniform(1, 4),
        user_tokens=Uniform(10, 120),
        output_tokens=Uniform(1, 40),
        think_time_s=Uniform(0.0, 2.0),
        system_prompts=(3, 64),
    )
    reqs = sessions(
        n_sessions=n_sessions,
        arrivals=PoissonArrivals(rate),
        shape=shape,
        block_tokens=BT,
        rng=np.random.default_rng(seed),
    )
    return OpenLoopSource(reqs, BT)


def _config(**overrides: object) -> ServingConfig:
    base: dict[str, object] = {
        "model": "toy/Toy-1B",
        "gpu": "toy_gpu",
        "latency_model": "linear:0.005,0.0001,0.000001",
        "kv_capacity_tokens": 600,
        "max_batched_tokens": 256,
        "chunk_tokens": 128,
        "max_running_requests": 16,
    }
    base.update(overrides)
    return ServingConfig.model_validate(base)


def _minimal_tokens(rec: RequestRecord) -> int:
    cached = rec.cached_l1_tokens + rec.cached_l2_tokens + rec.cached_l3_tokens
    return rec.input_tokens - cached + rec.output_tokens - 1


TIERS: dict[str, dict[str, Any]] = {
    "l1": {},
    "l2": {"l2_dram_gib": 1e-3},
    "l3": {
        "l2_dram_gib": 2e-4,
        "l3_tier": "ssd",
        "l3_capacity_gib": 1e-2,
        "l3_prefetch_threshold_tokens": 32,
    },
}


@pytest.mark.parametrize(
    ("scheduler", "tiers", "preemption", "write"),
    [
        (s, t, p, w)
        for s, t, p, w in itertools.product(
            ("chunked", "decode_first", "prefill_first"),
            TIERS,
            ("recompute", "swap"),
            ("write_through", "write_back"),
        )
        if not (p == "swap" and t == "l1")
    ],
)
def test_invariants_hold_after_every_step(
    catalog: Catalog, scheduler: str, tiers: str, preemption: str, write: str
) -> None:
    config = _config(scheduler=scheduler, preemption=preemption, write_policy=write, **TIERS[tiers])
    result = simulate(config, _chatty(seed=7), seed=1, catalog=catalog, check_invariants=True)
    summary = result.summary
    assert summary is not None
    n_total = len(list(_chatty(seed=7).start()))
    assert summary.n_requests + summary.n_rejected == n_total  # every request accounted for
    for rec in result.records:
        if rec.preemptions == 0:
            assert rec.computed_tokens == _minimal_tokens(rec)
        assert rec.first_token_s >= rec.arrival_s
        assert rec.finish_s >= rec.first_token_s


@pytest.mark.parametrize("policy", ["best_effort", "wait_complete", "timeout"])
def test_invariants_hold_with_l3_prefetch(catalog: Catalog, policy: str) -> None:
    config = _config(
        prefetch_policy=policy, prefetch_timeout_base_s=0.001, instances=2, **TIERS["l3"]
    )
    result = simulate(config, _chatty(seed=9), seed=1, catalog=catalog, check_invariants=True)
    assert result.summary is not None
    assert result.diagnostics["l3_to_l2_blocks"] > 0
    assert result.summary.hit_ratio["l3"] > 0
    if policy == "wait_complete":
        assert any(rec.prefetch_queue_s > 0 for rec in result.records)


def test_every_token_is_computed_once_without_preemption(catalog: Catalog) -> None:
    result = simulate(_config(kv_capacity_tokens=1 << 16), _chatty(seed=3), seed=0, catalog=catalog)
    assert result.summary is not None
    assert result.summary.preemptions == 0
    for rec in result.records:
        assert rec.computed_tokens == _minimal_tokens(rec)
    total = sum(rec.computed_tokens for rec in result.records)
    extra = result.diagnostics
    assert extra["prefill_tokens"] + extra["decode_tokens"] == total


def test_swap_preemption_never_recomputes(catalog: Catalog) -> None:
    config = _config(preemption="swap", l2_dram_gib=1e-2)
    result = simulate(config, _chatty(seed=7), seed=1, catalog=catalog)
    assert result.summary is not None
    assert result.summary.preemptions > 0
    for rec in result.records:
        assert rec.computed_tokens == _minimal_tokens(rec)
    assert sum(rec.swapped_queue_s for rec in result.records) > 0


def test_preemption_happens_when_and_only_when_l1_is_exhausted(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[int, int, int]] = []  # (need, available, preemptions during the call)
    original = EngineInstance.grow

    def spy(self: EngineInstance, req: EngineRequest, n_tokens: int) -> bool:
        need = self.kv.grow_need(req, req.processed + n_tokens)
        available, before = self.kv.l1.available(), self.totals.preemptions
        ok = original(self, req, n_tokens)
        calls.append((need, available, self.totals.preemptions - before))
        return ok

    monkeypatch.setattr(EngineInstance, "grow", spy)
    tight = simulate(_config(), _chatty(seed=7), seed=1, catalog=catalog)
    assert tight.summary is not None
    assert tight.summary.preemptions > 0
    assert any(p for _, _, p in calls)
    for need, available, preempted in calls:
        assert (preempted > 0) == (need > available)
    roomy = simulate(_config(kv_capacity_tokens=1 << 16), _chatty(seed=7), seed=1, catalog=catalog)
    assert roomy.summary is not None
    assert roomy.summary.preemptions == 0


def _records(result: SimResult) -> list[tuple[float, ...]]:
    return [
        (r.index, r.first_token_s, r.finish_s, r.computed_tokens, r.cached_l1_tokens)
        for r in sorted(result.records, key=lambda r: r.index)
    ]


def test_decode_runs_match_step_by_step_simulation(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(kv_capacity_tokens=2000)
    batched = simulate(config, _chatty(seed=11), seed=2, catalog=catalog)
    monkeypatch.setattr(instance_module, "MAX_RUN_STEPS", 1)
    stepwise = simulate(config, _chatty(seed=11), seed=2, catalog=catalog)
    assert batched.diagnostics["events"] < stepwise.diagnostics["events"]
    assert batched.diagnostics["steps"] == stepwise.diagnostics["steps"]
    for a, b in zip(_records(batched), _records(stepwise), strict=True):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9)
    sa, sb = batched.summary, stepwise.summary
    assert sa is not None
    assert sb is not None
    assert sa.itl_ms.p90 == pytest.approx(sb.itl_ms.p90, rel=1e-9)
    assert sa.itl_ms.mean == pytest.approx(sb.itl_ms.mean, rel=1e-9)


def test_same_seed_same_result_other_seed_other_result(catalog: Catalog) -> None:
    spec = WorkloadSpec.model_validate(
        {
            "kind": "sessions",
            "sessions": 30,
            "arrival": {"process": "gamma", "rate_per_s": 3, "cv": 2},
            "turns": {"dist": "uniform", "low": 1, "high": 3},
            "user_tokens": {"dist": "lognormal", "median": 60, "sigma": 0.5},
            "output_tokens": {"dist": "uniform", "low": 1, "high": 30},
            "think_time_s": {"dist": "exponential", "mean": 1},
            "block_tokens": BT,
        }
    )
    config = _config(l1_policy="lru", router="least_load", instances=2)
    first = simulate(config, spec, seed=5, catalog=catalog)
    again = simulate(config, spec, seed=5, catalog=catalog)
    other = simulate(config, spec, seed=6, catalog=catalog)
    assert first.records == again.records
    assert first.to_dict() == again.to_dict()
    assert first.records != other.records


@pytest.mark.parametrize(
    "policy", sorted(name for name, cls in POLICIES.items() if not cls.needs_next_access)
)
def test_every_engine_policy_keeps_the_accounting_balanced(catalog: Catalog, policy: str) -> None:
    config = _config(l1_policy=policy, l2_policy=policy, **TIERS["l3"], l3_policy=policy)
    result = simulate(config, _chatty(seed=4), seed=0, catalog=catalog, check_invariants=True)
    assert result.summary is not None
    assert result.summary.n_requests == len(list(_chatty(seed=4).start()))
    assert result.summary.hit_ratio["l1"] > 0


def test_repeated_block_ids_in_one_request_keep_pins_balanced(catalog: Catalog) -> None:
    # Raw (non-prefix-interned) trace ids can repeat inside a prompt; pins are per occurrence.
    rng = np.random.default_rng(0)
    reqs = []
    for i in range(60):
        n = int(rng.integers(2, 8))
        ids = tuple(int(x) for x in rng.integers(1, 6, n))
        reqs.append(request(i, 0.002 * i, n * BT, int(rng.integers(1, 60)), ids))
    for preemption, l2 in (("recompute", 0.0), ("swap", 1e-2)):
        config = _config(kv_capacity_tokens=200, preemption=preemption, l2_dram_gib=l2)
        result = simulate(
            config, OpenLoopSource(reqs, BT), seed=0, catalog=catalog, check_invariants=True
        )
        assert result.summary is not None
        assert result.summary.n_requests == 60
        assert result.summary.preemptions > 0


def test_parking_pinned_lru_blocks_changes_no_result(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(preemption="swap", **TIERS["l3"])
    parked = simulate(config, _chatty(seed=5), seed=0, catalog=catalog, check_invariants=True)
    monkeypatch.setattr(tiers_module, "PARKING_POLICIES", frozenset())
    kept = simulate(config, _chatty(seed=5), seed=0, catalog=catalog, check_invariants=True)
    assert parked.summary is not None
    assert parked.summary.preemptions > 0
    assert parked.records == kept.records
