"""``simulator.validation.inferencex``: the launch scripts of the families InferenceX added in
2026 (Kimi-K2.5, GLM-5, DeepSeek-V4-Pro, Qwen3.5, MiniMax on Blackwell), per GPU and precision."""

from __future__ import annotations

import re

import pytest

from hardware.catalog import shipped_catalog
from simulator.validation.inferencex import LAUNCHES, Launch, launch_for
from simulator.validation.rules import benchmark_engine_settings, kv_precision
from simulator.validation.validate import SiliconRow, row_config

#: What an SGLang script with ``--disable-radix-cache`` adds (the harness ignores EOS).
NO_RADIX = {"prefix_caching": False, "kv_admission": "reserve_timeline"}

#: An InferenceX export row (the harness whose scripts ``LAUNCHES`` reads).
IX_SOURCE = "source_file=2026-04-06.csv; model=x; image=vllm/vllm-openai:v0.20.0"


def _ix(model: str, backend: str, system: str, precision: str, **fields: object) -> SiliconRow:
    row: dict[str, object] = {
        "line": 2, "id": "r", "model": model, "backend": backend, "system": system,
        "precision": precision, "isl": 1024, "osl": 1024, "concurrency": 64, "tp": 8, "pp": 1,
        "attention_dp": 1, "moe_tp": 8, "moe_ep": 1, "measured_ttft_ms": 100.0,
        "measured_tpot_ms": 20.0, "source": IX_SOURCE,
    }  # fmt: skip
    row.update(fields)
    return SiliconRow(**row)  # type: ignore[arg-type]


def _family(model: str, backend: str, precision: str) -> str | None:
    launch = launch_for(_ix(model, backend, "b200_sxm", precision))
    return None if launch is None else launch.family


def _vllm_args(running: int, tokens: int, memory: float) -> dict[str, object]:
    """The settings of ``vllm serve --max-num-seqs R --max-num-batched-tokens T
    --gpu-memory-utilization M`` (async scheduling on)."""
    return {"max_running_requests": running, "max_batched_tokens": tokens, "chunk_tokens": tokens,
            "hbm_utilization": memory, "overlap_scheduling": True}  # fmt: skip


def _launch(row: SiliconRow) -> Launch:
    launch = launch_for(row)
    assert launch is not None, row
    return launch


@pytest.mark.parametrize(
    ("model", "backend", "precision", "family"),
    [
        # The model ids aiconfigurator's InferenceX adapter gives the harness keys (MODEL_PATHS).
        ("moonshotai/Kimi-K2.5", "vllm", "int4", "kimik2.5"),
        ("nvidia/Kimi-K2.5-NVFP4", "vllm", "fp4", "kimik2.5"),
        ("zai-org/GLM-5-FP8", "sglang", "fp8", "glm5"),
        ("nvidia/GLM-5-NVFP4", "sglang", "nvfp4", "glm5"),
        ("deepseek-ai/DeepSeek-V4-Pro", "vllm", "fp4", "dsv4"),
        ("sgl-project/DeepSeek-V4-Pro-FP8", "sglang", "fp8", "dsv4"),
        ("Qwen/Qwen3.5-397B-A17B", "sglang", "bf16", "qwen3.5"),
        ("nvidia/Qwen3.5-397B-A17B-NVFP4", "sglang", "fp4", "qwen3.5"),
        ("MiniMaxAI/MiniMax-M2.5", "vllm", "fp8", "minimax"),
        # No NVIDIA fixed-length script: GLM-5.1/5.2 (MI355X only), V4-Flash, Kimi-K2.
        ("zai-org/GLM-5.1-FP8", "sglang", "fp8", None),
        ("nvidia/GLM-5.2-NVFP4", "sglang", "fp4", None),
        ("deepseek-ai/DeepSeek-V4-Flash", "vllm", "fp4", None),
        ("moonshotai/Kimi-K2-Instruct", "vllm", "fp8", None),
    ],
)
def test_new_families_are_matched_on_the_model_name(
    model: str, backend: str, precision: str, family: str | None
) -> None:
    assert _family(model, backend, precision) == family


