"""``simulator.validation.validate``: the engine limits of the benchmark's generated deployment."""

from __future__ import annotations

import dataclasses

import pytest

from hardware.catalog import shipped_catalog
from simulator.validation.rules import harness, protocol, recorded_layout, version_settings
from simulator.validation.validate import (
    FITTED_TTFT_OFFSET_MS,
    RowResult,
    SiliconRow,
    benchmark_engine_settings,
    row_config,
    simulate_row,
)
from slo.inputfile import InputError

#: A row from aiconfigurator's gap analysis (the generator's rules apply to it).
AIC_SOURCE = "source_file=/x/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/m.csv"


def _row(**fields: object) -> SiliconRow:
    base: dict[str, object] = {
        "line": 2, "id": "r", "model": "meta-llama/Llama-3.1-8B-Instruct", "backend": "vllm",
        "system": "h100_sxm", "isl": 1024, "osl": 4, "concurrency": 8, "tp": 1, "pp": 1,
        "attention_dp": 1, "moe_tp": 1, "moe_ep": 1, "precision": "",
        "measured_ttft_ms": 30.0, "measured_tpot_ms": 7.0,
        "source": AIC_SOURCE,
    }  # fmt: skip
    base.update(fields)
    return SiliconRow(**base)  # type: ignore[arg-type]


def test_settings_follow_the_generator_rules() -> None:
    # max_batch_size = N; max_num_tokens = N + isl + 1500 (aiconfigurator benchmark rules);
    # TensorRT-LLM's generated engine arguments give the KV cache 0.80 of the free memory.
    assert benchmark_engine_settings(_row(backend="trtllm")) == {
        "max_running_requests": 8,
        "max_batched_tokens": 8 + 1024 + 1500,
        "hbm_utilization": 0.80,
    }
    vllm = benchmark_engine_settings(_row(concurrency=64, isl=4096))
    assert vllm == {
        "max_running_requests": 64,
        "max_batched_tokens": 64 + 4096 + 1500,
        "chunk_tokens": 64 + 4096 + 1500,
    }
    # SGLang: the running cap; the generator's mixed chunks only when taken literally (the
    # measured rows contradict them, DeploymentRule.note).
    sglang_row = _row(backend="sglang", model="Qwen/Qwen3-32B")
    assert benchmark_engine_settings(sglang_row) == {"max_running_requests": 8}
    literal = benchmark_engine_settings(sglang_row, literal=True)
    assert literal == {"max_running_requests": 8, "scheduler": "chunked",
                       "max_batched_tokens": 8 + 1024 + 1500}  # fmt: skip


def test_a_generator_override_applies_only_to_its_rows() -> None:
    # A row of no known harness runs on the engine's defaults; InferenceX's vLLM launch script
    # passes the concurrency as --max-num-seqs, an 8,192-token budget and async scheduling.
    assert benchmark_engine_settings(_row(backend="trtllm", source="")) == {}
    inferencex = _row(source="source_file=2026-04-06.csv; model=Llama-3.1-70B; wip=False")
    assert harness(inferencex) == "inferencex"
    assert benchmark_engine_settings(inferencex)["max_batched_tokens"] == 8192
    assert benchmark_engine_settings(inferencex)["overlap_scheduling"] is True


def test_sglang_before_054_keeps_the_by_tp_fraction() -> None:
    old = _row(backend="sglang", backend_version="0.5.1.post1", tp=2)
    assert version_settings(old, 2) == {"hbm_utilization": 0.87}
    assert version_settings(_row(backend="sglang", backend_version="0.5.8"), 2) == {}


def test_vllm_rows_before_0_21_keep_their_cuda_graphs_outside_the_pool() -> None:
    """A vLLM 0.18 row is simulated with its CUDA graphs outside the KV budget; a 0.21 one (and
    one without a release) with the preset's, in it."""
    old = _row(backend_version="0.18.0")
    assert version_settings(old, 1) == {"cuda_graphs_in_kv_budget": False}
    assert version_settings(_row(backend_version="0.21.0"), 1) == {}
    assert version_settings(_row(), 1) == {}


