"""Engine launch command lines for a recommended configuration (vLLM, SGLang, TensorRT-LLM).

The flags are the engines' documented CLI options (vLLM ``vllm serve``, SGLang
``python -m sglang.launch_server``, TensorRT-LLM ``trtllm-serve`` with its
``--extra_llm_api_options`` YAML); values come from the configuration the optimizer picked.
This is a starting point a user pastes and adjusts — it does not claim every simulator knob has
an engine equivalent; where one has none (e.g. an eviction policy other than LRU) the line
carries a note instead of a made-up flag. The engine the study simulated (the ``backend``
parameter, vLLM by default) comes first; the others carry a note that their numbers were not
simulated.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from optimizer.configs import pd_pools

__all__ = ["launch_commands"]


def _reuse(p: Mapping[str, Any]) -> bool:
    """Prefix caching on unless ``prefix_caching`` is explicitly false (None = on, every
    shipped preset's default)."""
    return p.get("prefix_caching") is not False


def _layout(p: Mapping[str, Any]) -> tuple[int, int, int | None]:
    """(GPUs per instance, attention-DP ranks, expert parallelism or None = the default)."""
    ep = p.get("ep")
    return int(p.get("tp", 1)), int(p.get("attention_dp") or 1), None if ep is None else int(ep)


def _stages(p: Mapping[str, Any]) -> int:
    """Pipeline stages of an instance (``pp``, 1 = none)."""
    return int(p.get("pp") or 1)


# Pipeline parallelism: vLLM ``--pipeline-parallel-size`` (docs.vllm.ai serving/
# distributed_serving), SGLang ``--pp-size`` (docs.sglang.io server arguments), TensorRT-LLM
# ``trtllm-serve --pp_size`` (its ``pipeline_parallel_size``); in all three the instance is
# tp x pp GPUs.


# Parallel-layout flags, as the engines document them:
# - vLLM (docs.vllm.ai serving/data_parallel_deployment, expert_parallel_deployment):
#   ``--data-parallel-size D`` ranks of ``--tensor-parallel-size`` GPUs each; the experts form
#   one TP group of DP x TP GPUs unless ``--enable-expert-parallel``, which spreads whole
#   experts over all of them (EP = DP x TP). Other EP sizes have no flag.
# - SGLang (docs.sglang.io advanced_features/dp_dpa_smg_guide, "DP attention"): ``--tp-size``
#   is all the GPUs, ``--enable-dp-attention --dp-size D`` splits attention into D ranks,
#   ``--ep-size`` the experts.
# - TensorRT-LLM (nvidia.github.io/TensorRT-LLM features/parallel-strategy):
#   ``tensor_parallel_size`` GPUs, ``enable_attention_dp: true`` makes every GPU its own
#   attention rank (D = tp only), ``moe_expert_parallel_size`` the experts, both in the
#   ``--extra_llm_api_options`` YAML.
def _vllm_layout(p: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    tp, dp, ep = _layout(p)
    args = ["--tensor-parallel-size", str(tp // dp)]
    if _stages(p) > 1:
        args += ["--pipeline-parallel-size", str(_stages(p))]
    notes: list[str] = []
    if dp > 1:
        args += ["--data-parallel-size", str(dp)]
    if ep is not None and ep == tp and tp > 1:
        args += ["--enable-expert-parallel"]
    elif ep not in (None, 1, tp):
        notes.append(f"ep={ep}: vLLM's expert parallelism spans all {tp} GPUs or none")
    return args, notes


def _sglang_layout(p: Mapping[str, Any], role: str | None) -> list[str]:
    tp, dp, ep = _layout(p)
    args = ["--tp-size", str(tp)]
    if role is not None:  # docs.sglang.io advanced_features/pd_disaggregation
        args += ["--disaggregation-mode", role]
    if _stages(p) > 1:
        args += ["--pp-size", str(_stages(p))]
    if dp > 1:
        args += ["--enable-dp-attention", "--dp-size", str(dp)]
    if ep is not None and ep > 1:
        args += ["--ep-size", str(ep)]
    return args


def _trtllm_layout(p: Mapping[str, Any], options: dict[str, Any], role: str | None) -> list[str]:
    """Adds the layout to the LLM API ``options``; returns the notes."""
    tp, dp, ep = _layout(p)
    notes = []
    if role is not None:  # the KV cache transfer between the pools (features/disagg-serving)
        options["cache_transceiver_config"] = {"backend": "DEFAULT"}
    if dp > 1:
        options["enable_attention_dp"] = True
        if dp != tp:
            notes.append(
                f"attention_dp={dp} of tp={tp}: TensorRT-LLM's attention DP runs one rank per "
                f"GPU ({tp} ranks)"
            )
    if ep is not None and ep > 1:
        options["moe_expert_parallel_size"] = ep
    return notes


def _vllm(p: Mapping[str, Any], role: str | None) -> tuple[str, list[str]]:
    layout, notes = _vllm_layout(p)
    args = ["vllm", "serve", str(p["model"]), *layout]
    if role is not None:
        # NixlConnector (docs.vllm.ai features/nixl_connector_usage): the same config on both
        # pools; which instance prefills is the proxy's choice.
        args += ["--kv-transfer-config", json.dumps(_NIXL, separators=(",", ":"))]
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
    # vLLM V1 caches prefixes by default; say which way explicitly either way.
    args += ["--enable-prefix-caching" if _reuse(p) else "--no-enable-prefix-caching"]
    if p.get("scheduler") == "chunked":
        args += ["--enable-chunked-prefill"]
    l2 = float(p.get("l2_dram_gib") or 0)
    if l2 > 0:
        args += ["--kv-offloading-backend", "native", "--kv-offloading-size", f"{l2:g}"]
    if p.get("l3") not in (None, "none"):
        notes.append(f"L3 tier '{p['l3']}': attach it through a KV connector (e.g. LMCache)")
    if p.get("eviction") not in (None, "lru"):
        notes.append(f"eviction '{p['eviction']}' has no vLLM flag (vLLM evicts LRU)")
    return shlex.join(args), notes


def _sglang(p: Mapping[str, Any], role: str | None) -> tuple[str, list[str]]:
    args = ["python", "-m", "sglang.launch_server", "--model-path", str(p["model"])]
    args += _sglang_layout(p, role)
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
    if p.get("schedule_conservativeness") not in (None, 1, 1.0):
        args += ["--schedule-conservativeness", f"{float(p['schedule_conservativeness']):g}"]
    if not _reuse(p):
        args += ["--disable-radix-cache"]
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


#: ``kv_admission`` → TensorRT-LLM ``scheduler_config.capacity_scheduler_policy``.
_CAPACITY_POLICY = {"on_demand": "MAX_UTILIZATION", "reserve_full": "GUARANTEED_NO_EVICT"}


def _trtllm_kv_cache(p: Mapping[str, Any]) -> dict[str, Any]:
    """TensorRT-LLM ``kv_cache_config``: prefix reuse, fp8 KV, host (L2) cache in bytes."""
    kv: dict[str, Any] = {"enable_block_reuse": _reuse(p)}
    if p.get("kv_precision") == "fp8":
        kv["dtype"] = "fp8"
    l2 = float(p.get("l2_dram_gib") or 0)
    if l2 > 0:
        kv["host_cache_size"] = int(l2 * 2**30)
    return kv


def _trtllm(p: Mapping[str, Any], role: str | None) -> tuple[str, list[str]]:
    options_file = f"kvplan-trtllm-{role}.yaml" if role else "kvplan-trtllm.yaml"
    args = [
        "trtllm-serve",
        str(p["model"]),
        "--backend",
        "pytorch",
        "--tp_size",
        str(p.get("tp", 1)),
    ]
    if _stages(p) > 1:
        args += ["--pp_size", str(_stages(p))]
    if "hbm_utilisation" in p:
        # The simulator applies TensorRT-LLM's meaning: a share of the memory left after the
        # weights and activations.
        args += ["--kv_cache_free_gpu_memory_fraction", f"{float(p['hbm_utilisation']):.2f}"]
    budget = p.get("max_batched_tokens")
    if p.get("scheduler") == "chunked":
        budget = budget or p.get("chunk_tokens")
    if budget:
        args += ["--max_num_tokens", str(budget)]
    if p.get("max_running_requests"):
        args += ["--max_batch_size", str(p["max_running_requests"])]
    options: dict[str, Any] = {}
    notes: list[str] = []
    notes += _trtllm_layout(p, options, role)
    if p.get("scheduler") == "chunked":
        options["enable_chunked_prefill"] = True
    elif p.get("scheduler") == "prefill_first":
        notes.append(
            "scheduler 'prefill_first' has no TensorRT-LLM equivalent (its in-flight batching "
            "runs contexts alongside generation steps)"
        )
    options["kv_cache_config"] = _trtllm_kv_cache(p)
    policy = _CAPACITY_POLICY.get(str(p.get("kv_admission")))
    if policy:
        options["scheduler_config"] = {"capacity_scheduler_policy": policy}
    args += ["--extra_llm_api_options", options_file]
    notes.insert(0, f"{options_file}: {json.dumps(options)}")
    if p.get("precision") == "fp8":
        notes.append("fp8 weights: serve an FP8-quantized checkpoint of the model")
    if p.get("l3") not in (None, "none"):
        notes.append(f"L3 tier '{p['l3']}': attach it through a KV connector")
    if p.get("eviction") not in (None, "lru"):
        notes.append(f"eviction '{p['eviction']}' has no TensorRT-LLM flag (block reuse is LRU)")
    return shlex.join(args), notes


#: Where each engine takes its speculative-decoding settings.
_SPECULATIVE_FLAG = {
    "vllm": "--speculative-config",
    "sglang": "--speculative-algorithm and --speculative-num-steps",
    "trtllm": "speculative_config in kvplan-trtllm.yaml",
}

_BUILDERS: dict[str, Callable[[Mapping[str, Any], str | None], tuple[str, list[str]]]] = {
    "vllm": _vllm,
    "sglang": _sglang,
    "trtllm": _trtllm,
}

#: vLLM's KV connector between prefill and decode instances.
_NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}

#: How each engine puts a prefill pool and a decode pool behind one endpoint.
_PD_ROUTING = {
    "vllm": "put a prefill/decode proxy in front: it sends each request to a prefill "
    "instance, then to a decode instance that pulls the KV cache over NIXL (vLLM's "
    "NixlConnector guide)",
    "sglang": "route with python -m sglang_router.launch_router --pd-disaggregation "
    "--prefill URL... --decode URL... (one URL per instance)",
    "trtllm": "start the pools and their router with trtllm-serve disaggregated -c CONFIG "
    "(context_servers: the prefill instances, generation_servers: the decode instances)",
}


def _dedup(notes: list[str]) -> list[str]:
    return list(dict.fromkeys(notes))


def _pd_launch(engine: str, pools: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One command per pool, each with its engine's disaggregation flags."""
    commands: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for role, pool in pools.items():
        command, pool_notes = _BUILDERS[engine](pool, role)
        commands[role] = {"command": command, "instances": int(pool["instances"])}
        notes += pool_notes
    counts = " and ".join(f"{c['instances']} {role}" for role, c in commands.items())
    notes = [f"run {counts} instances (disaggregated prefill/decode)", _PD_ROUTING[engine],
             *notes]  # fmt: skip
    text = "\n".join(
        f"# {role} pool: {c['instances']} instance{'s' * (c['instances'] != 1)}\n{c['command']}"
        for role, c in commands.items()
    )
    return {"command": text, "notes": _dedup(notes), "pools": commands}


def launch_commands(params: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{engine: {"command": str, "notes": [...], "simulated": bool}}`` for one configuration,
    the simulated engine (``params["backend"]``, default vLLM) first.

    ``params`` uses the optimizer's parameter names (model, backend, tp, pp, attention_dp, ep,
    precision,
    kv_precision, hbm_utilisation, max_batched_tokens, max_running_requests, scheduler,
    chunk_tokens, kv_admission, l2_dram_gib, l3, eviction, router, prefix_caching); missing
    ones are left to the engine's defaults (prefix caching: on).

    A disaggregated point (``pd_mode: disaggregated``) gets one command per pool, each with
    the engine's prefill/decode role flags, under ``"pools"``: ``{"prefill": {"command",
    "instances"}, "decode": {...}}`` (the pools as ``optimizer.configs.pd_pools`` splits them,
    which is what was simulated); ``"command"`` is then both, each under a comment line.
    """
    simulated = str(params.get("backend") or "vllm").lower()
    order = sorted(_BUILDERS, key=lambda engine: engine != simulated)
    out: dict[str, dict[str, Any]] = {}
    spec = int(params.get("spec_tokens") or 0)
    pools = pd_pools(params)
    for engine in order:
        if pools is not None:
            entry = _pd_launch(engine, pools)
        else:
            command, notes = _BUILDERS[engine](params, None)
            instances = int(params.get("instances", 1))
            if instances > 1:
                notes.insert(0, f"run {instances} instances of this command behind the router")
            entry = {"command": command, "notes": notes}
        if spec:
            entry["notes"].append(
                f"speculative decoding with {spec} draft tokens: add your draft (EAGLE head or "
                f"MTP layers) with {_SPECULATIVE_FLAG[engine]}"
            )
        if engine != simulated:
            entry["notes"].insert(0, f"not simulated: the figures above are for {simulated}")
        out[engine] = {**entry, "simulated": engine == simulated}
    return out
