"""Validation scoring: error statistics, groupings, hold-outs, the refitted TTFT offset."""

from __future__ import annotations

import math

import pytest

from simulator.validation.report import (
    FidelityReport,
    Holdout,
    error_stats,
    fit_ttft_offsets,
    parse_holdout,
)
from simulator.validation.silicon.rows import SiliconRow
from simulator.validation.validate import RowResult
from slo.inputfile import InputError


def _row(model: str = "Qwen/Qwen3-32B", backend: str = "trtllm", n: int = 8,
         ttft: float = 100.0) -> SiliconRow:  # fmt: skip
    return SiliconRow(
        line=2, id=f"{model}-{backend}-{n}", model=model, backend=backend, system="h100_sxm",
        isl=1024, osl=128, concurrency=n, precision="", measured_ttft_ms=ttft,
        measured_tpot_ms=10.0, tp=1, pp=1, attention_dp=1, moe_tp=0, moe_ep=0,
    )  # fmt: skip


def _result(row: SiliconRow, ttft: float, tpot: float = 10.0) -> RowResult:
    return RowResult(row, ttft, tpot, requests=row.concurrency)


def test_error_stats_by_hand() -> None:
    errors = [0.1, -0.2, 0.3, -0.4, math.nan]
    stats = error_stats(errors)
    assert stats.n == 4
    assert stats.mape == pytest.approx(0.25)
    assert stats.median_ape == pytest.approx(0.25)
    assert stats.median_bias == pytest.approx(-0.05)
    assert stats.mape_trimmed == stats.mape  # under 100 rows nothing is dropped
    # 200 rows: the worst 2 (1%) leave the trimmed MAPE.
    many = error_stats([0.1] * 198 + [5.0, -9.0])
    assert many.mape_trimmed == pytest.approx(0.1)
    assert many.mape > 0.1


def test_groups_by_every_key() -> None:
    results = (
        _result(_row(n=8), 110.0),
        _result(_row(n=16), 80.0),
        _result(_row(model="meta-llama/Llama-3.1-8B-Instruct", backend="vllm", n=8), 150.0),
    )
    report = FidelityReport("roofline", 5, results, ())
    assert [g.label for g in report.groups("engine")] == ["trtllm", "vllm"]
    assert [g.label for g in report.groups("concurrency")] == ["N=8", "N=16"]
    trt = report.groups("engine")[0]
    assert (trt.n, trt.ttft.mape, trt.ttft.median_bias) == (2, pytest.approx(0.15),
                                                            pytest.approx(-0.05))  # fmt: skip
    summary = report.summary()
    assert summary["ttft"]["median_ape"] == pytest.approx(0.2)


def test_holdout_refits_the_offset_on_the_other_rows() -> None:
    # Qwen rows are 40 ms fast, the Llama rows 10 ms fast: held out Llama, the offset fitted
    # on Qwen (40 ms) overshoots Llama by 30 ms.
    qwen = [_result(_row(n=n), 60.0) for n in (8, 16, 32)]
    llama = [_result(_row(model="meta-llama/Llama-3.1-8B-Instruct", n=n), 90.0) for n in (8, 16)]
    report = FidelityReport("roofline", 5, (*qwen, *llama), (), ttft_offset=True)
    held = report.held_out(parse_holdout("model=Llama-3.1-8B-Instruct"))
    assert held.fitted_offsets_ms == {"trtllm": 40.0}
    assert [r.predicted_ttft_ms for r in held.results] == [130.0, 130.0]
    assert held.summary()["holdout"] == "model=Llama-3.1-8B-Instruct"
    assert fit_ttft_offsets(llama, ["trtllm", "sglang"]) == {"trtllm": 10.0}


def test_holdout_spellings() -> None:
    assert Holdout("concurrency", "16-64").matches(_row(n=32))
    assert not Holdout("concurrency", "16-64").matches(_row(n=8))
    assert parse_holdout("concurrency=8").matches(_row(n=8))
    assert parse_holdout("engine=TRTLLM").matches(_row())
    for bad in ("model", "colour=red", "concurrency=lots"):
        with pytest.raises(InputError, match="--holdout"):
            parse_holdout(bad)
    report = FidelityReport("roofline", 5, (_result(_row(), 100.0),), ())
    with pytest.raises(InputError, match="no simulated row matches"):
        report.held_out(parse_holdout("engine=vllm"))