def test_row_config_applies_them_only_for_the_benchmark_deployment() -> None:
    catalog = shipped_catalog()
    sized = row_config(_row(), catalog, latency_model="roofline")
    plain = row_config(_row(), catalog, latency_model="roofline", deployment="defaults")
    assert not isinstance(sized, str)
    assert not isinstance(plain, str)
    assert (sized.max_running_requests, sized.max_batched_tokens) == (8, 2532)
    assert (plain.max_running_requests, plain.max_batched_tokens) == (None, None)


def _ttft(row: SiliconRow, deployment: str) -> float:
    outcome = simulate_row(
        row,
        latency_model="constant:0.01",
        catalog=shipped_catalog(),
        rounds=1,
        deployment=deployment,  # type: ignore[arg-type]
    )
    assert isinstance(outcome, RowResult)
    return outcome.predicted_ttft_ms


@pytest.mark.usefixtures("no_frontend")  # hand-derived step times only
def test_smaller_step_budget_spreads_the_first_prefills() -> None:
    # Every step takes 10 ms. The 8,192-token default prefills all eight 1k prompts in the
    # first step; 2,532 tokens per step take about two prompts a step, so later users wait.
    row = _row()
    assert _ttft(row, "defaults") == pytest.approx(10.0)
    assert _ttft(row, "benchmark") >= 20.0


@pytest.mark.usefixtures("no_frontend")  # hand-derived step times only
def test_trtllm_contexts_run_whole() -> None:
    # Budget 3 + 2000 + 1500 = 3503: one 2,000-token context per step (plus the decodes), the
    # second prompt is not split to fill the step. First tokens at 10, 20, 30 ms, each handed
    # out when the next step has been launched, i.e. at its end when it runs a prefill
    # (overlap_prefill_lag): TTFTs 20, 30, 30 ms. Chunking would give 10, 20, 20 ms, and with
    # the lag 20, 20, 20 ms (the third step is a decode).
    row = _row(backend="trtllm", concurrency=3, isl=2000)
    assert _ttft(row, "benchmark") == pytest.approx(80.0 / 3)


@pytest.mark.usefixtures("no_frontend")  # hand-derived step times only
def test_fitted_ttft_offset_is_opt_in_and_per_backend() -> None:
    catalog = shipped_catalog()
    for backend, offset in (("trtllm", FITTED_TTFT_OFFSET_MS["trtllm"]), ("vllm", 0.0)):
        row = _row(backend=backend, concurrency=1, isl=64)
        plain, shifted = (
            simulate_row(
                row, latency_model="constant:0.01", catalog=catalog, rounds=2, ttft_offset=on
            )
            for on in (False, True)
        )
        assert isinstance(plain, RowResult)
        assert isinstance(shifted, RowResult)
        assert plain.predicted_ttft_ms == pytest.approx(10.0)
        assert shifted.predicted_ttft_ms == pytest.approx(10.0 + offset)
        assert shifted.predicted_tpot_ms == plain.predicted_tpot_ms


def test_inferencex_clients_draw_lengths_and_send_ten_rounds() -> None:
    # bench_serving --random-range-ratio 0.8 --num-prompts 10·N: lengths uniform in
    # [0.8 L, L], so the users' requests end at different steps and drift apart.
    source = "source_file=2026-04-06.csv; model=Llama-3.1-70B; wip=False"
    row = _row(source=source, concurrency=4, isl=512, osl=64)
    assert protocol(row).requests_per_user == 10
    outcome = simulate_row(row, latency_model="constant:0.01", catalog=shipped_catalog(),
                           rounds=20)  # fmt: skip
    assert isinstance(outcome, RowResult)
    assert outcome.requests == 4 * 10
    fixed = simulate_row(_row(concurrency=4, isl=512, osl=64), latency_model="constant:0.01",
                         catalog=shipped_catalog(), rounds=20)  # fmt: skip
    assert isinstance(fixed, RowResult)
    assert fixed.requests == 4 * 20
    # Fixed lengths: every step holds all four requests, so TPOT is one step exactly.
    assert fixed.predicted_tpot_ms == pytest.approx(10.0)


