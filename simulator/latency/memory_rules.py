"""Engine rules that size their defaults from the GPU: SGLang's ``mem_fraction_static`` and
prefill chunk, vLLM's step budget and running cap.

SGLang (0.5.4 and later; PR sgl-project/sglang#10975 "General heuristics for
--mem-fraction-static", read in ``python/sglang/srt/server_args.py``,
``_handle_gpu_memory_settings``) derives the static fraction — weights plus the KV pool — from
the GPU's memory when ``--mem-fraction-static`` is not given::

    reserved_mib = 512                                  # attention-backend metadata
                 + max(chunked_prefill_size, 2048) * 1.5  # activations of the largest prefill
                 + cuda_graph_max_bs * 2                 # CUDA-graph buffers
                 + tp * pp / 8 * 1024                    # communication buffers at large TP
    reserved_mib = max(reserved_mib, 10 * 1024)  if gpu_mib > 60 * 1024
    mem_fraction_static = round((gpu_mib - reserved_mib) / gpu_mib, 3)

``chunked_prefill_size`` and ``cuda_graph_max_bs`` themselves come from buckets of GPU memory
(``SGLANG_BUCKETS``). Releases before 0.5.4 used a fixed fraction by TP size instead (0.88 at
TP1 … 0.79 at TP16, ``sglang.yaml``'s ``hbm_utilization_by_tp``). Pure functions: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "SGLANG_BUCKETS",
    "SGLANG_MXFP4_ALIGNMENT",
    "VLLM_LARGE_GPU_GIB",
    "VLLM_MXFP4_ALIGNMENT",
    "VLLM_SMALL_GPU_DEFAULTS",
    "SglangMemoryDefaults",
    "VllmBatchDefaults",
    "padded_expert",
    "sglang_memory_defaults",
    "sglang_mxfp4_backend",
    "vllm_batch_defaults",
    "vllm_mxfp4_backend",
]

#: ``(upper bound of GPU memory in MiB, chunked_prefill_size, cuda_graph_max_bs at TP < 4,
#: at TP >= 4)``, first match wins (server_args.py buckets: T4/4080, A10/4090, A100-40G/L40,
#: H100/A100-80G, H20/H200, then B200/MI300 and larger). The buckets from 60 GiB up were
#: read in the source; the two below 35 GiB are from memory of it (assumption; no GPU of
#: the catalog is that small).
SGLANG_BUCKETS: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 80),
    (35 * 1024, 2048, 24, 80),
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
    (float("inf"), 16384, 512, 512),
)
_MIB = float(2**20)


@dataclass(frozen=True, slots=True)
class SglangMemoryDefaults:
    """What SGLang's launcher derives from one GPU's memory (module doc)."""

    chunked_prefill_tokens: int
    cuda_graph_max_bs: int
    #: Memory kept outside the static fraction, MiB.
    reserved_mib: float
    #: ``mem_fraction_static`` (rounded to 3 decimals, as SGLang does).
    mem_fraction_static: float

    def explain(self, gpu_mib: float) -> str:
        """One clause: how the fraction came about."""
        return (
            f"SGLang mem_fraction_static {self.mem_fraction_static:.3f} = 1 - "
            f"{self.reserved_mib:,.0f} MiB reserved / {gpu_mib:,.0f} MiB (prefill chunk "
            f"{self.chunked_prefill_tokens:,}, CUDA graphs to batch {self.cuda_graph_max_bs})"
        )


def sglang_memory_defaults(gpu_bytes: float, tp: int, pp: int = 1) -> SglangMemoryDefaults:
    """SGLang's derived defaults on a GPU of ``gpu_bytes`` at ``tp`` × ``pp`` (module doc)."""
    gpu_mib = gpu_bytes / _MIB
    _, chunk, small_tp, large_tp = next(b for b in SGLANG_BUCKETS if gpu_mib < b[0])
    graphs = small_tp if tp < 4 else large_tp
    reserved = 512 + max(chunk, 2048) * 1.5 + graphs * 2 + tp * pp / 8 * 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    fraction = round((gpu_mib - reserved) / gpu_mib, 3)
    return SglangMemoryDefaults(chunk, graphs, reserved, fraction)


#: vLLM's large-device threshold, GiB of device memory (module doc; ``GiB_bytes`` = 2**30).
VLLM_LARGE_GPU_GIB = 70
#: ``(max_num_batched_tokens, max_num_seqs)`` of ``vllm serve`` below that class (module doc).
VLLM_SMALL_GPU_DEFAULTS = (2048, 256)


