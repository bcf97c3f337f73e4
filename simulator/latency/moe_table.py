"""Measured fused-MoE layers: the routed experts of one MoE layer priced from a profile table.

A ``*_moe.csv.gz`` profile (aiconfigurator-core's performance database format, README of
``shared/data/profiles``) times an engine's fused MoE kernel — everything of one layer's routed
experts after the router GEMM: token permutation, the grouped gate+up GEMM, the activation, the
grouped down GEMM and the weighted sum of each token's ``top_k`` results — on one GPU of a
``moe_tp × moe_ep`` split, for ``num_tokens`` tokens entering the layer (every GPU of the split
sees all of them). Columns: ``moe_dtype``, ``num_tokens``, ``hidden_size``, ``inter_size``
(one expert's full FFN width), ``topk``, ``num_experts``, ``moe_tp_size``, ``moe_ep_size``,
``latency`` (ms); optional ``distribution`` and ``kernel_source``.

**Which rows.** Only ``distribution == balanced`` rows are read (all rows if the column is
absent). Measured skewed routing (``power_law_*``) is slower under expert parallelism (the busiest
GPU sets the pace); it is not priced, and those rows serve only to check the rule below
(``bench/moe_routing.py``). Of several kernels that
timed one shape, the engine's default fused-MoE path is kept (``MOE_SOURCE_PREFERENCE``: the
Triton fused-MoE kernel that vLLM and SGLang dispatch to unless a FlashInfer/CUTLASS MoE backend
is requested — vLLM ``VLLM_USE_FLASHINFER_MOE_FP8``, SGLang ``--moe-runner-backend``), then the
median of repeats.

**Balanced rows are perfectly even picks; a batch's picks are not** (``MoeTable.routed``).
aiconfigurator's collectors build a balanced row's routing by striding (``balanced_logits``:
token ``i``'s ``j``-th pick is expert ``(i + j·⌈E/k⌉) mod E``, spread out further below
``⌈E/k⌉`` tokens), so ``T`` tokens touch exactly ``min(E, k·T)`` experts: the measured time
climbs linearly to ``T = E/k`` and is flat after it (H100 vLLM, fp8, 256 experts, top-8: 0.20 /
1.24 / 4.20 / 4.14 ms at 1 / 8 / 32 / 48 tokens). A served batch's picks collide — uniform picks
of a load-balanced router touch ``E·(1 − (1 − 1/E)^{kT})`` (163 of 256 at 32 tokens), skewed
ones fewer (``ROUTING_POWER_LAW``) — so at decode sizes the balanced row reads weights the batch
does not. A layer of ``T`` tokens whose picks touch ``t`` experts (``MoeShape.touched``) is
priced as the balanced layer at ``T_eq = (t/k)^w · min(T, E/k)^(1−w)`` tokens plus the balanced
layer's growth from ``E/k`` to ``T`` (``max(0, f(T) − f(E/k))``: the compute of the extra
assignments once every expert is read, so a prefill of thousands of tokens keeps ``f(T)``).
``w = TOUCHED_TOKENS_WEIGHT`` = 1/2: timed against the profiles' own ``power_law_1.01`` and
``power_law_1.2`` rows, whose touched experts follow from their generator (per-expert token
counts drawn from a truncated power law, scaled to ``k·T`` and rounded,
``power_law_logits_v3``; ``bench/moe_routing.py``), the H100 tables' balanced rows taken as
they are miss them by 14.4% (vLLM) / 11.5% (SGLang) MAPE, with ``w`` = 1/4, 1/2, 3/4, 1 by 11.7 /
9.4 / 8.9 / 10.8% and 9.1 / 7.8 / 8.0 / 10.0% (at ``k·T/E`` from 1 to 2, +36% / +21% median as
they are, +11% / +3% at w = 1/2); w = 1 (time proportional to the experts read) undershoots
below ``E/k``, where a layer's cost follows its picks too; 1/2 and 3/4 tie, 1/2 kept. Held out,
the other GPUs' tables, as they are → w = 1/2: B200 SGLang 10.0% → 6.9%, vLLM 15.2% → 9.9%;
H200 11.0% → 7.8%, 14.2% → 9.5%; B300 9.9% → 6.8%, 14.9% → 9.4%; A100 SGLang 17.0% → 13.9%;
L40S SGLang 16.7% → 11.6%, vLLM 17.3% → 11.1%.

**The lookup rule** (``MoeTable.lookup``): a layer is priced from the table only where the table
measured its exact shape — ``(dtype, hidden, inter, top_k, num_experts, moe_tp, moe_ep)`` — and
is interpolated in ``num_tokens`` only (log time over log tokens between the measured counts,
the grid made non-decreasing in tokens as ``profile_grid.Grid`` does). Another hidden size,
expert width, expert count, top-k or split is *not* interpolated: the fused kernel's tiling and
the experts each GPU holds change with them in steps, so a neighbouring shape is no measurement
of this one. A checkpoint served at its own precision reads the rows of its own expert format
first (``MoeShape.expert_format``, ``Recipe.moe_format``), then those of its weight dtype, and an
``fp8`` layer the other FP8 kind last (SGLang measures only block FP8 on Hopper). Block-scaled
``fp8_block`` rows time a vendor's block FP8 (Qwen3-235B-A22B-FP8, DeepSeek-V3, MiniMax-M2.5),
per-tensor ``fp8`` rows ModelOpt and compressed-tensors FP8: different kernels — vLLM's H100
table times Qwen3-235B's experts split EP4 at 64 tokens (balanced rows) in 0.24 ms per layer
block-scaled and 1.01 ms per-tensor (ModelOpt's FlashInfer CUTLASS path), so a block-FP8
checkpoint read from the per-tensor rows was priced ~4× too slow at decode sizes. ``mxfp4``
rows time gpt-oss's MXFP4 experts (the profiles' ``w4a16_mxfp4`` / ``w4a8_mxfp4_mxfp8``), which
no ``fp4`` (NVFP4) row does: on B200 the composition from NVFP4 GEMMs put vLLM's layer at half
to a quarter of its measured time at 1,024-8,192 tokens. Where the engine runs vLLM's Marlin
MoE instead (below) that path prices the layer. Outside the measured token range
the caller scales the edge's time by its own composition (``model.py``). A shape the table does
not hold returns ``None`` and the caller composes the layer from GEMMs (``compose.py``, "Routed
experts"). MXFP4 rows measured with MXFP8 activations are a table dtype of their own
(``MXFP4_MXFP8``), read first where the deployment runs MXFP8 activations
(``MoeShape.activation``) and after the bf16 ones otherwise; where an engine runs a kernel only
another engine's profile times (TensorRT-LLM's and SGLang's gpt-oss experts), that profile's
rows of it are read for the shapes the engine's own lacks (``load_moe_table``'s ``lent``,
``profile_files.MOE_LENDERS``).

**Rows that do not time the engine's own work on the layer** are dropped or refiled when a
profile is read (each rule's evidence at its constant; ``bench/profile_audit.py`` finds such
tables): a kernel the engine does not run for that format (``NOT_THE_ENGINES_PATH``), layers the
collector routed under an artefact of the model's grouped router (``GROUP_ROUTED_SHAPES``), and
EP rows of a collector that gave one rank the whole layer's picks (``REROUTED_EP_PROFILES``,
refiled at the layer's token count).

**Marlin layers carried to another shape** (``MoeTable.marlin_layer``). vLLM runs an MXFP4 MoE on a
GPU without fp4 tensor cores (Hopper, Ampere, Ada) as weight-only W4A16 in one of two kernels:
OpenAI's Triton ``matmul_ogs`` (``OAITritonExperts``) when the ``triton_kernels`` package is
installed, else Marlin (``fused_marlin_moe``), and always Marlin with ``VLLM_MXFP4_USE_MARLIN=1``
(``vllm/model_executor/layers/quantization/mxfp4.py``, ``get_mxfp4_backend``) — which InferenceX's
H100 gpt-oss script sets (``benchmarks/gptoss_fp4_h100.sh``). Marlin dequantises in the kernel and
multiplies with Ampere-style ``mma.sync`` tiles of at most 64 rows: on H100 its measured MXFP4 and
int4 MoE layers reach 150-270 TFLOPS at 8-16k tokens, where the grouped-GEMM composition
(``compose.py``) prices gpt-oss's experts at 340-550 (TP 8-2, bf16 tensor-core rates), as fast as
OpenAI's Triton kernel measures; at decode sizes Marlin reads the weights at 2.4-2.5 TB/s. The
profiles time Marlin at another MoE shape than a model's (H100 vLLM: ``w4a16_mxfp4`` at hidden
3,584, expert width 3,072, 896 experts, top-16, not gpt-oss's 2,880 / 2,880 / 128 / 4), so the layer
is carried there *at the same tokens per touched expert* (the per-expert GEMM the kernel runs,
``m``, is then the same) and scaled by the weights of the touched experts (``experts × hidden ×
width``, the hidden size and each GPU's share of the width padded to Marlin's tiles as vLLM holds
them: 256 and 128, ``memory_rules.VLLM_MXFP4_ALIGNMENT``; gpt-oss's 2,880 × 2,880 runs as 3,072 × 2
· 1,536 at TP2): FLOPs and weight bytes both scale by that ratio, so one factor carries the compute-
and the memory-bound regime alike. The target's touched experts follow the skewed routing the
composition uses (``ROUTING_POWER_LAW``), the reference's the balanced routing it was measured
under. The reference of the same weight format and split (``moe_tp``, ``moe_ep``) nearest in hidden
and expert width is used (the exact shape where Marlin measured it). The two H100 Marlin references
(MXFP4 at the shape above, int4 at 7,168 / 2,048 / 384 / top-8) carried to gpt-oss's shape agree
within 0-30% (8,192 tokens, TP 2-8). The carried time scales the reference's fixed launch costs with
the weights too, so it is a floor under the composition (which prices them), not a replacement
(``model.py``).

Times are seconds per layer per GPU. Not a profiler.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal, Protocol, cast, runtime_checkable

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from simulator.latency.memory_rules import VLLM_MXFP4_ALIGNMENT, padded_expert
from simulator.latency.profile_files import MoeLender
from simulator.latency.profile_grid import Grid
from simulator.latency.profiles import (
    KNOWN_DTYPES,
    normalise_dtype,
    profile_csv,
    profile_numbers,
)
from slo.inputfile import InputError

__all__ = [
    "GROUP_ROUTED_SHAPES",
    "MARLIN_DTYPES",
    "MOE_SOURCE_PREFERENCE",
    "MXFP4_MXFP8",
    "NOT_THE_ENGINES_PATH",
    "REROUTED_EP_PROFILES",
    "ROUTING_POWER_LAW",
    "TOUCHED_TOKENS_WEIGHT",
    "FusedMoeTimer",
    "MarlinMoeTimer",
    "MoeShape",
    "MoeTable",
    "Mxfp4Activation",
    "distinct_experts",
    "load_moe_table",
    "read_moe_kernels",
    "read_moe_profile",
]

#: Kernel sources in order of preference where several timed one shape (module doc); a source
#: whose name contains none of these ranks after them, alphabetically.
MOE_SOURCE_PREFERENCE: tuple[str, ...] = ("triton", "cutlass", "flashinfer")

#: ``(table dtype, kernel source)`` pairs a profile measured but the engine never runs for that
#: format unless told to, dropped when a profile is read (a row of them would price another
#: kernel than the engine's). SGLang runs gpt-oss's MXFP4 experts in OpenAI's ``triton_kernels``
#: (``matmul_ogs``) on Hopper and Ada, FlashInfer's MXFP4 kernel on SM100
#: (``server_args._handle_model_specific_adjustments``: ``moe_runner_backend`` auto →
#: ``triton_kernel`` / ``flashinfer_mxfp4`` for GptOssForCausalLM); its own fused-MoE Triton
#: kernel runs MXFP4 only when asked for (``--moe-runner-backend triton``, which LoRA needs).
#: Without its rows SGLang on Hopper reads vLLM's rows of ``triton_kernels``
#: (``profile_files.MOE_LENDERS``).
NOT_THE_ENGINES_PATH: frozenset[tuple[str, str]] = frozenset({("mxfp4", "sglang_fused_moe_triton")})

#: ``(hidden, inter, top_k, experts)`` of the layers whose vLLM and SGLang profile rows were routed
#: by the model's group-limited top-k (DeepSeek-V3/R1: 8 groups of 32 experts, the top 4 groups)
#: over the collectors' ``balanced_logits``, which give each token one equal-scoring expert in
#: every group: the grouped router then sends every token to the same four groups and its
#: remaining picks to tied low-numbered experts, so the rows time a layer that reads about half
#: the experts and, split by EP, an overloaded rank 0 (vLLM's H100 rows at 16,384 tokens,
#: EP 64 / 128 / 256: 10.7 / 5.5 / 2.8 ms, i.e. 4T / 2T / T rows where even routing gives
#: 8T / EP; SGLang EP2 = EP1). aiconfigurator's collectors (``collector/{vllm,sglang}/
#: collect_moe.py``: ``use_grouped_topk`` from the model config; TensorRT-LLM's uses plain
#: renormalised top-k, whose EP rows fall as 1 / EP) — read for this project, not fitted. Such
#: rows are dropped when read: those layers are composed from GEMMs.
GROUP_ROUTED_SHAPES: frozenset[tuple[float, float, float, float]] = frozenset(
    {(7168.0, 2048.0, 8.0, 256.0)}
)
#: Profile files (``<engine>_<version>`` prefixes) whose collector gave each EP rank the whole
#: layer's ``num_tokens × topk`` picks re-routed onto its own ``experts / ep`` experts, before
#: aiconfigurator PR #753 (2026-04-14, "project global MoE routing onto rank-1 workload … instead
#: of re-routing over local experts"): the A100 SGLang 0.5.10 rows, whose EP splits take the
#: EP1 time at 16,384 tokens (speedup 1.03 / 1.06 / 1.08 at EP 2 / 4 / 8, where TP splits give
#: 2.0 / 3.96 / 7.72). Read as ``_rank_of_the_layer`` says.
REROUTED_EP_PROFILES: tuple[str, ...] = ("sglang_0.5.10_",)
#: Kernel sources whose collectors route a model's experts with its own grouped top-k.
_GROUP_ROUTING_COLLECTORS = ("vllm", "sglang")


def _rank_of_the_layer(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of a ``REROUTED_EP_PROFILES`` file as one rank of an EP split: an EP row measured at
    ``n`` tokens did the work one of ``ep`` ranks does for a layer of ``n × ep`` tokens whose
    picks spread over all experts (``n × topk`` picks on ``experts / ep`` experts), so it is
    filed at ``n × ep``. Rows whose rank holds no more experts than a token picks are dropped:
    every pick is local there, which no spread routing gives."""
    ep = frame["moe_ep"]
    spread = frame["experts"] / ep > frame["top_k"]
    out = frame[(ep == 1) | spread].copy()
    out["tokens"] = out["tokens"] * out["moe_ep"]
    return out


