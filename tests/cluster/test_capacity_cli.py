"""``kvplan simulate --capacity --slo FILE`` and the PD / router / L3 flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from optimizer.cli.main import app
from slo.inputfile import InputError

BASE = ["simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "h100_sxm", "--latency", "constant:0.005"]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    workload = tmp_path / "workload.yaml"
    workload.write_text(
        "kind: open_loop\nrequests: 60\narrival: {process: poisson, rate_per_s: 20}\n"
        "input_tokens: 200\noutput_tokens: 20\n"
    )
    slo = tmp_path / "slo.yaml"
    slo.write_text("name: chat\ntargets:\n  ttft_ms: {p90: 400}\nattainment: 0.8\n")
    impossible = tmp_path / "impossible.yaml"
    impossible.write_text("name: never\ntargets:\n  ttft_ms: {p90: 0.001}\n")
    # One request at a time: 20 steps of 5 ms, a queue that saturates at 10 requests/s.
    config = tmp_path / "deploy.yaml"
    config.write_text("max_running_requests: 1\nkv_capacity_tokens: 65536\n")
    return {"workload": workload, "slo": slo, "impossible": impossible, "config": config}


def _json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, [*BASE, *args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_capacity_json_reports_scale_rate_and_simulations(files: dict[str, Path]) -> None:
    data = _json(
        "--config", str(files["config"]), "--workload", str(files["workload"]),
        "--capacity", "--slo", str(files["slo"]),
    )  # fmt: skip
    capacity = data["capacity"]
    assert set(capacity) == {"time_scale", "requests_per_s", "simulations"}
    assert 0.125 < capacity["time_scale"] < 8
    assert capacity["simulations"] >= 3
    assert capacity["requests_per_s"] == pytest.approx(data["throughput"]["requests_per_s"])
    assert data["ttft_ms"]["p90"] < 400
    assert "load_imbalance" in data


def test_an_slo_no_load_meets_is_infeasible_exit_2(files: dict[str, Path]) -> None:
    args = ["--workload", str(files["workload"]), "--capacity", "--slo", str(files["impossible"])]
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(app, [*BASE, *args, *extra])
        assert result.exit_code == 2
        assert "infeasible even at the lowest load" in result.output


def test_pd_flags_select_disaggregation_and_router(files: dict[str, Path]) -> None:
    data = _json(
        "--workload", str(files["workload"]),
        "--prefill-instances", "1", "--decode-instances", "2",
        "--decode-tp", "2", "--router", "least_load",
    )  # fmt: skip
    config = data["config"]
    assert config["pd_mode"] == "disaggregated"
    assert (config["prefill"]["instances"], config["decode"]["instances"]) == (1, 2)
    assert config["router"] == "least_load"
    assert data["cost"]["gpus"] == 1 + 2 * 2
    assert data["requests"]["finished"] == 60
    assert data["load_imbalance"] >= 1.0


def test_l3_spec_sets_tier_and_capacity(files: dict[str, Path]) -> None:
    data = _json("--workload", str(files["workload"]), "--l2-gib", "8", "--l3", "pool_16tib:512")
    assert data["config"]["l3_tier"] == "pool_16tib"
    assert data["config"]["l3_capacity_gib"] == 512


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prefill-instances", "2", "--decode-instances", "0"], "at least one decode instance"),
        (["--decode-tp", "2"], "needs prefill.instances"),
        (["--capacity"], "--capacity needs --slo"),
        (["--l3", "pool_16tib:lots", "--l2-gib", "4"], "is not TIER[:GIB]"),
        (["--router", "nope"], "unknown router"),
        (["--concurrency", "2", "--capacity", "--slo", "SLO"], "open-loop workload"),
    ],
)
def test_bad_flags_are_one_line_errors(
    files: dict[str, Path], args: list[str], message: str
) -> None:
    # ``kvplan`` prints an InputError as one line and exits 2 (optimizer/cli/main.py).
    args = [str(files["slo"]) if a == "SLO" else a for a in args]
    result = CliRunner().invoke(app, [*BASE, *args])
    assert isinstance(result.exception, InputError)
    assert message in str(result.exception)
    assert "\n" not in str(result.exception)
