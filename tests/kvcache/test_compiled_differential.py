"""Differential tests: the compiled replay core against the Python serve loop (the reference).

``CompiledReplay`` fed ``BlockChunk``s must return exactly the ``ReplayResult`` that
``replay(requests, make_policy(...))`` returns with the same options: both ratios, every
counter (the four RESULT eviction counters included), the cost sums and the warnings. Checked
on random traces (arbitrary ids with repeats inside a request, and prefix-structured ones), cut
into chunks at random places, and on a slice of a real Mooncake trace read through the
vectorised JSONL reader. The random traces get random request contexts (timestamps out of
order and tied, types and turns), which the policies of ``compiled.CONTEXT`` read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvcache_helpers import TRACES_DIR, as_requests, random_prefix_trace

from simulator.kvcache.compiled import (
    COMPILED,
    PYTHON_ONLY,
    CompiledReplay,
    _kernels,
    compiled_reason,
)
from simulator.kvcache.cost import UNIFORM, CostModel, parse_cost_model
from simulator.kvcache.policies import POLICIES, make_policy
from simulator.kvcache.replay import ReplayResult, replay
from simulator.kvcache.served_future import distinct_counts, without_skipped
from simulator.workload import open_trace
from simulator.workload.chunk_reader import ChunkPass
from simulator.workload.chunks import BlockChunk, chunk_requests
from simulator.workload.future import FutureTable, build_future
from simulator.workload.request import TraceRequest

#: (policy, parameters) pairs with a compiled path; CLOCK with a 1-bit and a 2-bit counter,
#: S3-FIFO(-D) with its default small queue and a large one (so both queues give victims),
#: SLRU and 2Q with their default and with unusual splits, LIRS with a large HIR share,
#: W-TinyLFU without its doorkeeper and with a large window, a shallow sketch and halving
#: after every ``capacity`` accesses, AsymCache with its default half-life and a short one (so
#: cost and time trade off within the traces' few seconds), the random policies with their
#: default samples and few (so pinned-only samples, redraws and scans occur), one with a large
#: small queue, the partial-node pair also in drain mode and with micro batches of 1 and 2,
#: LHD and its cost-weighted variant with their default 64 samples and with few, the session
#: policies (session_random_compute also with few samples, session_s3fifo with a large S).
SPECS: list[tuple[str, dict[str, Any]]] = [
    ("lru", {}),
    ("fifo", {}),
    ("clock", {}),
    ("clock", {"bits": 2}),
    ("sieve", {}),
    ("lfu", {}),
    ("s3fifo", {}),
    ("s3fifo", {"small_ratio": 0.5}),
    ("slru", {}),
    ("slru", {"protected_ratio": 0.3}),
    ("twoq", {}),
    ("twoq", {"kin_ratio": 0.6, "kout_ratio": 0.2}),
    ("arc", {}),
    ("s3fifod", {}),
    ("s3fifod", {"small_ratio": 0.5}),
    ("gdsf", {}),
    ("gdsf_compute", {}),
    ("belady", {}),
    ("belady_compute", {}),
    ("lirs", {}),
    ("lirs", {"hir_ratio": 0.3}),
    ("wtinylfu", {}),
    ("wtinylfu", {"doorkeeper": False}),
    (
        "wtinylfu",
        {"window_ratio": 0.3, "protected_ratio": 0.5, "sketch_depth": 2, "sample_factor": 1},
    ),
    ("asym_cache", {}),
    ("asym_cache", {"half_life": 0.75}),
    ("random_compute", {}),
    ("random_compute", {"n_sample": 2}),
    ("random_compute_small_queue", {}),
    ("random_compute_small_queue", {"n_sample": 3, "small_ratio": 0.5}),
    ("workload_aware", {}),
    ("workload_aware", {"aging_period": 3}),
    ("partial_node_random_compute", {}),
    ("partial_node_random_compute", {"n_sample": 2, "eviction_mode": "drain"}),
    ("partial_node_random_compute", {"n_sample": 3, "micro_batch": 1}),
    ("partial_node_random_freq", {}),
    ("partial_node_random_freq", {"n_sample": 2, "micro_batch": 2}),
    ("partial_node_random_freq", {"eviction_mode": "drain"}),
    ("lhd", {}),
    ("lhd", {"n_sample": 2}),
    ("lhd_compute", {}),
    ("lhd_compute", {"n_sample": 3}),
    ("session_lru", {}),
    ("session_belady", {}),
    ("session_random_compute", {}),
    ("session_random_compute", {"n_sample": 2}),
    ("session_s3fifo", {}),
    ("session_s3fifo", {"small_ratio": 0.5}),
    ("session_arc", {}),
]
SESSION_SPECS = [spec for spec in SPECS if spec[0].startswith("session_")]
COST_MODELS = ["uniform", "linear:1,2", "position"]


def _served_future(requests: list[TraceRequest], capacity: int) -> FutureTable:
    """The future of ``requests`` as ``replay`` hands it to an oracle at ``capacity``."""
    served = distinct_counts([r.block_ids for r in requests]) <= capacity
    return without_skipped(build_future(requests), served)


def _feed(run: CompiledReplay, chunks: Iterable[BlockChunk], future: FutureTable) -> None:
    """Feed ``chunks`` in order, with their slices of ``future`` where the policy reads them:
    block oracles the next accesses of their blocks, session_belady their requests' next
    turns."""
    at = 0
    for chunk in chunks:
        n = len(chunk.blocks)
        first = chunk.first_index
        turns = future.session_next[first : first + chunk.n_requests]
        run.feed(
            chunk,
            future.next_access[at : at + n] if run.needs_future else None,
            turns if run.needs_session_future else None,
        )
        at += n


def _with_context(requests: list[TraceRequest], seed: int) -> list[TraceRequest]:
    """``requests`` with random contexts: timestamps from a few values in [0, 4) s (ties, out of
    order), types 0-2, turns 0-3 and sessions 0-4 or none (-1, each its own session; drawn
    from a second generator, so the other fields are what they were before sessions)."""
    rng = np.random.default_rng(seed)
    sessions = np.random.default_rng([seed, 1]).integers(-1, 5, size=len(requests)).tolist()
    return [
        replace(
            r,
            timestamp_s=float(rng.integers(0, 16)) / 4,
            type_id=int(rng.integers(0, 3)),
            turn=int(rng.integers(0, 4)),
            session_id=session,
        )
        for r, session in zip(requests, sessions, strict=True)
    ]


Outcome = ReplayResult | tuple[type[Exception], str]


def _outcome(run: Callable[[], ReplayResult]) -> Outcome:
    """``run()``, or the type and message of the error it raised: where a Python policy breaks
    the serve loop's contract, the compiled path must raise the same error (none is known to:
    LIRS did, in rare pinned states, until S was pruned after every push; see below)."""
    try:
        return run()
    except (RuntimeError, KeyError) as error:
        return type(error), str(error)


def _both(
    requests: list[TraceRequest],
    spec: tuple[str, dict[str, Any]],
    capacity: int,
    *,
    chunk_blocks: int,
    model: CostModel = UNIFORM,
    pin: bool = True,
    deep: bool = True,
    stop: bool = False,
    slots: int = 1024,
) -> tuple[Outcome, Outcome]:
    """(Python outcome, compiled outcome) of one configuration (``_outcome``); ``slots``: the
    compiled run's initial slot capacity (small: its arrays grow and its slots are recycled
    mid-chunk)."""
    name, params = spec
    options = {
        "match": "stop-at-first-miss" if stop else "all",
        "replay_order": "deepest-first" if deep else "prefix-order",
        "pin": pin,
    }
    expected = _outcome(
        lambda: replay(requests, make_policy(name, capacity, **params), cost_model=model, **options)  # type: ignore[arg-type]
    )
    run = CompiledReplay(name, capacity, params=params, cost_model=model, slots=slots, **options)  # type: ignore[arg-type]
    future = _served_future(requests, capacity)

    def compiled() -> ReplayResult:
        _feed(run, chunk_requests(requests, max_blocks=chunk_blocks), future)
        return run.result()

    return expected, _outcome(compiled)


@settings(max_examples=500, deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 14), max_size=9), max_size=40),
    spec=st.sampled_from(SPECS),
    capacity=st.integers(1, 10),
    chunk_blocks=st.integers(1, 30),
    cost=st.sampled_from(COST_MODELS),
    pin=st.booleans(),
    deep=st.booleans(),
    stop=st.booleans(),
    context=st.integers(0, 2**16),
)
def test_compiled_equals_python_on_arbitrary_traces(  # noqa: PLR0917  (hypothesis draws)
    lists: list[list[int]],
    spec: tuple[str, dict[str, Any]],
    capacity: int,
    chunk_blocks: int,
    cost: str,
    pin: bool,
    deep: bool,
    stop: bool,
    context: int,
) -> None:
    expected, got = _both(
        _with_context(as_requests(lists), context),
        spec,
        capacity,
        chunk_blocks=chunk_blocks,
        model=parse_cost_model(cost),
        pin=pin,
        deep=deep,
        stop=stop,
    )
    assert got == expected  # every field: ratios, counters, cost sums, warnings


@settings(max_examples=240, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    spec=st.sampled_from(SPECS),
    capacity=st.integers(1, 60),
    chunk_blocks=st.integers(1, 200),
    pin=st.booleans(),
    deep=st.booleans(),
    stop=st.booleans(),
)
def test_compiled_equals_python_on_prefix_traces(  # noqa: PLR0917  (hypothesis draws)
    seed: int,
    spec: tuple[str, dict[str, Any]],
    capacity: int,
    chunk_blocks: int,
    pin: bool,
    deep: bool,
    stop: bool,
) -> None:
    trace = _with_context(random_prefix_trace(np.random.default_rng(seed), 80), seed)
    expected, got = _both(
        trace, spec, capacity, chunk_blocks=chunk_blocks, pin=pin, deep=deep, stop=stop
    )
    assert got == expected


#: Cost models for belady_compute's cost buckets (``compiled._belady``): a bucket per position
#: (``position``, the measured Qwen model), positions sharing buckets (period 3), zero costs
#: beside positive ones, and costs that turn negative from position 5 on, so a run leaves the
#: lazy bucket heap for Python's per-call one when its first long request arrives (or starts
#: there). A bucket's blocks change when a block id comes back at another position.
BUCKET_MODELS = [
    parse_cost_model("position"),
    parse_cost_model("qwen3coder30b_blksz_16"),
    CostModel("period-3", lambda p: float(p % 3 + 1)),
    CostModel("zeros", lambda p: float(p % 2)),
    CostModel("signed", lambda p: 4.0 - p),
    CostModel("alternating", lambda p: -1.0 - p if p % 2 else 1.0 + p),
]


def _residents_per_chunk(
    requests: list[TraceRequest],
    capacity: int,
    model: CostModel,
    options: dict[str, Any],
    *,
    chunk_blocks: int,
    slots: int,
) -> tuple[list[set[int] | str], list[set[int] | str]]:
    """belady_compute's resident blocks after each chunk, (Python, compiled): the same sets
    mean the same victims, chunk by chunk. A run that raises ends its list with the error's
    type name."""
    policy = make_policy("belady_compute", capacity)
    run = CompiledReplay("belady_compute", capacity, cost_model=model, slots=slots, **options)
    future = _served_future(requests, capacity)
    rows = future.rows()
    python: list[set[int] | str] = []
    compiled: list[set[int] | str] = []
    at = 0
    for chunk in chunk_requests(requests, max_blocks=chunk_blocks):
        part = requests[chunk.first_index : chunk.first_index + chunk.n_requests]
        n = len(chunk.blocks)
        try:
            replay(part, policy, cost_model=model, future=islice(rows, len(part)), **options)
            python.append(set(policy.resident_view()))  # type: ignore[call-overload]
        except RuntimeError as error:
            python.append(type(error).__name__)
        try:
            run.feed(chunk, future.next_access[at : at + n])
            compiled.append(set(run._ids[run._res.astype(bool)].tolist()))
        except RuntimeError as error:
            compiled.append(type(error).__name__)
        at += n
        if isinstance(python[-1], str) or isinstance(compiled[-1], str):
            break
    return python, compiled


@settings(max_examples=300, deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 14), max_size=9), max_size=40),
    prefix_seed=st.integers(0, 2**32 - 1) | st.none(),
    model=st.sampled_from(BUCKET_MODELS),
    capacity=st.integers(1, 30),
    chunk_blocks=st.integers(1, 60),
    pin=st.booleans(),
    deep=st.booleans(),
    stop=st.booleans(),
    slots=st.sampled_from([4, 1024]),
)
def test_belady_compute_equals_python_under_position_costs(  # noqa: PLR0917  (hypothesis draws)
    lists: list[list[int]],
    prefix_seed: int | None,
    model: CostModel,
    capacity: int,
    chunk_blocks: int,
    pin: bool,
    deep: bool,
    stop: bool,
    slots: int,
) -> None:
    """The lazy bucket heap (and its fallback) against the Python policy: the same result and
    the same resident blocks after every chunk, on arbitrary traces (blocks move between
    buckets) and prefix traces (paths deepen, so buckets are added mid-run)."""
    requests = (
        as_requests(lists)
        if prefix_seed is None
        else random_prefix_trace(np.random.default_rng(prefix_seed), 120)
    )
    options = {
        "match": "stop-at-first-miss" if stop else "all",
        "replay_order": "deepest-first" if deep else "prefix-order",
        "pin": pin,
    }
    python, compiled = _residents_per_chunk(
        requests, capacity, model, options, chunk_blocks=chunk_blocks, slots=slots
    )
    assert compiled == python
    expected, got = _both(
        requests,
        ("belady_compute", {}),
        capacity,
        chunk_blocks=chunk_blocks,
        model=model,
        pin=pin,
        deep=deep,
        stop=stop,
        slots=slots,
    )
    assert got == expected


def test_the_random_traces_exercise_every_counter() -> None:
    """The cases above are not vacuous: skips, self-evictions and evictions all occur."""
    # Request 2 evicts block 1 of its own (LRU front, pinning off); request 3 is too long.
    trace = as_requests([[1, 2], [3, 4, 5], [1, 6, 7, 8, 9], [2, 9, 9, 10, 11, 12, 13]])
    expected, got = _both(trace, ("lru", {}), 5, chunk_blocks=3, pin=False)
    assert got == expected
    assert isinstance(got, ReplayResult)
    assert (got.n_req_skipped, got.n_eviction > 0, got.n_self_eviction > 0) == (1, True, True)
    assert len(got.warnings) == 2  # the skip and the self-evictions


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s[0]}{''.join(map(str, s[1].values()))}")
@pytest.mark.parametrize("capacity", [256, 4096])
def test_compiled_equals_python_on_a_real_trace_slice(
    spec: tuple[str, dict[str, Any]], capacity: int
) -> None:
    path = TRACES_DIR / "mooncake_conversation_trace.jsonl"
    n_requests = 4000  # the slice: the Python reader and loop on one side...
    requests = list(islice(open_trace(path), n_requests))
    expected = replay(requests, make_policy(spec[0], capacity, **spec[1]))
    run = CompiledReplay(spec[0], capacity, params=spec[1])  # ...the chunked reader and core
    left = n_requests
    sliced = []
    for chunk in ChunkPass(open_trace(path), skip_bad_lines=False):
        keep = min(chunk.n_requests, left)
        offsets = chunk.offsets[: keep + 1]
        assert chunk.timestamps is not None
        assert chunk.categories is not None
        assert chunk.sessions is not None
        cut = BlockChunk(
            chunk.blocks[: offsets[-1]],
            offsets,
            chunk.first_index,
            chunk.max_id,
            chunk.timestamps[:keep],
            chunk.categories[:keep],
            chunk.sessions[:keep],
        )
        sliced.append(cut)
        left -= keep
        if not left:
            break
    _feed(run, sliced, _served_future(requests, capacity))
    assert run.result() == expected
    assert expected.n_req == n_requests
    assert expected.n_eviction > 0


@pytest.mark.parametrize("spec", SESSION_SPECS, ids=lambda s: s[0] + "".join(map(str, s[1])))
@pytest.mark.parametrize(("n_sessions", "capacity"), [(40, 48), (400, 200)])
def test_session_policies_on_long_multi_turn_traces(
    spec: tuple[str, dict[str, Any]], n_sessions: int, capacity: int
) -> None:
    """Thousands of turns of many conversations, from a 4-slot start: the session table and
    the path pool grow, paths are replaced and compacted, ghosts come and go."""
    trace = random_prefix_trace(np.random.default_rng(n_sessions), 3000, sessions=n_sessions)
    expected, got = _both(trace, spec, capacity, chunk_blocks=5000, slots=4)
    assert got == expected
    assert isinstance(expected, ReplayResult)
    assert expected.n_eviction > 0


def test_lirs_keeps_its_capacity_when_pinned_evictions_take_its_lir_blocks() -> None:
    # Capacity 2 (LIR target 1): request [6, 7] evicts LIR 9 (Q holds only the pinned 7), S is
    # pruned empty, and 7, 6 are pushed onto it; S's bottom was then the HIR 7, which a later
    # demotion made resident again: "lirs: 3 resident blocks exceed 2".
    requests = as_requests([[9, 9, 7], [6, 7], [9, 9], [2]])
    python, compiled = _both(requests, ("lirs", {}), 2, chunk_blocks=3)
    assert isinstance(python, ReplayResult)
    assert compiled == python
    rng = np.random.default_rng(0)
    for _ in range(2000):  # 200,000 such traces gave 31 errors before the fix, none after
        capacity = int(rng.integers(2, 7))
        lists = [
            [int(b) for b in rng.integers(1, 10, size=int(rng.integers(1, capacity + 2)))]
            for _ in range(int(rng.integers(2, 12)))
        ]
        replay(as_requests(lists), make_policy("lirs", capacity))  # verify=True checks capacity


def test_every_policy_is_compiled_or_says_why_not() -> None:
    assert set(COMPILED) | set(PYTHON_ONLY) == set(POLICIES)
    assert not set(COMPILED) & set(PYTHON_ONLY)
    assert all(compiled_reason(name) is None for name in COMPILED)
    assert all(compiled_reason(name) == PYTHON_ONLY[name] for name in PYTHON_ONLY)
    assert compiled_reason("lru", holes=True) is not None


def test_bad_configurations_are_refused_like_the_python_policy() -> None:
    with pytest.raises(ValueError, match="no compiled path"):
        CompiledReplay("no_such_policy", 8)
    with pytest.raises(ValueError, match="match must be one of"):
        CompiledReplay("lru", 8, match="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bits must be between 1 and 8"):
        CompiledReplay("clock", 8, params={"bits": 9})
    with pytest.raises(TypeError, match="unknown parameters"):
        CompiledReplay("lru", 8, params={"speed": 1})
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        CompiledReplay("sieve", 0)


def test_the_cached_serve_loop_is_keyed_on_every_kernel_module() -> None:
    """numba keys a cached kernel on its own file only: each family's entry point closes over
    a hash of every kernel module (and its family), so editing any of them recompiles it
    (``_kernels`` docstring)."""
    here = Path(_kernels.__file__).parent
    with_kernels = {p.stem for p in here.glob("*.py") if "njit" in p.read_text()}
    assert with_kernels | {"_layout"} == set(_kernels.KERNEL_MODULES)
    for family, (_, kinds) in _kernels.FAMILIES.items():
        cells = [c.cell_contents for c in _kernels.serve_for(kinds[0]).py_func.__closure__]
        assert cells == [family, _kernels.SOURCE_KEY]
    assert _kernels.source_key() == _kernels.SOURCE_KEY


def test_a_context_policy_needs_its_context_in_the_chunk() -> None:
    """A chunk without the context a ``CONTEXT`` policy reads is refused, not served with a
    default (every reader fills it: ``tests/workload``, ``test_replay_cmd``)."""
    assert compiled_reason("asym_cache") is None
    chunk = next(chunk_requests(as_requests([[1, 2], [2, 3]])))
    assert chunk.timestamps is not None
    assert chunk.timestamps.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="reads request timestamps"):
        CompiledReplay("asym_cache", 4).feed(replace(chunk, timestamps=None))
    assert chunk.sessions is not None
    assert chunk.sessions.tolist() == [-1, -1]
    with pytest.raises(ValueError, match="reads request sessions"):
        CompiledReplay("session_lru", 4).feed(replace(chunk, sessions=None))


def test_requests_without_a_session_warn_once_as_the_python_policy_does() -> None:
    """The session policies number such requests as sessions of their own and warn once
    (``warnings``, and ``policy_warnings`` for ``kvplan replay`` to fold into the result)."""
    trace = as_requests([[1, 2], [2, 3], [4]])
    with pytest.warns(RuntimeWarning) as python:
        replay(trace, make_policy("session_arc", 3))
    run = CompiledReplay("session_arc", 3)
    with pytest.warns(RuntimeWarning) as compiled:
        _feed(run, chunk_requests(trace, max_blocks=2), _served_future(trace, 3))
    assert [str(w.message) for w in compiled] == [str(w.message) for w in python]
    assert run.policy_warnings == (str(python[0].message),)
    named = [replace(r, session_id=7) for r in trace]
    quiet = CompiledReplay("session_arc", 3)
    quiet.feed(next(chunk_requests(named)))
    assert quiet.policy_warnings == ()


def test_an_oracle_needs_the_future_and_no_other_policy_takes_one() -> None:
    chunk = next(chunk_requests(as_requests([[1, 2], [2, 3]])))
    with pytest.raises(ValueError, match="needs next-access"):
        CompiledReplay("belady", 4).feed(chunk)
    with pytest.raises(ValueError, match="takes no next-access"):
        CompiledReplay("lru", 4).feed(chunk, np.zeros(4, dtype=np.int64))
    with pytest.raises(ValueError, match="entries for 4 blocks"):
        CompiledReplay("belady", 4).feed(chunk, np.zeros(3, dtype=np.int64))
    # session_belady reads its requests' next turns, not its blocks' next accesses
    session = CompiledReplay("session_belady", 4)
    assert (session.needs_future, session.needs_session_future) == (False, True)
    with pytest.raises(ValueError, match="needs session next-turn annotations"):
        session.feed(chunk)
    with pytest.raises(ValueError, match="takes no next-access"):
        session.feed(chunk, np.zeros(4, dtype=np.int64), np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="session_next has 1 entries for 2 requests"):
        session.feed(chunk, None, np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match="takes no session next-turn"):
        CompiledReplay("belady", 4).feed(chunk, np.zeros(4, np.int64), np.zeros(2, np.int64))
