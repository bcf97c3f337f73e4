"""``kvplan replay``: sizes, choices, JSON keys, RESULT lines, holes, jobs, one-line errors,
streaming (every run re-reads the file; results equal the list-based replay; bounded memory)."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kvcache_helpers import TRACES_DIR, as_requests, random_prefix_trace
from typer.testing import CliRunner

from optimizer.cli import replay_cmd
from optimizer.cli.main import app
from optimizer.cli.trace_options import parse_block_count
from simulator.kvcache.compiled.passes import replay_pass
from simulator.kvcache.policies import make_policy
from simulator.kvcache.replay import RESULT_KEYS, replay
from simulator.workload import (
    FutureTable,
    LcpHeader,
    LcpWriter,
    TraceRequest,
    build_future,
    convert_to_lcp,
    open_trace,
)
from simulator.workload.bundled import bundled_trace_path
from simulator.workload.lcp_chunks import CHUNK_BYTES as LCP_CHUNK_BYTES
from slo.inputfile import InputError

runner = CliRunner()

# hash_ids of a tiny Mooncake-style trace; prefix-unique, so interning keeps the structure
LISTS = [[0, 1, 2, 3], [0, 1, 4], [5, 6], [0, 1, 2, 7], [5, 6, 8, 9], [0, 1, 2, 3]]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_trace.jsonl"
    lines = [
        json.dumps(
            {"timestamp": 10 * i, "input_length": 512 * len(ids), "output_length": 5,
             "hash_ids": ids}
        )
        for i, ids in enumerate(LISTS)
    ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def _interned() -> list[list[int]]:
    table: dict[tuple[int, int], int] = {}
    out = []
    for ids in LISTS:
        parent, row = 0, []
        for raw in ids:
            parent = table.setdefault((parent, raw), len(table) + 1)
            row.append(parent)
        out.append(row)
    return out


@pytest.mark.parametrize(
    ("text", "blocks"), [("8", 8), ("8k", 8192), ("8K", 8192), ("2m", 2 * 1024**2), ("1g", 1024**3)]
)
def test_parse_block_count(text: str, blocks: int) -> None:
    assert parse_block_count(text) == blocks


@pytest.mark.parametrize("text", ["8q", "0", "-1", "k", "1.5k", ""])
def test_parse_block_count_rejects(text: str) -> None:
    with pytest.raises(InputError, match="--cache-size"):
        parse_block_count(text)


def test_json_has_exactly_the_result_keys_and_matches_the_library(trace: Path) -> None:
    result = runner.invoke(
        app, ["replay", str(trace), "--cache-size", "4,6", "--algo", "lru,fifo", "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["algo"], r["cache_size"]) for r in rows] == [
        ("lru", 4),
        ("lru", 6),
        ("fifo", 4),
        ("fifo", 6),
    ]
    for row in rows:
        assert tuple(row) == RESULT_KEYS
        direct = replay(as_requests(_interned()), make_policy(row["algo"], row["cache_size"]))
        assert row == direct.summary()


def test_table_and_result_lines(trace: Path) -> None:
    result = runner.invoke(
        app,
        ["replay", str(trace), "--cache-size", "6", "--cost-model", "position"],
        env={"COLUMNS": "120"},
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "6 requests, 21 block accesses" in out
    assert "Prefix-cache replay" in out
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1
    fields = dict(item.split("=", 1) for item in lines[0].split()[1:])
    assert list(fields) == [
        "trace", "algo", "cache_size", "cost_model", "block_id", *RESULT_KEYS[2:]
    ]  # fmt: skip
    assert fields["cost_model"] == "position"
    assert fields["block_id"] == "prefix"
    assert fields["n_blocks"] == "21"
    assert len(fields["block_hit_ratio"].split(".")[1]) == 6


def test_jobs_give_the_same_results(trace: Path) -> None:
    args = ["replay", str(trace), "--cache-size", "3,5", "--algo", "lru,sieve,lfu", "--json"]
    serial = runner.invoke(app, args)
    parallel = runner.invoke(app, [*args, "--jobs", "2"])
    assert serial.exit_code == parallel.exit_code == 0, parallel.output
    assert json.loads(serial.stdout) == json.loads(parallel.stdout)


def test_oracle_policy_and_options(trace: Path) -> None:
    result = runner.invoke(
        app,
        ["replay", str(trace), "--cache-size", "5", "--algo", "belady,lru", "--json",
         "--match", "stop-at-first-miss", "--replay-order", "prefix-order", "--no-pin"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    belady, lru = json.loads(result.stdout)
    assert belady["block_hit_ratio"] >= lru["block_hit_ratio"]


def test_skipped_requests_warn_on_stderr(trace: Path) -> None:
    result = runner.invoke(app, ["replay", str(trace), "--cache-size", "3", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)[0]["n_req_skipped"] == 4
    assert "skipped" in result.stderr


def test_dump_holes(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "holes"
    out.mkdir()
    result = runner.invoke(
        app, ["replay", str(trace), "--cache-size", "16", "--algo", "lru", "--dump-holes", str(out)]
    )
    assert result.exit_code == 0, result.output
    lines = (out / "holes_tiny_trace_cache16_lru.txt").read_text().splitlines()
    assert len(lines) == len(LISTS)
    assert lines[0] == "Request 0: (idx: 0, len: 4)"
    assert lines[1] == "Request 1: (idx: 2, len: 1)"
    assert lines[5] == "Request 5:"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cache-size", "8q"], "--cache-size '8q'"),
        (["--cache-size", "8", "--algo", "lru,nope"], "known: lru, fifo"),
        (["--cache-size", "8", "--cost-model", "linear:1"], "linear:A,B"),
        (["--cache-size", "8", "--match", "some"], "--match 'some'"),
        (["--cache-size", "8", "--replay-order", "x"], "deepest-first"),
        (["--cache-size", "8", "--block-id", "hash"], "--block-id 'hash'"),
        (["--cache-size", "8", "--dump-holes", "/nonexistent/dir"], "no such directory"),
    ],
)
def test_bad_options_are_input_errors(trace: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["replay", str(trace), *args])
    assert isinstance(result.exception, InputError)
    assert message in str(result.exception)
    assert "\n" not in str(result.exception)


def test_missing_trace_is_an_input_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", str(tmp_path / "none.jsonl"), "--cache-size", "8"])
    assert isinstance(result.exception, InputError)


def test_error_exit_status_two_without_traceback(trace: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "replay", str(trace), "--cache-size", "8q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --cache-size '8q': expected a positive number of blocks with an optional k/m/g"
        " suffix (×1024), e.g. 8k"
    ]


def test_mooncake_lru_8k_via_cli() -> None:
    path = TRACES_DIR / "mooncake_conversation_trace.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    result = runner.invoke(app, ["replay", str(path), "--cache-size", "8k", "--json"])
    assert result.exit_code == 0
    (row,) = json.loads(result.stdout)
    assert round(row["block_hit_ratio"], 6) == 0.181563
    assert row["n_blocks"] == 288_500


def test_raw_ids_over_count_and_warn(tmp_path: Path) -> None:
    # PrefixSim's extra case: {1,2,3},{4,2,3}: raw ids give 2 hits, prefix interning 0.
    path = tmp_path / "qwen.jsonl"
    rows = [
        {"chat_id": i, "parent_chat_id": -1, "timestamp": float(i), "input_length": 48,
         "output_length": 2, "type": "text", "turn": 1, "hash_ids": ids}
        for i, ids in enumerate([[1, 2, 3], [4, 2, 3]])
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + "not json\n")
    base = ["replay", str(path), "--cache-size", "8", "--json", "--skip-bad-lines"]
    raw = runner.invoke(app, [*base, "--block-id", "raw"])
    prefix = runner.invoke(app, base)
    assert raw.exit_code == prefix.exit_code == 0, raw.output
    assert json.loads(raw.stdout)[0]["block_hit_ratio"] == 2 / 6
    assert json.loads(prefix.stdout)[0]["block_hit_ratio"] == 0.0
    assert "not prefix-unique" in raw.stderr
    assert "skipped 1 bad line" in prefix.stderr
    strict = runner.invoke(app, base[:-1])
    assert isinstance(strict.exception, InputError)
    assert ":3:" in str(strict.exception)


# --- streaming: every run re-reads the file; results equal the list-based replay ------------

ORACLE_AND_PLAIN = "lru,sieve,belady"


def _write_mooncake(path: Path, requests: list[TraceRequest]) -> Path:
    """Mooncake JSONL whose hash ids are the requests' (prefix-unique) block ids."""
    with path.open("w", encoding="utf-8") as out:
        for r in requests:
            record = {"timestamp": r.index, "input_length": 512 * len(r.block_ids)}
            out.write(json.dumps({**record, "output_length": 1, "hash_ids": r.block_ids}) + "\n")
    return path


