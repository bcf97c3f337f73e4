"""The engine's batched fast paths against the block-by-block reference they replace.

One eviction per run of new blocks (``CacheTier.insert_all`` / ``add_pinned_all``) must evict
the same victims, hand them down in the same order and leave the same policy order as one
``insert`` / ``add_pinned`` per block, and ``release`` the same order as ``unpin`` then
``touch``; the plain-Python batch grouping must equal numpy's; the
decode-run interpolation must equal ``np.linspace`` bit for bit, and its unrolled first
bisection the plain one; the engine's one-pass split of
a step and a composed model's decode-run pricer must price what the step's pairs do; the
split a scheduler gathers while scheduling must be the batch's own; the run-length stable
argsort of the ITL statistics must order as numpy's stable sort, and the recorder's raw gap
buffer must pool the same arrays as a list of gaps.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pytest

from hardware import shipped_catalog
from simulator.engine.analytic import LinearLatency
from simulator.engine.invariants import check_split
from simulator.engine.kvmanager import KVManager, PrefixMatch
from simulator.engine.progress import hit_tokens, record_of
from simulator.engine.request import EngineRequest
from simulator.engine.scheduler import StepPlan, StepSplit
from simulator.engine.steps import (
    REL_TOL,
    StepPricer,
    _fill,
    _linspace_into,
    decode_run_durations,
    split_of,
)
from simulator.engine.tiers import CacheTier
from simulator.kvcache.policies import POLICIES, RequestContext
from simulator.kvcache.policies.lru import LRU, pop_oldest
from simulator.latency import ComposedLatencyModel, Deployment, make_latency_model
from simulator.latency import batch as batch_module
from simulator.latency.batch import Batch, DecodeRun, split_groups
from simulator.metrics import _weighted_picks, per_request_ms, stable_argsort
from simulator.records import Recorder, RequestRecord
from simulator.workload.request import TraceRequest


def _tier(policy: str, capacity: int, sink: list[list[int]]) -> CacheTier:
    rng = np.random.default_rng(0)
    return CacheTier("T", POLICIES[policy](capacity, rng=rng), on_evict=sink.append)


def _state(tier: CacheTier) -> tuple[object, ...]:
    resident = sorted(b for b in range(200) if tier.policy.find(b))
    return (resident, list(tier.pins.items()), tier.private, tier.n_evicted)


@pytest.mark.parametrize("policy", ["lru", "s3fifo", "lfu"])
@pytest.mark.parametrize("seed", range(6))
def test_batched_inserts_and_pins_match_block_by_block(policy: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    fast_sink: list[list[int]] = []
    slow_sink: list[list[int]] = []
    fast, slow = _tier(policy, 24, fast_sink), _tier(policy, 24, slow_sink)
    for _ in range(300):
        blocks = [int(b) for b in rng.integers(0, 60, size=int(rng.integers(1, 12)))]
        op = rng.random()
        if op < 0.5:
            fast.insert_all(blocks)
            for block in blocks:
                slow.insert(block)
        elif op < 0.8:
            # Pin a request's blocks: resident ones first, then the absent ones, if room.
            absent = list(dict.fromkeys(b for b in blocks if not slow.has(b)))
            if len({b for b in blocks if b not in slow.pins}) > slow.available():
                continue  # the engine checks this need first (``KVManager.admission_need``)
            for tier in (fast, slow):
                for block in blocks:
                    if tier.has(block) and block not in absent:
                        tier.pin(block)
            fast.add_pinned_all(absent)
            for block in absent:
                slow.add_pinned(block)
        else:
            # A request finishing: its pins dropped, its blocks touched deepest first.
            done = list(slow.pins)[: int(rng.integers(0, 8))]
            done += done[: int(rng.integers(0, 2))]  # a repeated id holds two pins
            if any(slow.pins[b] < done.count(b) for b in done):
                continue
            fast.release(done)
            slow.unpin_all(done)
            for block in reversed(done):
                slow.touch(block)
        assert _state(fast) == _state(slow)
        assert fast_sink == slow_sink  # same victims, handed down one at a time, in order
    # And the same order from here on: evict everything unpinned.
    unpinned = slow.available() - slow.free()
    assert unpinned == fast.available() - fast.free()
    assert fast.policy.evict_n(unpinned, fast.pins) == slow.policy.evict_n(unpinned, slow.pins)


def test_lru_one_pass_verbs_equal_the_general_ones() -> None:
    # ``evict_oldest`` is ``evict_n`` with nothing pinned (the reference ``pop_oldest``), and
    # ``insert_absent`` of absent, distinct blocks is ``access`` of each in turn.
    rng = np.random.default_rng(3)
    fast = LRU(64, rng=rng)
    slow = LRU(64, rng=rng)
    for _ in range(200):
        new = [int(b) for b in rng.choice(1000, size=int(rng.integers(1, 9)), replace=False)]
        new = [b for b in new if not slow.find(b)]
        fast.insert_absent(new)
        for block in new:
            slow.access(block, 1.0, 0)
        n = int(rng.integers(0, 12))
        assert fast.evict_oldest(n) == pop_oldest(slow.resident_view(), n, ())
        assert list(fast.resident_view()) == list(slow.resident_view())


def test_small_batches_group_as_numpy_does() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        size = int(rng.integers(1, 300))
        cache = rng.integers(0, 70_000, size=size).tolist()
        new = np.where(rng.random(size) < 0.9, 1, rng.integers(1, 4096, size=size)).tolist()
        pairs = list(zip(cache, new, strict=True))
        python = Batch.of(pairs)
        arrays = Batch.from_arrays(cache, new)
        assert python.decode_buckets == arrays.decode_buckets
        assert python.prefill_groups == arrays.prefill_groups
        assert python.num_tokens == arrays.num_tokens
        assert sorted(python.decode_kv_lens.tolist()) == sorted(arrays.decode_kv_lens.tolist())
    assert batch_module._SMALL >= 256  # an engine step of up to 256 requests stays in Python


def test_decode_run_interpolation_is_numpys_linspace() -> None:
    rng = np.random.default_rng(1)
    for _ in range(2000):
        n = int(rng.integers(3, 400))
        a = float(rng.uniform(1e-3, 0.1))
        b = a if rng.random() < 0.05 else a * float(rng.uniform(0.8, 1.3))
        out = np.zeros(n + 4)
        _linspace_into(out, 2, n + 1, a, b)
        assert np.array_equal(out[2 : n + 2], np.linspace(a, b, n))


def test_decode_run_steady_buckets_only_grow_their_sums() -> None:
    # Up to ``steady()``'s last step every request stays in its octave: step k's buckets are
    # step 0's with each KV sum count x k larger; the step after, one has moved up.
    rng = np.random.default_rng(13)
    for _ in range(300):
        cache = rng.integers(0, 40_000, size=int(rng.integers(1, 60))).tolist()
        run = DecodeRun(cache)
        first, steady = run.steady()
        assert first == run.buckets(0)
        for k in {0, steady // 2, steady}:
            assert run.buckets(k) == [(e, b, s + b * k) for e, b, s in first]
        moved = run.buckets(steady + 1)
        assert [(e, b) for e, b, _ in moved] != [(e, b) for e, b, _ in first]


def test_decode_run_batches_price_as_their_pairs() -> None:
    rng = np.random.default_rng(2)
    for _ in range(300):
        cache = rng.integers(0, 40_000, size=int(rng.integers(1, 257))).tolist()
        run = DecodeRun(cache)
        for k in (0, 1, int(rng.integers(2, 5000))):
            fast, slow = run.at(k), Batch.of([(c + k, 1) for c in cache])
            assert fast.decode_buckets == slow.decode_buckets
            assert (fast.size, fast.num_tokens, fast.logit_tokens) == (
                slow.size,
                slow.num_tokens,
                slow.logit_tokens,
            )
            assert fast.decode_kv_lens.tolist() == sorted(slow.decode_kv_lens.tolist())


def _composed_70b(spec: str) -> ComposedLatencyModel:
    """Llama-3.1-70B on four H100s, priced by the composed model ``spec``."""
    catalog = shipped_catalog()
    deployment = Deployment(
        catalog.model("meta-llama/Llama-3.1-70B"), catalog.gpu("h100_sxm"), tp=4
    )
    model = make_latency_model(spec, deployment)
    assert isinstance(model, ComposedLatencyModel)
    return model


@pytest.mark.parametrize("spec", ["roofline", "table"])
def test_decode_step_pricer_prices_as_the_pairs(spec: str) -> None:
    # The composed model's decode-run pricer (constant parts priced once, the buckets per
    # call) gives the seconds ``step_seconds`` gives for the step's pairs, bit for bit.
    model = _composed_70b(spec)
    rng = np.random.default_rng(6)
    for _ in range(60):
        cache = rng.integers(0, 40_000, size=int(rng.integers(1, 300))).tolist()
        at = model.decode_step_pricer(cache)
        steady = DecodeRun(cache).steady()[1]  # the last step priced from step 0's buckets
        for k in (0, 1, int(rng.integers(2, 3000)), steady, steady + 1, steady + 2):
            assert at(k) == model.step_seconds([(c + k, 1) for c in cache])


@pytest.mark.parametrize("spec", ["roofline", "table"])
def test_decode_run_durations_equal_the_whole_bisection(spec: str) -> None:
    # ``decode_run_durations`` unrolls the first bisection (one straight piece built as one
    # array); the durations must be those of the plain bisection over the whole run.
    model = _composed_70b(spec)
    rng = np.random.default_rng(8)
    for _ in range(150):
        cache = rng.integers(0, 70_000, size=int(rng.integers(1, 40))).tolist()
        n = int(rng.integers(1, 3000))
        at = model.decode_step_pricer(cache)
        expected = np.array([at(k) for k in range(n)]) if n <= 4 else np.empty(n)
        if n > 4:
            _fill(expected, at, [(0, n - 1, at(0), at(n - 1))], rel_tol=REL_TOL)
        assert np.array_equal(decode_run_durations(model, cache, n), expected)


@pytest.mark.parametrize("spec", ["roofline", "table"])
def test_plain_prefill_miss_prices_as_its_planned_call(spec: str) -> None:
    # A composed model prices a plain prefill group's cache miss without the planner's call
    # list; the seconds must be those of the list, bit for bit.
    model = _composed_70b(spec)
    assert model._plain_prefill
    rng = np.random.default_rng(7)
    for _ in range(200):
        group = (int(rng.integers(0, 30_000)), int(rng.integers(2, 8_000)), int(rng.integers(1, 4)))
        planned = model._sum(model._planner.prefill_calls((group,)))
        assert model._prefill_seconds((group,)) == planned


def _fields(batch: Batch) -> tuple[object, ...]:
    return (
        batch.size,
        batch.num_tokens,
        batch.logit_tokens,
        batch.decode_kv_lens.tolist(),
        batch.prefill_groups,
        batch.decode_buckets,
    )


def test_split_batches_equal_batches_of_pairs() -> None:
    # The engine's one-pass split (``Batch.of_split``) builds what ``Batch.of`` builds from
    # the pairs, field by field, in the plain-Python range and beyond it (numpy).
    rng = np.random.default_rng(4)
    for _ in range(300):
        size = int(rng.integers(1, 400))
        cache = rng.integers(0, 70_000, size=size).tolist()
        chunked = rng.random(size) < rng.choice([0.0, 0.02, 0.5, 1.0])
        new = np.where(chunked, rng.integers(2, 8, size=size), 1).tolist()
        pairs = list(zip(cache, new, strict=True))
        kv_lens = [c + 1 for c, n in pairs if n == 1]
        chunks = [(c, n) for c, n in pairs if n > 1]
        split = Batch.of_split(kv_lens, chunks, sum(new))
        assert _fields(split) == _fields(Batch.of(pairs))


def test_prefill_groups_count_repeated_chunks() -> None:
    # A step's prefill chunks are grouped by sorting and counting equal neighbours (no
    # ``Counter``); repeated shapes must be one group with their count, as ``Batch.of`` has.
    rng = np.random.default_rng(9)
    for _ in range(500):
        size = int(rng.integers(2, 9))
        chunks = [(int(rng.integers(0, 3)) * 64, int(rng.integers(2, 5))) for _ in range(size)]
        groups, _ = split_groups([], chunks)
        assert groups == Batch.of(chunks).prefill_groups


def test_step_pricer_prices_as_the_pairs() -> None:
    # Through a latency model the pricer hands over a prebuilt batch; through any other timer
    # the pairs. Both give the seconds ``step_seconds(pairs)`` gives, bit for bit.
    catalog = shipped_catalog()
    deployment = Deployment(catalog.model("meta-llama/Llama-3.1-8B"), catalog.gpu("h100_sxm"))
    model = make_latency_model("roofline", deployment)
    rng = np.random.default_rng(5)
    for timer in (model, LinearLatency(1e-3, 2e-6, 3e-9)):
        pricer = StepPricer(timer)
        for _ in range(100):
            batch: dict[EngineRequest, int] = {}
            for index in range(int(rng.integers(1, 300))):
                req = EngineRequest(TraceRequest(index, 0.0, 9000, 10, ()), 16, 0, 0.0)
                req.processed = int(rng.integers(0, 8000))
                batch[req] = 1 if rng.random() < 0.9 else int(rng.integers(2, 1000))
            pairs = [(req.processed, n) for req, n in batch.items()]
            assert pricer.step(batch) == timer.step_seconds(pairs)


def test_gathered_split_prices_as_the_batch() -> None:
    # A split gathered request by request (``StepSplit.add``, what the schedulers do) is the
    # batch's own split and prices the same seconds; one that disagrees is caught.
    catalog = shipped_catalog()
    deployment = Deployment(catalog.model("meta-llama/Llama-3.1-8B"), catalog.gpu("h100_sxm"))
    pricer = StepPricer(make_latency_model("roofline", deployment))
    rng = np.random.default_rng(9)
    for _ in range(50):
        batch: dict[EngineRequest, int] = {}
        split = StepSplit()
        for index in range(int(rng.integers(1, 300))):
            req = EngineRequest(TraceRequest(index, 0.0, 9000, 10, ()), 16, 0, 0.0)
            req.processed = int(rng.integers(0, 8000))
            n = 1 if rng.random() < 0.9 else int(rng.integers(2, 1000))
            batch[req] = n
            split.add(req.processed, n)
        assert (split.kv_lens, split.chunks, split.chunk_tokens) == split_of(batch)
        assert pricer.step(batch, split) == pricer.step(batch)
        check_split(StepPlan(batch, (), split))
        split.kv_lens.append(7)
        with pytest.raises(AssertionError, match="split disagrees"):
            check_split(StepPlan(batch, (), split))


@pytest.mark.parametrize("seed", range(8))
def test_stable_argsort_orders_as_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs = [
        np.full(int(rng.integers(1, 200)), float(rng.choice([0.0, -0.0, 1.5, 2.5, np.nan])))
        if rng.random() < 0.3
        else np.full(int(rng.integers(1, 200)), float(rng.integers(0, 50)) / 7)
        for _ in range(int(rng.integers(1, 400)))
    ]
    runs.append(rng.random(int(rng.integers(0, 300))))  # a stretch of distinct values
    values = np.concatenate(runs)
    expected = np.argsort(values, kind="stable")
    assert np.array_equal(stable_argsort(values), expected)
    distinct = rng.random(int(rng.integers(0, 50)))  # no runs: numpy's own sort
    assert np.array_equal(stable_argsort(distinct), np.argsort(distinct, kind="stable"))


def _sorted_picks(values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """Nearest-rank weighted quantiles by sorting everything (the definition)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    return [
        float(values[order][min(len(values) - 1, np.searchsorted(cum, q * cum[-1]))]) for q in qs
    ]


