"""Speed of ``kvplan analyze`` on a large synthetic chat trace (default 10 M block accesses).

    python bench/analyze_speed.py [--accesses 10e6] [--check 3] [--lcp DIR]

Builds the chat workload of ``replay_speed.py`` (``_chat_trace.py``) in memory, then times, in
CPU seconds of this process: flattening it into arrays, the one-pass exact LRU curve (the numba
stack-distance kernel, warmed up first so compilation is not counted), the extra passes below
the largest request, and every distribution. ``--check N`` replays LRU at N curve sizes with
``simulator.kvcache.replay`` and prints the largest absolute difference (must be 0).
``--lcp DIR`` also writes the trace as ``DIR/chat.lcp.zst`` and times ``kvplan analyze`` on it
end to end in a fresh process (wall seconds: reading and decompressing included).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _chat_trace import ChatShape, chat_turns

from simulator.kvcache.analyze import analyze, default_low_sizes
from simulator.kvcache.lru_curve import TraceArrays, lru_curve
from simulator.kvcache.policies import make_policy
from simulator.kvcache.replay import replay
from simulator.kvcache.stack_distance import stack_pass
from simulator.workload import TraceRequest

CHAT = ChatShape(
    prompts=200,
    prompt_blocks=(8, 64),
    turn_blocks=(2, 40),
    mean_turns=5.0,
    active_sessions=512,
    max_context_blocks=400,
    first_id=1,
)


def build(n_accesses: int, seed: int) -> list[TraceRequest]:
    return [
        TraceRequest(i, i * 0.05, 512 * len(ids), 128, tuple(ids), session_id=conv, turn=turn)
        for i, (conv, turn, ids) in enumerate(chat_turns(n_accesses, CHAT, seed))
    ]


def timed(label: str, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.process_time()
    out = fn(*args, **kwargs)
    print(f"{label:<44} {time.process_time() - start:8.2f} CPU s")
    return out


def write_lcp(requests: list[TraceRequest], path: Path) -> None:
    """The trace as Mooncake JSONL, converted by ``kvplan convert`` (prefix interning)."""
    jsonl = path.with_name("chat.jsonl")
    with jsonl.open("w", encoding="utf-8") as out:
        for r in requests:
            out.write(
                f'{{"timestamp": {round(r.timestamp_s * 1000)}, "input_length":'
                f' {r.input_length}, "output_length": {r.output_length},'
                f' "hash_ids": [{", ".join(map(str, r.block_ids))}]}}\n'
            )
    convert = [sys.executable, "-m", "optimizer.cli", "convert", str(jsonl), str(path)]
    subprocess.run(convert, check=True, capture_output=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", type=float, default=10e6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", type=int, default=0, help="LRU replays to compare with")
    parser.add_argument("--lcp", type=Path, default=None, help="directory for an lcp.zst copy")
    args = parser.parse_args(argv)
    requests = timed(
        "build the chat trace (Python generator)", build, int(args.accesses), args.seed
    )
    arrays = timed("flatten into arrays", TraceArrays.from_requests, requests)
    print(f"{arrays.n_requests:,} requests, {len(arrays.ids):,} block accesses,"
          f" {arrays.n_ids:,} unique blocks")  # fmt: skip
    tiny = TraceArrays.from_requests(requests[:50])
    timed("numba warm-up (compile or load cache)", stack_pass, tiny.ids, tiny.offsets, tiny.n_ids)
    timed("one-pass exact curve (all sizes >= d_max)", lru_curve, arrays)
    result = timed("kvplan analyze computation (all of it)", analyze, arrays, 512)
    low = default_low_sizes(result.curve.d_max)
    print(f"  of which {len(low)} extra passes below d_max = {result.curve.d_max}: {low}")
    if args.check:
        sizes = np.geomspace(result.curve.d_max, arrays.n_ids, args.check).round().astype(int)
        worst = 0.0
        for size in sizes.tolist():
            start = time.process_time()
            replayed = replay(requests, make_policy("lru", size))
            point = result.curve.at(size)
            worst = max(worst, abs(point.block_hit_ratio - replayed.block_hit_ratio))
            cpu = time.process_time() - start
            print(f"  lru replay @ {size:,}: {replayed.block_hit_ratio:.6f} vs curve"
                  f" {point.block_hit_ratio:.6f} ({cpu:.1f} CPU s)")  # fmt: skip
        print(f"max |curve - replay| over {len(sizes)} sizes: {worst:.3g}")
    if args.lcp is not None:
        path = args.lcp / "chat.lcp.zst"
        timed("write JSONL + kvplan convert to lcp.zst", write_lcp, requests, path)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "optimizer.cli", "analyze", str(path), "--json"],
            check=True,
            capture_output=True,
        )
        print(f"{'kvplan analyze FILE.lcp.zst --json (process)':<44} "
              f"{time.perf_counter() - start:8.2f} wall s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
