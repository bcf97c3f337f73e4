"""Hand-traced and golden cases of the serve loop (PrefixSim §8 and our own)."""

from __future__ import annotations

from collections.abc import Collection, Container, Sequence
from pathlib import Path

import numpy as np
import pytest
from kvcache_helpers import (
    TRACES_DIR,
    as_requests,
    random_prefix_trace,
    read_mooncake,
    reference_lru,
)

from simulator.kvcache.cost import parse_cost_model
from simulator.kvcache.holes import HoleWriter, dataset_name, find_holes, holes_path
from simulator.kvcache.policies import NEVER, EvictionPolicy, RequestContext, make_policy
from simulator.kvcache.policies.lru import LRU
from simulator.kvcache.replay import RESULT_KEYS, ReplayResult, replay
from simulator.workload.future import build_future
from simulator.workload.request import TraceRequest

# PrefixSim's test_prefixsim.cpp cases (LRU, uniform cost):
# name: (cache, requests, hits, blocks, self-evictions pinned, unpinned, skipped)
PREFIXSIM_CASES = {
    "a": (5, [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6]], 4, 10, 0, 0, 0),
    "b": (5, [[1], [2, 3, 4, 5], [2, 3, 4, 5, 6]], 4, 10, 0, 0, 0),
    "c": (5, [[1, 2, 3, 4], [5], [1, 2, 3, 4, 6]], 4, 10, 0, 4, 0),
    "d": (5, [[1, 2, 3, 4], [5], [1], [1, 2, 3, 4, 6]], 5, 11, 0, 3, 0),
    "e": (3, [[1, 2, 3], [1, 2, 3, 4], [1, 2, 3]], 3, 6, 0, 0, 1),
}


