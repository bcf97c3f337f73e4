"""Goldens of the issue-16 policies on the bundled Mooncake traces, pinned from the brute-force
references of ``policy_references.py`` (``@slow`` tests re-derive them from the references;
the fast ones check the implementation against the pinned numbers), plus differential tests
against the references on random traces and asym_cache's reduction to LRU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from kvcache_helpers import TRACES_DIR, random_prefix_trace, read_mooncake
from policy_references import (
    RefAsym,
    Reference,
    RefLirs,
    RefPartialNodeFreq,
    RefS3FifoD,
    RefSessionArc,
    RefSessionRandomCompute,
    RefSessionS3Fifo,
    RefSmallQueueRandomCompute,
    serve,
)

from simulator.kvcache.cost import parse_cost_model
from simulator.kvcache.policies import make_policy
from simulator.kvcache.replay import replay
from simulator.workload.request import TraceRequest

QWEN = parse_cost_model("qwen3coder30b_blksz_16")


def qwen_cost(position: int) -> float:
    return 865.0 + 2.0 * position


TRACES = ("mooncake_synthetic_trace", "mooncake_conversation_trace")

# name: (first N requests or None = all, cache, implementation params, cost model?) and per
# trace (block hits, evictions) as the reference computes them.
GOLDENS: dict[str, tuple[int | None, int, dict[str, object], bool, dict[str, tuple[int, int]]]] = {
    "asym_cache": (None, 256, {}, True, {
        "mooncake_synthetic_trace": (2_306, 115_685),
        "mooncake_conversation_trace": (12_196, 276_048),
    }),
    # Sampled policies: a sample 32x the cache draws every resident block (miss chance e^-32).
    "random_compute_small_queue": (1500, 256, {"n_sample": 8192}, True, {
        "mooncake_synthetic_trace": (313, 34_302),
        "mooncake_conversation_trace": (1_647, 39_799),
    }),
    "partial_node_random_freq": (1500, 256, {"n_sample": 8192, "micro_batch": 8}, False, {
        "mooncake_synthetic_trace": (328, 34_287),
        "mooncake_conversation_trace": (1_554, 39_892),
    }),
    "lirs": (1500, 256, {}, False, {
        "mooncake_synthetic_trace": (317, 34_298),
        "mooncake_conversation_trace": (1_551, 39_895),
    }),
    "s3fifod": (1500, 256, {}, False, {
        "mooncake_synthetic_trace": (260, 34_355),
        "mooncake_conversation_trace": (1_650, 39_796),
    }),
    # Session policies: the Mooncake traces carry no session ids, so each request is a session.
    "session_s3fifo": (1500, 256, {}, True, {
        "mooncake_synthetic_trace": (300, 34_320),
        "mooncake_conversation_trace": (1_555, 39_915),
    }),
    # Without sessions and with no request repeated whole, session_arc and session_s3fifo
    # both reduce to FIFO over requests on these traces (hence equal numbers); the random-trace
    # differential test below, with sessions, tells them apart.
    "session_arc": (1500, 256, {}, False, {
        "mooncake_synthetic_trace": (300, 34_320),
        "mooncake_conversation_trace": (1_555, 39_915),
    }),
    "session_random_compute": (1500, 256, {"n_sample": 4096}, True, {
        "mooncake_synthetic_trace": (243, 34_388),
        "mooncake_conversation_trace": (1_547, 39_914),
    }),
}  # fmt: skip

# Saving ratios of the cost-aware goldens (qwen3coder30b_blksz_16), from the reference.
SAVINGS = {
    ("asym_cache", "mooncake_synthetic_trace"): 0.021417,
    ("asym_cache", "mooncake_conversation_trace"): 0.039581,
    ("random_compute_small_queue", "mooncake_synthetic_trace"): 0.009068,
    ("random_compute_small_queue", "mooncake_conversation_trace"): 0.036569,
    ("session_s3fifo", "mooncake_synthetic_trace"): 0.008672,
    ("session_s3fifo", "mooncake_conversation_trace"): 0.034417,
    ("session_random_compute", "mooncake_synthetic_trace"): 0.007041,
    ("session_random_compute", "mooncake_conversation_trace"): 0.034238,
}


def _requests(name: str, first: int | None) -> list[TraceRequest]:
    path: Path = TRACES_DIR / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    requests = read_mooncake(path)
    return requests if first is None else requests[:first]


def _reference(algo: str, capacity: int) -> Reference:
    makers: dict[str, Callable[[], Reference]] = {
        "asym_cache": RefAsym,
        "random_compute_small_queue": lambda: RefSmallQueueRandomCompute(capacity),
        "partial_node_random_freq": lambda: RefPartialNodeFreq(micro_batch=8),
        "s3fifod": lambda: RefS3FifoD(capacity),
        "lirs": lambda: RefLirs(capacity),
        "session_arc": RefSessionArc,
        "session_s3fifo": RefSessionS3Fifo,
        "session_random_compute": RefSessionRandomCompute,
    }
    return makers[algo]()


def _cases(slow_algos: set[str]) -> list[object]:
    return [
        pytest.param(algo, name, marks=[pytest.mark.slow] if algo in slow_algos else [])
        for algo in GOLDENS
        for name in TRACES
    ]


SLOW = {"partial_node_random_freq", "random_compute_small_queue", "session_random_compute"}


@pytest.mark.parametrize(("algo", "name"), _cases(SLOW))
def test_golden_implementation(algo: str, name: str) -> None:
    first, size, params, costed, expected = GOLDENS[algo]
    requests = _requests(name, first)
    model = QWEN if costed else parse_cost_model("uniform")
    result = replay(requests, make_policy(algo, size, **params), cost_model=model)
    assert (result.n_block_hits, result.n_eviction) == expected[name]
    assert (result.n_self_eviction, result.n_unexpected_eviction) == (0, 0)
    if costed:
        assert round(result.compute_saving_ratio, 6) == SAVINGS[algo, name]


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "name"), _cases(set()))
def test_golden_reference(algo: str, name: str) -> None:
    first, size, _, costed, expected = GOLDENS[algo]
    requests = _requests(name, first)
    counts = serve(requests, size, _reference(algo, size), qwen_cost if costed else None)
    assert (counts.n_block_hits, counts.n_eviction) == expected[name]
    if costed:
        assert round(counts.saved / counts.total, 6) == SAVINGS[algo, name]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("algo", sorted(GOLDENS))
def test_matches_reference_on_random_traces(algo: str, seed: int) -> None:
    trace = random_prefix_trace(np.random.default_rng(seed), 300, max_new=5, sessions=6)
    size = 20
    _, _, params, costed, _ = GOLDENS[algo]
    params = {k: (800 if k == "n_sample" else v) for k, v in params.items()}
    model = QWEN if costed else parse_cost_model("uniform")
    result = replay(trace, make_policy(algo, size, seed=seed, **params), cost_model=model)
    counts = serve(trace, size, _reference(algo, size), qwen_cost if costed else None)
    assert (result.n_block_hits, result.n_eviction) == (counts.n_block_hits, counts.n_eviction)


@pytest.mark.parametrize("name", TRACES)
def test_asym_cache_is_lru_under_uniform_cost(name: str) -> None:
    requests = _requests(name, None)
    for size in (2048,):
        asym = replay(requests, make_policy("asym_cache", size))
        lru = replay(requests, make_policy("lru", size))
        assert (asym.n_block_hits, asym.n_eviction) == (lru.n_block_hits, lru.n_eviction)
    # ... and not under a position-dependent cost, where deep blocks outlive shallow ones
    costed = replay(requests, make_policy("asym_cache", 1024), cost_model=QWEN)
    lru_costed = replay(requests, make_policy("lru", 1024), cost_model=QWEN)
    assert costed.n_eviction != lru_costed.n_eviction


def test_asym_cache_keeps_a_deep_block_for_half_life_times_log2_cost_ratio() -> None:
    # Two one-block requests 100 s apart: cost 4 at t=0 vs cost 1 at t=100 with half-life 100:
    # keys 2 + 0 and 0 + 1, so the newer, cheaper block leaves first.
    policy = make_policy("asym_cache", 2, half_life=100.0)
    old = TraceRequest(0, 0.0, 1, 1, (1,))
    new = TraceRequest(1, 100.0, 1, 1, (2,))
    replay([old], policy, cost_model=parse_cost_model("linear:4,0"))
    replay([new], policy)
    assert policy.evict_n(1, ()) == [2]
