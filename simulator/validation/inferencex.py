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
around 2026-02 to 2026-05; for the ``fixed_seq_len`` scripts the tree of commit 8eec0d4e, which
has ``perf-changelog.yaml`` changes of that period such as Kimi-K2.5 FP4 B200's FP8 KV cache, PR
#1047, and not the later ones such as its profiler switch, PR #1395).

Families are matched on the row's model name (``gpt-oss-120b``, ``deepseek-r1`` /
``deepseek-v3``, ``llama-3.x-70b``, ``minimax-m2.5``, ``kimi-k2.5``, ``glm-5``,
``deepseek-v4-pro``, ``qwen3.5-397b``: the names aiconfigurator's InferenceX adapter gives the
harness's keys, ``sdk/config_adapter/inferencex.py`` ``MODEL_PATHS``), GPUs on its ``system``
resolved to the catalog key (through the catalog's aliases, e.g. aiconfigurator's ``gb200_sxm``).
For gpt-oss, DeepSeek-R1 and Llama-70B, B300 and GB200 take the B200 recipes: the B300 scripts
say they reuse them as-is, and the single-node GB200 TensorRT-LLM script has the B200 settings.
The families added since (Kimi-K2.5, GLM-5, DeepSeek-V4-Pro, Qwen3.5, MiniMax on Blackwell) have
B200 and B300 scripts of their own, read each (most B300 ones say they reuse the B200 recipe
as-is, and do; Kimi-K2.5 FP4's kept the B200 recipe from before its FP8 KV cache), and no
single-node GB200 or GB300 script: their GB200/GB300 rows ran Dynamo srt-slurm recipes
(``runners/launch_gb{200,300}-nv.sh``), not read here. GB300 is in no set: InferenceX runs it only
through those recipes, and no script or changelog entry says it reuses the B200/B300 settings.
A row no entry covers keeps the harness's generic rule (``rules.py``) and the checkpoint's KV
precision.
Not modelled: stream intervals, scheduler receive intervals, CUDA-graph sizes, MoE backends,
SGLang's SWA token ratios.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hardware.catalog import shipped_catalog
from simulator.validation.silicon.rows import MeasuredRow
from slo.inputfile import InputError

__all__ = ["LAUNCHES", "Launch", "family_of", "gpu_key", "launch_for", "weights_of"]

_HOPPER = frozenset({"h100_sxm", "h200_sxm"})
_BLACKWELL = frozenset({"b200_sxm", "b300_sxm", "gb200"})
_H200 = frozenset({"h200_sxm"})
_B200 = frozenset({"b200_sxm"})
_B300 = frozenset({"b300_sxm"})
#: The families whose scripts are per B200 and B300 only (module doc).
_B200_B300 = _B200 | _B300

#: Model families by a part of the row's model name, first match wins. GLM-5.1 and 5.2 come
#: before GLM-5 so that ``glm-5`` does not claim them: InferenceX has no NVIDIA fixed-length
#: script of theirs (GLM-5.1 only on MI355X), so their family has no entry.
_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gptoss", ("gpt-oss-120b",)),
    ("dsr1", ("deepseek-r1", "deepseek-v3")),
    ("70b", ("llama-3.3-70b", "llama-3.1-70b")),
    ("minimax", ("minimax-m2.5",)),
    ("kimik2.5", ("kimi-k2.5",)),
    ("glm5.x", ("glm-5.1", "glm-5.2")),
    ("glm5", ("glm-5",)),
    ("dsv4", ("deepseek-v4-pro",)),
    ("qwen3.5", ("qwen3.5-397b",)),
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
    #: Whether the script has an attention-DP branch (``DP_ATTENTION``). Where it has none, a
    #: row that records attention DP ran its id's GPUs as one TP group
    #: (``rules.recorded_layout``).
    attention_dp: bool = True


#: vLLM's ``--max-num-seqs`` where a script leaves it unset (``EngineArgs`` default for the API
#: server on GPUs of 70 GiB and more); a script's ``$CONC`` is None below.
_VLLM_SEQS = 1024
#: SGLang's ``--max-prefill-tokens`` where a script leaves it unset (``ServerArgs`` default).
_SGLANG_PREFILL = 16384


def _vllm(
    running: int | None,
    budget: int | Callable[[MeasuredRow], int] = 8192,
    memory: float = 0.90,
) -> Callable[[MeasuredRow], dict[str, Any]]:
    """``vllm serve --max-num-seqs R --max-num-batched-tokens B --gpu-memory-utilization M``
    (B a number, or of the row: ``$((ISL * 2))``); async scheduling (on by default from v0.14,
    set in the earlier scripts)."""

    def settings(row: MeasuredRow) -> dict[str, Any]:
        cap = row.concurrency if running is None else running
        tokens = budget(row) if callable(budget) else budget
        return {
            "max_running_requests": cap,
            "max_batched_tokens": max(tokens, cap),
            "chunk_tokens": tokens,
            "hbm_utilization": memory,
            "overlap_scheduling": True,
        }

    return settings


def _with(
    settings: Callable[[MeasuredRow], dict[str, Any]], **fixed: Any
) -> Callable[[MeasuredRow], dict[str, Any]]:
    """``settings`` plus the ``ServingConfig`` fields a script fixes by an environment variable
    or flag that selects a kernel or state dtype (each ``Launch``'s source names it):
    ``marlin_moe`` (``VLLM_MXFP4_USE_MARLIN=1``), ``mxfp4_moe_activation``
    (``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1``), ``moe_kernel``
    (``VLLM_USE_FLASHINFER_MOE_INT4=1``), ``linear_state_precision`` (SGLang
    ``--mamba-ssm-dtype bfloat16``)."""
    return lambda row: {**settings(row), **fixed}


#: ``--disable-radix-cache`` under the harness's ``--ignore-eos`` (``benchmark_lib.sh``
#: ``run_benchmark_serving`` passes it to every run): no prefix cache, and SGLang admits each
#: request on its ignore-EOS path (``admission.py``, ``reserve_timeline``).
_NO_RADIX: dict[str, Any] = {"prefix_caching": False, "kv_admission": "reserve_timeline"}


def _no_radix(
    settings: Callable[[MeasuredRow], dict[str, Any]],
) -> Callable[[MeasuredRow], dict[str, Any]]:
    """``settings`` of an SGLang script that disables the radix cache (``_NO_RADIX``)."""
    return lambda row: {**settings(row), **_NO_RADIX}


def _recv_interval(row: MeasuredRow, above: int) -> int:
    """SGLang's ``--scheduler-recv-interval`` as the scripts pick it: 30 at more than
    ``above`` users, else 10."""
    return 30 if row.concurrency > above else 10


def _recv(
    settings: Callable[[MeasuredRow], dict[str, Any]], above: int
) -> Callable[[MeasuredRow], dict[str, Any]]:
    """``settings`` with the receive interval ``_recv_interval`` picks
    (``ServingConfig.scheduler_recv_interval``)."""
    return lambda row: {**settings(row), "scheduler_recv_interval": _recv_interval(row, above)}


def _twice_isl(row: MeasuredRow) -> int:
    """``--max-num-batched-tokens "$((ISL * 2))"``."""
    return 2 * row.isl


def _sglang(
    running: int | None, chunk: int | None, memory: float, prefill: int | None = None
) -> dict[str, Any]:
    """``--max-running-requests R --chunked-prefill-size C --max-prefill-tokens P
    --mem-fraction-static M``. P None: C (the scripts set both); R or C None: not set (SGLang
    sizes R from the KV pool and C from the GPU's memory: the preset's). The step budget is the
    larger of P and C: with attention DP a rank's chunk (C / ranks) bounds it anyway
    (``BackendPreset.rank_limits``)."""
    settings: dict[str, Any] = {"hbm_utilization": memory}
    if running is not None:
        settings["max_running_requests"] = running
    if chunk is not None:
        settings["chunk_tokens"] = chunk
        settings["max_batched_tokens"] = max(chunk, prefill or chunk)
    return settings


def _each(settings: dict[str, Any]) -> Callable[[MeasuredRow], dict[str, Any]]:
    """The same settings for every row of a script."""

    def fixed(row: MeasuredRow) -> dict[str, Any]:
        del row
        return dict(settings)

    return fixed


def _sglang_dsr1_h200(row: MeasuredRow) -> dict[str, Any]:
    return _sglang(512 if (row.isl, row.osl) == (1024, 1024) else 256, 32768, 0.82)


def _sglang_dsr1_b200_fp8(row: MeasuredRow) -> dict[str, Any]:
    """TP8: running 128, 0.82, chunk 32768, receive interval 30 from 16 users else 10; TP4:
    32, 0.95, 8192, interval 10."""
    if _tp(row) >= 8:
        recv = _recv_interval(row, above=15)
        return {**_sglang(128, 32768, 0.82), "scheduler_recv_interval": recv}
    return {**_sglang(32, 8192, 0.95), "scheduler_recv_interval": 10}


def _sglang_dsr1_b200_fp4(row: MeasuredRow) -> dict[str, Any]:
    """One setting for every TP and length (--max-prefill-tokens not set: SGLang's 16384) but
    the receive interval: 30 from 16 users, else 10."""
    return {**_sglang(256, 16384, 0.85), "scheduler_recv_interval": _recv_interval(row, 15)}


def _trt_gptoss(running: int | None) -> Callable[..., Any]:
    """``trtllm-serve --max_batch_size R --max_num_tokens 20000``, KV fraction 0.85,
    ``stream_interval: 20``."""

    def settings(row: MeasuredRow) -> dict[str, Any]:
        cap = row.concurrency if running is None else running
        return {"max_running_requests": cap, "max_batched_tokens": 20000,
                "hbm_utilization": 0.85, "stream_interval": 20}  # fmt: skip

    return settings


def _trt_dsr1_tokens(row: MeasuredRow) -> int:
    """``MAX_NUM_TOKENS``: concurrency + prompt + 64 rounded up to 64, at least 8192."""
    return max(8192, 64 * math.ceil((row.concurrency + row.isl + 64) / 64))


def _trt_dsr1(memory: Callable[[MeasuredRow], float]) -> Callable[..., Any]:
    def settings(row: MeasuredRow) -> dict[str, Any]:
        return {"max_batched_tokens": _trt_dsr1_tokens(row), "hbm_utilization": memory(row),
                "stream_interval": 10}  # fmt: skip

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
    return {"max_batched_tokens": 16384, "stream_interval": 10}


def _sglang_glm5_fp8(row: MeasuredRow) -> dict[str, Any]:
    return _sglang(row.concurrency, 32768, 0.85)


def _sglang_qwen_fp8_b300(row: MeasuredRow) -> dict[str, Any]:
    return {**_sglang(row.concurrency, 16384, 0.80), "scheduler_recv_interval": 10}


#: qwen3.5_fp8_h200.sh.
_qwen35_h200 = _no_radix(
    _with(_each(_sglang(128, 16384, 0.80, _SGLANG_PREFILL)), linear_state_precision="bf16")
)
#: qwen3.5_fp{8,4}_b200.sh: one recipe (PR #1018).
_qwen35_b200 = _no_radix(
    _recv(_with(_each(_sglang(None, 16384, 0.80)), linear_state_precision="bf16"), above=4)
)


def _vllm_dsv4_b200(row: MeasuredRow) -> dict[str, Any]:
    """Attention DP: ``--gpu-memory-utilization 0.85`` (else vLLM's 0.9); budget ISL at 8k
    prompts and CONC <= 128, else 2048."""
    tokens = row.isl if row.isl == 8192 and row.concurrency <= 128 else 2048
    return _vllm(_VLLM_SEQS, tokens, 0.85 if _dp(row) > 1 else 0.90)(row)


def _vllm_dsv4_b300(row: MeasuredRow) -> dict[str, Any]:
    """Budget 2048 with attention DP, else ISL x 2; memory fraction not set (0.9)."""
    return _vllm(_VLLM_SEQS, 2048 if _dp(row) > 1 else _twice_isl(row))(row)


def _dsv4_running(row: MeasuredRow) -> int:
    """``--max-running-requests "$((CONC * 3 / 2))"`` (at least 8 in the later scripts)."""
    return max(row.concurrency * 3 // 2, 8)


def _sglang_dsv4_h200(row: MeasuredRow) -> dict[str, Any]:
    return _sglang(_dsv4_running(row), 4096, 0.88, _SGLANG_PREFILL)


def _sglang_dsv4_b200(row: MeasuredRow) -> dict[str, Any]:
    """Attention DP: chunk 32768, else 8192; running CONC x 3/2 (no floor), memory 0.90;
    ``--disable-radix-cache`` (the H200 and B300 scripts leave the radix cache on)."""
    chunk = 32768 if _dp(row) > 1 else 8192
    return {**_sglang(row.concurrency * 3 // 2, chunk, 0.90, _SGLANG_PREFILL), **_NO_RADIX}


#: dsv4_fp4_b300_sglang.sh's attention-DP recipes at CONC 2048/4096/8192: (running, memory).
_DSV4_B300_HIGH = {2048: (2560, 0.87), 4096: (4352, 0.835), 8192: (8192, 0.80)}


def _sglang_dsv4_b300(row: MeasuredRow) -> dict[str, Any]:
    """TP: chunk 8192, memory 0.90. Attention DP: CONC 2048/4096/8192 chunk 65536 with the
    table's running cap and memory; else chunk 16384, memory 0.94, running 768 with EP 8 (the
    mega-MoE recipe), CONC x 3/2 otherwise."""
    if _dp(row) <= 1:
        return _sglang(_dsv4_running(row), 8192, 0.90, _SGLANG_PREFILL)
    if row.concurrency in _DSV4_B300_HIGH:
        running, memory = _DSV4_B300_HIGH[row.concurrency]
        return _sglang(running, 65536, memory, _SGLANG_PREFILL)
    running = 768 if _count(row, "moe_ep") == 8 else _dsv4_running(row)
    return _sglang(running, 16384, 0.94, _SGLANG_PREFILL)


def _trt_dsv4(row: MeasuredRow) -> dict[str, Any]:
    """``--max_batch_size max(CONC, 16) --max_num_tokens max(ISL + OSL + 256, 8192)``,
    ``free_gpu_memory_fraction`` 0.50 (the step budget at least the batch, as the engine needs)."""
    batch = max(row.concurrency, 16)
    tokens = max(row.isl + row.osl + 256, 8192)
    return {"max_running_requests": batch, "max_batched_tokens": max(tokens, batch),
            "hbm_utilization": 0.50, "stream_interval": 10}  # fmt: skip


def _per_gpu(
    scripts: Mapping[str, Callable[[MeasuredRow], dict[str, Any]]],
) -> Callable[[MeasuredRow], dict[str, Any]]:
    """One entry's settings from its scripts per GPU (catalog key): for a family whose scripts
    differ per GPU but share engine, weights and KV cache dtype (``launch_for`` returns the
    entry only for its GPUs, the keys)."""

    def settings(row: MeasuredRow) -> dict[str, Any]:
        return scripts[gpu_key(row.system)](row)

    return settings


#: DeepSeek-V4-Pro's scripts per GPU (vLLM, SGLang).
_VLLM_DSV4 = {"h200_sxm": _vllm(512, 512, 0.95), "b200_sxm": _vllm_dsv4_b200,
              "b300_sxm": _vllm_dsv4_b300}  # fmt: skip
_SGLANG_DSV4 = {"h200_sxm": _sglang_dsv4_h200, "b200_sxm": _sglang_dsv4_b200,
                "b300_sxm": _sglang_dsv4_b300}  # fmt: skip


def _count(row: MeasuredRow, column: str) -> int:
    """A layout column of the row (1 where the row has none)."""
    value = getattr(row, column, 1)
    return value if isinstance(value, int) else 1


def _tp(row: MeasuredRow) -> int:
    return _count(row, "tp")


def _dp(row: MeasuredRow) -> int:
    """Attention-DP ranks (the scripts' ``DP_ATTENTION=true`` when more than one)."""
    return _count(row, "attention_dp")


_IX = "SemiAnalysisAI/InferenceX "
_FSL = "benchmarks/single_node/fixed_seq_len/"
#: The scripts' settings (module doc), one entry per script family.
LAUNCHES: tuple[Launch, ...] = (
    # ----- vLLM --------------------------------------------------------------------------------
    Launch("vllm", "gptoss", _HOPPER, "any", "auto", _with(_vllm(None), marlin_moe=True),
           _IX + "benchmarks/gptoss_fp4_h{100,200}.sh @1fc5d73c/@16cd9556, fixed_seq_len "
           "@8eec0d4e: --max-num-seqs $CONC, max-num-batched-tokens 8192, "
           "--gpu-memory-utilization 0.9, KV cache not set, VLLM_MXFP4_USE_MARLIN=1"),
    Launch("vllm", "gptoss", _BLACKWELL, "any", "fp8",
           _with(_vllm(512), mxfp4_moe_activation="mxfp8"),
           _IX + "benchmarks/gptoss_fp4_b200.sh @1fc5d73c/@ffdb196e, fixed_seq_len @8eec0d4e: "
           "kv-cache-dtype: fp8, --max-num-seqs 512, max-num-batched-tokens 8192, 0.9 "
           "(PR 273 added the FP8 KV cache), VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1"),
    Launch("vllm", "70b", frozenset({"h200_sxm"}), "any", "fp8", _vllm(None),
           _IX + "benchmarks/70b_fp8_h200_slurm.sh @409e9a48/@6ebc8824: kv-cache-dtype: fp8, "
           "--max-num-seqs $CONC, 8192, 0.9"),
    Launch("vllm", "70b", _BLACKWELL, "any", "fp8", _vllm(512),
           _IX + "benchmarks/70b_fp{8,4}_b200_docker.sh @bb4c7f93: kv-cache-dtype: fp8, "
           "--max-num-seqs 512, 8192, 0.9"),
    Launch("vllm", "minimax", frozenset({"h100_sxm"}), "any", "auto", _vllm(256),
           _IX + "benchmarks/single_node[/fixed_seq_len]/minimaxm2.5_fp8_h100.sh @34bc7c40/"
           "@8eec0d4e: --max-num-seqs 256, 0.90, KV cache not set; --tensor-parallel-size=$TP "
           "--enable-expert-parallel, no data-parallel size", attention_dp=False),
    Launch("vllm", "minimax", frozenset({"h200_sxm"}), "any", "auto", _vllm(None, memory=0.95),
           _IX + "benchmarks/single_node/fixed_seq_len/minimaxm2.5_fp8_h200.sh @8eec0d4e: "
           "--gpu-memory-utilization 0.95, KV cache and max-num-seqs not set"),
    Launch("vllm", "minimax", _B200_B300, "any", "fp8", _vllm(_VLLM_SEQS, _twice_isl),
           _IX + _FSL + "minimaxm2.5_fp{8,4}_b{200,300}.sh @8eec0d4e (B300: the B200 recipe "
           "as-is): kv-cache-dtype fp8, max-num-batched-tokens ISL x 2, 0.90, max-num-seqs "
           "not set (the first B200 ones, single_node @07e171a3/@56245be3: no KV dtype or budget)"),
    Launch("vllm", "kimik2.5", _B200, "fp4", "fp8", _vllm(None, _twice_isl),
           _IX + _FSL + "kimik2.5_fp4_b200.sh @8eec0d4e/@380b685d: kv-cache-dtype fp8, "
           "--max-num-seqs $CONC, max-num-batched-tokens ISL x 2, 0.90 (PR #1047; before, "
           "neither KV dtype nor budget)"),
    Launch("vllm", "kimik2.5", _B300, "fp4", "auto", _vllm(None),
           _IX + _FSL + "kimik2.5_fp4_b300.sh @8eec0d4e, single_node @56324839: the B200 "
           "recipe before PR #1047: --max-num-seqs $CONC, 0.90, KV cache and budget not set "
           "(FP8 KV and ISL x 2 only after 2026-06, @3274c535)"),
    # After the FP4 entries (first match wins): the INT4 checkpoint's scripts.
    Launch("vllm", "kimik2.5", _H200, "any", "auto", _vllm(None, memory=0.95),
           _IX + _FSL + "kimik2.5_int4_h200.sh @8eec0d4e (single_node @34bc7c40): "
           "--max-num-seqs $CONC, --gpu-memory-utilization 0.95, KV cache and budget not set"),
    Launch("vllm", "kimik2.5", _B200_B300, "any", "auto",
           _with(_vllm(None, memory=0.95), moe_kernel="flashinfer_trtllm"),
           _IX + _FSL + "kimik2.5_int4_{b200,b300}.sh @8eec0d4e (B300: the B200 recipe as-is): "
           "--max-num-seqs $CONC, --gpu-memory-utilization 0.95, KV cache and budget not set, "
           "VLLM_USE_FLASHINFER_MOE_INT4=1 (the first B200 one, single_node @2b7b6949: 0.97, no "
           "running cap, no FlashInfer MoE)"),
    Launch("vllm", "dsv4", frozenset(_VLLM_DSV4), "any", "fp8", _per_gpu(_VLLM_DSV4),
           _IX + _FSL + "dsv4_fp8_h200.sh, dsv4_fp4_b{200,300}_vllm.sh @8eec0d4e: kv-cache-dtype "
           "fp8 in all; H200: --max-num-seqs 512, --max-num-batched-tokens 512, 0.95 (0.90 from "
           "v0.21.0, PR #1461); B200: budget ISL at 8k1k CONC <= 128 else 2048, attention DP "
           "0.85; B300: budget 2048 with attention DP else ISL x 2; else not set"),
    # ----- SGLang ------------------------------------------------------------------------------
    Launch("sglang", "dsr1", frozenset({"h200_sxm"}), "any", "auto",
           _no_radix(_sglang_dsr1_h200),
           _IX + "benchmarks/dsr1_fp8_h200.sh @1fc5d73c/@d1c47c8c: --max-running-requests 512 "
           "(1k1k) else 256, --mem-fraction-static 0.82, --chunked-prefill-size 32768 "
           "--max-prefill-tokens 32768, KV cache not set, --disable-radix-cache"),
    Launch("sglang", "dsr1", _BLACKWELL, "fp8", "fp8", _no_radix(_sglang_dsr1_b200_fp8),
           _IX + "benchmarks/dsr1_fp8_b200.sh @1fc5d73c (dsr1_fp8_b300.sh reuses it): "
           "--kv-cache-dtype fp8_e4m3, --disable-radix-cache; TP8: --max-running-requests 128, "
           "mem 0.82, chunk and prefill 32768, --scheduler-recv-interval 30 from 16 users else "
           "10; TP4: 32, 0.95, 8192, interval 10"),
    Launch("sglang", "dsr1", _BLACKWELL, "fp4", "fp8", _no_radix(_sglang_dsr1_b200_fp4),
           _IX + "benchmarks/dsr1_fp4_b200.sh @1fc5d73c/@df64f87f: --kv-cache-dtype fp8_e4m3, "
           "--max-running-requests 256, --mem-fraction-static 0.85, --chunked-prefill-size "
           "16384, --scheduler-recv-interval 30 from 16 users else 10, --disable-radix-cache"),
    Launch("sglang", "glm5", _H200, "any", "auto", _each(_sglang(None, None, 0.85)),
           _IX + _FSL + "glm5_fp8_h200.sh @8eec0d4e: --mem-fraction-static 0.85; running, "
           "chunk and KV cache not set"),
    Launch("sglang", "glm5", _B200_B300, "fp8", "fp8", _no_radix(_sglang_glm5_fp8),
           _IX + _FSL + "glm5_fp8_b{200,300}.sh @8eec0d4e, single_node @4eca3fe0 (B300: the "
           "B200 recipe as-is): --kv-cache-dtype fp8_e4m3, --max-running-requests $CONC, "
           "0.85, chunk and prefill 32768, --disable-radix-cache"),
    Launch("sglang", "glm5", _B200_B300, "fp4", "fp8", _no_radix(_each(_sglang(None, 32768, 0.90))),
           _IX + _FSL + "glm5_fp4_b{200,300}.sh @8eec0d4e (B300: the B200 recipe as-is; PR "
           "#1011): --kv-cache-dtype fp8_e4m3, 0.9, chunk and prefill 32768, running not set, "
           "--disable-radix-cache"),
    Launch("sglang", "dsv4", frozenset(_SGLANG_DSV4), "any", "auto", _per_gpu(_SGLANG_DSV4),
           _IX + _FSL + "dsv4_fp8_h200_sglang.sh, dsv4_fp4_b200.sh, dsv4_fp4_b300_sglang.sh "
           "@8eec0d4e: running CONC x 3/2, chunk and memory per GPU, DP and CONC "
           "(_SGLANG_DSV4); prefill and KV cache not set; B200's --disable-radix-cache"),
    Launch("sglang", "qwen3.5", _B200, "fp8", "fp8",
           _qwen35_b200,
           _IX + _FSL + "qwen3.5_fp8_b200.sh @8eec0d4e: --kv-cache-dtype fp8_e4m3, 0.8, "
           "chunk and prefill 16384, running not set, --mamba-ssm-dtype bfloat16, "
           "--scheduler-recv-interval 30 at CONC > 4 else 10, --disable-radix-cache"),
    Launch("sglang", "qwen3.5", _B200, "fp4", "fp8",
           _qwen35_b200,
           _IX + _FSL + "qwen3.5_fp4_b200.sh @8eec0d4e: as FP8 (PR #1018; before, chunk and "
           "prefill 81920 with a running cap)"),
    Launch("sglang", "qwen3.5", _B300, "fp8", "fp8",
           _no_radix(_with(_sglang_qwen_fp8_b300, linear_state_precision="bf16")),
           _IX + _FSL + "qwen3.5_fp8_b300.sh @8eec0d4e: fp8_e4m3, --max-running-requests $CONC,"
           " 0.8, chunk and prefill 16384, --mamba-ssm-dtype bfloat16, "
           "--scheduler-recv-interval 10, --disable-radix-cache"),
    Launch("sglang", "qwen3.5", _B300, "fp4", "fp8",
           _no_radix(
               _recv(_with(_each(_sglang(128, 32768, 0.80)), linear_state_precision="bf16"), 15)
           ),
           _IX + _FSL + "qwen3.5_fp4_b300.sh @8eec0d4e: fp8_e4m3, running 128, 0.8, chunk and "
           "prefill 32768, --mamba-ssm-dtype bfloat16, --scheduler-recv-interval 30 at CONC >= "
           "16 else 10, --disable-radix-cache"),
    # After the FP8/FP4 entries (first match wins): the BF16 checkpoint's scripts.
    Launch("sglang", "qwen3.5", _B200_B300, "any", "auto",
           _no_radix(_recv(_each(_sglang(128, 32768, 0.82)), above=15)),
           _IX + _FSL + "qwen3.5_bf16_b200.sh @8eec0d4e, qwen3.5_bf16_b300.sh @f89cdfe2: "
           "running 128, 0.82, chunk and prefill 32768, KV cache not set, "
           "--scheduler-recv-interval 30 at CONC >= 16 else 10, --disable-radix-cache"),
    Launch("sglang", "qwen3.5", _H200, "any", "fp8",
           _qwen35_h200,
           _IX + _FSL + "qwen3.5_fp8_h200.sh @8eec0d4e: fp8_e4m3, running 128, chunk 16384, "
           "0.8, prefill not set (16384), --mamba-ssm-dtype bfloat16, --disable-radix-cache"),
    # ----- TensorRT-LLM ------------------------------------------------------------------------
    Launch("trtllm", "gptoss", frozenset({"h200_sxm"}), "any", "auto", _trt_gptoss(None),
           _IX + "benchmarks/gptoss_fp4_h200_trt.sh @111f0312/@ffdb196e: --max_batch_size "
           "$CONC, --max_num_tokens 20000, free_gpu_memory_fraction 0.85, KV dtype auto, "
           "stream_interval 20"),
    Launch("trtllm", "gptoss", _BLACKWELL, "any", "fp8", _trt_gptoss(512),
           _IX + "benchmarks/gptoss_fp4_b200_trt.sh @1825e7f0/@6be4ee36, "
           "gptoss_fp4_gb200_trt_slurm.sh @5e3f8166: kv_cache_config.dtype fp8, --max_batch_size "
           "512, --max_num_tokens 20000, free_gpu_memory_fraction 0.85, stream_interval 20"),
    Launch("trtllm", "dsr1", frozenset({"h200_sxm"}), "any", "fp8", _trt_dsr1(lambda _: 0.75),
           _IX + "benchmarks/dsr1_fp8_h200_trt.sh @1fc5d73c: kv_cache_config.dtype fp8, "
           "free_gpu_memory_fraction 0.75, --max_num_tokens ceil64(CONC + ISL + 64), >= 8192, "
           "stream_interval 10"),
    Launch("trtllm", "dsr1", _BLACKWELL, "fp8", "fp8", _trt_dsr1(_trt_dsr1_b200_fp8_memory),
           _IX + "benchmarks/dsr1_fp8_b200_trt.sh @0a919c5f: kv_cache_config.dtype fp8, "
           "fraction 0.8 (0.7 at CONC >= 256 with 1k prompts, 0.75 at 8k1k TP4), "
           "--max_num_tokens ceil64(CONC + ISL + 64), >= 8192, stream_interval 10"),
    Launch("trtllm", "dsr1", _BLACKWELL, "fp4", "fp8", _trt_dsr1(lambda _: 0.80),
           _IX + "benchmarks/dsr1_fp4_b200_trt.sh @111f0312: kv_cache_config.dtype fp8, "
           "fraction 0.8, --max_num_tokens ceil64(CONC + ISL + 64), >= 8192, stream_interval 10"),
    Launch("trtllm", "70b", _HOPPER | _BLACKWELL, "any", "fp8", _trt_70b,
           _IX + "benchmarks/70b_fp8_h200_trt_slurm.sh @a267b4bd, 70b_fp{8,4}_b200_trt_*.sh: "
           "kv_cache_config.dtype fp8, --max_num_tokens 16384, fraction not set, "
           "stream_interval 10"),
    Launch("trtllm", "dsv4", _B200_B300, "any", "fp8", _trt_dsv4,
           _IX + _FSL + "dsv4_fp4_b{200,300}_trt.sh @8eec0d4e: kv_cache_config.dtype fp8, "
           "free_gpu_memory_fraction 0.50, --max_batch_size max(CONC, 16), --max_num_tokens "
           "max(ISL + OSL + 256, 8192), stream_interval 10"),
)  # fmt: skip


def family_of(model: str) -> str | None:
    """The InferenceX model family of a row's model name (``_FAMILIES``), or None."""
    name = model.lower()
    return next((f for f, parts in _FAMILIES if any(p in name for p in parts)), None)


def weights_of(row: MeasuredRow) -> str:
    """``fp4`` / ``fp8`` / ``other``: the weight precision a row names, as the scripts key it."""
    precision = row.precision.lower()
    return "fp4" if "fp4" in precision else "fp8" if "fp8" in precision else "other"


def gpu_key(system: str) -> str:
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
    family, gpu = family_of(row.model), gpu_key(row.system)
    for launch in LAUNCHES:
        if (launch.backend, launch.family) != (row.backend, family) or gpu not in launch.gpus:
            continue
        if launch.weights in ("any", weights_of(row)):
            return launch
    return None
