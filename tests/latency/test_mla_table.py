"""Measured MLA attention (``mla_table.py``, ``mla_measured.py``): DeepSeek's attention cores
from the shipped SGLang / TensorRT-LLM MLA profiles, the generic answer everywhere else."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from hardware.catalog import shipped_catalog
from optimizer.cli.main import app
from simulator.latency import Batch, Deployment
from simulator.latency.compose import KernelCall, OperatorPlanner
from simulator.latency.mla_table import measured_mla_shape, read_mla_profile
from simulator.latency.model import ComposedLatencyModel
from simulator.latency.profile_files import shipped_profiles_dir
from simulator.latency.table_source import table_kernels
from slo.inputfile import InputError

MODEL = "deepseek-ai/DeepSeek-V3"
H200 = shipped_profiles_dir("h200_sxm")


def _model(engine: str, tp: int = 8, model: str = MODEL) -> ComposedLatencyModel:
    catalog = shipped_catalog()
    deployment = Deployment(
        model=catalog.model(model),
        gpu=catalog.gpu("h200_sxm"),
        tp=tp,
        weight_precision="fp8",
        kv_precision="bf16",
    )
    timer = table_kernels(catalog.gpu("h200_sxm"), engine=engine, warn_range=False)
    return ComposedLatencyModel(deployment, timer, name="table")


def _measured_ms(kind: str, heads: int, batch: int, length: int) -> float:
    """The shipped file's latency (ms) at one cell, bf16 KV (median of its repeats)."""
    frame = pd.read_csv(H200 / f"sglang_0.5.14_{kind}_mla.csv.gz")
    column = "isl" if kind == "context" else "step"
    cell = frame[
        (frame["num_heads"] == heads)
        & (frame["batch_size"] == batch)
        & (frame[column] == length)
        & (frame["kv_cache_dtype"] == "bfloat16")
    ]
    assert len(cell), (kind, heads, batch, length)
    return float(cell["latency"].median())


def test_deepseek_attention_is_the_measured_mla_kernel_times_its_layers() -> None:
    model = _model("sglang", tp=8)  # 128 heads / TP8 = 16 per GPU
    layers = OperatorPlanner(model.deployment).attention_layers
    prefill = model.breakdown(Batch.of([(0, 4096)] * 4)).seconds["attn_prefill"]
    assert prefill == pytest.approx(layers * _measured_ms("context", 16, 4, 4096) / 1e3)
    decode = model.breakdown(Batch.of([(2047, 1)] * 64)).seconds["attn_decode"]
    # The decode reads 2,048 tokens, one past the measured 2,047 (log interpolation: +0.04%).
    expected = layers * _measured_ms("generation", 16, 64, 2047) / 1e3
    assert decode == pytest.approx(expected, rel=1e-3)


def test_a_long_mla_prefill_costs_what_the_kernel_measured_not_its_flops() -> None:
    # SGLang's MLA prefill (192-wide QK heads) runs well below the FLOP rate of the 128-wide
    # heads the generic tables measure: vLLM (no MLA table) keeps the generic estimate.
    batch = Batch.of([(0, 16384)])
    measured = _model("sglang").breakdown(batch).seconds["attn_prefill"]
    generic = _model("vllm").breakdown(batch).seconds["attn_prefill"]
    assert measured > 2.5 * generic


def _prefill(model: ComposedLatencyModel, planner: OperatorPlanner, *shape: int) -> float:
    """One layer's prefill attention for ``(count, new, cached)``, as the model prices it."""
    call = KernelCall("attn_prefill", "context_attention", planner.prefill_args(*shape), 1)
    return model.call_seconds(call)


def test_outside_the_grid_the_nearest_measurement_grows_like_the_generic_answer() -> None:
    model = _model("sglang", tp=8)
    generic = table_kernels(shipped_catalog().gpu("h200_sxm"), engine="vllm", warn_range=False)
    planner = OperatorPlanner(model.deployment)
    # 512 prompts is past the table's largest batch (256): measured(256) x generic ratio.
    inside = _prefill(model, planner, 256, 1024, 0)
    beyond = _prefill(model, planner, 512, 1024, 0)
    ratio = generic.context_attention(
        *planner.prefill_args(512, 1024, 0)
    ) / generic.context_attention(*planner.prefill_args(256, 1024, 0))
    assert beyond == pytest.approx(inside * ratio, rel=0.02)
    # A chunk over a cached prefix (the tables measure none) costs more than without it.
    cached = _prefill(model, planner, 1, 2048, 8192)
    fresh = _prefill(model, planner, 1, 2048, 0)
    assert cached > fresh


def test_only_the_measured_latent_shape_is_priced_from_the_tables() -> None:
    catalog = shipped_catalog()
    deepseek = catalog.model(MODEL)
    assert measured_mla_shape(deepseek)
    other = deepseek.model_copy(update={"kv_lora_rank": 256})
    assert not measured_mla_shape(other)
    assert not measured_mla_shape(catalog.model("Qwen/Qwen3-32B"))


def test_mla_profile_bad_input_is_one_line(tmp_path: Path) -> None:
    frame = pd.read_csv(H200 / "sglang_0.5.14_generation_mla.csv.gz")
    for name, edit, message in (
        ("no_step", frame.drop(columns=["step"]), "missing column 'step'"),
        ("zero", frame.assign(latency=0.0), "column 'latency': expected a positive number"),
        ("dtype", frame.assign(kv_cache_dtype="int3"), "unknown dtype 'int3'"),
    ):
        path = tmp_path / f"{name}_generation_mla.csv"
        edit.to_csv(path, index=False)
        with pytest.raises(InputError, match=message) as info:
            read_mla_profile(path, "generation")
        assert str(path) in str(info.value)
        assert "\n" not in str(info.value)


def test_import_copies_mla_profiles_and_validates_them(tmp_path: Path) -> None:
    source = tmp_path / "mine"
    source.mkdir()
    for kind in ("context", "generation"):
        shutil.copyfile(
            H200 / f"sglang_0.5.14_{kind}_mla.csv.gz", source / f"sglang_9.9_{kind}_mla.csv.gz"
        )
    shutil.copyfile(H200 / "sglang_0.5.14_gemm.csv.gz", source / "sglang_9.9_gemm.csv.gz")
    root = tmp_path / "cache"
    result = CliRunner().invoke(
        app,
        ["profiles", "import", str(source), "--gpu", "h200_sxm", "--cache", str(root), "--json"],
    )
    assert result.exit_code == 0, result.output
    assert (root / "h200_sxm" / "sglang_9.9_generation_mla.csv.gz").is_file()
    assert '"class": "context_mla"' in result.output
