"""Synthetic workload generators: determinism, rates, block-id reuse, closed loop."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simulator.workload.synthetic import (
    BlockIds,
    ClosedLoopSource,
    Empirical,
    Exponential,
    Fixed,
    GammaArrivals,
    LogNormal,
    PoissonArrivals,
    SessionShape,
    TokenSequence,
    Uniform,
    open_loop,
    sessions,
)

BT = 16


def _open(seed: int, **kw: object) -> list:  # type: ignore[type-arg]
    args: dict[str, object] = {
        "n_requests": 500,
        "arrivals": PoissonArrivals(10.0),
        "input_tokens": Uniform(10, 200),
        "output_tokens": Fixed(8),
        "block_tokens": BT,
        "rng": np.random.default_rng(seed),
    }
    args.update(kw)
    return list(open_loop(**args))  # type: ignore[arg-type]


def test_open_loop_is_deterministic_for_a_seed() -> None:
    assert _open(1) == _open(1)
    assert _open(1) != _open(2)


def test_open_loop_rate_lengths_and_block_counts() -> None:
    reqs = _open(0, n_requests=20_000)
    times = np.array([r.timestamp_s for r in reqs])
    assert np.all(np.diff(times) >= 0)
    assert len(reqs) / times[-1] == pytest.approx(10.0, rel=0.03)
    for r in reqs[:200]:
        assert 10 <= r.input_length <= 200
        assert r.output_length == 8
        assert len(r.block_ids) == -(-r.input_length // BT)
    all_ids = [b for r in reqs for b in r.block_ids]
    assert len(all_ids) == len(set(all_ids))  # no shared prefix: every block is fresh


def test_gamma_arrivals_have_the_requested_rate_and_burstiness() -> None:
    gaps = GammaArrivals(5.0, 3.0).gaps(np.random.default_rng(0), 200_000)
    assert 1 / gaps.mean() == pytest.approx(5.0, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.05)


def test_distributions() -> None:
    rng = np.random.default_rng(0)
    assert LogNormal(100, 0.0).sample(rng, 3) == pytest.approx([100.0] * 3)
    clipped = LogNormal(100, 2.0, low=50, high=150).sample(rng, 1000)
    assert clipped.min() >= 50
    assert clipped.max() <= 150
    assert Exponential(2.0).sample(rng, 100_000).mean() == pytest.approx(2.0, rel=0.02)
    assert set(Empirical((3.0, 7.0)).sample(rng, 100).tolist()) == {3.0, 7.0}


def test_system_prompts_share_their_full_blocks() -> None:
    reqs = _open(0, system_prompts=(2, 40))  # 2 full blocks + 8 tokens per system prompt
    heads = {r.block_ids[:2] for r in reqs}
    assert len(heads) == 2
    assert all(r.input_length >= 40 + 10 for r in reqs)


def test_token_sequence_keeps_full_blocks_and_renews_the_tail() -> None:
    ids = BlockIds()
    seq = TokenSequence(BT)
    seq.extend(40, ids)  # blocks 1, 2 full; 8 tokens of tail
    first = seq.prompt_blocks(ids)  # tail gets id 3
    seq.extend(30, ids)  # 38 tail tokens -> 2 more full blocks (4, 5), 6 tokens of tail
    second = seq.prompt_blocks(ids)
    assert first == (1, 2, 3)
    assert second == (1, 2, 4, 5, 6)
    assert seq.tokens == 70


def test_sessions_extend_the_previous_turn_with_its_answer() -> None:
    shape = SessionShape(
        turns=Fixed(3), user_tokens=Fixed(50), output_tokens=Fixed(20), think_time_s=Fixed(1.0)
    )
    reqs = sessions(
        n_sessions=10,
        arrivals=PoissonArrivals(1.0),
        shape=shape,
        block_tokens=BT,
        rng=np.random.default_rng(0),
    )
    assert len(reqs) == 30
    by_session: dict[int, list] = {}  # type: ignore[type-arg]
    for r in reqs:
        by_session.setdefault(r.session_id, []).append(r)
    for turns in by_session.values():
        assert [t.turn for t in turns] == [1, 2, 3]
        assert [t.input_length for t in turns] == [50, 120, 190]
        for prev, nxt in itertools.pairwise(turns):
            assert nxt.timestamp_s == pytest.approx(prev.timestamp_s + 1.0)
            full = prev.input_length // BT
            assert nxt.block_ids[:full] == prev.block_ids[:full]
    assert [r.index for r in reqs] == list(range(30))
    assert all(a.timestamp_s <= b.timestamp_s for a, b in itertools.pairwise(reqs))


def test_closed_loop_source_issues_the_next_request_on_finish() -> None:
    shape = SessionShape(
        turns=Fixed(2), user_tokens=Fixed(20), output_tokens=Fixed(5), think_time_s=Fixed(0.5)
    )
    source = ClosedLoopSource(
        users=3,
        n_requests=7,
        shape=shape,
        block_tokens=BT,
        rng=np.random.default_rng(0),
        ramp_s=0.1,
    )
    first = list(source.start())
    assert [r.timestamp_s for r in first] == [0.0, 0.1, 0.2]
    follow = source.on_finish(first[0], 2.0)
    assert follow is not None
    assert follow.timestamp_s == pytest.approx(2.5)
    assert follow.session_id == first[0].session_id
    assert follow.turn == 2
    assert follow.input_length == 20 + 5 + 20
    # Third turn of user 0 starts a new session (2 turns each).
    third = source.on_finish(follow, 3.0)
    assert third is not None
    assert third.session_id != follow.session_id
    issued = 5
    for r in first[1:]:
        if source.on_finish(r, 4.0) is not None:
            issued += 1
    assert issued == 7
    assert source.on_finish(third, 5.0) is None  # the budget of 7 requests is spent
