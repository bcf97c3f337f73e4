"""Backend presets: the shipped three load, user files validate, errors are one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.latency import ComposeParams
from simulator.presets import BACKEND_PRESETS, BackendPreset, load_preset
from slo.inputfile import InputError


@pytest.mark.parametrize("name", sorted(BACKEND_PRESETS))
def test_shipped_presets_load(name: str) -> None:
    preset = load_preset(name)
    assert preset.name == name
    assert preset.max_batched_tokens >= preset.chunked_prefill_tokens or name == "sglang"
    assert 0 < preset.hbm_utilization <= 1
    assert preset.compose_params().step_overhead_s > 0
    assert preset.memory_params(1).block_tokens == preset.kv_block_tokens


def test_documented_engine_defaults() -> None:
    vllm, sglang, trt = (load_preset(n) for n in ("vllm", "sglang", "trtllm"))
    assert (vllm.kv_block_tokens, sglang.kv_block_tokens, trt.kv_block_tokens) == (16, 1, 32)
    assert (vllm.hbm_utilization, sglang.hbm_utilization, trt.hbm_utilization) == (0.9, 0.88, 0.9)
    assert vllm.max_batched_tokens == 8192
    assert vllm.max_running_requests == 1024
    assert sglang.hbm_utilization_for(1) == 0.88
    assert sglang.hbm_utilization_for(4) == 0.85
    assert sglang.hbm_utilization_for(6) == 0.85
    # 0.5.4+ derives the fraction from the GPU (memory_fit); the by-TP table is for older rows.
    assert sglang.hbm_utilization_for(8) == 0.81
    assert sglang.memory_params(8).hbm_utilization is None
    assert (vllm.cuda_graph_gib, sglang.cuda_graph_gib, trt.cuda_graph_gib) == (0.5, 0.0, 0.5)
    assert trt.memory_accounting == "fraction_of_free"
    # vLLM 0.19 on H100 measured (llm-d-planner's accuracy campaign): non-torch memory
    # 0.24-0.27 GiB per GPU at TP1, 2.06-2.17 at TP2/TP4.
    assert {p.collective_gib for p in (vllm, sglang, trt)} == {1.85}
    assert vllm.memory_params(4).collective_gib == 1.85
    # The same logs: vLLM 0.17+'s activation peak is its sampler run, ~4 fp32 logits copies.
    assert (vllm.sampler_logit_copies, sglang.sampler_logit_copies) == (4, None)
    # SGLang's static fraction is of what the driver's reserve and the CUDA context leave.
    assert (vllm.startup_gib, sglang.startup_gib, trt.startup_gib) == (0.0, 0.9, 0.0)
    # FP8 on Ampere: vLLM's FP8 Marlin for linear layers and experts, SGLang's for linear
    # layers only, TensorRT-LLM none (each preset's comment has the source).
    assert (vllm.fp8_weight_only, sglang.fp8_weight_only, trt.fp8_weight_only) == (
        "all", "dense", "none"
    )  # fmt: skip


def test_compose_defaults_are_the_vllm_preset() -> None:
    assert load_preset("vllm").compose_params() == ComposeParams()


def test_names_are_case_insensitive() -> None:
    assert load_preset("vLLM") is load_preset("vllm")


def test_user_file(tmp_path: Path) -> None:
    data = (Path(__file__).parents[2] / "simulator/data/presets/vllm.yaml").read_text()
    path = tmp_path / "mine.yaml"
    path.write_text(data.replace("kv_block_tokens: 16", "kv_block_tokens: 32"))
    preset = load_preset(path)
    assert isinstance(preset, BackendPreset)
    assert (preset.name, preset.kv_block_tokens) == ("mine", 32)


def test_unknown_name_suggests() -> None:
    with pytest.raises(InputError, match=r"unknown backend preset 'vlm' \(did you mean 'vllm'\?\)"):
        load_preset("vlm")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kv_block_tokens: 0\n", "kv_block_tokens: Input should be greater than or equal to 1"),
        ("max_batch: 3\n", "max_batch: unknown key"),
        ("scheduler: fastest\n", "scheduler: unknown scheduler 'fastest'"),
        ("collective_gib: -1\n", "collective_gib: Input should be greater than or equal to 0"),
        ("sampler_logit_copies: 0\n", "sampler_logit_copies: Input should be greater than 0"),
        ("startup_gib: -0.5\n", "startup_gib: Input should be greater than or equal to 0"),
        ("fp8_weight_only: yes\n", "fp8_weight_only: Input should be 'none', 'dense' or 'all'"),
        # A CPU cost past 10 s (1e300 once hung the simulation: its clock stopped moving).
        ("step_overhead_us: 1.0e+300\n", "step_overhead_us: Input should be less than or equal"),
        ("frontend_token_us: 1.0e+300\n", "frontend_token_us: Input should be less than"),
        ("tokenize_us_per_prompt_token: 2.0e+7\n", "tokenize_us_per_prompt_token: Input should"),
    ],
)
def test_bad_fields_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    base = (Path(__file__).parents[2] / "simulator/data/presets/trtllm.yaml").read_text()
    lines = [
        ln for ln in base.splitlines() if not ln.startswith(text.split(":", maxsplit=1)[0] + ":")
    ]
    path = tmp_path / "bad.yaml"
    path.write_text("\n".join(lines) + "\n" + text)
    with pytest.raises(InputError) as info:
        load_preset(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


def test_missing_file() -> None:
    with pytest.raises(InputError, match="no such file"):
        load_preset("/nonexistent/preset.yaml")


def test_vllm_async_scheduling_hides_the_per_request_cpu_time() -> None:
    # vLLM issue #10634 (5-6 ms between decodes at batch 256 with the 1 ms step overhead):
    # ~20 µs per request when the scheduler runs between steps; --async-scheduling schedules
    # the next step while this one computes, so only the fixed step overhead stays.
    vllm = load_preset("vllm")
    assert vllm.compose_params().request_overhead_s == pytest.approx(20e-6)
    hidden = vllm.compose_params(overlapped=True)
    assert hidden.request_overhead_s == 0.0
    assert hidden.step_overhead_s == vllm.compose_params().step_overhead_s > 0
    # SGLang's and TensorRT-LLM's overlap schedulers keep it (hiding it there was measured worse).
    for name in ("sglang", "trtllm"):
        preset = load_preset(name)
        assert preset.compose_params(overlapped=True) == preset.compose_params()