def lru_replay(lists: list[list[int]], capacity: int, **options: object) -> ReplayResult:
    return replay(as_requests(lists), make_policy("lru", capacity), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", sorted(PREFIXSIM_CASES))
@pytest.mark.parametrize("pin", [True, False])
def test_prefixsim_cases(case: str, pin: bool) -> None:
    capacity, lists, hits, blocks, self_pinned, self_unpinned, skipped = PREFIXSIM_CASES[case]
    result = lru_replay(lists, capacity, pin=pin)
    assert (result.n_block_hits, result.n_blocks) == (hits, blocks)
    assert result.n_self_eviction == (self_pinned if pin else self_unpinned)
    assert result.n_req_skipped == skipped
    assert result.n_req == len(lists) - skipped
    assert result.n_unexpected_eviction == 0
    assert result.compute_saving_ratio == result.block_hit_ratio
    assert result.block_hit_ratio == hits / blocks


def test_hit_past_a_gap() -> None:
    # Cache 4, deepest-first: [1,2,3] leaves LRU order (old -> new) 3,2,1; [4] fills the cache;
    # [5] evicts 3, the deepest block. [1,2,3] then hits 1 and 2.
    result = lru_replay([[1, 2, 3], [4], [5], [1, 2, 3]], 4)
    assert result.n_block_hits == 2
    # Prefix order makes the root the LRU block: [5] evicts 1, and [1,2,3] misses its root
    # but still hits 2 and 3 past the gap.
    gap = lru_replay([[1, 2, 3], [4], [5], [1, 2, 3]], 4, replay_order="prefix-order")
    assert gap.n_block_hits == 2
    holes: list[tuple[int, list[tuple[int, int]]]] = []
    lru_replay(
        [[1, 2, 3], [4], [5], [1, 2, 3]],
        4,
        replay_order="prefix-order",
        on_holes=lambda i, h: holes.append((i, h)),
    )
    assert holes[-1] == (3, [(0, 1)])
    engine = lru_replay(
        [[1, 2, 3], [4], [5], [1, 2, 3]],
        4,
        replay_order="prefix-order",
        match="stop-at-first-miss",
    )
    assert engine.n_block_hits == 0  # the engine stops at the missing root


def test_middle_block_evicted_still_hits_past_gap() -> None:
    # Evict exactly the middle block with a manual remove between two serves.
    policy = make_policy("lru", 10)
    first = replay(as_requests([[1, 2, 3, 4]]), policy)
    assert first.n_block_hits == 0
    policy.remove(2)
    holes: list[list[tuple[int, int]]] = []
    again = replay(as_requests([[1, 2, 3, 4]]), policy, on_holes=lambda _, h: holes.append(h))
    assert again.n_block_hits == 3  # 1, then 3 and 4 past the gap at 2
    assert holes == [[(1, 1)]]
    assert all(policy.find(b) for b in (1, 2, 3, 4))


def test_oversized_request_skipped_and_cache_untouched() -> None:
    policy = make_policy("lru", 3)
    replay(as_requests([[1, 2, 3]]), policy)
    before = [policy.find(b) for b in range(10)]
    victims_probe = make_policy("lru", 3)
    replay(as_requests([[1, 2, 3]]), victims_probe)
    result = replay(as_requests([[5, 6, 7, 8]]), policy)
    assert result.n_req_skipped == 1
    assert result.n_req == result.n_blocks == result.n_eviction == 0
    assert result.block_hit_ratio == result.compute_saving_ratio == 0.0
    assert [policy.find(b) for b in range(10)] == before
    # eviction order unchanged too
    assert policy.evict_n(3, ()) == victims_probe.evict_n(3, ())
    assert len(result.warnings) == 1
    assert "request 0 with 4 blocks" in result.warnings[0]


def test_duplicate_blocks_count_distinct_for_skip_and_allocation() -> None:
    # Four probes but three distinct blocks: fits a 3-block cache.
    result = lru_replay([[1, 2, 1, 3], [1, 2, 1, 3]], 3)
    assert result.n_req_skipped == 0
    assert (result.n_block_hits, result.n_blocks) == (4, 8)
    assert result.n_eviction == 0


def test_uniform_saving_equals_hit_ratio_and_costs_weight_positions() -> None:
    lists = [[1, 2, 3, 4], [1, 2, 5, 6], [1, 7]]
    uniform = lru_replay(lists, 8)
    assert uniform.compute_saving_ratio == uniform.block_hit_ratio
    position = lru_replay(lists, 8, cost_model=parse_cost_model("position"))
    # hits: req1 positions 0,1 (cost 1+2); req2 position 0 (cost 1); total 10 + 10 + 3
    assert position.n_block_hits == uniform.n_block_hits == 3
    assert position.saved_cost == 4.0
    assert position.total_cost == 23.0
    assert position.compute_saving_ratio == pytest.approx(4 / 23)
    qwen = lru_replay(lists, 8, cost_model=parse_cost_model("qwen3coder30b_blksz_16"))
    assert qwen.saved_cost == 865 + 867 + 865


def test_stop_at_first_miss_counts_contiguous_prefix_only() -> None:
    policy = make_policy("lru", 10)
    replay(as_requests([[1, 2, 3, 4]]), policy)
    policy.remove(2)
    result = replay(as_requests([[1, 2, 3, 4]]), policy, match="stop-at-first-miss")
    assert result.n_block_hits == 1
    assert result.n_blocks == 4
    # same cache evolution: every block is resident afterwards in both modes
    assert all(policy.find(b) for b in (1, 2, 3, 4))


def test_stop_at_first_miss_never_counts_more_than_all() -> None:
    lists = [[1, 2, 3], [1, 4], [5, 6], [1, 2, 7], [5, 6, 8], [1, 2, 3]]
    full = lru_replay(lists, 4)
    engine = lru_replay(lists, 4, match="stop-at-first-miss")
    assert engine.n_block_hits <= full.n_block_hits
    assert (engine.n_eviction, engine.n_blocks) == (full.n_eviction, full.n_blocks)


def test_replay_order_changes_state_not_counting_rules() -> None:
    lists = [[1, 2, 3], [4, 5], [1, 2, 6]]
    deep = lru_replay(lists, 4)
    prefix = lru_replay(lists, 4, replay_order="prefix-order")
    # [4,5] evicts the LRU block: 3 after a deepest-first replay of [1,2,3], 1 after a
    # prefix-order one; [1,2,6] then hits 1 and 2, or only 2 (past the gap).
    assert (deep.n_block_hits, prefix.n_block_hits) == (2, 1)


def test_result_summary_has_exactly_the_result_keys() -> None:
    result = lru_replay([[1, 2], [1, 3]], 4)
    summary = result.summary()
    assert (
        tuple(summary)
        == RESULT_KEYS
        == (
            "algo",
            "cache_size",
            "n_req",
            "n_req_skipped",
            "n_blocks",
            "block_hit_ratio",
            "compute_saving_ratio",
            "n_eviction",
            "n_self_eviction",
            "n_unexpected_eviction",
            "n_unobserved_eviction_round",
        )
    )
    assert summary["algo"] == "lru"
    assert summary["block_hit_ratio"] == 0.25


def test_empty_run_has_zero_ratios() -> None:
    result = lru_replay([], 4)
    assert result.block_hit_ratio == result.compute_saving_ratio == 0.0
    assert result.n_req == 0


def test_bad_options_raise() -> None:
    with pytest.raises(ValueError, match="match"):
        lru_replay([[1]], 2, match="some")
    with pytest.raises(ValueError, match="replay_order"):
        lru_replay([[1]], 2, replay_order="random")


class _Lazy(EvictionPolicy):
    """Breaks the contract: evicts nothing, or evicts during access."""

    name = "lazy"

    def __init__(self, capacity: int, *, greedy: bool = False) -> None:
        super().__init__(capacity, rng=np.random.default_rng(0))
        self.blocks: dict[int, None] = {}
        self.greedy = greedy

    def __len__(self) -> int:
        return len(self.blocks)

    def find(self, block: int) -> bool:
        return block in self.blocks

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access
        if self.greedy and block not in self.blocks and self.blocks:
            del self.blocks[next(iter(self.blocks))]  # an eviction inside phase 3
        self.blocks[block] = None

    def evict(self, pinned: Collection[int]) -> list[int]:
        del pinned
        if self.greedy:
            victim = next(iter(self.blocks))
            del self.blocks[victim]
            return [victim]
        return []

    def remove(self, block: int) -> None:
        self.blocks.pop(block, None)


def test_policy_that_evicts_nothing_is_a_hard_error() -> None:
    with pytest.raises(RuntimeError, match="freed nothing"):
        replay(as_requests([[1, 2], [3, 4]]), _Lazy(2))


def test_unexpected_evictions_are_counted_and_verification_fails() -> None:
    with pytest.raises(RuntimeError, match="not resident"):
        replay(as_requests([[1, 2], [3, 4]]), _Lazy(4, greedy=True))
    result = replay(as_requests([[1, 2], [3, 4]]), _Lazy(4, greedy=True), verify=False)
    assert result.n_unexpected_eviction == 3
    assert any("unexpected" in w for w in result.warnings)


def test_holes_and_writer(tmp_path: Path) -> None:
    assert find_holes([True, False, False, True, False]) == [(1, 2), (4, 1)]
    assert find_holes([]) == []
    assert find_holes([False, False]) == [(0, 2)]
    assert dataset_name("/x/qwen_traceA_blksz_16.jsonl.zst") == "qwen_traceA_blksz_16"
    path = holes_path(tmp_path, "trace", 8192, "lru")
    assert path.name == "holes_trace_cache8192_lru.txt"
    with HoleWriter(path) as writer:
        result = replay(
            as_requests([[1, 2, 3], [9, 9, 9, 9], [1, 5, 3], [1, 2, 3]]),
            make_policy("lru", 3),
            on_holes=writer,
        )
    assert result.n_req_skipped == 0
    lines = path.read_text().splitlines()
    assert lines == [
        "Request 0: (idx: 0, len: 3)",
        "Request 1: (idx: 0, len: 4)",
        "Request 2: (idx: 1, len: 2)",
        "Request 3: (idx: 1, len: 1)",
    ]
    missed = sum(int(part.split(")")[0]) for line in lines for part in line.split("len: ")[1:])
    assert missed == result.n_blocks - result.n_block_hits


def test_holes_skip_oversized_requests(tmp_path: Path) -> None:
    path = tmp_path / "h.txt"
    with HoleWriter(path) as writer:
        replay(as_requests([[1, 2, 3], [4, 5]]), make_policy("lru", 2), on_holes=writer)
    assert path.read_text() == "Request 1: (idx: 0, len: 2)\n"


# LRU on the Mooncake traces (hash ids interned by (parent, raw)), deepest-first, pinned,
# uniform cost. Computed with the brute-force reference (``test_mooncake_reference`` below) and
# cross-checked by the real serve loop: (block hits, evictions); blocks are 288,500 / 121,877.
MOONCAKE_LRU = {
    "mooncake_conversation_trace": (
        288_500,
        {1024: (12_916, 274_560), 4096: (25_350, 259_054), 8192: (52_381, 227_927),
         16384: (76_632, 195_484)},
    ),
    "mooncake_synthetic_trace": (
        121_877,
        {1024: (10_364, 110_489), 4096: (29_698, 88_083), 8192: (46_087, 67_598),
         16384: (64_784, 40_709)},
    ),
}  # fmt: skip


MOONCAKE_LRU_8K = {"mooncake_conversation_trace": 0.181563, "mooncake_synthetic_trace": 0.378144}


def _mooncake(name: str) -> Path:
    path = TRACES_DIR / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


@pytest.mark.parametrize("name", sorted(MOONCAKE_LRU))
def test_mooncake_lru_golden(name: str) -> None:
    requests = read_mooncake(_mooncake(name))
    blocks, expected = MOONCAKE_LRU[name]
    for size, (hits, evictions) in expected.items():
        result = replay(requests, make_policy("lru", size))
        assert (result.n_blocks, result.n_block_hits, result.n_eviction) == (
            blocks,
            hits,
            evictions,
        )
        assert (result.n_self_eviction, result.n_unexpected_eviction) == (0, 0)
        if size == 8192:
            assert round(result.block_hit_ratio, 6) == MOONCAKE_LRU_8K[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MOONCAKE_LRU))