def _group_routed(frame: pd.DataFrame) -> pd.Series:
    """Rows of ``frame`` (canonical columns, ``_name``) that ``GROUP_ROUTED_SHAPES`` drops."""
    shape = pd.Series(
        list(zip(frame["hidden"], frame["inter"], frame["top_k"], frame["experts"], strict=True)),
        index=frame.index,
    )
    collector = frame["_name"].astype(str).str.startswith(_GROUP_ROUTING_COLLECTORS)
    return shape.isin(GROUP_ROUTED_SHAPES) & collector


#: The table dtype of MXFP4 experts run with MXFP8 activations (``w4a8_mxfp4_mxfp8`` rows);
#: ``mxfp4`` is theirs with bf16 activations (``w4a16_mxfp4``). FlashInfer's trtllm-gen kernel
#: runs either on Blackwell, at very different speeds (SGLang's B200 rows of gpt-oss's layer,
#: TP2: 0.16 / 0.22 / 0.46 ms with MXFP8 against 0.21 / 0.36 / 1.58 ms with bf16 at 256 /
#: 1,024 / 8,192 tokens), so they are kept apart and ``MoeShape.activation`` says which
#: prices a layer first.
MXFP4_MXFP8 = "mxfp4_mxfp8"
#: An MXFP4 MoE's activation precision (``ComposeParams.mxfp4_moe_activation``).
Mxfp4Activation = Literal["bf16", "mxfp8"]

