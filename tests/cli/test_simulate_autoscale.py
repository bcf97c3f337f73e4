"""``kvplan simulate`` of an autoscaled pool: the fleet table, the bill, SLO attainment per
window, and the shipped day-long example files."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from optimizer.cli.main import app
from simulator.config import ServingConfig
from simulator.workload.spec import load_workload
from slo.inputfile import InputError

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CONFIG = {
    "model": "Qwen/Qwen3-8B",
    "gpu": "h100_sxm",
    "instances": 3,
    "router": "least_load",
    "latency_model": "constant:0.02",
    "autoscale": {"target_concurrency": 6, "scale_down_delay_s": 60, "engine_init_s": 20},
}
WORKLOAD = {
    "kind": "open_loop",
    "requests": 6000,
    "arrival": {
        "process": "poisson",
        "rate_per_s": 20,
        "profile": {
            "pieces": [
                {"until_s": 120, "scale": 0.1},
                {"until_s": 300, "scale": 1.0},
                {"until_s": 1e6, "scale": 0.1},
            ]
        },
    },
    "input_tokens": 200,
    "output_tokens": 20,
}
SLO = {"name": "window-check", "targets": {"ttft_ms": {"p90": 200}}, "attainment": 0.9}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("autoscale")
    out = {}
    for name, data in (("config", CONFIG), ("workload", WORKLOAD), ("slo", SLO)):
        out[name] = root / f"{name}.yaml"
        out[name].write_text(yaml.safe_dump(data))
    return out


def _run(files: dict[str, Path], *extra: str) -> Any:
    args = ["simulate", "--config", str(files["config"]), "--workload", str(files["workload"])]
    return runner.invoke(app, [*args, *extra])


def test_json_has_the_fleet_its_bill_and_attainment_per_window(files: dict[str, Path]) -> None:
    result = _run(files, "--slo", str(files["slo"]), "--json")
    assert result.exit_code == 0, result.output
    fleet = json.loads(result.stdout)["fleet"]
    assert fleet["instances_started"] >= 1
    assert max(fleet["timeline"]["serving"]) > 1
    assert 1 < fleet["mean_instances"] < 3
    windows = fleet["windows"]
    assert [w["start_s"] for w in windows] == sorted(w["start_s"] for w in windows)
    assert sum(w["requests"] for w in windows) == 6000
    assert all(0 <= w["attainment"] <= 1 for w in windows if w["attainment"] is not None)
    # The bill is the paid instance-time at the per-instance price: a window's paid count
    # never exceeds the pool's maximum and the average lies inside what the windows show.
    assert all(w["paid"] <= 3 + 1e-9 for w in windows)
    assert fleet["usd_for_period"] == pytest.approx(
        fleet["usd_per_hour"] * fleet["period_s"] / 3600
    )


def test_the_table_output_shows_the_fleet(files: dict[str, Path]) -> None:
    result = _run(files, "--slo", str(files["slo"]))
    assert result.exit_code == 0, result.output
    assert "autoscaled:" in result.output
    assert "Fleet over time" in result.output
    assert "attainment" in result.output


def test_slo_without_capacity_or_autoscaling_is_a_one_line_error(files: dict[str, Path]) -> None:
    result = runner.invoke(
        app,
        ["simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "h100_sxm", "--workload",
         str(files["workload"]), "--slo", str(files["slo"])],
    )  # fmt: skip
    # ``kvplan`` prints an InputError as one line and exits 2 (optimizer/cli/main.py).
    assert isinstance(result.exception, InputError)
    assert "only with --capacity or an autoscaled config" in str(result.exception)


def test_the_shipped_day_is_a_day_at_the_bundled_slices_rate() -> None:
    builder = load_workload(EXAMPLES / "workloads" / "diurnal_day.yaml")
    spec = builder.spec.root
    assert spec.kind == "open_loop"
    assert spec.requests == pytest.approx(3.0 * 86_400, rel=0.01)
    config = yaml.safe_load((EXAMPLES / "simulate_autoscale.yaml").read_text())
    assert config["autoscale"]["target_concurrency"] > 0


PD_CONFIG = {
    "model": "Qwen/Qwen3-8B",
    "gpu": "h100_sxm",
    "router": "least_load",
    "latency_model": "constant:0.02",
    "pd_mode": "disaggregated",
    "prefill": {"instances": 2, "autoscale": {"target_concurrency": 0.5, "engine_init_s": 20}},
    "decode": {"instances": 3, "autoscale": {"target_concurrency": 6, "engine_init_s": 20}},
}


def test_pd_pools_print_a_fleet_each_and_their_bill(files: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "pd.yaml"
    config.write_text(yaml.safe_dump(PD_CONFIG))
    pd_files = {**files, "config": config}
    shown = _run(pd_files, "--slo", str(files["slo"]))
    assert shown.exit_code == 0, shown.output
    for text in ("prefill pool autoscaled:", "decode pool autoscaled:", "Prefill pool over time",
                 "Decode pool over time", "both pools together"):  # fmt: skip
        assert text in shown.output
    data = json.loads(_run(pd_files, "--slo", str(files["slo"]), "--json").stdout)
    assert "fleet" not in data
    fleets = data["fleets"]
    assert set(fleets) == {"prefill", "decode"}
    assert all(max(f["timeline"]["serving"]) > 1 for f in fleets.values())
    assert sum(w["requests"] for w in fleets["decode"]["windows"]) == 6000
    # Both pools together, at their own prices: the sum of the pools' period averages.
    total = sum(f["usd_per_hour"] for f in fleets.values())
    assert data["cost"]["usd_per_hour"] == pytest.approx(total)


def test_the_shipped_pd_example_scales_both_pools() -> None:
    config = ServingConfig.from_yaml(EXAMPLES / "simulate_pd_autoscale.yaml")
    assert config.pd_mode == "disaggregated"
    policies = [config.pool(name).autoscale for name in ("prefill", "decode")]
    assert all(policy is not None and policy.target_concurrency for policy in policies)


def test_out_writes_the_fleet_over_time_as_csv_and_png(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """``--out`` of an autoscaled run: ``fleet.csv`` at six windows per table row, the same
    requests and paid instance-time as the run, and ``fleet.png`` beside it."""
    out = tmp_path / "run"
    result = _run(files, "--slo", str(files["slo"]), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert str(out / "fleet.csv") in data["files"]
    assert str(out / "fleet.png") in data["files"]
    with (out / "fleet.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {row["pool"] for row in rows} == {"instances"}
    assert sum(int(row["requests"]) for row in rows) == 6000
    table_rows = len(data["fleet"]["windows"])
    assert 6 * (table_rows - 1) < len(rows) <= 6 * table_rows  # the last may be short
    # Time-averaged paid instances over the windows = the bill's mean instances (the bill
    # counts instance-time to the autoscaler's last tick, the windows to the last finish).
    paid = sum(float(r["paid"]) * (float(r["end_s"]) - float(r["start_s"])) for r in rows)
    mean = data["fleet"]["mean_instances"]
    assert paid / float(rows[-1]["end_s"]) == pytest.approx(mean, rel=1e-3)
    assert all(0 <= float(r["attainment"]) <= 1 for r in rows if r["attainment"])
    assert (out / "fleet.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_fixed_pool_writes_no_fleet_files(files: dict[str, Path], tmp_path: Path) -> None:
    fixed = {key: value for key, value in CONFIG.items() if key != "autoscale"}
    config = tmp_path / "fixed.yaml"
    config.write_text(yaml.safe_dump(fixed))
    out = tmp_path / "run"
    args = ["simulate", "--config", str(config), "--workload", str(files["workload"])]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "requests.csv").exists()
    assert not (out / "fleet.csv").exists()
    assert not (out / "fleet.png").exists()
