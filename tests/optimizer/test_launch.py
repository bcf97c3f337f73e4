"""Launch lines carry the picked configuration's values as real engine flags."""

from __future__ import annotations

import shlex

from optimizer.launch import launch_commands


def test_vllm_and_sglang_flags() -> None:
    params = {
        "model": "Qwen/Qwen3-32B",
        "tp": 4,
        "precision": "fp8",
        "hbm_utilisation": 0.85,
        "scheduler": "chunked",
        "chunk_tokens": 2048,
        "l2_dram_gib": 512,
        "instances": 3,
    }
    out = launch_commands(params)
    vllm = shlex.split(out["vllm"]["command"])
    assert vllm[:3] == ["vllm", "serve", "Qwen/Qwen3-32B"]
    assert vllm[vllm.index("--tensor-parallel-size") + 1] == "4"
    assert vllm[vllm.index("--max-num-batched-tokens") + 1] == "2048"
    assert vllm[vllm.index("--kv-offloading-size") + 1] == "512"
    assert "--enable-prefix-caching" in vllm
    sglang = shlex.split(out["sglang"]["command"])
    assert sglang[sglang.index("--tp-size") + 1] == "4"
    assert sglang[sglang.index("--hicache-size") + 1] == "512"
    assert sglang[sglang.index("--mem-fraction-static") + 1] == "0.85"
    assert out["vllm"]["notes"][0].startswith("run 3 instances")


def test_no_offload_flags_without_l2() -> None:
    out = launch_commands({"model": "m", "tp": 1})
    assert "offloading" not in out["vllm"]["command"]
    assert "hierarchical" not in out["sglang"]["command"]