def test_every_entry_names_its_scripts_and_commits() -> None:
    for launch in LAUNCHES:
        assert launch.source.startswith("SemiAnalysisAI/InferenceX benchmarks/"), launch
        assert ".sh" in launch.source, launch
        assert re.search(r"@[0-9a-f]{8}", launch.source), launch
        assert launch.gpus, launch


def test_the_new_families_have_no_gb200_or_gb300_entry() -> None:
    # Their GB200/GB300 rows ran Dynamo srt-slurm recipes; GB300 is in no set at all.
    for model, backend in (
        ("nvidia/Kimi-K2.5-NVFP4", "vllm"),
        ("nvidia/GLM-5-NVFP4", "sglang"),
        ("deepseek-ai/DeepSeek-V4-Pro", "vllm"),
        ("deepseek-ai/DeepSeek-V4-Pro", "trtllm"),
        ("nvidia/Qwen3.5-397B-A17B-NVFP4", "sglang"),
        ("MiniMaxAI/MiniMax-M2.5", "vllm"),
    ):
        for system in ("gb200_sxm", "gb300"):
            assert launch_for(_ix(model, backend, system, "fp4")) is None, (model, system)
    assert launch_for(_ix("openai/gpt-oss-120b", "vllm", "gb300", "fp4")) is None
    assert launch_for(_ix("openai/gpt-oss-120b", "vllm", "gb200_sxm", "fp4")) is not None


def test_kimi_k25_per_gpu_and_checkpoint() -> None:
    catalog = shipped_catalog()
    fp4 = "nvidia/Kimi-K2.5-NVFP4"
    # B200 FP4 (PR #1047): FP8 KV, --max-num-seqs $CONC, budget ISL x 2, 0.90.
    b200 = _ix(fp4, "vllm", "b200_sxm", "fp4", isl=8192)
    launch = _launch(b200)
    assert launch.kv_cache == "fp8"
    assert benchmark_engine_settings(b200) == _vllm_args(64, 16384, 0.90)
    # B300 FP4: the earlier B200 recipe, KV dtype and budget not set.
    b300 = _ix(fp4, "vllm", "b300_sxm", "fp4", isl=8192)
    launch = _launch(b300)
    assert launch.kv_cache == "auto"
    assert benchmark_engine_settings(b300)["max_batched_tokens"] == 8192
    # INT4 (the model's own checkpoint) on H200, B200 and B300: $CONC, 0.95, KV auto; on
    # Blackwell VLLM_USE_FLASHINFER_MOE_INT4=1 (FlashInfer's trtllm-gen MoE, not Marlin).
    for system in ("h200_sxm", "b200_sxm", "b300_sxm"):
        row = _ix("moonshotai/Kimi-K2.5", "vllm", system, "int4", concurrency=32)
        launch = _launch(row)
        assert (launch.weights, launch.kv_cache) == ("any", "auto")
        kernel = {} if system == "h200_sxm" else {"moe_kernel": "flashinfer_trtllm"}
        assert benchmark_engine_settings(row) == {**_vllm_args(32, 8192, 0.95), **kernel}
        assert kv_precision(row, catalog) == "bf16"
        config = row_config(row, catalog, latency_model="auto")
        assert not isinstance(config, str)
        assert config.moe_kernel == kernel.get("moe_kernel")
    # No Kimi script for SGLang or TensorRT-LLM single-node.
    assert launch_for(_ix(fp4, "sglang", "b200_sxm", "fp4")) is None


