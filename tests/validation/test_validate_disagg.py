"""Disaggregated rows of a silicon CSV (``simulator.validation.silicon.disagg``): parsed into
checked rows, deployed as PD configs or skipped with the reason, and simulated by
``kvplan validate``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hardware.catalog import shipped_catalog
from optimizer.cli.main import app
from simulator.config import ServingConfig
from simulator.validation.silicon.disagg import DisaggRow, PoolLayout, disagg_config
from simulator.validation.validate import (
    RowResult,
    read_silicon,
    row_config,
    run_validation,
    simulate_row,
)
from slo.inputfile import InputError

ROLE = "batch_size,num_workers,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size"
HEADER = (
    "id,silicon_data_source,backend,model_path,system,precision,mode,isl,osl,gemm_quant_mode,"
    "batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,"
    + ",".join(f"prefill_{c}" for c in ROLE.split(","))
    + ","
    + ",".join(f"decode_{c}" for c in ROLE.split(","))
    + ",silicon_ttft_ms,silicon_tpot_ms"
)
AGG = "qwen_agg,x,sglang,Qwen/Qwen3-32B,h100_sxm,,agg,256,8,,4,2,1,,1,1,,,,,,,,,,,,,,,60.0,16.0"
#: 1 prefill worker at TP2 + 1 decode worker at TP2, 4 users (from silicon_data_source).
PD = (
    "qwen_pd,src=a; silicon_concurrency=4; measured=x,sglang,Qwen/Qwen3-32B,h100_sxm,fp8,disagg,"
    "256,8,fp8_block,,,,,,,1,1,2,1,1,1,1,4,1,2,1,1,1,1,70.0,15.0"
)
#: DeepSeek-V3 with data-parallel attention on the prefill side (16 ways), as in the real file.
ADP = (
    "dsv3_adp,silicon_concurrency=6,trtllm,deepseek-ai/DeepSeek-V3,h100_sxm,fp8,disagg,"
    "8192,1024,fp8,,,,,,,1,1,1,1,16,1,16,2,3,16,1,1,1,16,13693.2,14.6"
)


def _csv(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "silicon.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def _pool(**fields: int | None) -> PoolLayout:
    base: dict[str, int | None] = {
        "workers": 1, "tp": 2, "pp": 1, "attention_dp": 1, "moe_tp": 0, "moe_ep": 0,
        "batch_size": None,
    }  # fmt: skip
    base.update(fields)
    return PoolLayout(**base)  # type: ignore[arg-type]


def _row(model: str = "Qwen/Qwen3-32B", **pools: PoolLayout) -> DisaggRow:
    return DisaggRow(
        line=2, id="r", model=model, backend="sglang", system="h100_sxm", isl=256, osl=8,
        concurrency=4, concurrency_from="silicon_concurrency", precision="fp8",
        measured_ttft_ms=70.0, measured_tpot_ms=15.0,
        prefill=pools.get("prefill", _pool()), decode=pools.get("decode", _pool()),
    )  # fmt: skip


# ----- reading ----------------------------------------------------------------------------------
def test_disagg_rows_parse_into_rows_with_both_pools(tmp_path: Path) -> None:
    rows, skipped = read_silicon(_csv(tmp_path, [AGG, PD, ADP]))
    assert skipped == []
    assert [(r.id, r.mode) for r in rows] == [
        ("qwen_agg", "agg"), ("qwen_pd", "disagg"), ("dsv3_adp", "disagg"),
    ]  # fmt: skip
    pd = rows[1]
    assert isinstance(pd, DisaggRow)
    assert (pd.line, pd.isl, pd.osl, pd.concurrency, pd.precision) == (3, 256, 8, 4, "fp8_block")
    assert pd.concurrency_from == "silicon_concurrency"
    assert pd.prefill == _pool(batch_size=1, moe_tp=1, moe_ep=1)
    assert pd.decode == _pool(batch_size=4, moe_tp=1, moe_ep=1)
    assert pd.tp == "1×TP2 + 1×TP2"  # the rows table's label, not a GPU count
    adp = rows[2]
    assert isinstance(adp, DisaggRow)
    assert (adp.prefill.attention_dp, adp.decode.workers, adp.decode.moe_ep) == (16, 3, 16)


def test_concurrency_falls_back_to_batch_size(tmp_path: Path) -> None:
    # No silicon_concurrency: the batch_size column, as for an aggregated row.
    from_batch = PD.replace("src=a; silicon_concurrency=4; measured=x", "src=b").replace(
        ",fp8_block,,,,,,,", ",fp8_block,6,,,,,,"
    )
    rows, skipped = read_silicon(_csv(tmp_path, [from_batch]))
    assert skipped == []
    (first,) = rows
    assert isinstance(first, DisaggRow)
    assert (first.concurrency, first.concurrency_from) == (6, "batch_size")


def test_a_disagg_row_without_worker_counts_is_skipped_not_given_one_worker(
    tmp_path: Path,
) -> None:
    # Empty worker counts (as in the shipped DeepSeek-R1 rows, whose identical columns carry
    # different measurements) leave the deployment's size unknown: skipped with the reason.
    no_decode_count = PD.replace(",1,1,2,1,1,1,1,4,1,2,", ",1,1,2,1,1,1,1,4,,2,")
    neither = PD.replace(",1,1,2,1,1,1,1,4,1,2,", ",,,2,1,1,1,1,,,2,")
    rows, skipped = read_silicon(_csv(tmp_path, [AGG, no_decode_count, neither]))
    assert [r.id for r in rows] == ["qwen_agg"]
    assert [s.line for s in skipped] == [3, 4]
    assert skipped[0].reason.startswith("worker count not recorded (decode_num_workers empty)")
    assert "(prefill_num_workers, decode_num_workers empty)" in skipped[1].reason


def test_a_disagg_row_without_a_concurrency_is_skipped_with_the_reason(tmp_path: Path) -> None:
    # decode_batch_size × decode_num_workers (4 × 1) is an engine cap, not taken as the load.
    unknown = PD.replace("src=a; silicon_concurrency=4; measured=x", "src=b")
    rows, skipped = read_silicon(_csv(tmp_path, [AGG, unknown]))
    assert [r.id for r in rows] == ["qwen_agg"]
    assert [(s.id, s.line) for s in skipped] == [("qwen_pd", 3)]
    assert skipped[0].reason.startswith("benchmark concurrency not recorded")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            PD.replace(",1,4,1,2,1,1,1,1,70.0", ",1,4,1,two,1,1,1,1,70.0"),
            "line 2: column decode_tp_size: expected a positive integer, got 'two'",
        ),
        (
            PD.replace(",1,1,2,1,1,1,1,4,", ",1,1.5,2,1,1,1,1,4,"),
            "line 2: column prefill_num_workers: expected a positive integer, got '1.5'",
        ),
        (
            PD.replace("silicon_concurrency=4", "silicon_concurrency=many"),
            "line 2: column silicon_data_source: silicon_concurrency: expected a positive "
            "integer, got 'many'",
        ),
        (
            PD.replace(",256,8,", ",256,0,"),
            "line 2: column osl: expected a positive integer, got '0'",
        ),
    ],
)
def test_a_malformed_number_is_a_one_line_error(tmp_path: Path, bad: str, message: str) -> None:
    path = _csv(tmp_path, [bad])
    with pytest.raises(InputError) as err:
        read_silicon(path)
    assert str(err.value) == f"{path}: {message}"
    assert "\n" not in str(err.value)


# ----- rows → PD deployments --------------------------------------------------------------------
def test_row_config_builds_the_disaggregated_deployment() -> None:
    row = _row(prefill=_pool(workers=2, tp=1), decode=_pool(workers=1, tp=4))
    config = row_config(row, shipped_catalog(), latency_model="table")
    assert not isinstance(config, str)
    assert config.pd_mode == "disaggregated"
    assert config.pool_shape("prefill") == ("h100_sxm", 1, 2)
    assert config.pool_shape("decode") == ("h100_sxm", 4, 1)
    # The aggregated rows' precision rules: fp8 weights → fp8 KV cache.
    assert (config.weight_precision, config.kv_precision) == ("fp8", "fp8")
    assert (config.backend, config.latency_model) == ("sglang", "table")


def test_each_pool_gets_its_recorded_batch_size_and_the_rules_step_budgets() -> None:
    row = _row(prefill=_pool(batch_size=1), decode=_pool(batch_size=48))
    config = row_config(row, shipped_catalog(), latency_model="table")
    assert not isinstance(config, str)
    # Prefill: prompt + 1,500 tokens a step, one request at a time; decode: 48 requests, one
    # token each per step (aiconfigurator's benchmark rules).
    assert config.pool_limits("prefill") == (256 + 1500, 1)
    assert config.pool_limits("decode") == (48, 48)
    defaults = row_config(row, shipped_catalog(), latency_model="table", deployment="defaults")
    assert not isinstance(defaults, str)
    assert defaults.pool_limits("prefill") == (None, None)  # the preset's
    # A role without a recorded batch size keeps the preset's cap.
    unknown = row_config(_row(), shipped_catalog(), latency_model="table")
    assert not isinstance(unknown, str)
    assert unknown.pool_limits("decode") == (None, None)
    assert unknown.pool_limits("prefill") == (256 + 1500, None)


def test_an_moe_row_gets_the_one_expert_parallelism_of_both_pools() -> None:
    pool = _pool(tp=4, moe_tp=1, moe_ep=4)
    config = disagg_config(
        _row("Qwen/Qwen3-235B-A22B-FP8", prefill=pool, decode=pool),
        shipped_catalog(),
        latency_model="roofline",
        weight_precision="fp8",
        kv_precision="fp8",
    )
    assert not isinstance(config, str)
    assert (config.ep, config.pool("prefill").tp, config.pool("decode").tp) == (4, 4, 4)


def test_attention_dp_pool_is_a_worker_of_tp_times_dp_gpus() -> None:
    # The DeepSeek-V3 TensorRT-LLM rows: prefill TP1 x DP16 (EP16), decode TP16 (EP16).
    config = disagg_config(
        _row(
            "deepseek-ai/DeepSeek-V3",
            prefill=_pool(tp=1, attention_dp=16, moe_tp=1, moe_ep=16, batch_size=1),
            decode=_pool(tp=16, moe_tp=1, moe_ep=16, workers=3),
        ),
        shipped_catalog(),
        latency_model="roofline",
        weight_precision="fp8",
        kv_precision="fp8",
    )
    assert not isinstance(config, str)
    prefill, decode = config.pool("prefill"), config.pool("decode")
    assert (prefill.tp, prefill.attention_dp, prefill.max_running_requests) == (16, 16, 1)
    assert (decode.tp, decode.attention_dp, decode.instances) == (16, 1, 3)
    assert (config.ep, config.allow_multi_node) == (16, True)


def test_pools_that_split_their_experts_differently_get_each_their_ep() -> None:
    # InferenceX's B200 recipes: DEP4 prefill, DEP8 decode; here TP4 experts vs EP4.
    row = _row(
        "Qwen/Qwen3-235B-A22B-FP8",
        prefill=_pool(tp=4, moe_tp=4, moe_ep=1),
        decode=_pool(tp=4, moe_tp=1, moe_ep=4),
    )
    cfg = row_config(row, shipped_catalog(), latency_model="roofline")
    assert isinstance(cfg, ServingConfig), cfg
    assert cfg.prefill is not None
    assert cfg.decode is not None
    assert (cfg.prefill.ep, cfg.decode.ep, cfg.ep) == (1, 4, 4)
    assert (cfg.pool_ep("prefill"), cfg.pool_ep("decode")) == (1, 4)
    result = simulate_row(row, latency_model="roofline", catalog=shipped_catalog(), rounds=1)
    assert isinstance(result, RowResult)
    assert result.predicted_tpot_ms > 0


@pytest.mark.parametrize(
    ("model", "prefill", "decode", "reason"),
    [
        (
            "deepseek-ai/DeepSeek-V3",
            _pool(tp=1, attention_dp=16, moe_tp=1, moe_ep=8),
            _pool(tp=16, moe_tp=1, moe_ep=16),
            "MoE layout prefill_moe_tp_size=1 × prefill_moe_ep_size=8 != prefill_tp_size=1 × "
            "prefill_attention_dp_size=16",
        ),
        (
            "Qwen/Qwen3-32B",
            _pool(),
            _pool(pp=2),
            "pipeline parallelism (decode_pp_size=2): not mapped onto a simulated layout yet (the "
            "H100 silicon file has no pp_size > 1 row to check the mapping of its GPU count and "
            "batch size against)",
        ),
        (
            "Qwen/Qwen3-235B-A22B-FP8",
            _pool(tp=4),
            _pool(tp=4),
            "MoE layout prefill_moe_tp_size=1 × prefill_moe_ep_size=1 != prefill_tp_size=4",
        ),
        ("org/NoSuchModel", _pool(), _pool(), "unknown model 'org/NoSuchModel'"),
    ],
)
def test_layouts_the_simulator_cannot_express_give_a_reason(
    model: str, prefill: PoolLayout, decode: PoolLayout, reason: str
) -> None:
    result = row_config(
        _row(model, prefill=prefill, decode=decode), shipped_catalog(), latency_model="roofline"
    )
    assert isinstance(result, str)
    assert reason in result


def test_tensor_parallelism_across_servers_is_modelled_not_refused() -> None:
    config = row_config(
        _row(
            "deepseek-ai/DeepSeek-R1",
            prefill=_pool(tp=16, moe_tp=16, moe_ep=1),
            decode=_pool(tp=16, moe_tp=16, moe_ep=1),
        ),
        shipped_catalog(),
        latency_model="roofline",
    )
    assert not isinstance(config, str)
    assert config.allow_multi_node
    assert (config.pool("prefill").tp, config.pool("decode").tp) == (16, 16)


def test_unknown_backend_and_precision_use_the_aggregated_rules() -> None:
    catalog = shipped_catalog()
    backend = row_config(replace(_row(), backend="lmdeploy"), catalog, latency_model="roofline")
    assert isinstance(backend, str)
    assert "backend 'lmdeploy' has no preset" in backend
    precision = row_config(replace(_row(), precision="q3"), catalog, latency_model="roofline")
    assert precision == "unknown precision 'q3'"


# ----- simulation and report --------------------------------------------------------------------
@pytest.mark.usefixtures("no_frontend")  # hand-derived step times only
def test_a_disagg_row_is_simulated_as_a_closed_loop_on_two_pools() -> None:
    row = _row()
    result = simulate_row(row, latency_model="constant:0.01", catalog=shipped_catalog(), rounds=2)
    assert isinstance(result, RowResult)
    assert result.requests == 8  # 4 users × 2 rounds
    # Every step takes 10 ms. SGLang's client gets the first token from the decode server once
    # the KV has arrived (``pd_first_token: decode_ready``): one prefill step (the four prompts
    # share it) plus the hand-off transfers, which the decode instance receives one at a time
    # (well under a millisecond each here). TPOT is the decode pool's 10 ms steps, plus the wait
    # of a request whose KV landed during a step for the next one.
    assert 10.0 < result.predicted_ttft_ms < 11.0
    assert 10.0 <= result.predicted_tpot_ms < 20.0
    assert result.to_dict()["mode"] == "disagg"


def test_report_groups_disagg_rows_apart_and_lists_skips(tmp_path: Path) -> None:
    rows, skipped = read_silicon(_csv(tmp_path, [AGG, PD, ADP]))
    report = run_validation(rows, latency_model="roofline", rounds=2, skipped=skipped)
    data = report.to_dict()
    assert [(r["id"], r["mode"]) for r in data["rows"]] == [
        ("qwen_agg", "agg"), ("qwen_pd", "disagg"), ("dsv3_adp", "disagg"),
    ]  # fmt: skip
    pd = data["rows"][1]
    assert pd["prefill"]["tp"] == pd["decode"]["tp"] == 2
    assert pd["predicted_ttft_ms"] > 0
    assert pd["predicted_tpot_ms"] > 0
    assert {(g["model"], g["backend"], g["mode"], g["n"]) for g in data["groups"]} == {
        ("Qwen/Qwen3-32B", "sglang", "agg", 1),
        ("Qwen/Qwen3-32B", "sglang", "disagg", 1),
        ("deepseek-ai/DeepSeek-V3", "trtllm", "disagg", 1),
    }
    # The attention-DP row is simulated now (prefill TP1 x DP16 + 3 decode workers of TP16).
    adp = data["rows"][2]
    assert (adp["prefill"]["attention_dp"], adp["decode"]["workers"]) == (16, 3)
    assert adp["predicted_ttft_ms"] > 0
    assert 0 < adp["predicted_tpot_ms"] < 100
    assert data["skipped"] == []


def test_cli_json_says_each_row_mode(tmp_path: Path) -> None:
    path = _csv(tmp_path, [PD, ADP])
    result = CliRunner().invoke(
        app, ["validate", "--silicon", str(path), "--json", "--rounds", "2"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(r["id"], r["mode"]) for r in data["rows"]] == [
        ("qwen_pd", "disagg"), ("dsv3_adp", "disagg"),
    ]  # fmt: skip
    assert data["rows"][1]["prefill"]["attention_dp"] == 16


def test_cli_malformed_disagg_number_is_an_input_error(tmp_path: Path) -> None:
    path = _csv(tmp_path, [PD.replace(",1,4,1,2,1,1,1,1,70.0", ",1,4,1,two,1,1,1,1,70.0")])
    result = CliRunner().invoke(app, ["validate", "--silicon", str(path)])
    # The CLI's entry point prints an InputError as one line and exits 2 (tests/cli).
    assert isinstance(result.exception, InputError)
    assert str(result.exception) == (
        f"{path}: line 2: column decode_tp_size: expected a positive integer, got 'two'"
    )
