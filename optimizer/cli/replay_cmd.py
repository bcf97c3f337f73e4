"""``kvplan replay``: PrefixSim-style trace replay over policies × cache sizes.

    kvplan replay trace.lcp.zst --cache-size 8k,16k --algo lru,sieve [--json] [--jobs 4]
    kvplan replay trace.jsonl --cache-size 8k --algo 'partial_node_random_compute:n_sample=32'
    kvplan replay --list-policies

Policies take parameters as ``name:key=value,...`` (``simulator.kvcache.params``: checked
against the policy's constructor, one-line error and exit 2 otherwise); results are labelled
with the spec as given. ``--list-policies`` prints ``simulator.kvcache.policy_table``.

One run per (policy, size) pair, each from an empty cache with its own generator seeded by
``--seed`` (so results do not depend on ``--jobs``). Runs whose policy has a compiled path
(``simulator.kvcache.compiled``; ``--engine python`` turns it off) are served by the compiled
core, all of them from one chunked pass over the file; every other run streams the trace afresh
from the file (through zstd for ``.zst``), one request at a time. With ``--jobs N`` each worker
process opens the file itself. So the trace never has to fit in memory, with one exception:
oracle policies (``needs_next_access``) on a file that does not store next accesses (JSONL, or
lcp written without them) need the trace's future, computed once by a full pass and held for
all runs (``simulator.workload.future``: about 16 bytes per block access while it is built, 8
kept, plus 16 per request); a compiled oracle (belady, belady_compute, session_belady) reads
its slices of that held future. An
lcp file from ``kvplan convert`` stores the future and streams it too (through the Python loop,
whose reader yields it per request, when no run needs the future rebuilt). Apart from that,
memory grows only with the policies' state (the cache size) and, for JSONL with ``--block-id
prefix``, the block-id interning table (one entry per distinct block).

Output: a rich table and PrefixSim ``RESULT key=value`` lines, or with ``--json`` a list of
objects with exactly the RESULT keys. Warnings go to stderr.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any, cast

import numpy as np
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from optimizer.cli._output import console, err_console, print_json
from optimizer.cli._seed import check_seed
from optimizer.cli.replay_tables import (
    describe_pass,
    show_holes,
    show_policies,
    show_results,
    warn,
)
from optimizer.cli.trace_options import (
    BlockIdOpt,
    CostModelOpt,
    choice_of,
    parse_block_count,
    split_list,
)
from simulator.kvcache.compiled import CompiledReplay, compiled_reason
from simulator.kvcache.compiled.passes import replay_pass
from simulator.kvcache.cost import parse_cost_model
from simulator.kvcache.holes import HoleStats, HoleWriter, dataset_name, holes_path
from simulator.kvcache.params import PolicySpec, parse_policy_specs
from simulator.kvcache.policies import POLICIES, make_policy
from simulator.kvcache.policies.session import NO_SESSION_WARNING
from simulator.kvcache.replay import (
    MATCH_MODES,
    REPLAY_ORDERS,
    MatchMode,
    ReplayOrder,
    ReplayResult,
    replay,
)
from simulator.kvcache.served_future import SharedFuture, replay_streams, stores_future
from simulator.workload import (
    BLOCK_ID_MODES,
    ReadStats,
    TraceInfo,
    TraceReader,
    TraceRequest,
    build_future,
    open_trace,
)
from simulator.workload.chunk_reader import chunk_reason
from simulator.workload.trace import LcpTrace
from slo.inputfile import InputError

__all__ = ["register"]

_TICK = 1024  # requests between progress-bar updates


@dataclass(frozen=True, slots=True)
class _Run:
    """One (policy, size) replay; plain data so it can travel to a worker process."""

    spec: PolicySpec
    cache_size: int
    cost_model: str
    match: MatchMode
    replay_order: ReplayOrder
    pin: bool
    verify: bool
    seed: int
    holes: Path | None
    compiled: bool = False
    """Served by the compiled core (``simulator.kvcache.compiled``), not ``replay``."""


@dataclass(frozen=True, slots=True)
class _Source:
    """How to open the trace: plain data, so a worker process opens the file itself."""

    path: Path
    block_id: str
    skip_bad_lines: bool

    def open(self) -> TraceReader:
        """A fresh reader (cheap: sniffs the first record or reads the lcp header)."""
        return open_trace(self.path, block_id=self.block_id, skip_bad_lines=self.skip_bad_lines)


@dataclass(frozen=True, slots=True)
class _Outcome:
    """One run's result and what its pass over the trace saw (header line, trace warnings)."""

    result: ReplayResult
    stats: ReadStats
    info: TraceInfo
    holes: HoleStats | None = None
    """Hole statistics of the run (``--dump-holes`` only)."""