#: MoE-only quantisation schemes of the profiles (gpt-oss MXFP4): valid in a file, never asked
#: for by a deployment (no catalog precision names them).
_MOE_ONLY_DTYPES: dict[str, str] = {
    "w4a16_mxfp4": "mxfp4",
    "w4a8_mxfp4_mxfp8": MXFP4_MXFP8,
    "mxfp4": "mxfp4",
}


#: Catalog weight precisions vLLM runs through its Marlin MoE kernel on a GPU without tensor
#: cores of that precision, and the table dtype of the Marlin rows that time it (module doc).
MARLIN_DTYPES: dict[str, str] = {"fp4": "mxfp4"}
#: What a Marlin row's ``kernel_source`` contains (vLLM ``...marlin_marlinexperts``, SGLang
#: ``sglang_marlin_moe``).
_MARLIN_SOURCE = "marlin"

_COLUMNS: dict[str, str] = {  # canonical -> CSV column
    "dtype": "moe_dtype",
    "tokens": "num_tokens",
    "hidden": "hidden_size",
    "inter": "inter_size",
    "top_k": "topk",
    "experts": "num_experts",
    "moe_tp": "moe_tp_size",
    "moe_ep": "moe_ep_size",
    "seconds": "latency",
}
_SHAPE = ("dtype", "hidden", "inter", "top_k", "experts", "moe_tp", "moe_ep")


