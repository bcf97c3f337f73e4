"""``simulator.validation.silicon.rows`` and ``simulator.validation.validate``: CSV parsing,
row → deployment, extrapolated means, MAPE."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hardware.catalog import shipped_catalog
from simulator.presets import load_preset
from simulator.validation.silicon.rows import REQUIRED_COLUMNS
from simulator.validation.validate import (
    BENCHMARK_ROUNDS,
    RowResult,
    SiliconRow,
    Skipped,
    UserFiles,
    benchmark_mean,
    mape,
    read_silicon,
    row_config,
    run_validation,
    select_rows,
    simulate_row,
)
from slo.inputfile import InputError

HEADER = (
    "id,backend,model_path,system,precision,mode,isl,osl,gemm_quant_mode,batch_size,tp_size,"
    "pp_size,attention_dp_size,moe_tp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms"
)
ROWS = [
    "a,trtllm,meta-llama/Llama-3.1-8B-Instruct,h100_sxm,,agg,128,8,,2,1,1,,1,1,30.0,7.0",
    "b,sglang,Qwen/Qwen3-32B,h100_sxm,,agg,256,8,,2,2,1,,1,1,60.0,16.0",
    "c,vllm,org/NoSuchModel,h100_sxm,fp8,agg,128,8,fp8,2,1,1,,1,1,30.0,7.0",
    "d,trtllm,deepseek-ai/DeepSeek-V3,h100_sxm,fp8,disagg,8192,1024,fp8,,,,,,,13693.2,14.6",
]


def _csv(tmp_path: Path, rows: list[str] = ROWS, header: str = HEADER) -> Path:
    path = tmp_path / "silicon.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def _row(**fields: object) -> SiliconRow:
    base: dict[str, object] = {
        "line": 2, "id": "r", "model": "meta-llama/Llama-3.1-8B-Instruct", "backend": "trtllm",
        "system": "h100_sxm", "isl": 128, "osl": 8, "concurrency": 2, "tp": 1, "pp": 1,
        "attention_dp": 1, "moe_tp": 1, "moe_ep": 1, "precision": "",
        "measured_ttft_ms": 30.0, "measured_tpot_ms": 7.0,
    }  # fmt: skip
    base.update(fields)
    return SiliconRow(**base)  # type: ignore[arg-type]


# ----- reading ----------------------------------------------------------------------------------
def test_read_silicon_parses_agg_rows_and_skips_disagg(tmp_path: Path) -> None:
    rows, skipped = read_silicon(_csv(tmp_path))
    assert [r.id for r in rows] == ["a", "b", "c"]
    assert [r.line for r in rows] == [2, 3, 4]
    first = rows[0]
    assert (first.isl, first.osl, first.concurrency, first.tp) == (128, 8, 2, 1)
    assert first.measured_ttft_ms == 30.0
    assert first.attention_dp == 1  # empty → default
    assert rows[2].precision == "fp8"
    assert len(skipped) == 1
    assert skipped[0].id == "d"
    assert skipped[0].line == 5
    assert "disagg" in skipped[0].reason


def test_attention_dp_row_has_batch_size_users_per_rank(tmp_path: Path) -> None:
    # aiconfigurator records batch_size per DP rank (the MiniMax-M2.5 vLLM rows: batch_size 8
    # at attention DP 4 for silicon_concurrency=32).
    row = "m,vllm,Qwen/Qwen3-235B-A22B-FP8,h100_sxm,fp8,agg,1024,1024,fp8,8,4,1,4,1,16,90.0,10.0"
    (read,), _ = read_silicon(_csv(tmp_path, [row]))
    assert isinstance(read, SiliconRow)
    assert (read.concurrency, read.tp, read.attention_dp) == (32, 4, 4)


def test_an_agg_row_whose_recorded_users_contradict_its_batch_is_skipped(
    tmp_path: Path,
) -> None:
    # As the H100 gpt-oss TensorRT-LLM rows: id c192, silicon_concurrency=192, batch_size 48 at
    # TP4 and no attention DP recorded. 48 users would be another load than the one measured.
    header = "silicon_data_source," + HEADER
    agree = "src; silicon_concurrency=32,m,vllm,Qwen/Qwen3-235B-A22B-FP8,h100_sxm,fp8,agg," \
        "1024,1024,fp8,8,4,1,4,1,16,90.0,10.0"  # fmt: skip
    contradict = "src; silicon_concurrency=192,g,trtllm,openai/gpt-oss-120b,h100_sxm,fp8,agg," \
        "4000,1000,fp8,48,4,1,,4,1,1591.0,48.8"  # fmt: skip
    rows, skipped = read_silicon(_csv(tmp_path, [agree, contradict], header))
    assert [(r.id, r.concurrency) for r in rows] == [("m", 32)]
    assert [(s.id, s.line) for s in skipped] == [("g", 3)]
    assert skipped[0].reason == (
        "silicon_concurrency=192 but batch_size x attention_dp_size = 48: the benchmark's "
        "users and its recorded layout disagree"
    )
    malformed = contradict.replace("=192", "=many")
    with pytest.raises(InputError, match="line 2: column silicon_data_source: silicon_concurrency"):
        read_silicon(_csv(tmp_path, [malformed], header))


def test_missing_column_names_the_file_and_column(tmp_path: Path) -> None:
    header = HEADER.replace(",silicon_tpot_ms", "")
    rows = [r.rsplit(",", 1)[0] for r in ROWS]
    with pytest.raises(InputError, match=r"silicon\.csv: line 1: missing column silicon_tpot_ms"):
        read_silicon(_csv(tmp_path, rows, header))
    assert "silicon_tpot_ms" in REQUIRED_COLUMNS


@pytest.mark.parametrize(
    ("bad", "column", "shown"),
    [
        ("a,trtllm,m/x,h100_sxm,,agg,128,8,,two,1,1,,1,1,30.0,7.0", "batch_size", "'two'"),
        ("a,trtllm,m/x,h100_sxm,,agg,-128,8,,2,1,1,,1,1,30.0,7.0", "isl", "'-128'"),
        ("a,trtllm,m/x,h100_sxm,,agg,128,8,,2,1,1,,1,1,,7.0", "silicon_ttft_ms", "an empty value"),
        ("a,trtllm,m/x,h100_sxm,,agg,128,8,,2,1.5,1,,1,1,30.0,7.0", "tp_size", "'1.5'"),
    ],
)
def test_bad_value_names_line_and_column(tmp_path: Path, bad: str, column: str, shown: str) -> None:
    with pytest.raises(InputError) as err:
        read_silicon(_csv(tmp_path, [ROWS[0], bad]))
    assert str(err.value) == (
        f"{tmp_path / 'silicon.csv'}: line 3: column {column}: expected a positive "
        f"{'number' if column.startswith('silicon') else 'integer'}, got {shown}"
    )


@pytest.mark.parametrize(
    ("bad", "column"),
    [
        ("a,trtllm,m/x,h100_sxm,,agg,128,8,,2,1e300,1,,1,1,30.0,7.0", "tp_size"),
        ("a,trtllm,m/x,h100_sxm,,agg,128,8,,2,1,1,,1,1,1e300,7.0", "silicon_ttft_ms"),
    ],
)
def test_a_number_past_any_benchmark_names_line_and_column(
    tmp_path: Path, bad: str, column: str
) -> None:
    # A mistyped exponent: a 300-digit TP in a skip reason, a measurement no prediction nears.
    with pytest.raises(InputError) as err:
        read_silicon(_csv(tmp_path, [ROWS[0], bad]))
    assert str(err.value) == (
        f"{tmp_path / 'silicon.csv'}: line 3: column {column}: expected at most 1,000,000,000, "
        "got '1e300'"
    )


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_silicon(tmp_path / "nope.csv")


# ----- rows → deployments -----------------------------------------------------------------------
def test_row_config_resolves_precision_and_names() -> None:
    catalog = shipped_catalog()
    config = row_config(_row(), catalog, latency_model="roofline")
    assert not isinstance(config, str)
    assert (config.model, config.gpu, config.tp) == ("meta-llama/Llama-3.1-8B-Instruct",
                                                    "h100_sxm", 1)  # fmt: skip
    assert config.weight_precision == "bf16"
    assert config.kv_precision == "bf16"
    # KV precision follows the checkpoint's recipe: ModelOpt FP8 / NVFP4 carry an FP8 KV
    # cache, a vendor's block-FP8 checkpoint does not (simulator/validation/rules.py).
    for mode, weights, kv in (("fp8", "fp8", "fp8"), ("fp8_block", "fp8", "bf16"),
                              ("nvfp4", "fp4", "fp8")):  # fmt: skip
        quantised = row_config(_row(precision=mode), catalog, latency_model="table")
        assert not isinstance(quantised, str)
        assert (quantised.weight_precision, quantised.kv_precision) == (weights, kv)
        assert quantised.latency_model == "table"
    named = row_config(_row(model="nvidia/Llama-3.1-8B-Instruct-FP8"), catalog,
                       latency_model="roofline")  # fmt: skip
    assert not isinstance(named, str)
    assert (named.model, named.weight_precision, named.kv_precision) == (
        "meta-llama/Llama-3.1-8B-Instruct", "fp8", "fp8")  # fmt: skip
    # An empty precision on an FP8 checkpoint means fp8 weights.
    moe = row_config(
        _row(model="Qwen/Qwen3-235B-A22B-FP8", tp=4, moe_tp=1, moe_ep=4), catalog,
        latency_model="roofline",
    )  # fmt: skip
    assert not isinstance(moe, str)
    assert (moe.weight_precision, moe.ep) == ("fp8", 4)
    # Attention DP: tp_size is a rank's TP; the worker has tp_size x attention_dp_size GPUs.
    adp = row_config(
        _row(model="Qwen/Qwen3-235B-A22B-FP8", tp=2, attention_dp=4, moe_tp=1, moe_ep=8),
        catalog,
        latency_model="roofline",
    )
    assert not isinstance(adp, str)
    assert (adp.tp, adp.attention_dp, adp.ep, adp.allow_multi_node) == (8, 4, 8, False)


#: A Qwen3-235B FP8 row at TP4 with whole experts per GPU.
_QWEN_MOE: dict[str, object] = {
    "model": "Qwen/Qwen3-235B-A22B-FP8", "tp": 4, "moe_tp": 1, "moe_ep": 4,
    "precision": "fp8_block",
}  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "weights", "kv"),
    [
        ({"precision": "sq", "system": "a100_sxm"}, "int8", "bf16"),  # SmoothQuant W8A8
        ({"precision": "int8_wo", "system": "a100_sxm"}, "int8_wo", "bf16"),  # W8A16
        ({"precision": "fp8_ootb"}, "fp8", "fp8"),  # an FP8 checkpoint in TRT-flow GEMMs
        # gpt-oss: bf16 GEMMs (attention) beside MXFP4 experts is its own checkpoint.
        (
            {"model": "openai/gpt-oss-120b", "precision": "float16",
             "moe_precision": "w4a16_mxfp4", "tp": 2, "moe_tp": 2},
            "fp4",
            "bf16",
        ),
        # The experts' column means nothing on a dense model.
        ({"precision": "fp8", "moe_precision": "int4_wo"}, "fp8", "fp8"),
        ({**_QWEN_MOE, "moe_precision": "fp8_block"}, "fp8", "bf16"),
    ],
)  # fmt: skip
def test_aiconfigurator_quant_modes_resolve(
    fields: dict[str, object], weights: str, kv: str
) -> None:
    config = row_config(_row(**fields), shipped_catalog(), latency_model="roofline")
    assert not isinstance(config, str), config
    assert (config.weight_precision, config.kv_precision) == (weights, kv)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"model": "org/NoSuchModel"}, "unknown model 'org/NoSuchModel'"),
        ({"system": "h999"}, "unknown GPU 'h999'"),
        ({"pp": 2}, "pipeline parallelism"),
        ({"attention_dp": 4}, "attention_dp_size=4 on a dense model"),
        (
            {"model": "Qwen/Qwen3-235B-A22B-FP8", "tp": 1, "attention_dp": 4, "moe_ep": 2},
            "moe_tp_size=1 × moe_ep_size=2 != tp_size=1 × attention_dp_size=4",
        ),
        ({"backend": "tgi"}, "backend 'tgi' has no preset"),
        ({"precision": "q3_k"}, "unknown precision 'q3_k'"),
        ({"precision": "w4afp8"}, "gemm_quant_mode 'w4afp8': int4 weights with FP8 activations"),
        # Routed experts in another precision than the rest of the checkpoint served.
        (
            {**_QWEN_MOE, "moe_precision": "w4afp8"},
            "moe_quant_mode 'w4afp8': int4 weights with FP8 activations",
        ),
        (
            {**_QWEN_MOE, "moe_precision": "int4_wo"},
            "moe_quant_mode 'int4_wo' (int4 experts) beside the fp8 weights",
        ),
        ({**_QWEN_MOE, "moe_precision": "q9"}, "unknown moe_quant_mode 'q9'"),
        (
            {"model": "Qwen/Qwen3-235B-A22B-FP8", "tp": 4, "moe_tp": 2, "moe_ep": 4},
            "moe_tp_size=2 × moe_ep_size=4 != tp_size=4",
        ),
        # Qwen3-32B's context is 40,960 tokens: the simulator would drop every request.
        (
            {"model": "Qwen/Qwen3-32B", "isl": 40_000, "osl": 961},
            "isl + osl = 40,961 tokens is longer than the 40,960-token context",
        ),
        ({"isl": 100_000_000}, "isl + osl = 100,000,"),
    ],
)
def test_rows_the_simulator_cannot_express_give_a_reason(
    fields: dict[str, object], reason: str
) -> None:
    result = row_config(_row(**fields), shipped_catalog(), latency_model="roofline")
    assert isinstance(result, str)
    assert reason in result


def test_a_row_filling_the_context_exactly_is_expressible() -> None:
    row = _row(model="Qwen/Qwen3-32B", backend="vllm", tp=2, isl=40_000, osl=960)
    assert not isinstance(row_config(row, shipped_catalog(), latency_model="roofline"), str)


def test_infeasible_row_is_skipped_with_the_fit_reason() -> None:
    # 70B in bf16 does not fit one H100.
    row = _row(model="meta-llama/Llama-3.1-70B", backend="vllm")
    outcome = simulate_row(row, latency_model="roofline", catalog=shipped_catalog(), rounds=1)
    assert isinstance(outcome, Skipped)
    assert outcome.reason.startswith("infeasible: Llama-3.1-70B bf16 needs")


def test_a_closed_loop_past_the_supported_users_is_skipped_with_the_reason() -> None:
    # It failed the whole file before; the row is listed, the others still score.
    row = _row(model="Qwen/Qwen3-8B", backend="vllm", concurrency=2_000_000, isl=128, osl=8)
    outcome = simulate_row(row, latency_model="roofline", catalog=shipped_catalog(), rounds=1)
    assert isinstance(outcome, Skipped)
    assert outcome.reason.startswith("cannot express the benchmark's closed loop: ")
    assert "users: 2,000,000 is more than the 1,000,000 supported" in outcome.reason


# ----- simulating -------------------------------------------------------------------------------
def test_the_user_files_are_read_and_never_change_a_result(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    files = UserFiles(kernel_profiles_dir=str(tmp_path / "profiles"), latency_cache_dir=str(tables))
    config = row_config(_row(), shipped_catalog(), latency_model="table")
    assert not isinstance(config, str)
    applied = files.apply(config)
    assert applied.kernel_profiles_dir == str(tmp_path / "profiles")
    assert applied.latency_cache_dir == str(tables)
    assert UserFiles().apply(config) is config
    row = _row(concurrency=2, isl=256, osl=8)
    plain = simulate_row(row, latency_model="table", catalog=shipped_catalog(), rounds=2)
    cached = simulate_row(
        row,
        latency_model="table",
        catalog=shipped_catalog(),
        rounds=2,
        files=UserFiles(latency_cache_dir=str(tables)),
    )
    assert len(list(tables.glob("table-*.pkl"))) == 1  # the H100 TensorRT-LLM table, kept
    assert isinstance(plain, RowResult)
    assert isinstance(cached, RowResult)
    assert (cached.predicted_ttft_ms, cached.predicted_tpot_ms) == (
        plain.predicted_ttft_ms,
        plain.predicted_tpot_ms,
    )


def test_constant_step_time_gives_analytic_ttft_and_tpot() -> None:
    # One user, every step 10 ms: the prompt is one step (first token), then one step per token;
    # TensorRT-LLM's front end adds its intake before the prompt and one token's streaming
    # after it (each later token is streamed within the next step).
    row = _row(concurrency=1, isl=64, osl=5)
    outcome = simulate_row(row, latency_model="constant:0.01", catalog=shipped_catalog(), rounds=3)
    assert isinstance(outcome, RowResult)
    preset = load_preset("trtllm")
    intake_us = preset.frontend_request_us + 64 * preset.frontend_prompt_token_us
    ttft = 10.0 + (intake_us + preset.frontend_token_us) / 1e3
    assert outcome.predicted_ttft_ms == pytest.approx(ttft)
    assert outcome.predicted_tpot_ms == pytest.approx(10.0)
    assert outcome.requests == 3
    assert outcome.ttft_error == pytest.approx((ttft - 30.0) / 30.0)


def test_benchmark_mean_extrapolates_the_steady_round() -> None:
    users, rounds = 2, 3
    values = np.array([10.0, 10.0, 4.0, 4.0, 2.0, 2.0])  # round means 10, 4 (steady), 2 (drain)
    expected = (10.0 + (BENCHMARK_ROUNDS - 2) * 4.0 + 2.0) / BENCHMARK_ROUNDS
    assert benchmark_mean(values, users, rounds) == pytest.approx(expected)
    # All 20 rounds simulated, or incomplete rounds: the plain mean.
    full = np.arange(2.0 * BENCHMARK_ROUNDS)
    assert benchmark_mean(full, 2, BENCHMARK_ROUNDS) == pytest.approx(full.mean())
    assert benchmark_mean(values[:5], users, rounds) == pytest.approx(values[:5].mean())
    # NaN (one-token outputs have no TPOT) is ignored.
    assert benchmark_mean(np.array([np.nan, 3.0]), 2, 1) == 3.0
    assert math.isnan(benchmark_mean(np.array([np.nan]), 1, 1))


def test_mape_ignores_non_finite_errors() -> None:
    assert mape([0.1, -0.3, math.nan]) == pytest.approx(0.2)
    assert math.isnan(mape([]))


def test_select_rows_filters_and_spreads(tmp_path: Path) -> None:
    rows, _ = read_silicon(_csv(tmp_path))
    assert [r.id for r in select_rows(rows, model="qwen3-32b")] == ["b"]
    assert [r.id for r in select_rows(rows, backend="TRTLLM")] == ["a"]
    assert [r.id for r in select_rows(rows, limit=2)] == ["a", "c"]  # first and last


def test_run_validation_reports_groups_summary_and_skips(tmp_path: Path) -> None:
    rows, skipped = read_silicon(_csv(tmp_path))
    report = run_validation(rows, latency_model="roofline", rounds=2, skipped=skipped)
    data = report.to_dict()
    assert set(data) == {"rows", "summary", "groups", "skipped"}
    assert [r["id"] for r in data["rows"]] == ["a", "b"]
    assert {"ttft_mape", "tpot_mape", "n"} <= set(data["summary"])
    assert data["summary"]["n"] == 2
    errors = [abs(r["ttft_error"]) for r in data["rows"]]
    assert data["summary"]["ttft_mape"] == pytest.approx(sum(errors) / 2)
    assert [(g["model"], g["backend"], g["n"]) for g in data["groups"]] == [
        ("meta-llama/Llama-3.1-8B-Instruct", "trtllm", 1),
        ("Qwen/Qwen3-32B", "sglang", 1),
    ]
    reasons = {s["id"]: s["reason"] for s in data["skipped"]}
    assert set(reasons) == {"c", "d"}
    assert "unknown model" in reasons["c"]
    for row in data["rows"]:
        assert row["predicted_ttft_ms"] > 0
        assert row["predicted_tpot_ms"] > 0


@pytest.mark.usefixtures("no_frontend")  # hand-derived step counts only
@pytest.mark.parametrize(("backend", "steps_waited"), [("vllm", 1), ("trtllm", 2)])
def test_spread_start_runs_a_pilot_and_staggers_the_users(backend: str, steps_waited: int) -> None:
    row = _row(concurrency=4, isl=64, osl=5, backend=backend)
    catalog = shipped_catalog()
    together = simulate_row(row, latency_model="constant:0.01", catalog=catalog, rounds=2)
    spread = simulate_row(
        row, latency_model="constant:0.01", catalog=catalog, rounds=2, start="spread"
    )
    assert isinstance(together, RowResult)
    assert isinstance(spread, RowResult)
    assert spread.requests == together.requests == 8
    # Four prompts that arrive at once share the first 10 ms step; staggered users arrive while
    # a step is running and wait for it (and, under TensorRT-LLM's overlap scheduler, for the
    # step scheduled meanwhile), so their first token comes later.
    assert together.predicted_ttft_ms == pytest.approx(10.0)
    assert 10.0 < spread.predicted_ttft_ms < 10.0 * (1 + steps_waited)
    if steps_waited > 1:
        assert spread.predicted_ttft_ms > 20.0


def test_unknown_column_names_the_file_and_column(tmp_path: Path) -> None:
    path = tmp_path / "typo.csv"
    path.write_text(
        "id,backend,model_path,system,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,"
        "silicon_tpot_ms,silicon_tpot_msx\n"
    )
    with pytest.raises(InputError, match=r"typo\.csv: line 1: unknown column 'silicon_tpot_msx'"):
        read_silicon(path)
