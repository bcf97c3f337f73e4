"""What InferenceX's launch scripts give each engine, per model family and GPU.

InferenceX (SemiAnalysis, formerly InferenceMAX; github.com/SemiAnalysisAI/InferenceX) runs one
shell script per model family, precision, GPU and engine (``benchmarks/<family>_<precision>_
<gpu>[_trt].sh``, later under ``benchmarks/single_node/[fixed_seq_len/]``). The engine arguments
differ between GPUs, and the difference matters to a simulation: the Blackwell scripts set an FP8
KV cache where the Hopper ones leave it at ``auto`` (twice the tokens in the same memory), and
the running caps, memory fractions and step budgets are per script. ``LAUNCHES`` is that table,
read from the scripts (paths and commit prefixes in each entry's ``source``); the settings that
held over the versions stored of each script, where the versions disagree the one in use in the
2026 exports (images of ``.github/configs/nvidia-master.yaml`` and the image-update issue #1154,
around 2026-02 to 2026-05).

Families are matched on the row's model name (``gpt-oss-120b``, ``deepseek-r1`` /
``deepseek-v3``, ``llama-3.x-70b``, ``minimax-m2.5``), GPUs on its ``system`` resolved to the
catalog key (through the catalog's aliases, e.g. aiconfigurator's ``gb200_sxm``). B300 and GB200
take the B200 recipes: the B300 scripts say they reuse them as-is, and the single-node GB200
TensorRT-LLM script has the B200 settings. A row no entry covers keeps the harness's generic
rule (``rules.py``) and the checkpoint's KV precision.
Not modelled: stream intervals, scheduler receive intervals, CUDA-graph sizes, MoE backends.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from hardware.catalog import shipped_catalog
from simulator.validation.silicon.rows import MeasuredRow
from slo.inputfile import InputError

__all__ = ["LAUNCHES", "Launch", "launch_for"]

_HOPPER = frozenset({"h100_sxm", "h200_sxm"})
_BLACKWELL = frozenset({"b200_sxm", "b300_sxm", "gb200"})

#: Model families by a part of the row's model name, first match wins.
_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gptoss", ("gpt-oss-120b",)),
    ("dsr1", ("deepseek-r1", "deepseek-v3")),
    ("70b", ("llama-3.3-70b", "llama-3.1-70b")),
    ("minimax", ("minimax-m2.5",)),
)


@dataclass(frozen=True, slots=True)
class Launch:
    """One script's engine settings: ``ServingConfig`` overrides and the KV-cache precision
    (``fp8`` where the script sets it, ``auto``: the checkpoint's, ``rules.kv_precision``)."""

    backend: str
    family: str
    gpus: frozenset[str]
    #: Which weights the script serves: ``fp8`` / ``fp4`` (row precision), or ``any``.
    weights: Literal["fp8", "fp4", "any"]
    kv_cache: Literal["fp8", "auto"]
    settings: Callable[[MeasuredRow], dict[str, Any]]
    source: str


def _vllm(running: int | None, budget: int = 8192, memory: float = 0.90) -> Callable[..., Any]:
    """``vllm serve --max-num-seqs R --max-num-batched-tokens B --gpu-memory-utilization M``;
    async scheduling (on by default from v0.14, set in the earlier scripts)."""

    def settings(row: MeasuredRow) -> dict[str, Any]:
        cap = row.concurrency if running is None else running
        return {
            "max_running_requests": cap,
            "max_batched_tokens": max(budget, cap),
            "chunk_tokens": budget,
            "hbm_utilization": memory,
            "overlap_scheduling": True,
        }

    return settings


def _sglang(running: int, chunk: int, memory: float) -> dict[str, Any]:
    """``--max-running-requests R --chunked-prefill-size C --max-prefill-tokens C
    --mem-fraction-static M``."""
    return {
        "max_running_requests": running,
        "chunk_tokens": chunk,
        "max_batched_tokens": chunk,
        "hbm_utilization": memory,
    }


def _sglang_dsr1_h200(row: MeasuredRow) -> dict[str, Any]:
    return _sglang(512 if (row.isl, row.osl) == (1024, 1024) else 256, 32768, 0.82)


def _sglang_dsr1_b200_fp8(row: MeasuredRow) -> dict[str, Any]:
    return _sglang(128, 32768, 0.82) if _tp(row) >= 8 else _sglang(32, 8192, 0.95)


def _sglang_dsr1_b200_fp4(row: MeasuredRow) -> dict[str, Any]:
    del row  # one setting for every TP and length
    return _sglang(256, 16384, 0.85)  # --max-prefill-tokens not set: SGLang's 16384


def _trt_gptoss(running: int | None) -> Callable[..., Any]:
    """``trtllm-serve --max_batch_size R --max_num_tokens 20000``, KV fraction 0.85."""

    def settings(row: MeasuredRow) -> dict[str, Any]:
        cap = row.concurrency if running is None else running
        return {"max_running_requests": cap, "max_batched_tokens": 20000, "hbm_utilization": 0.85}

    return settings


def _trt_dsr1_tokens(row: MeasuredRow) -> int:
    """``MAX_NUM_TOKENS``: concurrency + prompt + 64 rounded up to 64, at least 8192."""
    return max(8192, 64 * math.ceil((row.concurrency + row.isl + 64) / 64))


def _trt_dsr1(memory: Callable[[MeasuredRow], float]) -> Callable[..., Any]:
    def settings(row: MeasuredRow) -> dict[str, Any]:
        return {"max_batched_tokens": _trt_dsr1_tokens(row), "hbm_utilization": memory(row)}

    return settings


def _trt_dsr1_b200_fp8_memory(row: MeasuredRow) -> float:
    """``free_gpu_memory_fraction``: 0.7 at 256+ users of 1k prompts, 0.75 at 8k1k TP4."""
    if row.concurrency >= 256 and row.isl == 1024:
        return 0.70
    if row.isl == 8192 and _tp(row) == 4:
        return 0.75
    return 0.80


def _trt_70b(row: MeasuredRow) -> dict[str, Any]:
    del row
    return {"max_batched_tokens": 16384}


def _tp(row: MeasuredRow) -> int:
    tp = getattr(row, "tp", 1)
    return tp if isinstance(tp, int) else 1


_IX = "SemiAnalysisAI/InferenceX "
#: The scripts' settings (module doc), one entry per script family.
LAUNCHES: tuple[Launch, ...] = (
    # ----- vLLM --------------------------------------------------------------------------------
    Launch("vllm", "gptoss", _HOPPER, "any", "auto", _vllm(None),
           _IX + "benchmarks/gptoss_fp4_h{100,200}.sh @1fc5d73c/@16cd9556, fixed_seq_len "
           "@8eec0d4e: --max-num-seqs $CONC, max-num-batched-tokens 8192, "
           "--gpu-memory-utilization 0.9, KV cache not set, VLLM_MXFP4_USE_MARLIN=1"),
    Launch("vllm", "gptoss", _BLACKWELL, "any", "fp8", _vllm(512),
           _IX + "benchmarks/gptoss_fp4_b200.sh @1fc5d73c/@ffdb196e, fixed_seq_len @8eec0d4e: "
           "kv-cache-dtype: fp8, --max-num-seqs 512, max-num-batched-tokens 8192, 0.9 "
           "(PR 273 added the FP8 KV cache)"),
    Launch("vllm", "70b", frozenset({"h200_sxm"}), "any", "fp8", _vllm(None),
           _IX + "benchmarks/70b_fp8_h200_slurm.sh @409e9a48/@6ebc8824: kv-cache-dtype: fp8, "
           "--max-num-seqs $CONC, 8192, 0.9"),
    Launch("vllm", "70b", _BLACKWELL, "any", "fp8", _vllm(512),
           _IX + "benchmarks/70b_fp{8,4}_b200_docker.sh @bb4c7f93: kv-cache-dtype: fp8, "
           "--max-num-seqs 512, 8192, 0.9"),
    Launch("vllm", "minimax", frozenset({"h100_sxm"}), "any", "auto", _vllm(256),
           _IX + "benchmarks/single_node[/fixed_seq_len]/minimaxm2.5_fp8_h100.sh @34bc7c40/"
           "@8eec0d4e: --max-num-seqs 256, 0.90, KV cache not set"),
    Launch("vllm", "minimax", frozenset({"h200_sxm"}), "any", "auto", _vllm(None, memory=0.95),
           _IX + "benchmarks/single_node/fixed_seq_len/minimaxm2.5_fp8_h200.sh @8eec0d4e: "
           "--gpu-memory-utilization 0.95, KV cache and max-num-seqs not set"),
    # ----- SGLang ------------------------------------------------------------------------------
    Launch("sglang", "dsr1", frozenset({"h200_sxm"}), "any", "auto", _sglang_dsr1_h200,
           _IX + "benchmarks/dsr1_fp8_h200.sh @1fc5d73c/@d1c47c8c: --max-running-requests 512 "
           "(1k1k) else 256, --mem-fraction-static 0.82, --chunked-prefill-size 32768 "
           "--max-prefill-tokens 32768, KV cache not set"),
    Launch("sglang", "dsr1", _BLACKWELL, "fp8", "fp8", _sglang_dsr1_b200_fp8,
           _IX + "benchmarks/dsr1_fp8_b200.sh @1fc5d73c (dsr1_fp8_b300.sh reuses it): "
           "--kv-cache-dtype fp8_e4m3; TP8: --max-running-requests 128, mem 0.82, chunk and "
           "prefill 32768; TP4: 32, 0.95, 8192"),
    Launch("sglang", "dsr1", _BLACKWELL, "fp4", "fp8", _sglang_dsr1_b200_fp4,
           _IX + "benchmarks/dsr1_fp4_b200.sh @1fc5d73c/@df64f87f: --kv-cache-dtype fp8_e4m3, "
           "--max-running-requests 256, --mem-fraction-static 0.85, --chunked-prefill-size "
           "16384"),
    # ----- TensorRT-LLM ------------------------------------------------------------------------
    Launch("trtllm", "gptoss", frozenset({"h200_sxm"}), "any", "auto", _trt_gptoss(None),
           _IX + "benchmarks/gptoss_fp4_h200_trt.sh @111f0312/@ffdb196e: --max_batch_size "
           "$CONC, --max_num_tokens 20000, free_gpu_memory_fraction 0.85, KV dtype auto"),
    Launch("trtllm", "gptoss", _BLACKWELL, "any", "fp8", _trt_gptoss(512),
           _IX + "benchmarks/gptoss_fp4_b200_trt.sh @1825e7f0/@6be4ee36, "
           "gptoss_fp4_gb200_trt_slurm.sh @5e3f8166: kv_cache_config.dtype fp8, --max_batch_size "
           "512, --max_num_tokens 20000, free_gpu_memory_fraction 0.85"),
    Launch("trtllm", "dsr1", frozenset({"h200_sxm"}), "any", "fp8", _trt_dsr1(lambda _: 0.75),
           _IX + "benchmarks/dsr1_fp8_h200_trt.sh @1fc5d73c: kv_cache_config.dtype fp8, "
           "free_gpu_memory_fraction 0.75, --max_num_tokens ceil64(CONC + ISL + 64), >= 8192"),
    Launch("trtllm", "dsr1", _BLACKWELL, "fp8", "fp8", _trt_dsr1(_trt_dsr1_b200_fp8_memory),
           _IX + "benchmarks/dsr1_fp8_b200_trt.sh @0a919c5f: kv_cache_config.dtype fp8, "
           "fraction 0.8 (0.7 at CONC >= 256 with 1k prompts, 0.75 at 8k1k TP4), "
           "--max_num_tokens ceil64(CONC + ISL + 64), >= 8192"),
    Launch("trtllm", "dsr1", _BLACKWELL, "fp4", "fp8", _trt_dsr1(lambda _: 0.80),
           _IX + "benchmarks/dsr1_fp4_b200_trt.sh @111f0312: kv_cache_config.dtype fp8, "
           "fraction 0.8, --max_num_tokens ceil64(CONC + ISL + 64), >= 8192"),
    Launch("trtllm", "70b", _HOPPER | _BLACKWELL, "any", "fp8", _trt_70b,
           _IX + "benchmarks/70b_fp8_h200_trt_slurm.sh @a267b4bd, 70b_fp{8,4}_b200_trt_*.sh: "
           "kv_cache_config.dtype fp8, --max_num_tokens 16384, fraction not set"),
)  # fmt: skip


def _family(model: str) -> str | None:
    name = model.lower()
    return next((f for f, parts in _FAMILIES if any(p in name for p in parts)), None)


def _weights(row: MeasuredRow) -> str:
    precision = row.precision.lower()
    return "fp4" if "fp4" in precision else "fp8" if "fp8" in precision else "other"


def _gpu_key(system: str) -> str:
    """The shipped catalog's key for a row's ``system`` (through its aliases: aiconfigurator's
    ``gb200_sxm`` is ``gb200``); the name itself where the catalog lacks it."""
    try:
        return shipped_catalog().gpu(system).name.lower()
    except InputError:
        return system.lower()


def launch_for(row: MeasuredRow) -> Launch | None:
    """The InferenceX script entry that launched ``row``'s engine (module doc), or None. Only
    aggregated rows: the disaggregated ones ran other (Dynamo) scripts, not read here."""
    if getattr(row, "mode", "agg") != "agg":
        return None
    family, gpu = _family(row.model), _gpu_key(row.system)
    for launch in LAUNCHES:
        if (launch.backend, launch.family) != (row.backend, family) or gpu not in launch.gpus:
            continue
        if launch.weights in ("any", _weights(row)):
            return launch
    return None
