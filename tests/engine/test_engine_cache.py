"""Prefix hits across tiers: what they save, when loads finish, where copies go."""

from __future__ import annotations

import pytest
from engine_helpers import make_rig, request

from simulator.engine import LinearLatency

BASE, PER_TOKEN = 0.01, 0.001  # a step costs 10 ms + 1 ms per token processed
PROMPT = tuple(range(1, 11))  # 10 blocks = 160 tokens


def _timer() -> LinearLatency:
    return LinearLatency(BASE, PER_TOKEN)


def test_l1_hit_lowers_ttft_by_exactly_the_saved_prefill() -> None:
    rig = make_rig(_timer(), l1=64)
    rig.arrive(request(0, 0.0, 160, 1, PROMPT), request(1, 5.0, 160, 1, PROMPT))
    recs = rig.run()
    cold, warm = recs[0], recs[1]
    assert cold.ttft_s == pytest.approx(BASE + 160 * PER_TOKEN)
    # Every prompt token hits, so only the last one is computed (vLLM).
    assert warm.cached_l1_tokens == 159
    assert warm.ttft_s == pytest.approx(BASE + 1 * PER_TOKEN)
    assert cold.ttft_s - warm.ttft_s == pytest.approx(159 * PER_TOKEN)


def test_partial_prefix_hit_stops_at_the_first_miss() -> None:
    rig = make_rig(_timer(), l1=64)
    shared = PROMPT[:4]
    rig.arrive(
        request(0, 0.0, 160, 1, PROMPT),
        # Shares 4 blocks, then diverges; block 6 (=PROMPT[5]) would hit past the gap.
        request(1, 5.0, 160, 1, (*shared, 99, PROMPT[5], 98, 97, 96, 95)),
    )
    recs = rig.run()
    assert recs[1].cached_l1_tokens == 4 * 16
    assert recs[1].computed_tokens == 160 - 64


def test_l2_hit_loads_before_prefill_and_overlaps_nothing_when_idle() -> None:
    # L1 holds 10 blocks: request 1 (other blocks) evicts request 0's blocks from L1; write-
    # through left copies in L2. Request 2 then hits L2 for all 10 blocks; each block takes
    # 5 ms to load, so its prefill starts 50 ms after admission.
    rig = make_rig(_timer(), l1=10, l2=64, load_s_per_block=0.005)
    rig.arrive(
        request(0, 0.0, 160, 1, PROMPT),
        request(1, 1.0, 160, 1),
        request(2, 2.0, 160, 1, PROMPT),
    )
    recs = rig.run()
    hit = recs[2]
    assert hit.cached_l2_tokens == 159
    assert hit.cached_l1_tokens == 0
    assert hit.ttft_s == pytest.approx(10 * 0.005 + BASE + PER_TOKEN)


def test_load_overlaps_the_steps_in_progress() -> None:
    # Request 1 (12 blocks) evicts request 0's blocks from L1 (12 slots). Requests 4 and 3
    # arrive together and are admitted at 2.0: 4 prefills at once (16 tokens: 26 ms) then
    # decodes (11 ms steps); 3 loads its 10 L2 blocks (50 ms) meanwhile and joins the first
    # step that starts at or after 2.05.
    rig = make_rig(_timer(), l1=12, l2=64, load_s_per_block=0.005)
    rig.arrive(
        request(0, 0.0, 160, 1, PROMPT),
        request(1, 1.0, 192, 1),
        request(4, 2.0, 16, 40),
        request(3, 2.0, 160, 1, PROMPT),
    )
    recs = rig.run()
    assert recs[3].waiting_queue_s == 0.0
    boundary = 2.0 + BASE + 16 * PER_TOKEN
    while boundary < 2.05 - 1e-12:
        boundary += BASE + PER_TOKEN
    assert boundary == pytest.approx(2.059)
    # That step carries request 4's decode token and request 3's one computed token.
    assert recs[3].first_token_s == pytest.approx(boundary + BASE + 2 * PER_TOKEN)
    assert recs[3].cached_l2_tokens == 159


def test_write_back_copies_to_l2_only_on_eviction() -> None:
    for write_through, in_l2_before_eviction in ((True, True), (False, False)):
        rig = make_rig(_timer(), l1=10, l2=64, write_through=write_through)
        rig.arrive(request(0, 0.0, 160, 1, PROMPT))
        rig.run()
        l2 = rig.instance.kv.l2
        assert l2 is not None
        assert all(l2.has(b) for b in PROMPT) is in_l2_before_eviction
        rig.arrive(request(1, 1.0, 160, 1))  # evicts request 0's blocks from L1
        rig.run()
        assert all(l2.has(b) for b in PROMPT)


def test_finished_request_keeps_its_blocks_cached_and_tail_is_evicted_first() -> None:
    rig = make_rig(_timer(), l1=12)
    rig.arrive(request(0, 0.0, 160, 1, PROMPT), request(1, 1.0, 48, 1))
    rig.run()
    l1 = rig.instance.kv.l1
    assert l1.pins == {}
    assert l1.private == 0
    # 13 blocks demanded of 12 slots: exactly one of request 0's evicted, its deepest block.
    assert [b for b in PROMPT if not l1.has(b)] == [PROMPT[-1]]
