"""Replay speed: ``kvplan replay`` end to end against a plain-Python loop, and per policy.

Usage::

    python bench/replay_speed.py                      # end to end, 10 M-block JSONL, lru @ 16k
    python bench/replay_speed.py --accesses 1e6 --repeats 1 --keep DIR
    python bench/replay_speed.py --serve-loop         # per policy: serve loop only, 10 M
    python bench/replay_speed.py --serve-loop --accesses 1e6 --algo lru,fifo
    python bench/replay_speed.py --serve-loop --algo lru --profile  # cProfile, top 25
    python bench/replay_speed.py --serve-loop --algo belady_compute --cost-model position

**End to end** (the default): writes a Mooncake JSONL trace of ``--accesses`` block accesses
(``replay_memory.write_jsonl``: many short multi-turn requests, about 40 blocks each) and its
``.lcp.zst`` conversion, then runs, each in a fresh process, ``--repeats`` times round-robin:
the 60-line pure-Python reference loop below (``json.loads``, a ``(parent, raw) -> id`` dict,
an ``OrderedDict`` LRU with pinning: the same serve loop, hit for hit), ``kvplan replay`` on
the JSONL and on the ``.lcp.zst`` file (compiled core), the same two with ``--engine python``
(the Python serve loop and readers), and ``replay --list-policies`` (start-up alone); then, for
every compiled policy named by ``--algo`` (default: all of them), ``kvplan replay`` of the
``.lcp.zst`` file with that policy alone, and one call with all of them (one read of the trace
feeding every policy; its blocks/s counts every policy's blocks). Each row is the median of the
children's CPU seconds (user + system, ``os.wait4``). Numba's compilation
is cached in a directory of the bench (``NUMBA_CACHE_DIR``): a first, uncounted run of each
compiled row fills it, and its extra CPU over that row's median is reported as the first-call
(compile) cost.

**Serve loop** (``--serve-loop``): the trace is synthetic, deterministic for ``--seed`` and
shaped like multi-turn chat traffic (``_chat_trace.py``): requests share one of ``--prompts``
system prompts (Zipf popularity) and then the growing history of their conversation, so
prefixes are reused at many depths. It is generated once, before any timing; oracle
annotations (for ``needs_next_access`` policies) are built once too and are not timed. One
block access = one block of one request (probed in phase 1 and replayed in phase 3).
Policies with a compiled path are timed on it too, from chunks packed before timing (its
compilation is warmed up on a tiny trace first and reported apart). ``--cost-model`` takes a
``kvplan replay --cost-model`` spec (uniform by default) for both loops, so cost-aware policies
can be timed with costs that vary by position. Single-threaded; run on
an otherwise idle core for stable numbers.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from operator import itemgetter
from pathlib import Path

from _chat_trace import ChatShape, chat_turns
from replay_memory import write_jsonl

from simulator.kvcache.compiled import COMPILED, CompiledReplay
from simulator.kvcache.cost import UNIFORM, CostModel, parse_cost_model
from simulator.kvcache.policies import POLICIES, make_policy
from simulator.kvcache.replay import ReplayResult, replay
from simulator.kvcache.served_future import distinct_counts, without_skipped
from simulator.workload.chunks import BlockChunk, chunk_requests
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


def reference_loop(path: Path, capacity: int) -> dict[str, float]:
    """PrefixSim's serve loop for LRU in plain Python, from the JSONL file to the hit ratio.

    What ``kvplan replay --algo lru`` computes (prefix interning, skip, match, pinned
    allocation, deepest-first access), written the obvious way: the yardstick of issue 14.
    """
    table: dict[tuple[int, int], int] = {}
    lru: OrderedDict[int, None] = OrderedDict()  # least recently used first
    n_req = n_blocks = hits = 0
    with path.open("rb") as lines:
        for line in lines:
            parent = 0
            ids = []
            for raw in json.loads(line)["hash_ids"]:
                key = (parent, raw)
                parent = table.get(key, 0)
                if not parent:
                    parent = table[key] = len(table) + 1
                ids.append(parent)
            if len(ids) > capacity:  # prefix ids never repeat inside a request
                continue
            n_req += 1
            n_blocks += len(ids)
            resident = sum(1 for b in ids if b in lru)
            hits += resident
            needed = len(ids) - resident - (capacity - len(lru))
            if needed > 0:  # evict the oldest blocks outside the request (it is pinned)
                alpha = set(ids)
                victims = []
                for b in lru:
                    if b not in alpha:
                        victims.append(b)
                        if len(victims) == needed:
                            break
                for b in victims:
                    del lru[b]
            for b in reversed(ids):
                if b in lru:
                    lru.move_to_end(b)
                else:
                    lru[b] = None
    return {"n_req": n_req, "n_blocks": n_blocks, "block_hit_ratio": hits / max(n_blocks, 1)}


def child_cpu(argv: Sequence[str], env: dict[str, str]) -> tuple[float, dict[str, float]]:
    """Run ``argv``; return its CPU seconds (user + system, its own rusage) and JSON result."""
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed")
        out.seek(0)
        text = out.read().decode()
    result = json.loads(text) if text.lstrip()[:1] in "[{" else {}
    if isinstance(result, list):
        result = result[0] if result and "n_blocks" in result[0] else {}
    return usage.ru_utime + usage.ru_stime, result


def end_to_end(args: argparse.Namespace, policies: Sequence[str]) -> int:
    """The default mode; see the module docstring. ``policies``: the compiled ones to time
    end to end from ``.lcp.zst`` besides lru, each alone and all in one call."""
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        jsonl = workdir / "chat.jsonl"
        lcp = workdir / "chat.lcp.zst"
        env = {**os.environ, "NUMBA_CACHE_DIR": str(workdir / "numba-cache")}
        kvplan = [sys.executable, "-m", "optimizer.cli"]
        if not (jsonl.exists() and lcp.exists()):
            start = time.perf_counter()
            write_jsonl(jsonl, int(args.accesses), args.seed)
            subprocess.run([*kvplan, "convert", str(jsonl), str(lcp)], check=True, env=env)
            print(f"trace written and converted in {time.perf_counter() - start:.0f} s")
        size = ("--cache-size", str(args.cache_size), "--json")
        lru = ("--algo", "lru", *size)
        rows = {
            "reference loop, JSONL": [sys.executable, __file__, "--reference-loop", str(jsonl),
                                      "--cache-size", str(args.cache_size)],
            "kvplan replay, JSONL": [*kvplan, "replay", str(jsonl), *lru],
            "kvplan replay, .lcp.zst": [*kvplan, "replay", str(lcp), *lru],
            "--engine python, JSONL": [*kvplan, "replay", str(jsonl), *lru, "--engine", "python"],
            "--engine python, .lcp.zst": [*kvplan, "replay", str(lcp), *lru, "--engine", "python"],
            "start-up (--list-policies)": [*kvplan, "replay", "--list-policies", "--json"],
        }  # fmt: skip
        lru_rows = [name for name in rows if "start-up" not in name]  # must agree on the ratio
        others = [name for name in policies if name != "lru"]
        for name in others:
            rows[f".lcp.zst, {name}"] = [*kvplan, "replay", str(lcp), "--algo", name, *size]
        runs = dict.fromkeys(rows, 1)  # replays per row, for the blocks/s column
        if others:
            together = ",".join(["lru", *others])
            rows[f".lcp.zst, {together}"] = [*kvplan, "replay", str(lcp), "--algo", together, *size]
            runs[f".lcp.zst, {together}"] = 1 + len(others)
            lru_rows.append(f".lcp.zst, {together}")  # its first result is lru's
        compiled = ("kvplan replay, JSONL", "kvplan replay, .lcp.zst")
        first = {name: child_cpu(rows[name], env)[0] for name in compiled}  # fill numba's cache
        for name in others:  # each policy's kernels compile on first use: not timed either
            child_cpu(rows[f".lcp.zst, {name}"], env)
        times: dict[str, list[float]] = {name: [] for name in rows}
        results: dict[str, dict[str, float]] = {}
        for _ in range(args.repeats):
            for name, argv in rows.items():
                seconds, results[name] = child_cpu(argv, env)
                times[name].append(seconds)
    reference = statistics.median(times["reference loop, JSONL"])
    print(f"{'run (CPU s, median of ' + str(args.repeats) + ')':<30} {'cpu s':>7} {'x ref':>6}"
          f" {'M blocks/s':>10} {'hit ratio':>9}")  # fmt: skip
    for name, seconds in times.items():
        cpu = statistics.median(seconds)
        result = results[name]
        blocks = result["n_blocks"] * runs[name] if result else 0
        rate = f"{blocks / cpu / 1e6:>10.2f}" if result else f"{'-':>10}"
        hit = f"{result['block_hit_ratio']:>9.6f}" if result else f"{'-':>9}"
        print(f"{name:<30} {cpu:>7.2f} {cpu / reference:>6.2f} {rate} {hit}")
    n_blocks = results["reference loop, JSONL"]["n_blocks"]
    n_req = results["reference loop, JSONL"]["n_req"]
    print(f"trace: {n_req:,} requests, {n_blocks:,} block accesses; cache {args.cache_size:,}")
    for name, seconds in first.items():
        extra = seconds - statistics.median(times[name])
        print(f"first call, {name} (numba compiles, empty cache): +{extra:.2f} s CPU")
    ratios = {round(results[name]["block_hit_ratio"], 12) for name in lru_rows}
    if len(ratios) != 1:
        raise SystemExit(f"the lru runs disagree: {ratios}")
    return 0


def time_policy(
    name: str,
    trace: Sequence[TraceRequest],
    cache_size: int,
    future: FutureTable | None,
    seed: int,
    *,
    cost_model: CostModel = UNIFORM,
) -> tuple[ReplayResult, float]:
    """Replay the whole trace once; return the result and the CPU time in seconds.

    CPU time of this process, not wall time: on a shared machine it is the stabler measure of
    what one core does (the replay is single-threaded and does no I/O).
    """
    policy = make_policy(name, cache_size, seed=seed)
    rows = future.rows() if (future is not None and policy.needs_next_access) else None
    start = time.process_time()
    result = replay(trace, policy, future=rows, cost_model=cost_model)
    return result, time.process_time() - start


def feed_all(run: CompiledReplay, chunks: Iterable[BlockChunk], future: FutureTable | None) -> None:
    """Feed ``run`` the chunks of a trace from its start, with the slices of ``future`` (the
    served trace's) that its policy reads."""
    oracle = run.needs_future or run.needs_session_future
    at = 0
    for chunk in chunks:
        run.feed_served(chunk, future if oracle else None, at)
        at += len(chunk.blocks)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, build the trace, time each policy, print one line per policy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", type=float, default=10e6, help="block accesses (≥)")
    parser.add_argument("--cache-size", type=int, help="capacity, blocks (16384; 32768)")
    parser.add_argument("--serve-loop", action="store_true", help="per policy, in memory")
    parser.add_argument("--repeats", type=int, default=3, help="end to end: runs per row")
    parser.add_argument("--keep", type=Path, help="end to end: directory for the traces")
    parser.add_argument("--reference-loop", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--algo", default=",".join(POLICIES), help="comma-separated names")
    parser.add_argument("--prompts", type=int, default=CHAT.prompts, help="distinct prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="cProfile the first policy")
    parser.add_argument("--cost-model", default="uniform", help="serve loop: a cost model spec")
    args = parser.parse_args(argv)
    if args.reference_loop is not None:
        print(json.dumps(reference_loop(args.reference_loop, args.cache_size)))
        return 0
    names = [name.strip() for name in args.algo.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        parser.error(f"unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}")
    if not args.serve_loop:
        args.cache_size = args.cache_size or 16_384
        return end_to_end(args, [name for name in names if name in COMPILED])
    args.cache_size = args.cache_size or 32_768
    model = parse_cost_model(args.cost_model)

    start = time.perf_counter()
    trace = synthetic_trace(int(args.accesses), prompts=args.prompts, seed=args.seed)
    n_blocks = sum(len(r.block_ids) for r in trace)
    print(
        f"trace: {len(trace):,} requests, {n_blocks:,} block accesses, "
        f"cache {args.cache_size:,} blocks (built in {time.perf_counter() - start:.1f} s), "
        f"cost model {args.cost_model}"
    )
    future = build_future(trace) if any(POLICIES[n].needs_next_access for n in names) else None
    if future is not None:  # what replay() hands an oracle: skipped requests left out
        served = distinct_counts([r.block_ids for r in trace]) <= args.cache_size
        future = without_skipped(future, served)

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        time_policy(names[0], trace, args.cache_size, future, args.seed, cost_model=model)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        return 0

    chunks = list(chunk_requests(trace)) if any(n in COMPILED for n in names) else []
    start = time.process_time()
    for name in names:  # numba compiles (or loads) each policy family's kernels on first use
        if name in COMPILED:
            feed_all(CompiledReplay(name, args.cache_size, seed=args.seed, cost_model=model),
                     chunk_requests(trace[:50]), future)  # fmt: skip
    print(f"compiled core: first calls {time.process_time() - start:.2f} s CPU (not in the table)")
    print(f"{'policy':<28} {'python acc/s':>12} {'cpu s':>7} {'compiled acc/s':>14} {'cpu s':>6}"
          f" {'hit ratio':>9}")  # fmt: skip
    for name in names:
        result, seconds = time_policy(
            name, trace, args.cache_size, future, args.seed, cost_model=model
        )
        fast = f"{'-':>14} {'-':>6}"
        if name in COMPILED:
            run = CompiledReplay(name, args.cache_size, seed=args.seed, cost_model=model)
            start = time.process_time()
            feed_all(run, chunks, future)
            elapsed = time.process_time() - start
            if run.result() != result:
                raise SystemExit(f"{name}: the compiled core disagrees with the Python loop")
            fast = f"{result.n_blocks / elapsed:>14,.0f} {elapsed:>6.2f}"
        rate = result.n_blocks / seconds
        print(f"{name:<28} {rate:>12,.0f} {seconds:>7.2f} {fast} {result.block_hit_ratio:>9.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
