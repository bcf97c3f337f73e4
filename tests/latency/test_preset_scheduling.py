"""Backend presets: which scheduling policy each engine's defaults amount to."""

from __future__ import annotations

from simulator.presets import load_preset


def test_trtllm_runs_contexts_whole() -> None:
    # TensorRT-LLM's enable_chunked_prefill is off by default: a context is never split.
    assert load_preset("trtllm").scheduler == "decode_first"


def test_vllm_v1_chunks_and_sglang_prefills_first() -> None:
    assert load_preset("vllm").scheduler == "chunked"
    assert load_preset("sglang").scheduler == "prefill_first"