#: The expert popularity routed-expert layers are composed with: expert ``i`` (by rank) takes
#: a share ``∝ i^-ROUTING_POWER_LAW`` of the assignments. Trained routers are skewed, so a
#: decode batch reads the weights of fewer distinct experts than uniform routing would touch.
#: 1.01 is aiconfigurator-core's default MoE workload (``power_law_1.01``), under which its
#: kernel database measures fused-MoE layers too: at 16 tokens those layers run 35-45% faster
#: than under balanced routing (Qwen3-235B's shape on H100, SGLang, EP4 and TP4), as the
#: distinct experts fall from 81 to 51 of 128. The load imbalance a skew causes under expert
#: parallelism (the same measurements: +6% at TP4, +22% at EP4 for 4,096 tokens) is not
#: modelled.
ROUTING_POWER_LAW = 1.01

#: The weight of the touched experts, against the tokens, in the balanced-row tokens a layer is
#: priced at (module doc, "Balanced rows are perfectly even picks"): fitted on the H100 tables'
#: ``power_law`` rows, held out on the other GPUs' (``bench/moe_routing.py``).
TOUCHED_TOKENS_WEIGHT = 0.5


@cache
def _popularity(experts: int) -> NDArray[np.float64]:
    share: NDArray[np.float64] = np.arange(1, experts + 1, dtype=np.float64) ** -ROUTING_POWER_LAW
    return share / float(share.sum())


def _balanced_distinct(experts: float, assignments: float) -> float:
    """Distinct experts ``assignments`` uniform picks touch: ``E · (1 − (1 − 1/E)^a)``."""
    return float(experts * (1.0 - (1.0 - 1.0 / experts) ** assignments))


