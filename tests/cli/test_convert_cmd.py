"""``kvplan convert``: writes the lcp file and prints one summary line; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from optimizer.cli import convert_cmd
from simulator.workload import open_trace
from slo.inputfile import InputError

runner = CliRunner()

RECORDS = [
    {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]},
    {"timestamp": 1500, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2]},
    {"timestamp": 1000, "input_length": 600, "output_length": 5, "hash_ids": [3, 1]},
]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root (keeps ``convert`` a subcommand)."""

    convert_cmd.register(app)
    return app


def _trace(tmp_path: Path, extra_lines: tuple[str, ...] = ()) -> Path:
    path = tmp_path / "t.jsonl"
    lines = [json.dumps(r) for r in RECORDS] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("suffix", [".lcp", ".lcp.zst"])
def test_convert_writes_file_and_prints_one_line(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"t{suffix}"
    result = runner.invoke(_app(), ["convert", str(_trace(tmp_path)), str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    line = lines[0]
    assert "3 requests, 7 blocks, 5 unique" in line
    assert f"{out.stat().st_size:,} bytes" in line
    assert "next-access deltas 0/1: 14.3%" in line  # 1 of 7: request 0 stores (3, 1)
    assert "never again: 71.4%" in line
    assert "1 requests out of time order" in line
    assert [r.block_ids for r in open_trace(out)] == [(1, 2), (1, 2, 3), (4, 5)]


def test_convert_options_reach_the_file(tmp_path: Path) -> None:
    out = tmp_path / "t.lcp"
    trace = _trace(tmp_path, extra_lines=("{broken",))
    args = ["convert", str(trace), str(out), "--block-size", "64", "--skip-bad-lines"]
    result = runner.invoke(_app(), args)
    assert result.exit_code == 0, result.output
    assert "skipped 1 bad lines" in result.stdout
    assert open_trace(out).info.block_size_tokens == 64


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--block-id", "raw"], "lcp files store prefix-interned ids only"),
        (["--block-id", "nope"], "--block-id must be one of prefix, raw"),
        (["--format", "csv"], "--format must be one of auto, mooncake, qwen, lcp"),
    ],
)
def test_bad_options_are_input_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(
        _app(), ["convert", str(_trace(tmp_path)), str(tmp_path / "o.lcp"), *args]
    )
    assert isinstance(result.exception, InputError)
    assert message in str(result.exception)


def test_bad_line_and_bad_output_name_are_input_errors(tmp_path: Path) -> None:
    trace = _trace(tmp_path, extra_lines=("{broken",))
    result = runner.invoke(_app(), ["convert", str(trace), str(tmp_path / "o.lcp")])
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{trace}:4: malformed JSON")
    assert not (tmp_path / "o.lcp").exists()
    result = runner.invoke(_app(), ["convert", str(trace), str(tmp_path / "o.bin")])
    assert isinstance(result.exception, InputError)
    assert "must end with .lcp or .lcp.zst" in str(result.exception)


def test_convert_json_summary(tmp_path: Path) -> None:
    out = tmp_path / "t.lcp"
    result = runner.invoke(_app(), ["convert", str(_trace(tmp_path)), str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["requests"] == 3
    assert data["block_accesses"] == 7
    assert data["output"] == str(out)
    assert data["out_of_order"] == 1
    assert data["output_bytes"] == out.stat().st_size