def test_an_inferencex_attention_dp_row_is_the_gpus_its_id_names() -> None:
    # The 2026-04-06 export's MiniMax-M2.5 rows: id "..._tp4_ep4_1322" (InferenceX's tp = the
    # server's 4 GPUs), columns tp_size 4 × attention_dp_size 4 with moe_ep_size 16 — read
    # in aiconfigurator's convention a 16-GPU worker. The worker is the id's 4 GPUs. Where the
    # script has an attention-DP branch (H200 here): 4 ranks of TP1 (--tensor-parallel-size=1
    # --data-parallel-size=$TP), experts split 4 ways.
    source = "source_file=2026-04-06.csv; model=MiniMax-M2.5; image=vllm/vllm-openai:v0.18.0"
    row = _row(
        id="2026_04_06_minimax_m2_5_h200_sxm_vllm_fp8_agg_8192x1024_c32_tp4_ep4_1322",
        model="MiniMaxAI/MiniMax-M2.5", system="h200_sxm", tp=4, attention_dp=4, moe_tp=1,
        moe_ep=16, concurrency=32, source=source, precision="fp8",
    )  # fmt: skip
    assert recorded_layout(row) == (1, 4, 1, 4)
    config = row_config(row, shipped_catalog(), latency_model="roofline")
    assert not isinstance(config, str)
    assert (config.tp, config.attention_dp, config.ep) == (4, 4, 4)
    # The H100 script has no attention-DP branch (--tensor-parallel-size=$TP
    # --enable-expert-parallel only): the same record is one TP4 group, experts split 4 ways.
    h100 = dataclasses.replace(row, system="h100_sxm")
    assert recorded_layout(h100) == (4, 1, 1, 4)
    config = row_config(h100, shipped_catalog(), latency_model="roofline")
    assert not isinstance(config, str)
    assert (config.tp, config.attention_dp, config.ep) == (4, 1, 4)
    # Without attention DP, or from another harness, the columns stand as recorded.
    plain = _row(id=row.id, tp=4, moe_ep=4, source=source)
    assert recorded_layout(plain) == (4, 1, 1, 4)
    aic = _row(id=row.id, tp=4, attention_dp=4, moe_ep=16)
    assert recorded_layout(aic) == (4, 4, 1, 16)
    # An id whose GPUs the ranks do not divide keeps the columns (the layout check reports).
    odd = _row(id="x_tp6_ep6_1", tp=4, attention_dp=4, moe_ep=16, source=source)
    assert recorded_layout(odd) == (4, 4, 1, 16)


def test_inferencex_rows_get_their_scripts_settings_per_gpu() -> None:
    # gpt-oss-120b on vLLM: the Hopper scripts leave the KV cache at auto and cap the running
    # requests at $CONC; the B200 script sets kv-cache-dtype fp8 and --max-num-seqs 512
    # (simulator/validation/inferencex.py). B300 and GB200 (aiconfigurator's gb200_sxm) take it.
    catalog = shipped_catalog()
    source = "source_file=2026-04-06.csv; model=GPT-OSS-120B; image=vllm/vllm-openai:v0.18.0"
    settings = {}
    for system in ("h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200_sxm"):
        row = _row(model="openai/gpt-oss-120b", system=system, tp=2, moe_tp=2, precision="fp4",
                   concurrency=64, source=source)  # fmt: skip
        config = row_config(row, catalog, latency_model="roofline")
        assert not isinstance(config, str), config
        settings[system] = (config.kv_precision, config.max_running_requests)
    assert settings == {
        "h100_sxm": ("bf16", 64),
        "h200_sxm": ("bf16", 64),
        "b200_sxm": ("fp8", 512),
        "b300_sxm": ("fp8", 512),
        "gb200_sxm": ("fp8", 512),
    }
    # DeepSeek-R1 on SGLang: per GPU, precision and TP (dsr1_fp8_h200.sh, dsr1_fp{8,4}_b200.sh).
    sgl = "source_file=2026-04-06.csv; model=DeepSeek-R1; image=lmsysorg/sglang:v0.5.9-cu130"

    def sglang(system: str, precision: str, tp: int, isl: int = 1024) -> tuple[object, ...]:
        row = _row(model="deepseek-ai/DeepSeek-R1", backend="sglang", system=system, tp=tp,
                   moe_tp=1, moe_ep=tp, precision=precision, isl=isl, concurrency=32,
                   source=sgl)  # fmt: skip
        c = row_config(row, catalog, latency_model="roofline")
        assert not isinstance(c, str), c
        return (c.kv_precision, c.max_running_requests, c.hbm_utilization, c.chunk_tokens)

    assert sglang("h200_sxm", "fp8", 8) == ("bf16", 256, 0.82, 32768)  # 1024/4: not 1k1k
    assert sglang("b200_sxm", "fp8", 8) == ("fp8", 128, 0.82, 32768)
    assert sglang("b200_sxm", "fp8", 4, isl=8192) == ("fp8", 32, 0.95, 8192)
    assert sglang("b200_sxm", "fp4", 8) == ("fp8", 256, 0.85, 16384)
    # TensorRT-LLM's DeepSeek budget: concurrency + prompt + 64, rounded up to 64, >= 8192.
    trt_source = sgl.replace("lmsysorg/sglang:v0.5.9-cu130", "tensorrt-llm/release:1.2.0")
    trt = _row(model="deepseek-ai/DeepSeek-R1", backend="trtllm", system="b200_sxm", tp=8,
               moe_tp=1, moe_ep=8, precision="fp8", isl=8192, concurrency=100,
               source=trt_source)  # fmt: skip
    assert benchmark_engine_settings(trt) == {
        "max_batched_tokens": 8384, "hbm_utilization": 0.8, "stream_interval": 10,
    }  # fmt: skip
    # Other harnesses, and rows the table does not cover, keep their rules.
    assert benchmark_engine_settings(_row(system="b200_sxm", backend="sglang")) == {
        "max_running_requests": 8
    }
    assert benchmark_engine_settings(_row(system="b200_sxm", backend="sglang", source=sgl)) == {}