def _balanced_assignments(experts: float, per_expert: float) -> float:
    """The assignments whose uniform picks put ``per_expert`` of them on each touched expert
    (``a / _balanced_distinct(E, a)``, which grows from 1 with ``a``), by bisection in log."""
    if per_expert <= 1.0:
        return 1.0
    low, high = 1.0, 2.0
    while high / _balanced_distinct(experts, high) < per_expert:
        low, high = high, high * 2.0
    for _ in range(60):
        mid = math.sqrt(low * high)
        if mid / _balanced_distinct(experts, mid) < per_expert:
            low = mid
        else:
            high = mid
    return math.sqrt(low * high)


def distinct_experts(experts: int, assignments: float) -> float:
    """Expected distinct experts among ``experts`` that ``assignments`` routed (token, expert)
    pairs touch, each an independent draw from the ``ROUTING_POWER_LAW`` popularity:
    ``Σ_i 1 − (1 − p_i)^assignments`` (``E · (1 − (1 − 1/E)^a)`` for uniform routing)."""
    if assignments <= 0:
        return 0.0
    return float(np.sum(1.0 - (1.0 - _popularity(experts)) ** assignments))


@dataclass(frozen=True, slots=True)
class MoeShape:
    """One MoE layer's routed experts on one GPU of a ``moe_tp × moe_ep`` split.

    ``inter`` is one expert's full FFN width (before the ``moe_tp`` split); ``dtype`` the weight
    precision in the catalog's names ('bf16', 'fp8', 'fp4', 'int4').
    """

    num_experts: int
    top_k: int
    hidden: int
    inter: int
    moe_tp: int
    moe_ep: int
    dtype: str
    #: Whether the router spreads tokens evenly (``ModelSpec.expert_routing`` balanced: uniform
    #: picks) rather than by the skewed ``ROUTING_POWER_LAW`` popularity.
    balanced: bool = False
    #: The checkpoint's own expert format as the tables name it (``Recipe.moe_format``:
    #: ``fp8_block``, ``mxfp4``; empty for none): its rows time the layer before those of
    #: ``dtype`` (module doc, the lookup rule).
    expert_format: str = ""
    #: The activation precision of an MXFP4 layer (``ComposeParams.mxfp4_moe_activation``):
    #: its rows first, the other precision's next (module doc, the lookup rule).
    activation: Mxfp4Activation = "bf16"
    #: The fused-MoE kernel the deployment runs, as the profiles name it (part of a
    #: ``kernel_source``, e.g. ``flashinfer_trtllm``; ``ComposeParams.moe_kernel``): its rows
    #: where a profile timed it, else the kernel the table kept. Empty: the kept one.
    kernel: str = ""

    def touched(self, assignments: float) -> float:
        """Expected distinct experts ``assignments`` routed pairs touch under this layer's
        routing (``distinct_experts``, or uniform picks when ``balanced``)."""
        if self.balanced:
            return _balanced_distinct(self.num_experts, assignments) if assignments > 0 else 0.0
        return distinct_experts(self.num_experts, assignments)

    def routing(self, tokens: int) -> tuple[int, int, float]:
        """How ``tokens`` entering the layer spread over this GPU's experts: ``(tokens per
        touched expert, the GPU's expert columns, assignments on this GPU)``. ``tokens · top_k``
        assignments touch ``touched`` of the ``E`` experts (routers are skewed,
        ``ROUTING_POWER_LAW``, unless ``balanced``); the GPU holds ``1 / moe_ep`` of them, each
        ``inter / moe_tp`` columns wide. The grouped GEMMs over them are priced as one GEMM that
        wide (``compose.py``, "Routed experts"; widths in columns, so no rounding of experts)."""
        assignments = tokens * self.top_k
        touched = self.touched(assignments)
        tokens_each = max(1, round(assignments / touched))
        width = max(1, round(touched / self.moe_ep * (self.inter // self.moe_tp)))
        return tokens_each, width, assignments / self.moe_ep

    @property
    def saturation_tokens(self) -> float:
        """``E / k``: the tokens from which a balanced profile row's even picks touch every
        expert (module doc, "Balanced rows are perfectly even picks")."""
        return self.num_experts / self.top_k

    def even_tokens(self, tokens: int) -> float:
        """The tokens at which a balanced profile row (perfectly even picks: ``min(E, k·T)``
        experts) is read for ``tokens`` entering the layer under this layer's routing, up to
        ``saturation_tokens`` (module doc, ``MoeTable.routed``)."""
        even = min(float(tokens), self.saturation_tokens)
        touched_tokens = self.touched(tokens * self.top_k) / self.top_k
        weight = TOUCHED_TOKENS_WEIGHT
        return float(touched_tokens**weight * even ** (1.0 - weight))

    def key(self, dtype: str) -> tuple[Hashable, ...]:
        """The table key of this shape at table dtype ``dtype``."""
        return (
            dtype,
            float(self.hidden),
            float(self.inter),
            float(self.top_k),
            float(self.num_experts),
            float(self.moe_tp),
            float(self.moe_ep),
        )


@runtime_checkable
class FusedMoeTimer(Protocol):
    """A kernel source that can time whole routed-expert layers (``table.ProfileKernels``)."""

    def fused_moe(self, tokens: int, shape: MoeShape) -> tuple[float, int] | None:
        """``(seconds per layer, anchor tokens)`` measured for ``shape`` at ``tokens`` clamped
        onto the measured range, or None where there is no measurement of ``shape``; on the
        GPU modelled (carried there from the profiled one where they differ)."""
        ...


@runtime_checkable
class MarlinMoeTimer(Protocol):
    """A kernel source that can time routed-expert layers in vLLM's Marlin MoE kernel
    (``table.ProfileKernels``; module doc, "Marlin layers carried to another shape")."""

    def marlin_moe(self, tokens: int, shape: MoeShape) -> float | None:
        """Seconds of one layer of ``shape`` at ``tokens`` in the Marlin kernel
        (``MoeTable.marlin_layer``), or None where no Marlin layer of its weight format and
        split was measured."""
        ...


def _marlin_padded(hidden: float, inter: float, moe_tp: float) -> tuple[float, float]:
    """``(hidden, full expert width)`` as vLLM holds an MXFP4 layer for its Marlin kernel: the
    hidden size and each GPU's share of the width rounded up to Marlin's tiles
    (``memory_rules.VLLM_MXFP4_ALIGNMENT``; the same padding as the memory the weights take)."""
    padded_hidden, share = padded_expert(hidden, inter / moe_tp, VLLM_MXFP4_ALIGNMENT["marlin"])
    return padded_hidden, share * moe_tp


def _moe_dtype(name: str) -> str:
    key = str(name).strip().lower()
    return _MOE_ONLY_DTYPES.get(key, normalise_dtype(key))


def _source_rank(name: str) -> tuple[int, str]:
    lowered = str(name).strip().lower()
    rank = next(
        (i for i, word in enumerate(MOE_SOURCE_PREFERENCE) if word in lowered),
        len(MOE_SOURCE_PREFERENCE),
    )
    return rank, lowered


def read_moe_profile(path: Path) -> pd.DataFrame:
    """The balanced-routing rows of a fused-MoE profile, one per shape and token count, with
    canonical columns (``_SHAPE``, ``tokens``, ``seconds``) and the kernel kept for the shape
    (``kernel``, its ``kernel_source`` lower-cased; empty without that column). ``InputError``
    naming the file, line and column for a missing column, a non-positive number or an unknown
    dtype."""
    every = read_moe_kernels(path)
    return every[every["preferred"]].drop(columns="preferred").reset_index(drop=True)


def read_moe_kernels(path: Path) -> pd.DataFrame:
    """``read_moe_profile``'s rows for every kernel that timed a shape, not only the kept one:
    one row per shape, kernel and token count, ``preferred`` marking the kernel kept
    (``MOE_SOURCE_PREFERENCE``). What a deployment that names its kernel reads
    (``MoeShape.kernel``)."""
    raw = profile_csv(path)
    missing = [col for col in _COLUMNS.values() if col not in raw.columns]
    if missing:
        raise InputError(
            f"{path}: line 1: missing column '{missing[0]}' (a moe profile needs "
            f"{', '.join(_COLUMNS.values())})"
        )
    if "distribution" in raw.columns:
        raw = raw[raw["distribution"].astype(str).str.strip().str.lower() == "balanced"]
    out = pd.DataFrame(index=raw.index)
    for canonical, column in _COLUMNS.items():
        if canonical == "dtype":
            continue
        out[canonical] = profile_numbers(raw[column], path, column)
    names = raw["moe_dtype"].astype(str)
    out["dtype"] = names.map(_moe_dtype)
    unknown = ~out["dtype"].isin(KNOWN_DTYPES | frozenset(_MOE_ONLY_DTYPES.values()))
    if unknown.any():
        position = int(np.argmax(unknown.to_numpy()))
        raise InputError(
            f"{path}: line {int(raw.index[position]) + 2}: column 'moe_dtype': unknown dtype "
            f"'{names.iloc[position]}'"
        )
    out["seconds"] = out["seconds"] / 1e3  # the CSVs give milliseconds
    if path.name.lower().startswith(REROUTED_EP_PROFILES):
        out = _rank_of_the_layer(out)
    sources = raw["kernel_source"] if "kernel_source" in raw.columns else pd.Series("", raw.index)
    ranks = sources.astype(str).map(_source_rank)
    out["_rank"] = ranks.map(lambda r: r[0])
    out["_name"] = ranks.map(lambda r: r[1])
    off_path = pd.Series(list(zip(out["dtype"], out["_name"], strict=True)), index=out.index)
    out = out[~off_path.isin(NOT_THE_ENGINES_PATH) & ~_group_routed(out)]
    out = out.sort_values(["_rank", "_name"], kind="stable")
    best = out.groupby(list(_SHAPE), sort=False)["_name"].transform("first")
    out = out.assign(preferred=out["_name"] == best)
    result = out.groupby([*_SHAPE, "_name", "tokens"], as_index=False, sort=False).agg(
        seconds=("seconds", "median"), preferred=("preferred", "first")
    )
    result = result.rename(columns={"_name": "kernel"})
    return result.sort_values([*_SHAPE, "tokens", "kernel"], ignore_index=True)


class MoeTable:
    """Fused-MoE layer times per measured shape, interpolated in tokens (module doc).

    Args:
        frame: ``read_moe_profile``'s rows (seconds): the kept kernel of each shape.
        source: where they came from, in words.
        monotone: make each shape's times non-decreasing in tokens (isotonic, as the other
            grids); False keeps them verbatim (the accuracy bench).
        alternatives: other kernels' rows of the same columns (``read_moe_kernels``' rows not
            ``preferred``, and rows lent by other engines' profiles): what a shape naming its
            kernel reads (``MoeShape.kernel``).
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        source: str = "",
        *,
        monotone: bool = True,
        alternatives: pd.DataFrame | None = None,
    ) -> None:
        self.source = source
        self._grids: dict[tuple[Hashable, ...], Grid] = {}
        #: Every kernel's grid of a shape, by kernel name (the kept one included).
        self._kernels: dict[tuple[Hashable, ...], dict[str, Grid]] = {}
        #: The shapes whose kept kernel is Marlin (module doc), by table dtype.
        self._marlin: dict[str, list[tuple[Hashable, ...]]] = {}
        mono = (0,) if monotone else ()
        kernels = frame["kernel"] if "kernel" in frame.columns else pd.Series("", frame.index)
        for key, rows in frame.groupby(list(_SHAPE), sort=True):
            grid = Grid.measure(rows, ("tokens",), lambda _: 1.0, monotone=mono)
            self._grids[tuple(key)] = grid
            name = str(kernels.loc[rows.index[0]])
            self._kernels.setdefault(tuple(key), {})[name] = grid
            if _MARLIN_SOURCE in name:
                self._marlin.setdefault(str(key[0]), []).append(tuple(key))
        if alternatives is not None and len(alternatives):
            for group, rows in alternatives.groupby([*_SHAPE, "kernel"], sort=True):
                shape_key, kernel = tuple(group[:-1]), str(group[-1])
                grid = Grid.measure(rows, ("tokens",), lambda _: 1.0, monotone=mono)
                self._kernels.setdefault(shape_key, {}).setdefault(kernel, grid)

    def __len__(self) -> int:
        return len(self._grids)

    def _grid(self, shape: MoeShape) -> Grid | None:
        formats: tuple[str, ...] = (shape.expert_format,)
        if shape.expert_format == "mxfp4":
            mxfp8_first = shape.activation == "mxfp8"
            formats = (MXFP4_MXFP8, "mxfp4") if mxfp8_first else ("mxfp4", MXFP4_MXFP8)
        kinds = (*formats, shape.dtype, "fp8_block" if shape.dtype == "fp8" else "")
        dtypes = tuple(dict.fromkeys(kind for kind in kinds if kind))
        for key in (shape.key(d) for d in dtypes):
            named = self._kernels.get(key, {})
            if shape.kernel:  # the deployment's kernel where measured, else the kept one
                grid = next((g for name, g in named.items() if shape.kernel in name), None)
                if grid is not None:
                    return grid
            if key in self._grids:
                return self._grids[key]
        return None

    def covers(self, shape: MoeShape) -> bool:
        """Whether the table measured ``shape`` (at some token counts)."""
        return self._grid(shape) is not None

    def grid(self, shape: MoeShape) -> Grid | None:
        """The measured times of ``shape`` over tokens (None where the table has no rows of
        it): what a caller carries to another GPU (``Grid.carried``) before ``read``."""
        return self._grid(shape)

    def lookup(self, tokens: int, shape: MoeShape) -> tuple[float, int] | None:
        """``(seconds, anchor tokens)`` for one layer of ``tokens`` under ``shape``'s routing
        (``routed``), the tokens clamped onto the measured range (``anchor == tokens`` inside
        it), or None where the table has no rows of ``shape``."""
        grid = self._grid(shape)
        return None if grid is None else self.routed(grid, tokens, shape)

    @classmethod
    def routed(cls, grid: Grid, tokens: int, shape: MoeShape) -> tuple[float, int] | None:
        """``read`` for a batch whose picks collide (module doc, "Balanced rows are perfectly
        even picks"): the balanced layer at ``shape.even_tokens(tokens)`` plus its growth from
        the saturation ``E / k`` to ``tokens``; the anchor is ``tokens``' own (clamped)."""
        hit = cls.read(grid, tokens)
        if hit is None:
            return None
        seconds, anchor = hit
        saturation = shape.saturation_tokens
        even, _ = cls._at(grid, shape.even_tokens(tokens))
        growth = seconds - cls._at(grid, saturation)[0] if tokens > saturation else 0.0
        return even + max(0.0, growth), anchor

    @staticmethod
    def _at(grid: Grid, tokens: float) -> tuple[float, float]:
        seconds, (anchor,), _, _ = grid.lookup((tokens,))
        return seconds, anchor

    def marlin_layer(self, tokens: int, shape: MoeShape) -> float | None:
        """Seconds of one routed-expert layer of ``shape`` at ``tokens`` in the Marlin kernel,
        carried from the nearest measured Marlin layer of the same weight format and split
        (module doc, "Marlin layers carried to another shape"), or None: a precision vLLM does
        not run through Marlin (``MARLIN_DTYPES``), or no such measurement. Beyond the measured
        tokens the edge's time grows in proportion (the kernel is compute-bound there)."""
        dtype = MARLIN_DTYPES.get(shape.dtype)
        if dtype is None or tokens <= 0:
            return None
        split = (float(shape.moe_tp), float(shape.moe_ep))
        keys = [k for k in self._marlin.get(dtype, ()) if tuple(k[5:7]) == split]
        if not keys:
            return None

        def distance(key: tuple[Hashable, ...]) -> tuple[float, float]:
            hidden, inter, top_k, experts = (float(cast(float, v)) for v in key[1:5])
            size = abs(math.log(hidden / shape.hidden)) + abs(math.log(inter / shape.inter))
            routing = abs(math.log(top_k / shape.top_k)) + abs(
                math.log(experts / shape.num_experts)
            )
            return size, routing

        key = min(keys, key=distance)
        hidden, inter, top_k, experts = (float(cast(float, v)) for v in key[1:5])
        # Marlin runs the weights padded to its tiles (vLLM pads them at load): the target's
        # and the reference's padded widths carry the time, not the checkpoint's.
        moe_tp = float(shape.moe_tp)
        hidden, inter = _marlin_padded(hidden, inter, moe_tp)
        target_hidden, target_inter = _marlin_padded(shape.hidden, shape.inter, moe_tp)
        assignments = tokens * shape.top_k
        touched = shape.touched(assignments)
        ref_assignments = _balanced_assignments(experts, assignments / touched)
        ref_touched = _balanced_distinct(experts, ref_assignments)
        ref_tokens = max(1, round(ref_assignments / top_k))
        hit = self.read(self._grids[key], ref_tokens)
        if hit is None:
            return None
        seconds, anchor = hit
        if ref_tokens > anchor:
            seconds *= ref_tokens / anchor
        weights = touched * target_hidden * target_inter
        return seconds * weights / (ref_touched * hidden * inter)

    @staticmethod
    def read(grid: Grid, tokens: int) -> tuple[float, int] | None:
        """``lookup`` on ``grid`` (one of ``grid``'s, or one carried from it)."""
        if tokens <= 0:
            return None
        seconds, (anchor,), _, _ = grid.lookup((float(tokens),))
        return seconds, int(anchor)


def load_moe_table(
    path: Path | None,
    *,
    monotone: bool = True,
    lent: Sequence[tuple[Path, MoeLender]] = (),
) -> MoeTable | None:
    """The ``MoeTable`` of the profile at ``path`` and of the rows other engines' profiles lend
    it (``lent``: each lender's file and what it lends, ``profile_files.MOE_LENDERS``): a lent
    kernel that is the engine's ``default`` is the one kept for a shape no earlier file
    measured (the lender's kept one where it lends several); otherwise, and for the other
    shapes, an alternative a deployment naming it reads (``MoeShape.kernel``). None where no
    file gives a row."""
    kept: list[pd.DataFrame] = []
    others: list[pd.DataFrame] = []
    sources: list[str] = []
    if path is not None:
        every = read_moe_kernels(path)
        kept.append(every[every["preferred"]])
        others.append(every[~every["preferred"]])
        sources.append(str(path))
    for lent_path, lender in lent:
        every = read_moe_kernels(lent_path)
        kernels = every["kernel"].str.contains(lender.kernel, regex=False)
        lends = every["dtype"].isin(lender.dtypes) & kernels
        every = every[lends]
        if not len(every):
            continue
        known = {
            shape
            for frame in kept
            for shape in frame[list(_SHAPE)].itertuples(index=False, name=None)
        }
        shapes = every[list(_SHAPE)].itertuples(index=False, name=None)
        new = every[[lender.default and shape not in known for shape in shapes]]
        new = new.sort_values("preferred", ascending=False, kind="stable")
        first = new.groupby(list(_SHAPE), sort=False)["kernel"].transform("first")
        taken = new[new["kernel"] == first]
        kept.append(taken)
        others.append(every.drop(index=taken.index))
        sources.append(f"{lent_path} ({'/'.join(lender.dtypes)} {lender.kernel} rows)")
    if not kept:
        return None
    frame = pd.concat(kept, ignore_index=True).drop(columns="preferred")
    rest = pd.concat(others, ignore_index=True).drop(columns="preferred")
    return MoeTable(frame, " + ".join(sources), monotone=monotone, alternatives=rest)
