"""Replay speed: block accesses per second of the PrefixSim serve loop, per eviction policy.

Usage::

    python bench/replay_speed.py                      # every registry policy, 10 M accesses
    python bench/replay_speed.py --accesses 1e6 --algo lru,fifo
    python bench/replay_speed.py --algo lru --profile # cProfile of one run, top 25 entries

The trace is synthetic, deterministic for ``--seed`` and shaped like multi-turn chat traffic
(``_chat_trace.py``): requests share one of ``--prompts`` system prompts (Zipf popularity) and
then the growing history of their conversation, so prefixes are reused at many depths. It is
generated once, before any timing; oracle annotations (for ``needs_next_access`` policies) are
built once too and are not timed. One block access = one block of one request (probed in
phase 1 and replayed in phase 3). Single-threaded; run on an otherwise idle core for stable
numbers.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from operator import itemgetter

from _chat_trace import ChatShape, chat_turns

from simulator.kvcache.policies import POLICIES, make_policy
from simulator.kvcache.replay import ReplayResult, replay
from simulator.workload.future import FutureTable, build_future
from simulator.workload.request import TraceRequest

#: Multi-turn chat traffic with long prompts and long conversations (``--prompts`` overrides).
CHAT = ChatShape(
    prompts=200,
    prompt_blocks=(8, 64),
    turn_blocks=(2, 40),
    mean_turns=5.0,
    active_sessions=512,
    max_context_blocks=400,
    first_id=1,
)


def synthetic_trace(n_accesses: int, *, prompts: int, seed: int) -> list[TraceRequest]:
    """Requests totalling at least ``n_accesses`` blocks (prefix-unique interned ids).

    Block id objects are shared between the requests that reuse them (``itemgetter`` over one
    pool), so the trace costs about 8 bytes per access.
    """
    requests: list[TraceRequest] = []
    for session, turn, context in chat_turns(n_accesses, replace(CHAT, prompts=prompts), seed):
        requests.append(
            TraceRequest(
                index=len(requests),
                timestamp_s=len(requests) * 0.01,
                input_length=16 * len(context),
                output_length=16,
                block_ids=tuple(context),
                session_id=session,
                turn=turn,
            )
        )
    n_ids = 1 + max((max(r.block_ids) for r in requests), default=0)
    return _share_ids(requests, n_ids)


def _share_ids(requests: list[TraceRequest], n_ids: int) -> list[TraceRequest]:
    """Rebuild every tuple from one pool of int objects (memory: one pointer per access)."""
    pool = list(range(n_ids))
    shared = []
    for request in requests:
        ids = request.block_ids
        picked = itemgetter(*ids)(pool) if len(ids) > 1 else (pool[ids[0]],)
        shared.append(replace(request, block_ids=picked))
    return shared


def time_policy(
    name: str,
    trace: Sequence[TraceRequest],
    cache_size: int,
    future: FutureTable | None,
    seed: int,
) -> tuple[ReplayResult, float]:
    """Replay the whole trace once; return the result and the CPU time in seconds.

    CPU time of this process, not wall time: on a shared machine it is the stabler measure of
    what one core does (the replay is single-threaded and does no I/O).
    """
    policy = make_policy(name, cache_size, seed=seed)
    rows = future.rows() if (future is not None and policy.needs_next_access) else None
    start = time.process_time()
    result = replay(trace, policy, future=rows)
    return result, time.process_time() - start


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, build the trace, time each policy, print one line per policy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", type=float, default=10e6, help="block accesses (≥)")
    parser.add_argument("--cache-size", type=int, default=32_768, help="capacity, blocks")
    parser.add_argument("--algo", default=",".join(POLICIES), help="comma-separated names")
    parser.add_argument("--prompts", type=int, default=CHAT.prompts, help="distinct prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="cProfile the first policy")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.algo.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        parser.error(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}")

    start = time.perf_counter()
    trace = synthetic_trace(int(args.accesses), prompts=args.prompts, seed=args.seed)
    n_blocks = sum(len(r.block_ids) for r in trace)
    print(
        f"trace: {len(trace):,} requests, {n_blocks:,} block accesses, "
        f"cache {args.cache_size:,} blocks (built in {time.perf_counter() - start:.1f} s)"
    )
    future = build_future(trace) if any(POLICIES[n].needs_next_access for n in names) else None

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        time_policy(names[0], trace, args.cache_size, future, args.seed)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        return 0

    print(f"{'policy':<28} {'accesses/s':>12} {'cpu s':>8} {'hit ratio':>9}")
    for name in names:
        result, seconds = time_policy(name, trace, args.cache_size, future, args.seed)
        rate = result.n_blocks / seconds
        print(f"{name:<28} {rate:>12,.0f} {seconds:>8.2f} {result.block_hit_ratio:>9.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