def _execute(
    run: _Run,
    reader: TraceReader,
    future: SharedFuture | None,
    tick: Callable[[int], None] | None = None,
) -> _Outcome:
    """Replay one run over a new pass of ``reader`` (the cost model is re-parsed: closures do
    not pickle). ``future`` is the shared future when the file does not store one."""
    policy = make_policy(run.spec.name, run.cache_size, seed=run.seed, **run.spec.kwargs())
    requests, rows = replay_streams(reader, future, policy.needs_next_access, run.cache_size)
    if tick is not None:
        requests = _ticking(requests, tick)
    options: dict[str, Any] = {
        "cost_model": parse_cost_model(run.cost_model),
        "match": run.match,
        "replay_order": run.replay_order,
        "pin": run.pin,
        "verify": run.verify,
        "future": rows,
    }
    # Policies may also warn through ``warnings``; fold those into the result so that they
    # reach the user once, the same way, from worker processes too.
    holes: HoleStats | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if run.holes is None:
            result = replay(requests, policy, **options)
        else:
            with HoleWriter(run.holes) as writer:
                result = replay(requests, policy, on_holes=writer, **options)
            holes = writer.stats
            stats_path = run.holes.with_suffix(".stats.json")
            stats_path.write_text(json.dumps(holes.summary(), indent=2) + "\n", encoding="utf-8")
    extra = tuple(dict.fromkeys(str(w.message) for w in caught))
    result = replace(result, algo=run.spec.label, warnings=result.warnings + extra)
    return _Outcome(result, reader.stats, reader.info, holes)


def _ticking(
    requests: Iterable[TraceRequest], tick: Callable[[int], None]
) -> Iterator[TraceRequest]:
    for i, request in enumerate(requests, start=1):
        if i % _TICK == 0:
            tick(_TICK)
        yield request


# Worker-process state, set once per process by the pool initializer (fork: inherited, not
# pickled). CLI layer only: the simulator itself keeps no module state.
_WORKER: dict[str, Any] = {}


def _init_worker(source: _Source, future: SharedFuture | None) -> None:
    _WORKER["source"] = source
    _WORKER["future"] = future


def _execute_in_worker(run: _Run) -> _Outcome:
    # Each run opens its own reader, so no pass is shared between runs of one worker.
    source: _Source = _WORKER["source"]
    if run.compiled:
        return _execute_compiled(
            [run], source.open(), source.skip_bad_lines, future=_WORKER["future"]
        )[0]
    return _execute(run, source.open(), _WORKER["future"])


def _with_engine(runs: list[_Run], reader: TraceReader, engine: str) -> list[_Run]:
    """Mark the runs the compiled core serves: ``--engine auto``, a policy with a compiled
    path (``compiled.COMPILED``), no hole dump, and a trace that reads as chunks."""
    if engine == "python" or chunk_reason(reader) is not None:
        return runs
    return [replace(run, compiled=_compiled(run)) for run in runs]


def _compiled(run: _Run) -> bool:
    """Whether the compiled core can serve ``run`` from the chunk readers' chunks (which carry
    the request context that ``compiled.CONTEXT``'s policies read)."""
    return compiled_reason(run.spec.name, holes=run.holes is not None) is None


def _execute_compiled(
    runs: Sequence[_Run],
    reader: TraceReader,
    skip_bad_lines: bool,
    tick: Callable[[int], None] | None = None,
    future: SharedFuture | None = None,
) -> list[_Outcome]:
    """Every run in ``runs`` over one pass of the trace (``compiled.passes.replay_pass``);
    oracle runs read their capacity's view of ``future`` (``_with_future`` makes sure there
    is one)."""
    replays = [
        CompiledReplay(
            r.spec.name,
            r.cache_size,
            params=r.spec.kwargs(),
            cost_model=parse_cost_model(r.cost_model),
            match=r.match,
            replay_order=r.replay_order,
            pin=r.pin,
            verify=r.verify,
            seed=r.seed,
        )
        for r in runs
    ]
    futures = [
        future.served(r.cache_size)
        if (one.needs_future or one.needs_session_future) and future is not None
        else None
        for r, one in zip(runs, replays, strict=True)
    ]
    # The session policies' one warning is kept per replay (``policy_warnings``) and folded
    # into its result, as ``_execute`` folds what a Python policy warns.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", f".*{re.escape(NO_SESSION_WARNING)}", RuntimeWarning)
        results, stats, info = replay_pass(
            reader, replays, skip_bad_lines=skip_bad_lines, tick=tick, futures=futures
        )
    return [
        _Outcome(
            replace(result, algo=run.spec.label, warnings=result.warnings + one.policy_warnings),
            stats,
            info,
        )
        for run, one, result in zip(runs, replays, results, strict=True)
    ]


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )


