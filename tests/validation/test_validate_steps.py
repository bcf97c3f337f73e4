"""``kvplan validate --steps``: measured fixed batches against the latency model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hardware import shipped_catalog
from simulator.latency import Deployment, LatencyContext, make_latency_model
from simulator.presets import load_preset
from simulator.validation.steps import read_steps, validate_steps
from slo.inputfile import InputError

HEADER = "id,gpu,engine,model,tp,precision,kv_precision,batch,measured_ms"
EXAMPLE = Path(__file__).parents[2] / "examples" / "steps_h100_from_silicon.csv"


def _file(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "steps.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_a_batch_is_priced_as_the_simulator_prices_a_step(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "mixed,h100_sxm,vllm,Qwen3-32B,2,bf16,,0:512 1024:1;2048:1,20.0",
        "decodes,h100_sxm,vllm,Qwen3-32B,2,bf16,,1088x4,10.0",
        "nosuch,h100_sxm,vllm,org/NoSuchModel,1,bf16,,0:16,1.0",
    )
    rows = read_steps(path)
    assert rows[0].batch == ((0, 512), (1024, 1), (2048, 1))
    assert rows[1].batch == ((1088, 1),) * 4
    catalog = shipped_catalog()
    report = validate_steps(rows, latency_model="roofline", catalog=catalog)
    model = make_latency_model(
        "roofline", Deployment(catalog.model("Qwen3-32B"), catalog.gpu("h100_sxm"), tp=2),
        params=load_preset("vllm").compose_params(),
    )  # fmt: skip
    assert report.rows[0][1] == pytest.approx(model.step_seconds(list(rows[0].batch)) * 1e3)
    assert [s.reason for s in report.skipped] == ["unknown model 'org/NoSuchModel'"]
    assert report.stats().n == 2


def test_each_row_is_priced_on_its_engines_kernels(tmp_path: Path) -> None:
    # A prefill of Qwen3-235B-A22B-FP8: the engines' measured kernels differ (TensorRT-LLM's
    # H100 step ~15% below vLLM's), so a TensorRT-LLM row priced on vLLM's tables, as it was,
    # scores other kernels than the engine ran.
    path = _file(
        tmp_path,
        "v,h100_sxm,vllm,Qwen3-235B-A22B-FP8,4,fp8,fp8,0:4096,150.0",
        "t,h100_sxm,trtllm,Qwen3-235B-A22B-FP8,4,fp8,fp8,0:4096,150.0",
    )
    rows = read_steps(path)
    catalog = shipped_catalog()
    report = validate_steps(rows, latency_model="table", catalog=catalog)
    deployment = Deployment(
        catalog.model("Qwen3-235B-A22B-FP8"), catalog.gpu("h100_sxm"), tp=4,
        weight_precision="fp8", kv_precision="fp8", allow_multi_node=True,
    )  # fmt: skip

    def priced(preset: str, kernels: str) -> float:
        model = make_latency_model(
            "table", deployment, params=load_preset(preset).compose_params(),
            context=LatencyContext.of(kernels),
        )  # fmt: skip
        return model.step_seconds(list(rows[0].batch)) * 1e3

    own = [priced("vllm", "vllm"), priced("trtllm", "trtllm")]
    assert [ms for _, ms in report.rows] == pytest.approx(own)
    assert own[1] < 0.95 * priced("trtllm", "vllm")


def test_the_shipped_example_scores() -> None:
    report = validate_steps(read_steps(EXAMPLE), latency_model="roofline",
                            catalog=shipped_catalog())  # fmt: skip
    assert not report.skipped
    assert len(report.rows) >= 10
    assert 0 < report.stats().mape < 0.5


@pytest.mark.parametrize(
    ("rows", "header", "expected"),
    [
        (["a,h100_sxm,vllm,Qwen3-32B,1,bf16,,1024,5.0"], HEADER,
         "line 2: column batch: expected cache_len:new_tokens pairs"),
        (["a,h100_sxm,vllm,Qwen3-32B,1,bf16,,0:16,-1"], HEADER,
         "line 2: column measured_ms: expected a positive number of milliseconds, got '-1'"),
        (["a,h100_sxm,vllm,Qwen3-32B,0,bf16,,0:16,1"], HEADER,
         "line 2: column tp: expected a positive integer, got '0'"),
        # Mistyped exponents: a 1e300 ms measurement scored as 100% error; 1e14 decodes
        # exhausted memory expanding the batch.
        (["a,h100_sxm,vllm,Qwen3-32B,1,bf16,,0:16,1e300"], HEADER,
         "line 2: column measured_ms: expected at most 1,000,000,000 milliseconds, got '1e300'"),
        (["a,h100_sxm,vllm,Qwen3-32B,1,bf16,,1536x100000000000000,5.0"], HEADER,
         "line 2: column batch: expected cache_len:new_tokens pairs (or AxB: B decodes at cache "
         "A), at most 1,000,000 requests of at most 1,000,000,000 tokens, got '1536x1000000"),
        (["a,h100_sxm,vllm,Qwen3-32B,1,bf16,,10000000000:16,5.0"], HEADER,
         "line 2: column batch: expected cache_len:new_tokens pairs"),
        (["a,h100_sxm,vllm,Qwen3-32B,1,bf16,,0:16,1,x"], HEADER + ",colour",
         "line 1: unknown column 'colour'"),
        (["a,h100_sxm,vllm,Qwen3-32B,1,bf16,"], HEADER.rsplit(",", 2)[0],
         "line 1: missing columns batch, measured_ms"),
    ],
)  # fmt: skip
def test_bad_rows_name_file_line_and_column(
    tmp_path: Path, rows: list[str], header: str, expected: str
) -> None:
    path = _file(tmp_path, *rows, header=header)
    with pytest.raises(InputError, match=r"steps\.csv") as caught:
        read_steps(path)
    assert expected in str(caught.value)


def test_the_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "a,h100_sxm,vllm,Qwen3-32B,1,bf16,,1024,5.0")
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "validate", "--steps", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "steps.csv: line 2: column batch" in lines[0]
