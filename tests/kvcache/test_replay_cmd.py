"""``kvplan replay``: sizes, choices, JSON keys, RESULT lines, holes, jobs, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kvcache_helpers import TRACES_DIR, as_requests
from typer.testing import CliRunner

from optimizer.cli.main import app
from optimizer.cli.replay_cmd import parse_block_count
from simulator.kvcache.policies import make_policy
from simulator.kvcache.replay import RESULT_KEYS, replay
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
