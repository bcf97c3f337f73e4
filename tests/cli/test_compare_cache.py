"""``kvplan simulate --compare-cache``: the same workload on each cache setup, side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hardware.catalog import shipped_catalog
from optimizer.cli.compare_cache import cache_configs, parse_setups
from optimizer.cli.main import app
from simulator.config import ServingConfig
from slo.inputfile import InputError

SMALL = ["--model", "Llama-3.1-8B-Instruct", "--gpu", "h100_sxm", "--max-requests", "120"]


def test_json_has_the_four_rows_in_order() -> None:
    result = CliRunner().invoke(
        app, ["simulate", *SMALL, "--compare-cache", "disk,host,idle,device", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = data["compare_cache"]
    assert [row["setup"] for row in rows] == ["idle", "device", "host", "disk"]
    idle, device, host, disk = rows
    assert [row["prefix_caching"] for row in rows] == [False, True, True, True]
    assert (idle["l2_dram_gib"], device["l2_dram_gib"]) == (0.0, 0.0)
    assert host["l2_dram_gib"] == disk["l2_dram_gib"] == 256.0  # the DRAM tier's default
    assert (host["l3_tier"], disk["l3_tier"]) == (None, "nvme_4tib")
    assert idle["hit_l1"] == idle["hit_l2"] == idle["hit_l3"] == 0.0
    assert device["hit_l1"] > 0
    assert len({row["finished"] for row in rows}) == 1  # the same requests, every setup
    assert idle["ttft_mean_ms"] >= device["ttft_mean_ms"]
    assert data["workload"]["kind"] == "trace"


def test_the_config_s_own_tiers_are_kept() -> None:
    serving = ServingConfig(
        model="Qwen3-32B", gpu="h100_sxm", l2_dram_gib=100, l3_tier="pool_16tib", preemption="swap"
    )
    configs = cache_configs(serving, parse_setups("idle,host,disk"), shipped_catalog())
    assert configs["idle"].l2_dram_gib == 0
    assert configs["idle"].preemption == "recompute"
    assert configs["host"].l2_dram_gib == 100
    assert configs["host"].l3_tier is None
    assert configs["disk"].l3_tier == "pool_16tib"


@pytest.mark.parametrize("spec", ["idle,foo", "host,host", ""])
def test_a_bad_list_is_one_line_in_process(spec: str) -> None:
    with pytest.raises(InputError, match="--compare-cache"):
        parse_setups(spec)


def test_a_bad_list_value_exits_2_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "simulate", *SMALL, "--compare-cache", "idle,ssd"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "unknown setup 'ssd'" in lines[0]
    assert "idle,device,host,disk" in lines[0]
    assert proc.stdout == ""


def test_compare_plot_draws_the_setups(tmp_path: Path) -> None:
    """``--compare-plot FILE.png`` writes a PNG of the comparison; a missing directory or another
    suffix is one line, exit 2, before anything is simulated."""
    from PIL import Image  # noqa: PLC0415  (Pillow comes with matplotlib)

    plot = tmp_path / "cache.png"
    result = CliRunner().invoke(
        app,
        [
            "simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "h100_sxm", "--max-requests", "60",
            "--compare-cache", "idle,device", "--compare-plot", str(plot), "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    with Image.open(plot) as image:
        assert image.format == "PNG"
        assert image.size[0] > 600
    for bad in (tmp_path / "missing" / "x.png", tmp_path / "x.svg"):
        refused = CliRunner().invoke(
            app,
            [
                "simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "h100_sxm",
                "--compare-cache", "idle", "--compare-plot", str(bad),
            ],
        )  # fmt: skip
        assert isinstance(refused.exception, InputError)  # exit 2, one line, from kvplan's main
        assert str(refused.exception).startswith("--compare-plot")
