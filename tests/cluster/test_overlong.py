"""Requests longer than the model's context: dropped before the run (default) or rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizer.cli.main import app
from optimizer.workloads import check_overlong, workload_from_arg
from simulator.api import simulate
from simulator.cluster.overlong import OverlongTally, tokens_of
from simulator.config import ServingConfig
from simulator.workload.request import TraceRequest
from slo.inputfile import InputError

MODEL = "Qwen/Qwen3-8B"  # 40,960-token context in the shipped catalog
runner = CliRunner()


def _trace(tmp_path: Path) -> Path:
    """Six Mooncake-format requests (512-token blocks); two exceed 40,960 tokens."""
    lengths = [(1000, 50), (50_000, 10), (2000, 20), (40_950, 20), (3000, 30), (1500, 10)]
    lines = []
    for i, (prompt, output) in enumerate(lengths):
        blocks = list(range(i * 1000, i * 1000 + -(-prompt // 512)))
        record = {"timestamp": i * 500, "input_length": prompt, "output_length": output}
        lines.append(json.dumps(record | {"hash_ids": blocks}))
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tally_counts_like_the_engine() -> None:
    tally = OverlongTally(max_context_tokens=100)
    short = TraceRequest(0, 0.0, 0, 0, ())  # empty prompt and output still take a token each
    assert tokens_of(short) == 2
    assert tally.see(short)
    assert not tally.see(TraceRequest(1, 0.0, 99, 2, ()))
    assert (tally.n_requests, tally.n_overlong, tally.longest_tokens) == (2, 1, 101)
    assert tally.share == 0.5


def test_dropped_by_default_and_rejected_when_asked(tmp_path: Path) -> None:
    workload = workload_from_arg(str(_trace(tmp_path)))
    config = ServingConfig(model=MODEL, gpu="h100_sxm")
    dropped = simulate(config, workload, seed=0)
    assert dropped.summary is not None
    assert dropped.summary.n_requests == 4
    assert dropped.summary.n_rejected == 0
    assert dropped.diagnostics["overlong_dropped"] == 2
    assert dropped.diagnostics["overlong_longest_tokens"] == 50_010
    # Not dropped: the engine rejects both at arrival and the SLO metrics count them as late.
    kept = simulate(config, workload, seed=0, drop_overlong_requests=False)
    assert kept.summary is not None
    assert kept.summary.rejections == {"longer than the model context": 2}
    assert kept.metrics_for_slo()["ttft_ms.p99"] == float("inf")
    assert dropped.metrics_for_slo()["ttft_ms.p99"] < 1e6


def test_reject_policy_is_an_input_error_with_the_numbers(tmp_path: Path) -> None:
    workload = workload_from_arg(str(_trace(tmp_path)))
    tally = check_overlong(workload, seed=0, max_context_tokens=40_960, policy="drop")
    assert (tally.n_requests, tally.n_overlong) == (6, 2)
    with pytest.raises(InputError, match=r"2 of 6 requests \(33\.3%\) exceed .*longest 50,010"):
        check_overlong(workload, seed=0, max_context_tokens=40_960, policy="reject")


def test_simulate_cli_reports_and_honours_the_policy(tmp_path: Path) -> None:
    args = ["simulate", "--model", MODEL, "--gpu", "h100_sxm", "--workload", str(_trace(tmp_path))]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"]["overlong"]["n_overlong"] == 2
    assert data["requests"]["finished"] == 4
    assert "2 of 6 requests (33.3%) exceed" in result.stderr
    missed = json.loads(runner.invoke(app, [*args, "--json", "--overlong", "count-as-miss"]).stdout)
    assert missed["requests"]["rejected"] == 2
    refused = runner.invoke(app, [*args, "--overlong", "reject"])
    assert refused.exit_code != 0
    assert isinstance(refused.exception, InputError)
