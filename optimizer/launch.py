"""Engine launch command lines for a recommended configuration (vLLM and SGLang).

The flags are the engines' documented CLI options (vLLM ``vllm serve``, SGLang
``python -m sglang.launch_server``); values come from the configuration the optimizer picked.
This is a starting point a user pastes and adjusts — it does not claim every simulator knob has
an engine equivalent; where one has none (e.g. an eviction policy other than LRU) the line
carries a ``#`` note instead of a made-up flag.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["launch_commands"]


def _vllm(p: Mapping[str, Any]) -> tuple[str, list[str]]:
    args = ["vllm", "serve", str(p["model"]), "--tensor-parallel-size", str(p.get("tp", 1))]
    if p.get("precision") == "fp8":
        args += ["--quantization", "fp8"]
    if p.get("kv_precision") == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if "hbm_utilisation" in p:
        args += ["--gpu-memory-utilization", f"{float(p['hbm_utilisation']):.2f}"]
    # vLLM's chunk size is its per-step token budget.
    budget = p.get("chunk_tokens") if p.get("scheduler") == "chunked" else None
    budget = budget or p.get("max_batched_tokens")
    if budget:
        args += ["--max-num-batched-tokens", str(budget)]
    if p.get("max_running_requests"):
        args += ["--max-num-seqs", str(p["max_running_requests"])]
    args += ["--enable-prefix-caching"]
    if p.get("scheduler") == "chunked":
        args += ["--enable-chunked-prefill"]
    notes: list[str] = []
    l2 = float(p.get("l2_dram_gib") or 0)
    if l2 > 0:
        args += ["--kv-offloading-backend", "native", "--kv-offloading-size", f"{l2:g}"]
    if p.get("l3") not in (None, "none"):
        notes.append(f"L3 tier '{p['l3']}': attach it through a KV connector (e.g. LMCache)")
    if p.get("eviction") not in (None, "lru"):
        notes.append(f"eviction '{p['eviction']}' has no vLLM flag (vLLM evicts LRU)")
    return shlex.join(args), notes


def _sglang(p: Mapping[str, Any]) -> tuple[str, list[str]]:
    args = ["python", "-m", "sglang.launch_server", "--model-path", str(p["model"])]
    args += ["--tp-size", str(p.get("tp", 1))]
    if p.get("precision") == "fp8":
        args += ["--quantization", "fp8"]
    if p.get("kv_precision") == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if "hbm_utilisation" in p:
        args += ["--mem-fraction-static", f"{float(p['hbm_utilisation']):.2f}"]
    if p.get("scheduler") == "chunked" and p.get("chunk_tokens"):
        args += ["--chunked-prefill-size", str(p["chunk_tokens"])]
    if p.get("max_running_requests"):
        args += ["--max-running-requests", str(p["max_running_requests"])]
    notes: list[str] = []
    l2 = float(p.get("l2_dram_gib") or 0)
    if l2 > 0:
        args += ["--enable-hierarchical-cache", "--hicache-size", f"{l2:g}"]
    l3 = p.get("l3")
    if l3 not in (None, "none"):
        backend = "mooncake" if str(l3).startswith("pool") else "file"
        args += ["--hicache-storage-backend", backend]
    if str(p.get("router", "")).split(":")[0] == "cache_aware":
        notes.append("put the instances behind sglang-router (cache-aware policy)")
    if p.get("eviction") not in (None, "lru"):
        notes.append(f"eviction '{p['eviction']}': SGLang offers --radix-eviction-policy lru|lfu")
    return shlex.join(args), notes


def launch_commands(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"vllm": {"command": str, "notes": [...]}, "sglang": {...}}`` for one configuration.

    ``params`` uses the optimizer's parameter names (model, tp, precision, kv_precision,
    hbm_utilisation, max_batched_tokens, max_running_requests, scheduler, chunk_tokens,
    l2_dram_gib, l3, eviction, router); missing ones are left to the engine's defaults.
    """
    out: dict[str, dict[str, Any]] = {}
    for engine, build in (("vllm", _vllm), ("sglang", _sglang)):
        command, notes = build(params)
        instances = int(params.get("instances", 1))
        if instances > 1:
            notes.insert(0, f"run {instances} instances of this command behind the router")
        out[engine] = {"command": command, "notes": notes}
    return out
