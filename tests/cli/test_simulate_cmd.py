"""``kvplan simulate`` (and ``kvplan models show --gpu``, which prices the same deployments)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from hardware.catalog import load_catalog, shipped_catalog
from optimizer.cli.main import app
from optimizer.simconfig import merge_config
from simulator.latency import Deployment, LatencyContext, make_latency_model
from simulator.presets import load_preset
from slo.inputfile import InputError

runner = CliRunner()

#: A small, fast deployment and closed loop: 4 users, 12 requests of 256 + 16 tokens.
SMALL = ["--model", "Llama-3.1-8B-Instruct", "--gpu", "h100_sxm"]
LOOP = ["--concurrency", "4", "--requests", "12", "--input-tokens", "256", "--output-tokens", "16"]
STATS = {"mean", "p50", "p90", "p99"}


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["simulate", *args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def _kvplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "optimizer.cli", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_json_has_exactly_the_documented_objects() -> None:
    data = _json(*SMALL, *LOOP)
    assert data["feasible"] is True
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert set(data[key]) == STATS
        assert data[key]["p50"] <= data[key]["p99"]
    assert {"requests_per_s", "output_tokens_per_s"} <= set(data["throughput"])
    assert set(data["cache"]) == {
        "l1_hit_ratio", "l2_hit_ratio", "l3_hit_ratio", "prefill_tokens_saved_ratio",
    }  # fmt: skip
    assert {"usd_per_hour", "usd_per_million_output_tokens"} <= set(data["cost"])
    assert data["requests"]["finished"] == 12
    # A benchmark-style closed loop has no shared prefixes: nothing is served from cache.
    assert data["cache"]["prefill_tokens_saved_ratio"] == 0.0
    assert data["throughput"]["output_tokens_per_s"] == pytest.approx(
        data["throughput"]["requests_per_s"] * 16
    )
    assert data["workload"]["users"] == 4
    assert data["config"]["model"] == "Llama-3.1-8B-Instruct"  # as given


def test_flags_override_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text("model: Qwen3-32B\ngpu: h100_sxm\ntp: 1\nbackend: sglang\n")
    data = _json("--config", str(config), "--tp", "2", "--eviction", "sieve", *LOOP)
    assert data["config"]["tp"] == 2
    assert data["config"]["backend"] == "sglang"  # from the file
    assert {data["config"][f"l{i}_policy"] for i in (1, 2, 3)} == {"sieve"}
    assert data["cost"]["gpus"] == 2


def test_merge_config_names_the_source_and_missing_fields(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^command line: model: required; give --model$"):
        merge_config(None, {"gpu": "h100_sxm"})
    config = tmp_path / "c.yaml"
    config.write_text("model: Qwen3-32B\ngpu: h100_sxm\nl2_dram_gib: 64\nl3_tier: nvme_4tib\n")
    assert merge_config(config, {"l3": "none"}).l3_tier is None
    with pytest.raises(InputError, match=r"c\.yaml \(with command-line flags\): scheduler"):
        merge_config(config, {"scheduler": "lifo"})


def test_infeasible_config_json_exits_0_table_exits_2() -> None:
    big = ["--model", "Llama-3.1-70B", "--gpu", "h100_sxm", *LOOP]
    data = _json(*big)
    assert data["feasible"] is False
    assert "needs" in data["reason"]
    assert data["ttft_ms"] == dict.fromkeys(STATS)
    assert data["cost"]["usd_per_hour"] > 0
    table = runner.invoke(app, ["simulate", *big])
    assert table.exit_code == 2
    assert "infeasible:" in table.stderr


def test_table_output_names_the_figures() -> None:
    result = runner.invoke(app, ["simulate", *SMALL, *LOOP])
    assert result.exit_code == 0, result.output
    for label in ("Latency (ms)", "ttft", "tpot", "output_tokens_per_s", "usd_per_hour"):
        assert label in result.stdout


def test_rejections_are_counted_by_reason_in_json_and_table(tmp_path: Path) -> None:
    # TensorRT-LLM without chunked prefill cannot run a 256-token context in a 128-token step.
    path = tmp_path / "trtllm.yaml"
    path.write_text("max_batched_tokens: 128\n")
    args = [*SMALL, "--backend", "trtllm", *LOOP]
    config = ["--config", str(path)]
    data = _json(*args, *config)
    reason = (
        "prompt longer than the step budget of an engine that does not chunk prefills "
        "(raise max_batched_tokens or use the chunked scheduler)"
    )
    assert data["requests"]["rejected"] == 12
    assert data["requests"]["rejections"] == {reason: 12}
    # The preset's settings as resolved, the override included.
    assert data["engine"] == (
        "decode_first scheduler, 128-token steps, at most 128 running, prefill steps at least "
        "19.2 ms (eager launch), overlap scheduling on, KV admission reserve_full, serial "
        "front end 8 ms + 0 µs per prompt token per request, "
        "75 µs per streamed token"
    )
    table = runner.invoke(app, ["simulate", *args, *config])
    assert "rejected 12 requests: 12 prompt longer than the step budget" in " ".join(
        table.stdout.split()
    )


def test_a_pd_deployment_names_both_pools_and_their_engines() -> None:
    args = [*SMALL, "--prefill-instances", "1", "--decode-instances", "2", *LOOP]
    table = runner.invoke(app, ["simulate", *args])
    assert table.exit_code == 0, table.output
    text = " ".join(table.stdout.split())
    assert "on 1× h100_sxm TP1 prefill + 2× h100_sxm TP1 decode" in text
    assert "engine: chunked scheduler" in text


def test_out_writes_one_row_per_request(tmp_path: Path) -> None:
    out = tmp_path / "run"
    data = _json(*SMALL, *LOOP, "--out", str(out))
    frame = pd.read_csv(out / "requests.csv")
    assert len(frame) == 12
    assert {"arrival_s", "first_token_s", "ttft_ms", "tpot_ms", "e2e_ms"} <= set(frame.columns)
    assert frame["ttft_ms"].mean() == pytest.approx(data["ttft_ms"]["mean"])
    assert str(out / "requests.csv") in data["files"]
    has_parquet = (out / "requests.parquet").exists()
    assert has_parquet == (str(out / "requests.parquet") in data["files"])


def test_workload_file(tmp_path: Path) -> None:
    spec = tmp_path / "load.yaml"
    spec.write_text(
        "kind: open_loop\nrequests: 10\narrival: {process: poisson, rate_per_s: 5}\n"
        "input_tokens: 300\noutput_tokens: 8\n"
    )
    data = _json(*SMALL, "--workload", str(spec), "--seed", "3")
    assert data["requests"]["finished"] == 10
    assert data["seed"] == 3
    assert data["workload"]["kind"] == "open_loop"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*SMALL, "--gpu", "h300"], "unknown GPU 'h300'"),
        ([*SMALL, "--latency", "rooflin"], "unknown latency model 'rooflin'"),
        ([*SMALL, "--input-tokens", "100"], "--input-tokens: only with --concurrency"),
        ([*SMALL, *LOOP, "--workload", "x.yaml"], "give one workload, not both"),
        ([*SMALL, *LOOP, "--time-scale", "2"], "apply to trace workloads"),
        ([*SMALL, "--workload", "missing.jsonl"], "no such workload or trace file"),
        ([*SMALL, *LOOP, "--kv-margin", "0"], "--kv-margin: expected a fraction between 0 and 1"),
        ([*SMALL, *LOOP, "--kv-margin", "1.5"], "--kv-margin: expected a fraction"),
        ([*SMALL, *LOOP, "--kv-margin", "nan"], "--kv-margin: expected a fraction"),
        ([*SMALL, *LOOP, "--kv-margin", "0.1", "--compare-cache", "idle"], "not with --capacity"),
    ],
)
def test_bad_input_is_an_input_error(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["simulate", *args])
    assert isinstance(result.exception, InputError), result.output
    assert message in str(result.exception)


def test_bad_config_file_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text("model: Qwen3-32B\ngpu: h100_sxm\ntensor_parallel: 2\n")
    proc = _kvplan("simulate", "--config", str(config), *LOOP)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "deploy.yaml" in lines[0]
    assert "tensor_parallel: unknown key" in lines[0]


def test_negative_length_and_malformed_workload_exit_2(tmp_path: Path) -> None:
    proc = _kvplan("simulate", *SMALL, "--concurrency", "2", "--output-tokens", "-5")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    spec = tmp_path / "load.yaml"
    spec.write_text("kind: closed_loop\nusers: 2\nrequests: 4\ninput_tokens: -1\n")
    proc = _kvplan("simulate", *SMALL, "--workload", str(spec))
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "load.yaml" in lines[0]


# ----- models show --gpu ------------------------------------------------------------------------
def _models_show(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["models", "show", *args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_models_show_fit_and_step_times() -> None:
    data = _models_show("Qwen3-32B", "--gpu", "h100_sxm", "--tp", "2", "--backend", "sglang")
    fit = data["fit"]
    assert fit["fits"] is True
    assert fit["kv_tokens"] > 100_000
    assert "fits on h100_sxm at TP2" in fit["reason"]
    assert data["deployment"] == {
        "gpu": "h100_sxm", "tp": 2, "weight_precision": "bf16", "weight_only": False,
        "kv_precision": "bf16", "backend": "sglang",
    }  # fmt: skip
    assert set(data["step_ms"]) == {"auto", "roofline", "table", "calibrated"}
    for times in data["step_ms"].values():
        assert set(times) >= {"prefill_1x4096", "decode_64x4096"}
        # A 4096-token prefill of a 32B model is compute-bound: far slower than one decode step.
        assert times["prefill_1x4096"] > 3 * times["decode_64x4096"] > 0
    assert data["name"] == "Qwen/Qwen3-32B"  # the model's own figures are still there


def test_models_show_prices_on_the_backends_own_kernels() -> None:
    # The step times follow --backend as a simulation would (the engine's kernel tables), not
    # vLLM's tables under every backend's CPU overheads.
    catalog = shipped_catalog()
    deployment = Deployment(
        catalog.model("Qwen3-235B-A22B-FP8"), catalog.gpu("h100_sxm"), tp=4,
        weight_precision="fp8",  # the checkpoint's KV: bf16
    )  # fmt: skip
    shown = _models_show(
        "Qwen3-235B-A22B-FP8", "--gpu", "h100_sxm", "--tp", "4", "--backend", "trtllm"
    )["step_ms"]["table"]["prefill_1x4096"]
    priced = {
        kernels: make_latency_model(
            "table", deployment, params=load_preset("trtllm").compose_params(),
            context=LatencyContext.of(kernels),
        ).step_seconds([(0, 4096)]) * 1e3
        for kernels in ("trtllm", "vllm")
    }  # fmt: skip
    assert shown == pytest.approx(priced["trtllm"])
    assert shown < 0.95 * priced["vllm"]


def test_models_show_fp8_halves_the_kv_bytes_and_reports_a_non_fit() -> None:
    bf16 = _models_show("Llama-3.1-70B", "--gpu", "h100_sxm", "--tp", "4")
    fp8 = _models_show("Llama-3.1-70B", "--gpu", "h100_sxm", "--tp", "4", "--kv-precision", "fp8")
    per_token = "kv_bytes_per_token_per_gpu"
    assert fp8["fit"][per_token] == bf16["fit"][per_token] / 2
    assert fp8["fit"]["kv_tokens"] > bf16["fit"]["kv_tokens"]
    tp1 = _models_show("Llama-3.1-70B", "--gpu", "h100_sxm")
    assert tp1["fit"]["fits"] is False
    assert tp1["fit"]["kv_tokens"] == 0
    assert "needs" in tp1["fit"]["reason"]
    table = runner.invoke(app, ["models", "show", "Llama-3.1-70B", "--gpu", "h100_sxm"])
    assert table.exit_code == 0
    for label in ("fit", "step_ms", "roofline", "prefill_1x4096"):
        assert label in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--gpu", "a100_sxm", "--precision", "fp8", "--backend", "trtllm"],
            "a100_sxm has no fp8 tensor cores",
        ),
        (["--tp", "2"], "--tp needs --gpu"),
        (["--gpu", "h100_sxm", "--tp", "3"], "tp=3 does not divide"),
        (["--gpu", "h100_sxm", "--backend", "tgi"], "unknown backend preset 'tgi'"),
    ],
)
def test_models_show_unknown_combos(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["models", "show", "Qwen3-32B", *args])
    assert isinstance(result.exception, InputError), result.output
    assert message in str(result.exception)


def test_models_show_fp8_on_a100_runs_weight_only_under_vllm() -> None:
    # vLLM serves FP8 on Ampere through its FP8 Marlin kernels (W8A16): half the weight bytes
    # of bf16, so a faster decode step, and a prefill that still computes at the 16-bit peak.
    bf16 = _models_show("Qwen3-32B", "--gpu", "a100_sxm")
    fp8 = _models_show("Qwen3-32B", "--gpu", "a100_sxm", "--precision", "fp8")
    assert fp8["deployment"]["weight_only"] is True
    assert bf16["deployment"]["weight_only"] is False
    assert "fp8 (weight-only) fits on a100_sxm" in fp8["fit"]["reason"]
    assert fp8["fit"]["weights_gib_per_gpu"] < 0.55 * bf16["fit"]["weights_gib_per_gpu"]
    for model in ("table", "roofline"):
        fast, slow = fp8["step_ms"][model], bf16["step_ms"][model]
        assert fast["decode_64x4096"] < slow["decode_64x4096"]
        assert fast["prefill_1x4096"] == pytest.approx(slow["prefill_1x4096"], rel=0.05)
    # SGLang's Marlin path covers linear layers only: an FP8 MoE checkpoint is refused.
    result = runner.invoke(
        app, ["models", "show", "Qwen3-235B-A22B-FP8", "--gpu", "a100_sxm", "--tp", "8",
              "--backend", "sglang"],
    )  # fmt: skip
    assert isinstance(result.exception, InputError)
    assert "dense layers only" in str(result.exception)


def test_models_show_fp8_on_a100_exits_2_with_one_line() -> None:
    proc = _kvplan(
        "models", "show", "Qwen3-32B", "--gpu", "a100_sxm", "--precision", "fp8",
        "--backend", "trtllm",
    )  # fmt: skip
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "fp8" in lines[0]


def test_out_writes_the_finished_requests_when_some_are_rejected(tmp_path: Path) -> None:
    """Issue #12: ``--out`` crashed ("Length of values (20) does not match length of index")
    whenever a request was rejected; the CSV now holds one row per finished request."""
    workload = tmp_path / "long.yaml"
    workload.write_text(
        "kind: open_loop\nrequests: 20\narrival: {process: poisson, rate_per_s: 2}\n"
        "input_tokens: {dist: uniform, low: 1000, high: 60000}\noutput_tokens: 8\n"
    )
    out = tmp_path / "run"
    data = _json(
        "--model", "Qwen/Qwen3-32B", "--gpu", "h100_sxm", "--workload", str(workload),
        "--out", str(out),
    )  # fmt: skip
    rejected = data["requests"]["rejected"]
    assert rejected > 0  # prompts past Qwen3-32B's 40,960-token context are rejected
    dropped = data["workload"]["overlong"]["n_overlong"]  # past the context: never simulated
    frame = pd.read_csv(out / "requests.csv")
    assert len(frame) == data["requests"]["finished"] == 20 - rejected - dropped
    assert frame["ttft_ms"].notna().all()


def test_precisions_follow_the_checkpoint_unless_given() -> None:
    """Issue #13: a quantised checkpoint's name (ModelOpt FP8) runs FP8 weights with the FP8
    KV cache its recipe carries; a plain name bf16 for both; a flag still wins."""
    cat = load_catalog(None)
    flags = {"gpu": "h100_sxm"}
    modelopt = merge_config(None, {**flags, "model": "nvidia/Llama-3.1-8B-Instruct-FP8"}, cat)
    assert (modelopt.weight_precision, modelopt.kv_precision) == ("fp8", "fp8")
    plain = merge_config(None, {**flags, "model": "meta-llama/Llama-3.1-8B-Instruct"}, cat)
    assert (plain.weight_precision, plain.kv_precision) == ("bf16", "bf16")
    given = merge_config(
        None,
        {**flags, "model": "nvidia/Llama-3.1-8B-Instruct-FP8", "kv_precision": "bf16"},
        cat,
    )
    assert (given.weight_precision, given.kv_precision) == ("fp8", "bf16")


def test_kv_margin_says_whether_the_prediction_sits_on_the_kv_edge() -> None:
    """Four users of 272 tokens on an H100 are nowhere near its pool: the margin runs match the
    nominal one; the table prints the line, --json the figures."""
    data = _json(*SMALL, *LOOP, "--kv-margin", "0.1")
    margin = data["kv_margin"]
    assert margin["fraction"] == 0.1
    assert margin["edge"] is False
    assert margin["smaller"]["ratios"] == {
        "ttft_ms.mean": 1.0,
        "ttft_ms.p90": 1.0,
        "tpot_ms.p50": 1.0,
    }
    assert margin["larger"]["kv_capacity_scale"] == pytest.approx(1.1)
    table = runner.invoke(app, ["simulate", *SMALL, *LOOP, "--kv-margin", "0.1"])
    assert table.exit_code == 0, table.output
    assert "KV pool smaller 10%: TTFT p90 x1.00, TPOT p50 x1.00" in table.output
    assert "not capacity-bound" in table.output