def test_glm5_per_gpu_and_precision() -> None:
    fp8, fp4 = "zai-org/GLM-5-FP8", "nvidia/GLM-5-NVFP4"
    h200 = _ix(fp8, "sglang", "h200_sxm", "fp8")
    launch = _launch(h200)
    assert launch.kv_cache == "auto"
    assert benchmark_engine_settings(h200) == {"hbm_utilization": 0.85}  # the rest SGLang's
    for system in ("b200_sxm", "b300_sxm"):  # B300 reuses the B200 recipes as-is
        row = _ix(fp8, "sglang", system, "fp8", concurrency=128)
        launch = _launch(row)
        assert (launch.weights, launch.kv_cache) == ("fp8", "fp8")
        assert benchmark_engine_settings(row) == {
            "max_running_requests": 128, "chunk_tokens": 32768, "max_batched_tokens": 32768,
            "hbm_utilization": 0.85, **NO_RADIX,
        }  # fmt: skip
        row = _ix(fp4, "sglang", system, "nvfp4", concurrency=128)
        launch = _launch(row)
        assert (launch.weights, launch.kv_cache) == ("fp4", "fp8")
        assert benchmark_engine_settings(row) == {
            "chunk_tokens": 32768, "max_batched_tokens": 32768, "hbm_utilization": 0.90,
            **NO_RADIX,
        }  # fmt: skip
    # A GLM-5 row of another precision on Blackwell has no script.
    assert launch_for(_ix("zai-org/GLM-5", "sglang", "b200_sxm", "bf16")) is None