def _lcp_without_future(jsonl: Path, out: Path) -> Path:
    """``jsonl`` as an lcp file that does not store next accesses (CLI must compute them)."""
    reader = open_trace(jsonl)
    requests = list(reader)
    stats = reader.stats
    header = LcpHeader(
        schema="mooncake",
        block_size_tokens=512,
        n_requests=stats.n_requests,
        n_block_accesses=stats.n_block_accesses,
        n_unique_blocks=stats.n_unique_blocks,
        max_blocks_per_request=stats.max_blocks_per_request,
        start_time_us=stats.start_time_us,
        end_time_us=stats.end_time_us,
        type_names=(),
        has_next_access=False,
    )
    with LcpWriter(out, header) as writer:
        for request in requests:
            writer.write(request)
    return out


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One random prefix trace as JSONL, .lcp.zst (future stored) and .lcp (no future)."""
    root = tmp_path_factory.mktemp("chat")
    requests = random_prefix_trace(np.random.default_rng(7), 600, max_new=6, reuse=0.85)
    jsonl = _write_mooncake(root / "chat.jsonl", requests)
    zst = root / "chat.lcp.zst"
    convert_to_lcp(jsonl, zst)
    return {
        "jsonl": jsonl,
        "lcp.zst": zst,
        "lcp-no-future": _lcp_without_future(jsonl, root / "x.lcp"),
    }


def _cli_rows(path: Path, *extra: str) -> list[dict[str, Any]]:
    args = ["replay", str(path), "--cache-size", "16,64", "--algo", ORACLE_AND_PLAIN, "--json"]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


@pytest.mark.parametrize("kind", ["jsonl", "lcp.zst", "lcp-no-future"])
def test_streaming_matches_the_list_based_replay(chat: dict[str, Path], kind: str) -> None:
    requests = list(open_trace(chat["jsonl"]))  # the whole trace in memory, as before
    rows = _cli_rows(chat[kind])
    assert len(rows) == 6
    for row in rows:
        policy = make_policy(row["algo"], row["cache_size"])
        assert row == replay(requests, policy).summary()  # replay annotates a list itself
    assert any(row["n_eviction"] for row in rows)  # the trace does stress the caches


@pytest.mark.parametrize("kind", ["jsonl", "lcp.zst", "lcp-no-future"])
def test_jobs_match_serial_with_oracles(chat: dict[str, Path], kind: str) -> None:
    assert _cli_rows(chat[kind], "--jobs", "2") == _cli_rows(chat[kind], "--jobs", "1")


@pytest.mark.parametrize(
    ("kind", "futures_built"), [("jsonl", 1), ("lcp.zst", 0), ("lcp-no-future", 1)]
)
def test_every_run_streams_and_the_future_is_built_at_most_once(
    chat: dict[str, Path], kind: str, futures_built: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    built: list[int] = []

    def spy_replay(requests: Iterable[TraceRequest], *args: Any, **kwargs: Any) -> Any:
        seen.append(requests)
        return replay(requests, *args, **kwargs)

    def spy_future(requests: Iterable[TraceRequest]) -> FutureTable:
        built.append(1)
        return build_future(requests)

    monkeypatch.setattr(replay_cmd, "replay", spy_replay)
    monkeypatch.setattr(replay_cmd, "build_future", spy_future)
    _cli_rows(chat[kind], "--engine", "python")  # every run on the Python loop
    assert len(seen) == 6
    assert not any(isinstance(requests, Sequence) for requests in seen)  # never a list
    assert len({id(requests) for requests in seen}) == 6  # a new pass per run
    assert len(built) == futures_built


@pytest.mark.parametrize(
    ("kind", "oracle_compiled"), [("jsonl", True), ("lcp.zst", False), ("lcp-no-future", True)]
)
def test_compiled_runs_share_one_pass_and_match_the_python_loop(
    chat: dict[str, Path], kind: str, oracle_compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    python_rows = _cli_rows(chat[kind], "--engine", "python")
    passes: list[list[str]] = []
    loops: list[str] = []

    def spy_pass(reader: Any, replays: Any, **kwargs: Any) -> Any:
        passes.append([f"{one.name}@{one.capacity}" for one in replays])
        return replay_pass(reader, replays, **kwargs)

    def spy_replay(requests: Iterable[TraceRequest], policy: Any, **kwargs: Any) -> Any:
        loops.append(policy.name)
        return replay(requests, policy, **kwargs)

    monkeypatch.setattr(replay_cmd, "replay_pass", spy_pass)
    monkeypatch.setattr(replay_cmd, "replay", spy_replay)
    assert _cli_rows(chat[kind]) == python_rows
    # lru and sieve at both sizes from one read of the file, and belady with them when the
    # future is held in memory (built: JSONL, lcp without one); the lcp file's stored future
    # fits both sizes here, so belady streams it through the Python loop.
    plain = ["lru@16", "lru@64", "sieve@16", "sieve@64"]
    oracle = ["belady@16", "belady@64"]
    assert passes == [plain + oracle if oracle_compiled else plain]
    assert loops == ([] if oracle_compiled else ["belady", "belady"])
    assert _cli_rows(chat[kind], "--jobs", "2") == python_rows  # one pass per worker run


@pytest.mark.parametrize("suffix", [".jsonl", ".lcp"])
def test_a_context_policy_is_compiled_from_the_file_readers(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunk readers fill the request context (arrival times, categories), so asym_cache
    and workload_aware take the compiled path from a trace file and give ``--engine python``'s
    results."""
    path = bundled_trace_path("mooncake_conversation_head2000.jsonl")
    options = ["--cache-size", "64,1024", "--algo", "asym_cache,workload_aware"]
    _compiled_as_python(_as(path, suffix, tmp_path), options, monkeypatch)