@dataclass(frozen=True, slots=True)
class VllmBatchDefaults:
    """Which of vLLM's two device classes a GPU falls in (module doc)."""

    #: True: the large class (the preset's own numbers apply).
    large: bool
    max_batched_tokens: int
    max_running_requests: int

    def explain(self) -> str:
        """One clause: the class and its numbers."""
        if self.large:
            return "vLLM's >= 70 GiB defaults"
        return (
            f"vLLM's defaults below 70 GiB or on A100: {self.max_batched_tokens:,}-token steps, "
            f"{self.max_running_requests} running requests"
        )


def vllm_batch_defaults(
    gpu_bytes: float, names: Iterable[str], large: tuple[int, int]
) -> VllmBatchDefaults:
    """vLLM's API-server batch defaults on a GPU of ``gpu_bytes`` called ``names`` (catalog
    key, aliases, product name; vLLM tests the device name for "a100"); ``large`` is the
    ``(max_num_batched_tokens, max_num_seqs)`` of the large class (the preset's)."""
    a100 = any("a100" in name.lower() for name in names)
    if gpu_bytes >= VLLM_LARGE_GPU_GIB * 2**30 and not a100:
        return VllmBatchDefaults(True, *large)
    return VllmBatchDefaults(False, *VLLM_SMALL_GPU_DEFAULTS)


#: ``(hidden, intermediate)`` alignments of one expert's weights as vLLM allocates MXFP4
#: experts, by the MoE backend it runs (``vllm/model_executor/layers/fused_moe/oracle/mxfp4.py``,
#: ``mxfp4_round_up_hidden_size_and_intermediate_size``, read; the same rule sat in
#: ``Mxfp4MoEMethod.create_weights`` since gpt-oss support): the intermediate size is the
#: per-partition one (``expert_ffn_size / (tp / ep)``), rounded up before the weights are
#: created, so the padding is resident memory. 1 = not padded.
VLLM_MXFP4_ALIGNMENT: dict[str, tuple[int, int]] = {
    "marlin": (256, 128),  # MARLIN / BATCHED_MARLIN
    "flashinfer_trtllm": (256, 256),  # FLASHINFER_TRTLLM_MXFP4_{BF16,MXFP8}
    "triton": (1, 64),  # OpenAI's Triton kernels (and any other CUDA backend)
}


#: ``VLLM_MXFP4_ALIGNMENT`` for SGLang (``Mxfp4MoEMethod.create_weights``,
#: ``python/sglang/srt/layers/quantization/mxfp4.py``, read): its FlashInfer MXFP4 runner (the
#: default on Blackwell, ``sglang.yaml`` ``mxfp4_moe_activation``) pads both to 256, OpenAI's
#: Triton kernels the FFN share to 64.
SGLANG_MXFP4_ALIGNMENT: dict[str, tuple[int, int]] = {
    "flashinfer": (256, 256),
    "triton": (1, 64),
}


def padded_expert(hidden: float, share: float, alignment: tuple[int, int]) -> tuple[float, float]:
    """``(hidden size, one GPU's share of the expert FFN)`` rounded up to ``alignment``
    (``VLLM_MXFP4_ALIGNMENT`` / ``SGLANG_MXFP4_ALIGNMENT``): the shape the engine allocates,
    and its kernel computes, for an MXFP4 expert."""
    hidden_align, share_align = alignment
    return (
        math.ceil(hidden / hidden_align) * hidden_align,
        math.ceil(share / share_align) * share_align,
    )


def sglang_mxfp4_backend(cuda_capability: int | None) -> str | None:
    """SGLang's MXFP4 MoE runner by compute capability: FlashInfer's on the SM100 family,
    OpenAI's Triton kernels elsewhere; None where not modelled (``vllm_mxfp4_backend``)."""
    if cuda_capability is None:
        return None
    return "flashinfer" if 100 <= cuda_capability < 110 else "triton"


def vllm_mxfp4_backend(cuda_capability: int | None, marlin: bool) -> str | None:
    """The MoE backend vLLM picks for MXFP4 experts (``select_mxfp4_moe_backend``, read in the
    file ``VLLM_MXFP4_ALIGNMENT`` cites), or None where the rule is not modelled (not an NVIDIA
    GPU, or an unknown capability; ROCm pads to its own alignment).

    ``VLLM_MXFP4_USE_MARLIN=1`` (``marlin``) picks Marlin. Otherwise the first supported in
    priority order: FlashInfer's TRT-LLM kernel on the SM100 family (Blackwell), OpenAI's
    Triton kernels where ``triton_kernels`` runs (compute capability 9.0 up to 11.0: Hopper),
    and Marlin below (Ampere, Ada)."""
    if cuda_capability is None:
        return None
    if marlin:
        return "marlin"
    if 100 <= cuda_capability < 110:
        return "flashinfer_trtllm"
    if 90 <= cuda_capability < 110:
        return "triton"
    return "marlin"
