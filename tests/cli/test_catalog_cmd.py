"""``kvplan hardware list|show`` and ``kvplan models list|show`` against the shipped catalog."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hardware import InputError, shipped_catalog
from optimizer.cli._output import console
from optimizer.cli.main import app

runner = CliRunner()


def _ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _json(*args: str) -> object:
    return json.loads(_ok(*args, "--json"))


def test_hardware_list_table_names_every_entry() -> None:
    out = _ok("hardware", "list")
    catalog = shipped_catalog()
    for name in [*catalog.gpus, *catalog.storage]:
        assert name in out


def test_hardware_list_json() -> None:
    data = _json("hardware", "list")
    assert isinstance(data, dict)
    catalog = shipped_catalog()
    assert [g["name"] for g in data["gpus"]] == list(catalog.gpus)
    assert [s["name"] for s in data["storage"]] == list(catalog.storage)
    h100 = next(g for g in data["gpus"] if g["name"] == "h100_sxm")
    assert h100["dense_tflops"]["fp8"] == 1979.0


def test_hardware_show_gpu() -> None:
    data = _json("hardware", "show", "H100_SXM")
    assert isinstance(data, dict)
    assert data["type"] == "gpu"
    assert data["name"] == "h100_sxm"
    assert data["hbm_gib"] == 79.65
    assert data["gpu_link_gb_per_s"] == 450.0
    out = _ok("hardware", "show", "h100_sxm")
    assert "dense_tflops" in out
    assert "989.5" in out


def test_hardware_show_storage_tier() -> None:
    data = _json("hardware", "show", "dram")
    assert isinstance(data, dict)
    assert data["type"] == "storage"
    assert data["kind"] == "dram"
    expected = data["default_capacity_gib"] * data["usd_per_gib_month"] / 730.0
    assert data["usd_per_hour_at_default_capacity"] == pytest.approx(expected)


def test_hardware_show_unknown_raises_input_error() -> None:
    result = runner.invoke(app, ["hardware", "show", "h200-sxm"])
    assert isinstance(result.exception, InputError)
    message = str(result.exception)
    assert "unknown GPU or storage tier 'h200-sxm' (did you mean 'h200_sxm'?)" in message
    assert "dram" in message


def test_models_list(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whole names on a terminal wide enough for them (at 80 columns they fold, figures whole:
    # tests/cli/test_narrow_tables.py). The width is the console's own: rich fixes it from
    # COLUMNS when the console is made, so COLUMNS at invoke time may not reach it.
    monkeypatch.setattr(console, "_width", 120)
    wide = runner.invoke(app, ["models", "list"])
    assert wide.exit_code == 0, wide.output
    for model in shipped_catalog().models.values():
        assert model.name in wide.stdout
    data = _json("models", "list")
    assert isinstance(data, list)
    assert len(data) == len(shipped_catalog().models)
    assert {"name", "shape", "parameters", "weight_gib", "kv_per_token"} <= set(data[0])


def test_models_show_derived_figures() -> None:
    data = _json("models", "show", "Llama-3.1-70B")
    assert isinstance(data, dict)
    model = shipped_catalog().model("meta-llama/Llama-3.1-70B")
    assert data["name"] == "meta-llama/Llama-3.1-70B"
    assert data["parameters"] == {"total": 70_553_706_496, "active": 70_553_706_496}
    assert data["kv_per_token"]["kib_bf16"] == 320.0
    assert data["kv_per_token"]["kib_fp8"] == 160.0
    assert data["weight_gib"]["bf16"] == pytest.approx(model.weight_bytes("bf16") / 2**30)
    assert data["weight_gib"]["fp8"] < data["weight_gib"]["bf16"]
    assert set(data["weight_gib"]) == {"bf16", "fp8", "fp4"}
    # MoE / MLA fields that are zero are left out of a dense model's shape.
    assert "num_experts" not in data["shape"]
    assert data["shape"]["tie_word_embeddings"] is False


def test_models_show_moe_and_table() -> None:
    data = _json("models", "show", "deepseek-ai/DeepSeek-V3")
    assert isinstance(data, dict)
    assert data["shape"]["num_experts"] == 256
    assert data["kv_per_token"]["elements"] == 61 * 576
    assert data["parameters"]["active"] < data["parameters"]["total"]
    out = _ok("models", "show", "DeepSeek-V3")
    for label in ("parameters", "weight_gib", "kv_per_token", "kv_lora_rank", "68.625"):
        assert label in out


def test_catalog_option_on_every_command(tmp_path: Path) -> None:
    user = tmp_path / "prices.yaml"
    user.write_text(
        "gpus:\n  h100_sxm:\n    usd_per_gpu_hour: 1.99\n"
        "models:\n  org/Tiny:\n    num_layers: 2\n    hidden_size: 64\n"
        "    num_attention_heads: 4\n    num_kv_heads: 2\n    head_dim: 16\n"
        "    ffn_size: 128\n    vocab_size: 1000\n    max_context_tokens: 2048\n"
    )
    shown = _json("hardware", "show", "h100_sxm", "--catalog", str(user))
    assert isinstance(shown, dict)
    assert shown["usd_per_gpu_hour"] == 1.99
    listed = _json("hardware", "list", "--catalog", str(user))
    assert isinstance(listed, dict)
    assert any(g["usd_per_gpu_hour"] == 1.99 for g in listed["gpus"])
    models = _json("models", "list", "--catalog", str(user))
    assert isinstance(models, list)
    assert models[-1]["name"] == "org/Tiny"
    tiny = _json("models", "show", "tiny", "--catalog", str(user))
    assert isinstance(tiny, dict)
    assert tiny["kv_per_token"]["elements"] == 2 * 2 * 2 * 16


def test_missing_catalog_file_is_an_input_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["models", "list", "--catalog", str(tmp_path / "nope.yaml")])
    assert isinstance(result.exception, InputError)
    assert "no such file" in str(result.exception)


def test_unknown_name_exits_2_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "models", "show", "Qwen3-33B"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert lines[0].startswith("error: unknown model 'Qwen3-33B' (did you mean 'Qwen/Qwen3-32B'?)")