def _as(path: Path, suffix: str, tmp_path: Path) -> Path:
    """The JSONL trace at ``path``, or (``suffix`` ".lcp") its conversion in ``tmp_path``."""
    if suffix != ".lcp":
        return path
    convert_to_lcp(path, tmp_path / "trace.lcp")
    return tmp_path / "trace.lcp"


def _compiled_as_python(
    path: Path, options: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str]:
    """``kvplan replay path *options --json`` on the Python loop (``--engine python``), then
    as is: no run may take the Python loop, the JSON rows must be equal and every run must
    evict. Returns the two runs' stderr (compiled, Python)."""
    args = ["replay", str(path), *options, "--json"]
    python = runner.invoke(app, [*args, "--engine", "python"])
    assert python.exit_code == 0, python.output
    loops: list[str] = []

    def spy_replay(requests: Iterable[TraceRequest], policy: Any, **kwargs: Any) -> Any:
        loops.append(policy.name)
        return replay(requests, policy, **kwargs)

    monkeypatch.setattr(replay_cmd, "replay", spy_replay)
    compiled = runner.invoke(app, args)
    assert compiled.exit_code == 0, compiled.output
    assert loops == []  # no run on the Python loop
    rows = json.loads(compiled.stdout)
    assert rows == json.loads(python.stdout)
    assert all(row["n_eviction"] for row in rows)
    return compiled.stderr, python.stderr