@pytest.mark.parametrize(
    ("fields", "aic_kv", "plain_kv"),
    [
        # A vendor block-FP8 checkpoint carries no FP8 KV scheme; aiconfigurator's generator
        # sets one for it on every engine.
        ({"model": "Qwen/Qwen3-235B-A22B-FP8", "backend": "trtllm", "tp": 4, "moe_ep": 4},
         "fp8", "bf16"),
        # vLLM before 0.13 ignores a ModelOpt KV scheme under auto; the generator's
        # --kv-cache-dtype does not depend on it.
        ({"model": "Qwen/Qwen3-32B", "precision": "fp8", "backend_version": "0.12.0"},
         "fp8", "bf16"),
        ({"model": "Qwen/Qwen3-32B", "precision": "fp8_block", "backend": "sglang"},
         "fp8", "bf16"),
        # bf16 weights: the generator leaves the KV cache in the model dtype.
        ({"model": "Qwen/Qwen3-32B", "backend": "trtllm"}, "bf16", "bf16"),
    ],
)  # fmt: skip
def test_aiconfigurator_deployments_quantise_the_kv_cache_with_the_weights(
    fields: dict[str, object], aic_kv: str, plain_kv: str
) -> None:
    catalog = shipped_catalog()
    aic = row_config(_row(**fields), catalog, latency_model="roofline")
    plain = row_config(_row(**fields, source=""), catalog, latency_model="roofline")
    assert not isinstance(aic, str), aic
    assert not isinstance(plain, str), plain
    assert (aic.kv_precision, plain.kv_precision) == (aic_kv, plain_kv)


def test_overrides_set_serving_config_fields_over_the_rows_deployment() -> None:
    # bench/implied_pool.py forces the KV pool: with room for one 1,028-token request at a
    # time, four users queue behind each other and the mean TTFT grows.
    row = _row(concurrency=4, isl=1024, osl=4)
    catalog = shipped_catalog()
    free = simulate_row(row, latency_model="constant:0.01", catalog=catalog, rounds=2)
    tight = simulate_row(
        row, latency_model="constant:0.01", catalog=catalog, rounds=2,
        overrides={"kv_capacity_tokens": 1100},
    )  # fmt: skip
    assert isinstance(free, RowResult)
    assert isinstance(tight, RowResult)
    assert tight.predicted_ttft_ms > 2 * free.predicted_ttft_ms
    with pytest.raises(InputError, match="kv_capacity_token"):
        simulate_row(
            row, latency_model="constant:0.01", catalog=catalog, overrides={"kv_capacity_token": 1}
        )
