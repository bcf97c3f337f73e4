"""Replay memory: peak RSS of ``kvplan replay`` on a trace and on the same process 10× longer.

Usage::

    python bench/replay_memory.py                       # 300 k and 3 M block accesses, lru @ 8k
    python bench/replay_memory.py --accesses 1e5 --scale 4 --algo sieve --keep DIR

Writes a deterministic synthetic multi-turn chat trace (Mooncake JSONL: 512-token blocks,
``hash_ids``) at 1× and ``--scale``× the number of block accesses. The generator is stationary
(the same sessions, prompt popularity and turn lengths throughout), so the longer trace is the
same workload for longer: its distinct blocks grow with its length, its working set does not.
Each trace is converted to ``.lcp.zst`` with ``kvplan convert``, then replayed by
``python -m optimizer.cli replay FILE --algo ALGO --cache-size N --json`` in a fresh process,
once from the ``.lcp.zst`` file and once from the JSONL file, after one uncounted replay of
the 1× trace per format (it fills numba's cache: a compiling first call peaks higher). For
every child the peak resident set size is read from ``os.wait4`` (that child's own
``ru_maxrss``, so no run can mask another) and the wall time from a monotonic clock. A last
row replays nothing (``replay --help``): the interpreter and imports alone, the floor under
every other row.

What to expect: the compiled core (every policy with a compiled path) streams the file in
pieces and holds the policy's arrays, indexed by slot (``simulator/kvcache/compiled/_slots``:
slots are recycled once the policy forgets a block, so at most 8/3 × (cache size + ghost
capacity + longest request) slots of ~58-74 bytes: 16,383 for ``lru`` at 8k, 0.9 MiB,
whatever the trace's length), plus numba's loaded machine code (~57 MiB over the import
floor): from ``.lcp.zst`` the 10× trace peaks within a few MiB of the 1× one. From JSONL the
block-id interning table adds about 48 bytes per distinct block, so that peak grows with the
trace's distinct blocks (not with its length as such). Python-path policies from ``.lcp.zst``
hold only their state (bounded by the cache size); from JSONL their interning dict holds
about 170 bytes per distinct block. Oracle policies on JSONL would add the trace's future (16
bytes per block access); they are not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _chat_trace import ChatShape, chat_turns

#: Shorter prompts and conversations than the speed benchmark: many small requests.
CHAT = ChatShape(
    prompts=100,
    prompt_blocks=(4, 16),
    turn_blocks=(2, 10),
    mean_turns=4.0,
    active_sessions=256,
    max_context_blocks=120,
)
BLOCK_TOKENS = 512  # Mooncake's block size
MS_PER_REQUEST = 50  # arrival spacing; replay ignores time, the trace needs increasing stamps


def write_jsonl(path: Path, n_accesses: int, seed: int) -> None:
    """Stream the chat workload (``_chat_trace.py``, raw hash ids) into a Mooncake JSONL file."""
    with path.open("w", encoding="utf-8") as out:
        for i, (_, _, ids) in enumerate(chat_turns(n_accesses, CHAT, seed)):
            tokens = BLOCK_TOKENS * len(ids) - BLOCK_TOKENS // 2  # last block half full
            out.write(
                f'{{"timestamp": {i * MS_PER_REQUEST}, "input_length": {tokens},'
                f' "output_length": 128, "hash_ids": [{", ".join(map(str, ids))}]}}\n'
            )


@dataclass(frozen=True, slots=True)
class Measurement:
    """One child process: its peak RSS, wall time and (for a replay) its JSON result."""

    peak_rss_mib: float
    wall_s: float
    result: dict[str, float | int | str] | None


def measure(argv: Sequence[str]) -> Measurement:
    """Run ``argv``; stdout goes to a temporary file (no pipe to drain while waiting)."""
    with tempfile.TemporaryFile() as stdout:
        start = time.perf_counter()
        child = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
        # wait4 reaps exactly this child and returns its own rusage (ru_maxrss in KiB on Linux)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        assert child.stderr is not None
        errors = child.stderr.read().decode()
        child.stderr.close()
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({child.returncode}):\n{errors}")
        stdout.seek(0)
        text = stdout.read().decode()
    result = json.loads(text)[0] if text.lstrip().startswith("[") else None
    return Measurement(usage.ru_maxrss / 1024, wall, result)


def kvplan(*args: str) -> list[str]:
    """The CLI as a fresh interpreter runs it."""
    return [sys.executable, "-m", "optimizer.cli", *args]


def build_traces(workdir: Path, accesses: int, scales: Sequence[int], seed: int) -> list[Path]:
    """Write the JSONL traces and their ``.lcp.zst`` conversions; return the JSONL paths."""
    paths = []
    for scale in scales:
        jsonl = workdir / f"chat_{scale}x.jsonl"
        lcp = jsonl.with_suffix(".lcp.zst")
        if not (jsonl.exists() and lcp.exists()):  # --keep: the traces of an earlier run
            write_jsonl(jsonl, accesses * scale, seed)
            subprocess.run(kvplan("convert", str(jsonl), str(lcp)), check=True, capture_output=True)
        paths.append(jsonl)
    return paths


def report(rows: list[tuple[str, int, Path | None, Measurement]], scale: int) -> None:
    """Print the table and, per input format, the peak RSS of the long trace over the short."""
    print(
        f"{'input':<8} {'scale':>5} {'requests':>9} {'accesses':>10} {'file MiB':>8}"
        f" {'peak RSS MiB':>12} {'wall s':>7} {'hit ratio':>9}"
    )
    for label, n, path, m in rows:
        size = f"{path.stat().st_size / 2**20:8.1f}" if path is not None else f"{'-':>8}"
        if m.result is None:
            stats, hit = f"{'-':>5} {'-':>9} {'-':>10}", f"{'-':>9}"
        else:
            stats = f"{n:>4}x {m.result['n_req']:>9,} {m.result['n_blocks']:>10,}"
            hit = f"{m.result['block_hit_ratio']:>9.4f}"
        print(f"{label:<8} {stats} {size} {m.peak_rss_mib:>12.1f} {m.wall_s:>7.1f} {hit}")
    for label in dict.fromkeys(row[0] for row in rows if row[3].result is not None):
        peaks = [m.peak_rss_mib for name, _, _, m in rows if name == label]
        print(f"{label}: peak RSS {scale}x / 1x = {peaks[-1] / peaks[0]:.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, build the traces, measure each replay, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", type=float, default=3e5, help="block accesses at 1x (≥)")
    parser.add_argument("--scale", type=int, default=10, help="size of the long trace, × 1x")
    parser.add_argument("--cache-size", default="8k", help="capacity in blocks (k = ×1024)")
    parser.add_argument("--algo", default="lru", help="one policy (not an oracle)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="existing directory to keep the traces in")
    args = parser.parse_args(argv)
    if args.scale < 2:
        parser.error("--scale must be at least 2")
    if args.keep is not None and not args.keep.is_dir():
        parser.error(f"--keep {args.keep}: no such directory")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or Path(tmp)
        start = time.perf_counter()
        traces = build_traces(workdir, int(args.accesses), (1, args.scale), args.seed)
        print(f"traces written and converted in {time.perf_counter() - start:.0f} s ({workdir})")
        options = ("--algo", args.algo, "--cache-size", args.cache_size, "--json")
        # The compiled core's first call in a numba cache compiles (seconds, and LLVM's memory):
        # one uncounted run per input format fills the cache, so the rows measure replays.
        for suffix in (".lcp.zst", ".jsonl"):
            first = measure(kvplan("replay", str(traces[0].with_suffix(suffix)), *options))
            print(f"first call, {suffix} (fills the numba cache; not in the table):"
                  f" peak RSS {first.peak_rss_mib:.1f} MiB, wall {first.wall_s:.1f} s")  # fmt: skip
        rows: list[tuple[str, int, Path | None, Measurement]] = []
        for label, suffix in (("lcp.zst", ".lcp.zst"), ("jsonl", ".jsonl")):
            for scale, jsonl in zip((1, args.scale), traces, strict=True):
                path = jsonl.with_suffix(suffix)
                rows.append((label, scale, path, measure(kvplan("replay", str(path), *options))))
        rows.append(("imports", 0, None, measure(kvplan("replay", "--help"))))
        report(rows, args.scale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