def _shared_future(reader: TraceReader, runs: list[_Run]) -> SharedFuture | None:
    """The future for oracle runs, unless the file stores one that no run needs to change.

    The one mode whose memory is proportional to the trace: a full pass builds the future of
    every block access (``build_future``: 16 bytes per access while building, 8 kept, plus
    16 per request), held for all runs. Requests themselves are not kept. A stored future
    is used as is only when no oracle run can skip a request (the header's longest request
    fits every oracle's cache); otherwise skipped requests must leave the future.
    """
    oracle_sizes = [r.cache_size for r in runs if POLICIES[r.spec.name].needs_next_access]
    if not oracle_sizes:
        return None
    if stores_future(reader):
        assert isinstance(reader, LcpTrace)
        if reader.header.max_blocks_per_request <= min(oracle_sizes):
            return None
    distinct: list[int] = []

    def counted(requests: Iterable[TraceRequest]) -> Iterator[TraceRequest]:
        for request in requests:
            distinct.append(len(set(request.block_ids)))
            yield request

    with _progress() as progress:
        task = progress.add_task("trace future", total=_known_count(reader))
        ticking = _ticking(counted(reader.requests()), partial(progress.advance, task))
        table = build_future(ticking)
    return SharedFuture(table, np.array(distinct, dtype=np.int64))


def _with_future(runs: list[_Run], future: SharedFuture | None) -> list[_Run]:
    """Oracle runs stay compiled only with a future held in memory; without one (an lcp file
    whose stored future every oracle can use as is) they stream it through the Python loop,
    which reads it per request, instead of holding the whole annotation."""
    if future is not None:
        return runs
    return [
        replace(run, compiled=False) if POLICIES[run.spec.name].needs_next_access else run
        for run in runs
    ]


def _known_count(reader: TraceReader) -> int | None:
    """Requests in the trace if known without a new pass: the lcp header, or a full pass
    already made with this reader (JSONL); ``None`` (an indeterminate bar) otherwise."""
    if isinstance(reader, LcpTrace):
        return reader.header.n_requests
    return reader.stats.n_requests if reader.stats.complete else None


def _run_all(runs: list[_Run], source: _Source, reader: TraceReader, jobs: int) -> list[_Outcome]:
    """Every run, in the order given; ``jobs > 1`` spreads them over a process pool."""
    future = _shared_future(reader, runs)
    runs = _with_future(runs, future)
    if jobs <= 1 or len(runs) == 1:
        done: dict[int, _Outcome] = {}
        with _progress() as progress:
            compiled = [i for i, run in enumerate(runs) if run.compiled]
            if compiled:
                task = progress.add_task("compiled replays", total=_known_count(reader))
                group = [runs[i] for i in compiled]
                tick = partial(progress.advance, task)
                outcomes = _execute_compiled(group, reader, source.skip_bad_lines, tick, future)
                done.update(zip(compiled, outcomes, strict=True))
                progress.remove_task(task)
            for i, run in enumerate(runs):
                if i in done:
                    continue
                total = _known_count(reader)
                task = progress.add_task(f"{run.spec.label} @ {run.cache_size}", total=total)
                done[i] = _execute(run, reader, future, partial(progress.advance, task))
                progress.remove_task(task)
        return [done[i] for i in range(len(runs))]
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(runs)), initializer=_init_worker, initargs=(source, future)
    ) as pool:
        # Submitting forks the workers: do it before the progress bar starts its thread.
        pending = [pool.submit(_execute_in_worker, run) for run in runs]
        with _progress() as progress:
            task = progress.add_task("replays", total=len(runs))
            outcomes = []
            for job in pending:
                outcomes.append(job.result())
                progress.advance(task)
    return outcomes


def _holes_paths(directory: Path | None, trace: Path, runs: list[_Run]) -> list[_Run]:
    """Attach and probe the hole-dump files (before the trace is read; DIR must exist)."""
    if directory is None:
        return runs
    if not directory.is_dir():
        raise InputError(f"--dump-holes {directory}: no such directory (it is not created)")
    dataset = dataset_name(trace)
    probed = []
    for run in runs:
        path = holes_path(directory, dataset, run.cache_size, run.spec.label)
        try:
            path.open("w", encoding="utf-8").close()
        except OSError as err:
            raise InputError(f"--dump-holes: cannot write {path}: {err.strerror}") from None
        probed.append(replace(run, holes=path))
    return probed