@pytest.mark.parametrize("seed", range(16))
def test_weighted_quantiles_by_selection_equal_a_full_sort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4096, 60_000))  # past _SELECT_MIN: the selection path
    kind = seed % 4
    if kind == 0:  # over many octaves: many selection buckets
        values = rng.exponential(size=n) * 10.0 ** rng.integers(-6, 6, size=n)
    elif kind == 1:  # many ties, zeros among them
        values = np.round(rng.random(n) * 40) / 7
    elif kind == 2:  # runs of equal gaps, as a decode step's pooled gaps come
        values = np.repeat(rng.random(n // 25 + 1), 25)[:n]
    else:  # negative values: no bucketing by bit pattern, the sorting path
        values = rng.normal(size=n)
    weights = rng.integers(1, 9, size=n).astype(float)
    qs = (0.0, 0.5, 0.9, 0.99, 1.0, float(rng.random()))
    assert _weighted_picks(values, weights, qs) == _sorted_picks(values, weights, qs)
    assert _weighted_picks(values, weights, qs, whole=True) == _sorted_picks(values, weights, qs)
    fractional = weights / 3  # not whole numbers: the sorting path, same definition
    assert _weighted_picks(values, fractional, qs) == _sorted_picks(values, fractional, qs)


def test_recorder_pools_the_gaps_it_was_given() -> None:
    rng = np.random.default_rng(3)
    recorder = Recorder()
    singles: list[float] = []
    chunks: list[tuple[np.ndarray, int]] = []
    for _ in range(200):
        gaps = rng.random(int(rng.integers(0, 20))).tolist()
        repeated = rng.random(int(rng.integers(0, 5)))
        weight = int(rng.integers(1, 9))
        recorder.gaps(gaps, repeated, weight)
        singles.extend(gaps)
        if len(repeated):
            chunks.append((repeated, weight))
        for _ in range(int(rng.integers(0, 3))):  # a cohort step's equal gaps, in their place
            same, n = float(rng.random()), int(rng.integers(0, 4))
            recorder.same_gaps(same, n)
            singles.extend([same] * n)
    recorder.gap(0.25)
    singles.append(0.25)
    values, weights = recorder.itl_values()
    expected_values = np.concatenate([np.array(singles), *(v for v, _ in chunks)])
    expected_weights = np.concatenate(
        [np.ones(len(singles)), *(np.full(len(v), float(w)) for v, w in chunks)]
    )
    assert np.array_equal(values, expected_values)
    assert np.array_equal(weights, expected_weights)
    assert weights.dtype == np.float64
    recorder.gap(0.5)  # a gap after the pooling (the buffer is not held by the arrays)
    assert len(recorder.itl_values()[0]) == len(expected_values) + 1


def test_finished_request_record_carries_each_counter() -> None:
    # ``record_of`` builds the record positionally: every field from its own counter.
    trace = TraceRequest(7, 1.5, 40, 9, (1, 2, 3))
    req = EngineRequest(trace, 16, 3, 2.0)
    req.first_token_s, req.finish_s = 2.5, 4.0
    req.cached_tokens = (11, 12, 13)
    req.queue_s = [0.1, 0.2, 0.3]
    req.preemptions, req.computed_total, req.max_gap_s = 4, 77, 0.75
    record = record_of(req, 3)
    assert dataclasses.asdict(record) == {
        "index": 7,
        "instance": 3,
        "arrival_s": 2.0,
        "first_token_s": 2.5,
        "finish_s": 4.0,
        "input_tokens": 40,
        "output_tokens": 9,
        "cached_l1_tokens": 11,
        "cached_l2_tokens": 12,
        "cached_l3_tokens": 13,
        "prefetch_queue_s": 0.1,
        "waiting_queue_s": 0.2,
        "swapped_queue_s": 0.3,
        "preemptions": 4,
        "computed_tokens": 77,
        "max_itl_s": 0.75,
    }


class _HookedLru(LRU):
    """An LRU that keeps what the per-admission hooks tell it."""

    def __init__(self, capacity: int, *, rng: np.random.Generator) -> None:
        super().__init__(capacity, rng=rng)
        self.told: list[object] = []

    def set_request_ctx(self, ctx: RequestContext) -> None:
        self.told.append(ctx)

    def record_request(self, blocks: Sequence[int]) -> None:
        self.told.append(tuple(blocks))


def test_admission_announces_to_a_policy_with_hooks() -> None:
    # ``KVManager.announce`` skips the hooks of a policy that keeps the base class's no-ops;
    # one that overrides them is told of every admission, context first.
    rng = np.random.default_rng(0)
    hooked = _HookedLru(8, rng=rng)
    kv = KVManager(CacheTier("L1", hooked), None, None, block_tokens=16, write_through=True)
    trace = TraceRequest(5, 1.0, 40, 3, (4, 5, 6), session_id=9, type_id=2)
    req = EngineRequest(trace, 16, 0, 1.25)
    kv.admit(req, kv.match_l12(req.blocks))
    assert hooked.told == [
        RequestContext(index=5, timestamp_s=1.25, n_blocks=3, category=2, session=9),
        (4, 5, 6),
    ]


def test_hit_tokens_of_an_all_l1_match_add_up_the_block_sizes() -> None:
    # ``hit_tokens`` sums an all-L1 match in one expression: the per-block sizes it stands for.
    rng = np.random.default_rng(11)
    for _ in range(500):
        bt = int(rng.choice([16, 512]))
        prompt = int(rng.integers(1, 20 * bt))
        n_blocks = -(-prompt // bt)
        trace = TraceRequest(0, 0.0, prompt, 5, tuple(range(1, n_blocks + 1)))
        req = EngineRequest(trace, bt, 0, 0.0)
        matched = int(rng.integers(0, n_blocks + 1))
        cached = min(matched * bt, prompt, prompt - 1)
        sizes = sum(min(prompt, (i + 1) * bt) - i * bt for i in range(matched))
        expected = (min(sizes, cached), 0, 0)
        assert hit_tokens(req, PrefixMatch((False,) * matched, 0), cached, bt) == expected


def test_per_request_arrays_are_the_records_properties_in_ms() -> None:
    # ``per_request_ms`` reads the fields once and does the properties' arithmetic on arrays:
    # the same doubles as the properties, NaN for a one-token output, rejected rows inf.
    rng = np.random.default_rng(12)
    records = []
    for i in range(2000):
        arrival = float(rng.uniform(0, 100))
        first = arrival + float(rng.uniform(0, 5))
        finish = first + float(rng.uniform(0, 50))
        queues = rng.random(3).tolist()
        out = int(rng.choice([1, 2, 3, 700]))
        records.append(
            RequestRecord(i, 0, arrival, first, finish, 9, out, 0, 0, 0, *queues, 0, 9, 0.1)
        )
    arrays = per_request_ms(records, 3)
    tail = [math.inf] * 3
    properties = {
        "ttft_ms": [r.ttft_s for r in records],
        "tpot_ms": [r.tpot_s for r in records],
        "itl_ms": [r.max_itl_s for r in records],
        "e2e_ms": [r.e2e_s for r in records],
        "queue_ms": [r.queue_s for r in records],
    }
    for name, values in properties.items():
        expected = np.concatenate([np.array(values) * 1e3, tail])
        assert arrays[name].tobytes() == expected.tobytes(), name
    assert all(len(a) == 2 for a in per_request_ms([], 2).values())