def test_mooncake_reference(name: str) -> None:
    lists = [r.block_ids for r in read_mooncake(_mooncake(name))]
    blocks, expected = MOONCAKE_LRU[name]
    for size, (hits, evictions) in expected.items():
        counts = reference_lru(lists, size)
        assert (counts.n_blocks, counts.n_block_hits, counts.n_eviction) == (
            blocks,
            hits,
            evictions,
        )


class _Spy(LRU):
    """LRU that logs the verbs the serve loop calls (and hides its fast path)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, rng=np.random.default_rng(0))
        self.log: list[str] = []
        self.contexts: list[RequestContext] = []

    def resident_view(self) -> Container[int] | None:
        return None

    def find(self, block: int) -> bool:
        self.log.append("find")
        return super().find(block)

    def set_request_ctx(self, ctx: RequestContext) -> None:
        self.log.append("ctx")
        self.contexts.append(ctx)

    def evict_n(self, n: int, pinned: Collection[int]) -> list[int]:
        self.log.append(f"evict{n}")
        return super().evict_n(n, pinned)

    def record_request(self, blocks: Sequence[int]) -> None:
        self.log.append(f"record{len(blocks)}")

    def access_request(
        self,
        blocks: Sequence[int],
        costs: Sequence[float],
        next_access: Sequence[int] | None,
        deepest_first: bool,
    ) -> None:
        self.log.append("access")
        super().access_request(blocks, costs, next_access, deepest_first)


def test_hooks_fire_in_prefixsim_order_with_context() -> None:
    spy = _Spy(2)
    requests = [
        TraceRequest(0, 0.5, 32, 1, (1, 2), session_id=7, turn=1, type_id=2),
        TraceRequest(1, 1.5, 64, 1, (3, 4, 5)),  # oversized: no hook at all
        TraceRequest(2, 2.5, 32, 1, (1, 8), session_id=7, turn=2, type_id=2),
    ]
    replay(requests, spy, future=[([9, 9], 2), ([1, 1, 1], NEVER), ([9, 9], NEVER)])
    probes = ["find", "find"]
    # ctx, phase-1 probes, (phase-2 eviction), record, phase-3 access, verification probes
    assert spy.log == [
        *["ctx", *probes, "record2", "access", *probes],
        *["ctx", *probes, "evict1", "record2", "access", *probes],
    ]
    assert not spy.find(2)  # the victim: LRU and not in request 2
    first, second = spy.contexts
    assert (first.index, first.timestamp_s, first.n_blocks) == (0, 0.5, 2)
    assert (first.session, first.session_next_access) == (7, 2)
    assert (second.index, second.session_next_access) == (2, NEVER)
    assert first.category != 0
    assert first.category != second.category  # turn differs


def test_external_future_matches_internal_annotation() -> None:
    trace = random_prefix_trace(np.random.default_rng(3), 150, sessions=5)
    internal = replay(trace, make_policy("belady", 12))
    external = replay(iter(trace), make_policy("belady", 12), future=build_future(trace).rows())
    assert internal == external
    assert internal.block_hit_ratio >= replay(trace, make_policy("lru", 12)).block_hit_ratio