def test_deepseek_v4_vllm() -> None:
    model = "deepseek-ai/DeepSeek-V4-Pro"
    h200 = _ix(model, "vllm", "h200_sxm", "fp8", concurrency=256)
    launch = _launch(h200)
    assert launch.kv_cache == "fp8"
    assert benchmark_engine_settings(h200) == _vllm_args(512, 512, 0.95)

    def vllm(system: str, isl: int, conc: int, ranks: int = 1) -> tuple[object, ...]:
        row = _ix(model, "vllm", system, "fp4", isl=isl, concurrency=conc, attention_dp=ranks,
                  tp=8 // ranks, moe_tp=1, moe_ep=8)  # fmt: skip
        launch = _launch(row)
        assert launch.kv_cache == "fp8"
        s = benchmark_engine_settings(row)
        return s["max_running_requests"], s["chunk_tokens"], s["hbm_utilization"]

    # B200: budget ISL at 8k prompts up to 128 users, else 2048; DP attention 0.85.
    assert vllm("b200_sxm", 8192, 128) == (1024, 8192, 0.90)
    assert vllm("b200_sxm", 8192, 256, ranks=8) == (1024, 2048, 0.85)
    assert vllm("b200_sxm", 1024, 64) == (1024, 2048, 0.90)
    # B300: 2048 with DP attention, else ISL x 2; memory not set.
    assert vllm("b300_sxm", 1024, 64) == (1024, 2048, 0.90)
    assert vllm("b300_sxm", 8192, 64) == (1024, 16384, 0.90)
    assert vllm("b300_sxm", 8192, 1024, ranks=4) == (1024, 2048, 0.90)


def test_deepseek_v4_sglang_and_trtllm() -> None:
    model = "deepseek-ai/DeepSeek-V4-Pro"

    def sglang(system: str, conc: int, ranks: int = 1, ep: int = 1) -> tuple[object, ...]:
        row = _ix(model, "sglang", system, "fp4", concurrency=conc, attention_dp=ranks,
                  tp=8 // ranks, moe_tp=1, moe_ep=ep)  # fmt: skip
        launch = _launch(row)
        assert launch.kv_cache == "auto"
        s = benchmark_engine_settings(row)
        return (s["max_running_requests"], s["chunk_tokens"], s["max_batched_tokens"],
                s["hbm_utilization"])  # fmt: skip

    assert sglang("h200_sxm", 4) == (8, 4096, 16384, 0.88)
    assert sglang("h200_sxm", 64) == (96, 4096, 16384, 0.88)
    assert sglang("b200_sxm", 32) == (48, 8192, 16384, 0.90)
    assert sglang("b200_sxm", 512, ranks=8, ep=8) == (768, 32768, 32768, 0.90)
    assert sglang("b300_sxm", 16) == (24, 8192, 16384, 0.90)
    assert sglang("b300_sxm", 4096, ranks=4, ep=8) == (4352, 65536, 65536, 0.835)
    assert sglang("b300_sxm", 1024, ranks=8, ep=8) == (768, 16384, 16384, 0.94)
    assert sglang("b300_sxm", 256, ranks=4, ep=4) == (384, 16384, 16384, 0.94)
    # TensorRT-LLM, B200 and B300: batch max(CONC, 16), tokens max(ISL + OSL + 256, 8192).
    for system in ("b200_sxm", "b300_sxm"):
        row = _ix(model, "trtllm", system, "fp4", isl=8192, concurrency=4)
        launch = _launch(row)
        assert launch.kv_cache == "fp8"
        assert benchmark_engine_settings(row) == {
            "max_running_requests": 16, "max_batched_tokens": 9472, "hbm_utilization": 0.50,
            "stream_interval": 10,
        }  # fmt: skip
    assert launch_for(_ix(model, "trtllm", "h200_sxm", "fp8")) is None


def test_qwen35_per_gpu_and_precision() -> None:
    def qwen(system: str, precision: str, conc: int = 64) -> tuple[object, ...]:
        row = _ix("Qwen/Qwen3.5-397B-A17B", "sglang", system, precision, concurrency=conc)
        s = benchmark_engine_settings(row)
        return (_launch(row).kv_cache, s.get("max_running_requests"), s["chunk_tokens"],
                s["max_batched_tokens"], s["hbm_utilization"])  # fmt: skip

    assert qwen("b200_sxm", "fp8") == ("fp8", None, 16384, 16384, 0.80)
    assert qwen("b200_sxm", "nvfp4") == ("fp8", None, 16384, 16384, 0.80)
    assert qwen("b300_sxm", "fp8") == ("fp8", 64, 16384, 16384, 0.80)
    assert qwen("b300_sxm", "nvfp4") == ("fp8", 128, 32768, 32768, 0.80)
    for system in ("b200_sxm", "b300_sxm"):  # BF16: after the FP8/FP4 entries
        assert qwen(system, "bf16") == ("auto", 128, 32768, 32768, 0.82)
        assert qwen(system, "") == ("auto", 128, 32768, 32768, 0.82)
    assert qwen("h200_sxm", "fp8") == ("fp8", 128, 16384, 16384, 0.80)
    # The FP8/FP4 scripts keep the linear-attention state in bf16 (--mamba-ssm-dtype bfloat16),
    # the BF16 checkpoint's leave SGLang's fp32.
    for system, precision, state in (
        ("b200_sxm", "fp8", "bf16"), ("b200_sxm", "nvfp4", "bf16"), ("b300_sxm", "fp8", "bf16"),
        ("b300_sxm", "nvfp4", "bf16"), ("h200_sxm", "fp8", "bf16"), ("b200_sxm", "bf16", None),
        ("b300_sxm", "bf16", None),
    ):  # fmt: skip
        row = _ix("Qwen/Qwen3.5-397B-A17B", "sglang", system, precision, concurrency=64)
        assert benchmark_engine_settings(row).get("linear_state_precision") == state
    # --scheduler-recv-interval: 30 above a few users (B200 FP8/FP4 above 4, B300 FP4 and BF16
    # from 16), else 10; B300 FP8 10 always; H200 not set.
    for system, precision, conc, interval in (
        ("b200_sxm", "fp8", 4, 10), ("b200_sxm", "fp8", 8, 30), ("b200_sxm", "nvfp4", 8, 30),
        ("b300_sxm", "fp8", 64, 10), ("b300_sxm", "nvfp4", 8, 10), ("b300_sxm", "nvfp4", 16, 30),
        ("b200_sxm", "bf16", 16, 30), ("b300_sxm", "bf16", 8, 10), ("h200_sxm", "fp8", 64, None),
    ):  # fmt: skip
        row = _ix("Qwen/Qwen3.5-397B-A17B", "sglang", system, precision, concurrency=conc)
        assert benchmark_engine_settings(row).get("scheduler_recv_interval") == interval


def test_minimax_on_blackwell_end_to_end() -> None:
    # MiniMax-M2.5 is a catalog model: the B200/B300 scripts' FP8 KV cache and ISL x 2 budget
    # reach the simulated deployment; H100/H200 keep theirs.
    catalog = shipped_catalog()
    source = "source_file=2026-04-06.csv; model=MiniMax-M2.5; image=vllm/vllm-openai:v0.19.0"
    got = {}
    for system in ("h200_sxm", "b200_sxm", "b300_sxm"):
        row = _ix("MiniMaxAI/MiniMax-M2.5", "vllm", system, "fp8", tp=4, moe_tp=4, isl=8192,
                  concurrency=32, source=source)  # fmt: skip
        config = row_config(row, catalog, latency_model="roofline")
        assert not isinstance(config, str), config
        got[system] = (config.kv_precision, config.max_batched_tokens, config.hbm_utilization)
    assert got == {
        "h200_sxm": ("bf16", 8192, 0.95),
        "b200_sxm": ("fp8", 16384, 0.90),
        "b300_sxm": ("fp8", 16384, 0.90),
    }


def test_gpt_oss_on_hopper_runs_marlin_as_the_script_sets_it() -> None:
    # gptoss_fp4_h{100,200}.sh export VLLM_MXFP4_USE_MARLIN=1: Marlin where vLLM's default on
    # Hopper is OpenAI's Triton kernel; the Blackwell script sets nothing of the kind.
    h100 = _ix("openai/gpt-oss-120b", "vllm", "h100_sxm", "fp4", tp=2, moe_tp=2)
    assert benchmark_engine_settings(h100) == {**_vllm_args(64, 8192, 0.90), "marlin_moe": True}
    config = row_config(h100, shipped_catalog(), latency_model="auto")
    assert not isinstance(config, str)
    assert config.marlin_moe is True
    b200 = _ix("openai/gpt-oss-120b", "vllm", "b200_sxm", "fp4", tp=2, moe_tp=2)
    assert "marlin_moe" not in benchmark_engine_settings(b200)


def test_tensorrt_llm_scripts_stream_every_ten_or_twenty_steps() -> None:
    # stream_interval in every InferenceX TensorRT-LLM script's extra options (gpt-oss 20, the
    # others 10): the front end streams a response per that many tokens.
    for model, system, precision, interval in (
        ("openai/gpt-oss-120b", "b200_sxm", "fp4", 20),
        ("openai/gpt-oss-120b", "h200_sxm", "fp4", 20),
        ("deepseek-ai/DeepSeek-R1-0528", "b200_sxm", "fp8", 10),
        ("deepseek-ai/DeepSeek-R1-0528", "h200_sxm", "fp8", 10),
        ("meta-llama/Llama-3.3-70B-Instruct", "b200_sxm", "fp8", 10),
    ):
        row = _ix(model, "trtllm", system, precision, tp=4, moe_tp=4)
        assert benchmark_engine_settings(row)["stream_interval"] == interval, model
    config = row_config(
        _ix("openai/gpt-oss-120b", "trtllm", "b200_sxm", "fp4", tp=2, moe_tp=2),
        shipped_catalog(), latency_model="auto",
    )  # fmt: skip
    assert not isinstance(config, str)
    assert config.stream_interval == 20


def test_gpt_oss_on_blackwell_runs_mxfp8_activations_as_the_script_sets_them() -> None:
    # gptoss_fp4_b200.sh exports VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (every version read):
    # the trtllm-gen MoE with MXFP8 activations where vLLM's default keeps them bf16.
    b200 = _ix("openai/gpt-oss-120b", "vllm", "b200_sxm", "fp4", tp=2, moe_tp=2)
    assert benchmark_engine_settings(b200)["mxfp4_moe_activation"] == "mxfp8"
    config = row_config(b200, shipped_catalog(), latency_model="auto")
    assert not isinstance(config, str)
    assert config.mxfp4_moe_activation == "mxfp8"
    h100 = _ix("openai/gpt-oss-120b", "vllm", "h100_sxm", "fp4", tp=2, moe_tp=2)
    assert "mxfp4_moe_activation" not in benchmark_engine_settings(h100)


def test_deepseek_r1_sglang_on_blackwell_looks_at_arrivals_every_10_or_30_steps() -> None:
    # dsr1_fp8_b200.sh @1fc5d73c: TP8 30 from 16 users else 10, TP4 10; dsr1_fp4_b200.sh
    # @df64f87f: 30 from 16 users else 10.
    for precision, tp, conc, interval in (
        ("fp8", 8, 16, 30), ("fp8", 8, 8, 10), ("fp8", 4, 64, 10), ("fp4", 8, 16, 30),
        ("fp4", 4, 4, 10),
    ):  # fmt: skip
        row = _ix("deepseek-ai/DeepSeek-R1-0528", "sglang", "b200_sxm", precision, tp=tp,
                  moe_tp=tp, concurrency=conc)  # fmt: skip
        assert benchmark_engine_settings(row)["scheduler_recv_interval"] == interval


@pytest.mark.parametrize(
    ("model", "system", "precision", "off"),
    [
        # --disable-radix-cache (helper-read scripts, each Launch's source): DeepSeek-R1 on
        # H200/B200 (FP8 and FP4), GLM-5 on B200/B300, Qwen3.5 everywhere, DeepSeek-V4 on B200.
        ("deepseek-ai/DeepSeek-R1-0528", "h200_sxm", "fp8", True),
        ("deepseek-ai/DeepSeek-R1-0528", "b200_sxm", "fp8", True),
        ("deepseek-ai/DeepSeek-R1-0528", "b300_sxm", "fp8", True),
        ("deepseek-ai/DeepSeek-R1-0528", "b200_sxm", "fp4", True),
        ("zai-org/GLM-5-FP8", "b200_sxm", "fp8", True),
        ("nvidia/GLM-5-NVFP4", "b300_sxm", "nvfp4", True),
        ("Qwen/Qwen3.5-397B-A17B", "b200_sxm", "fp8", True),
        ("Qwen/Qwen3.5-397B-A17B", "b200_sxm", "nvfp4", True),
        ("Qwen/Qwen3.5-397B-A17B", "b300_sxm", "fp8", True),
        ("Qwen/Qwen3.5-397B-A17B", "b300_sxm", "nvfp4", True),
        ("Qwen/Qwen3.5-397B-A17B", "b300_sxm", "bf16", True),
        ("Qwen/Qwen3.5-397B-A17B", "h200_sxm", "fp8", True),
        ("deepseek-ai/DeepSeek-V4-Pro", "b200_sxm", "fp4", True),
        # The radix cache stays on: GLM-5 on H200, DeepSeek-V4 on H200 and B300.
        ("zai-org/GLM-5-FP8", "h200_sxm", "fp8", False),
        ("deepseek-ai/DeepSeek-V4-Pro", "h200_sxm", "fp8", False),
        ("deepseek-ai/DeepSeek-V4-Pro", "b300_sxm", "fp4", False),
    ],
)
def test_sglang_scripts_without_a_radix_cache_admit_on_the_ignore_eos_path(
    model: str, system: str, precision: str, off: bool
) -> None:
    # Every InferenceX run passes --ignore-eos (benchmark_lib.sh run_benchmark_serving); with
    # the radix cache off SGLang's PrefillAdder takes add_one_req_ignore_eos.
    row = _ix(model, "sglang", system, precision)
    assert _launch(row).backend == "sglang"
    settings = benchmark_engine_settings(row)
    if off:
        assert settings["prefix_caching"] is False
        assert settings["kv_admission"] == "reserve_timeline"
    else:
        assert "prefix_caching" not in settings
        assert "kv_admission" not in settings  # the preset's reserve_estimate


def test_the_ignore_eos_admission_reaches_the_deployment() -> None:
    row = _ix("deepseek-ai/DeepSeek-R1-0528", "sglang", "b200_sxm", "fp8", isl=8192)
    config = row_config(row, shipped_catalog(), latency_model="auto")
    assert not isinstance(config, str)
    assert (config.kv_admission, config.prefix_caching) == ("reserve_timeline", False)
