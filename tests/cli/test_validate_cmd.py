"""``kvplan validate`` on a tiny hand-made silicon CSV: JSON shape, skipped rows, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from optimizer.cli.main import app
from slo.inputfile import InputError

runner = CliRunner()

HEADER = (
    "id,backend,model_path,system,precision,mode,isl,osl,gemm_quant_mode,batch_size,tp_size,"
    "pp_size,silicon_ttft_ms,silicon_tpot_ms"
)
ROWS = [
    "llama_c2,trtllm,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,,agg,128,8,,2,1,1,30.0,7.0",
    "qwen_c2,sglang,Qwen/Qwen3-32B,h100_sxm,,agg,256,8,,2,2,1,60.0,16.0",
    "mystery,vllm,org/NoSuchModel,h100_sxm,fp8,agg,128,8,fp8,2,1,1,30.0,7.0",
    "dsr1_disagg,trtllm,deepseek-ai/DeepSeek-V3,h100_sxm,fp8,disagg,8192,1024,fp8,,,,13693.2,14.6",
]


def _csv(tmp_path: Path, rows: list[str] = ROWS) -> Path:
    path = tmp_path / "silicon.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["validate", *args, "--json", "--rounds", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_json_rows_summary_groups_and_skipped(tmp_path: Path) -> None:
    data = _json("--silicon", str(_csv(tmp_path)))
    assert set(data) == {"rows", "summary", "groups", "skipped"}
    assert [row["id"] for row in data["rows"]] == ["llama_c2", "qwen_c2"]
    summary = data["summary"]
    assert summary["n"] == 2
    assert summary["latency_model"] == "auto"  # the default: the table where one exists
    assert 0 <= summary["ttft_mape"] < 100
    assert 0 <= summary["tpot_mape"] < 100
    row = data["rows"][0]
    for key in ("measured_ttft_ms", "predicted_ttft_ms", "ttft_error", "measured_tpot_ms",
                "predicted_tpot_ms", "tpot_error", "concurrency", "tp", "isl", "osl"):  # fmt: skip
        assert key in row
    assert row["ttft_error"] == pytest.approx(
        (row["predicted_ttft_ms"] - row["measured_ttft_ms"]) / row["measured_ttft_ms"]
    )
    assert {g["backend"] for g in data["groups"]} == {"trtllm", "sglang"}
    skipped = {s["id"]: s for s in data["skipped"]}
    assert set(skipped) == {"mystery", "dsr1_disagg"}  # listed, never silently dropped
    assert skipped["dsr1_disagg"]["line"] == 5
    assert "disagg" in skipped["dsr1_disagg"]["reason"]
    assert "unknown model 'org/NoSuchModel'" in skipped["mystery"]["reason"]


def test_built_tables_are_kept_in_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _json("--silicon", str(_csv(tmp_path)), "--model", "Qwen3-32B")
    assert list((tmp_path / "cache/kvplan/tables").glob("table-*.pkl"))


def test_model_backend_and_limit_select_rows(tmp_path: Path) -> None:
    path = str(_csv(tmp_path))
    only_qwen = _json("--silicon", path, "--model", "Qwen3-32B")
    assert [r["id"] for r in only_qwen["rows"]] == ["qwen_c2"]
    assert only_qwen["skipped"] == []  # the skipped rows are of other models
    only_trtllm = _json("--silicon", path, "--backend", "trtllm", "--latency", "constant:0.01")
    assert [r["id"] for r in only_trtllm["rows"]] == ["llama_c2"]
    assert only_trtllm["summary"]["latency_model"] == "constant:0.01"
    assert [s["id"] for s in only_trtllm["skipped"]] == ["dsr1_disagg"]
    limited = _json("--silicon", path, "--limit", "1")
    assert len(limited["rows"]) == 1


def test_table_output(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["validate", "--silicon", str(_csv(tmp_path)), "--rows", "--rounds", "1"]
    )
    assert result.exit_code == 0, result.output
    for text in ("TTFT MAPE", "Qwen/Qwen3-32B", "Skipped rows (2)", "disagg", "128/8"):
        assert text in result.stdout


def test_unknown_latency_model_is_an_input_error(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["validate", "--silicon", str(_csv(tmp_path)), "--latency", "magic"]
    )
    assert isinstance(result.exception, InputError)
    assert "unknown latency model 'magic'" in str(result.exception)


@pytest.mark.parametrize(
    ("rows", "header", "expected"),
    [
        (
            [ROWS[0].replace(",2,1,1,30.0", ",lots,1,1,30.0")],
            HEADER,
            "line 2: column batch_size: expected a positive integer, got 'lots'",
        ),
        (
            [ROWS[0].rsplit(",", 1)[0]],
            HEADER.rsplit(",", 1)[0],
            "line 1: missing column silicon_tpot_ms",
        ),
    ],
)
def test_malformed_csv_exits_2_with_one_line(
    tmp_path: Path, rows: list[str], header: str, expected: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    line = _exit_2_line("--silicon", str(path))
    assert "bad.csv" in line
    assert expected in line


def _exit_2_line(*args: str) -> str:
    """``kvplan validate ARGS`` in a fresh process: exit status 2 and one line on stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "validate", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_by_and_holdout(tmp_path: Path) -> None:
    path = str(_csv(tmp_path))
    by_engine = _json("--silicon", path, "--by", "engine")
    assert [g["group"] for g in by_engine["groups"]] == ["trtllm", "sglang"]
    for key in ("mape", "median_ape", "median_bias", "mape_trimmed"):
        assert key in by_engine["summary"]["ttft"]
        assert key in by_engine["groups"][0]["tpot"]
    held = _json("--silicon", path, "--holdout", "engine=sglang", "--ttft-offset")
    assert [row["id"] for row in held["rows"]] == ["qwen_c2"]
    assert held["summary"]["holdout"] == "engine=sglang"
    # The offset is refitted on the other (TensorRT-LLM) row; sglang has no row to fit on.
    assert held["summary"]["fitted_offsets_ms"] == {}
    result = runner.invoke(app, ["validate", "--silicon", path, "--by", "colour"])
    assert result.exit_code != 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--model", "meta-llama/Llama-3.1-8B"],
            "--model 'meta-llama/Llama-3.1-8B': no row of {path} is of that model; the file has "
            "meta-llama/Llama-3.1-8B-Instruct (1 row), ",
        ),
        (
            ["--backend", "tensorrt"],
            "--backend 'tensorrt': no row of {path} is on that backend; the file has ",
        ),
        (
            ["--model", "Qwen3-32B", "--backend", "vllm"],
            "--model 'Qwen3-32B' --backend 'vllm': no row of {path} is of that model on that "
            "backend; the model's rows are on sglang (1 row)",
        ),
        (
            ["--model", "Qwen3-32B", "--holdout", "concurrency=64"],
            "--holdout concurrency=64: none of the 1 selected rows matches; their concurrency "
            "values: 2 (1 row)",
        ),
    ],
)
def test_a_selection_of_nothing_exits_2_before_simulating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    path = _csv(tmp_path)

    def no_simulation(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("simulated although the selection names nothing in the file")

    monkeypatch.setattr("optimizer.cli.validate_cmd.run_validation", no_simulation)
    result = runner.invoke(app, ["validate", "--silicon", str(path), *args])
    assert isinstance(result.exception, InputError), result.output
    assert expected.format(path=path) in str(result.exception)
    assert "\n" not in str(result.exception)


def test_a_selection_of_only_skipped_rows_still_reports_them(tmp_path: Path) -> None:
    # The DeepSeek-V3 row is in the file but cannot be simulated: selecting it is no typo.
    data = _json("--silicon", str(_csv(tmp_path)), "--model", "DeepSeek-V3")
    assert data["rows"] == []
    assert [s["id"] for s in data["skipped"]] == ["dsr1_disagg"]


def test_a_selection_typo_is_one_line_and_exit_2(tmp_path: Path) -> None:
    line = _exit_2_line("--silicon", str(_csv(tmp_path)), "--model", "nonexistent")
    assert "--model 'nonexistent': no row of" in line