def replay_command(
    trace: Annotated[
        Path | None, typer.Argument(help="Trace file: Mooncake/Qwen JSONL or lcp (.zst ok).")
    ] = None,
    *,
    cache_size: Annotated[
        str | None,
        typer.Option(
            "--cache-size", help="Capacities in blocks, comma-separated; k/m/g = ×1024 (8k)."
        ),
    ] = None,
    list_policies: Annotated[
        bool,
        typer.Option(
            "--list-policies",
            help="Print every policy: pins honoured, needs future, needs request context,"
            " clock, parameters; then exit.",
        ),
    ] = False,
    algo: Annotated[
        str,
        typer.Option(
            "--algo",
            help="Policies, comma-separated, each optionally name:key=value,... (e.g."
            " partial_node_random_compute:eviction_mode=drain,n_sample=32); see"
            " --list-policies.",
        ),
    ] = "lru",
    cost_model: CostModelOpt = "uniform",
    block_id: BlockIdOpt = "prefix",
    replay_order: Annotated[
        str,
        typer.Option("--replay-order", help="Phase-3 order: deepest-first | prefix-order."),
    ] = "deepest-first",
    match: Annotated[
        str,
        typer.Option(
            "--match", help="all (PrefixSim: hits past gaps) | stop-at-first-miss (engines)."
        ),
    ] = "all",
    dump_holes: Annotated[
        Path | None,
        typer.Option(
            "--dump-holes", help="Existing directory for holes_<dataset>_cache<N>_<algo>.txt."
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of tables.")
    ] = False,
    jobs: Annotated[
        int, typer.Option("--jobs", min=1, help="Replays in parallel (processes).")
    ] = 1,
    skip_bad_lines: Annotated[
        bool,
        typer.Option("--skip-bad-lines", help="Skip and count corrupt JSONL lines, not fail."),
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of randomised policies.")] = 0,
    pin: Annotated[
        bool, typer.Option("--pin/--no-pin", help="Pin a request's blocks in phase 2.")
    ] = True,
    verify: Annotated[
        bool,
        typer.Option("--verify/--no-verify", help="Check blocks are resident after access."),
    ] = True,
    engine: Annotated[
        str,
        typer.Option("--engine", help="auto: compiled core where a policy has one; python."),
    ] = "auto",
) -> None:
    """Replay a trace through eviction policies at several cache sizes (PrefixSim semantics)."""
    if list_policies:
        show_policies(json_out)
        return
    if trace is None or cache_size is None:
        raise InputError("replay needs a TRACE and --cache-size (or --list-policies)")
    check_seed(seed)
    sizes = [parse_block_count(item) for item in split_list(cache_size) or [""]]
    specs = parse_policy_specs(algo)
    parse_cost_model(cost_model)  # fail fast, before the trace is read
    match_mode = cast(MatchMode, choice_of("--match", match, MATCH_MODES))
    order = cast(ReplayOrder, choice_of("--replay-order", replay_order, REPLAY_ORDERS))
    runs = [
        _Run(spec, size, cost_model, match_mode, order, pin, verify, seed, holes=None)
        for spec in specs
        for size in sizes
    ]
    choice_of("--block-id", block_id, sorted(BLOCK_ID_MODES))
    runs = _holes_paths(dump_holes, trace, runs)
    choice_of("--engine", engine, ("auto", "python"))
    source = _Source(trace, block_id, skip_bad_lines)
    reader = source.open()
    outcomes = _run_all(_with_engine(runs, reader, engine), source, reader, jobs)
    described = describe_pass(
        outcomes[0].stats, outcomes[0].info, trace
    )  # every run read the same trace
    results = [outcome.result for outcome in outcomes]
    for result in results:
        for message in result.warnings:
            warn(f"{result.algo} @ {result.cache_size}: {message}")
    if json_out:
        print_json([result.summary() for result in results])
        return
    console.print(described, markup=False, highlight=False, soft_wrap=True)
    order_text = f"match {match}, replay order {replay_order}"
    console.print(f"cost model {cost_model}, {order_text}", markup=False, highlight=False)
    show_results(results, trace, cost_model, block_id)
    if dump_holes is not None:
        show_holes([(o.result, o.holes) for o in outcomes])


def register(app: typer.Typer) -> None:
    """Add ``kvplan replay`` to ``app``."""
    app.command("replay")(replay_command)