def _write_qwen(path: Path, requests: list[TraceRequest]) -> Path:
    """Qwen JSONL whose chats chain each session's turns (parent: its previous turn's chat), so
    the reader's session ids are the sessions' first chats."""
    last: dict[int, int] = {}
    with path.open("w", encoding="utf-8") as out:
        for r in requests:
            record = {"chat_id": r.index, "parent_chat_id": last.get(r.session_id, -1)}
            last[r.session_id] = r.index
            record |= {"timestamp": float(r.index), "input_length": 16 * len(r.block_ids)}
            record |= {"output_length": 1, "type": "text", "turn": r.turn}
            out.write(json.dumps({**record, "hash_ids": list(r.block_ids)}) + "\n")
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".lcp"])
@pytest.mark.parametrize("schema", ["qwen", "mooncake"])
def test_the_session_policies_are_compiled_from_the_file_readers(
    tmp_path: Path, suffix: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunk readers carry session ids (Qwen chat chains), so every session policy takes
    the compiled path from a trace file with ``--engine python``'s results; without session
    ids (Mooncake) both warn the same, once per run."""
    if schema == "qwen":
        requests = random_prefix_trace(np.random.default_rng(5), 500, sessions=30)
        path = _write_qwen(tmp_path / "chat.jsonl", requests)
    else:
        path = bundled_trace_path("mooncake_conversation_head2000.jsonl")
    algos = "session_lru,session_belady,session_random_compute,session_s3fifo,session_arc"
    # the smaller size is below the longest request, so session_belady needs a held future
    options = ["--cache-size", "8,256", "--algo", algos]
    compiled, python = _compiled_as_python(_as(path, suffix, tmp_path), options, monkeypatch)
    assert compiled == python
    assert compiled.count("carry no session id") == (10 if schema == "mooncake" else 0)


def test_replay_consumes_requests_one_at_a_time() -> None:
    requests = random_prefix_trace(np.random.default_rng(3), 200)
    policy = make_policy("lru", 10_000)  # nothing is evicted: served blocks stay resident
    served_before: list[bool] = []

    def stream() -> Iterator[TraceRequest]:
        for i, request in enumerate(requests):
            if i:
                served_before.append(all(policy.find(b) for b in requests[i - 1].block_ids))
            yield request

    replay(stream(), policy)
    assert served_before == [True] * (len(requests) - 1)


def test_lcp_replay_memory_does_not_grow_with_the_trace(tmp_path: Path) -> None:
    # Python-level allocations (tracemalloc) of a whole CLI replay, for a trace and one 32x
    # longer: a list-based replay holds every request (~1 KiB each here: +15 MiB), the chunked
    # reader one piece of records and the ids scanned from it, whatever the trace's length
    # (the small trace's piece is smaller than CHUNK_BYTES, the long one's is not).
    peaks = []
    for n in (500, 16_000):
        requests = random_prefix_trace(np.random.default_rng(1), n, max_new=8, reuse=0.9)
        jsonl = _write_mooncake(tmp_path / f"t{n}.jsonl", requests)
        lcp = tmp_path / f"t{n}.lcp.zst"
        convert_to_lcp(jsonl, lcp)
        del requests
        tracemalloc.start()
        try:
            result = runner.invoke(app, ["replay", str(lcp), "--cache-size", "64", "--json"])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)[0]["n_req"] == n
    assert peaks[1] < peaks[0] + 2 * LCP_CHUNK_BYTES, peaks


def test_trace_errors_and_warnings_reach_the_user_once_from_workers(trace: Path) -> None:
    # A corrupt line is met while streaming (no separate reading pass), in a worker here.
    trace.write_text(trace.read_text() + "not json\n")
    base = ["replay", str(trace), "--cache-size", "3,6", "--algo", "lru,belady", "--json"]
    strict = runner.invoke(app, [*base, "--jobs", "2"])
    assert isinstance(strict.exception, InputError)
    assert f"{trace}:7:" in str(strict.exception)
    lenient = runner.invoke(app, [*base, "--jobs", "2", "--skip-bad-lines"])
    assert lenient.exit_code == 0, lenient.output
    assert lenient.stderr.count("skipped 1 bad line") == 1
    assert [row["n_req"] for row in json.loads(lenient.stdout)] == [2, 6, 2, 6]
