"""A model served on one instance: GPU type, tensor / expert parallelism and precisions.

``Deployment`` is the one object both the latency model and the memory fit take. It checks the
combination once, at construction, and raises a one-line ``InputError`` for what an engine would
refuse to launch:

- a weight precision the GPU's tensor cores cannot run (fp8 on an A100: ``GpuSpec.supports``);
  weight-only precisions are the exception — int4 (AWQ/GPTQ, W4A16), int8_wo (W8A16) and fp4
  (MXFP4/NVFP4 on a GPU without fp4 tensor cores: vLLM's Marlin and Triton MoE kernels, the path
  gpt-oss runs on Hopper) run on any GPU, computing in 16 bit; so does fp8 where the serving
  engine runs an FP8 checkpoint weight-only on such a GPU (``fp8_weight_only``: vLLM and SGLang
  dequantise FP8 weights in their Marlin kernels, W8A16, on Ampere; TensorRT-LLM refuses). The
  GEMMs are then priced at the 16-bit peak with one byte per weight, as for int8_wo (the
  roofline has no fp8 peak for such a GPU, and a kernel table without fp8 rows carries its bf16
  ones by the roofline's ratio);
- a KV precision no engine stores (int8/int4) or fp4 KV on a GPU without fp4;
- ``tp`` that does not divide the query heads, or that neither divides nor is a multiple of the
  KV heads (vLLM replicates KV heads when ``tp > num_kv_heads``, so tp=8 on 4 KV heads is fine);
- ``tp`` beyond one node without ``allow_multi_node`` (the all-reduce then crosses the NIC);
- ``ep`` that does not divide ``tp`` or the expert count, or ``ep`` on a dense model;
- ``attention_dp`` that does not divide ``tp``, or above 1 on a dense model (the heads and KV
  checks above then apply to the attention TP ``tp / attention_dp``);
- ``pp`` above the layer count, a stage left without a full-attention layer, ``pp`` together
  with attention DP (not modelled), or ``tp × pp`` GPUs beyond one node without
  ``allow_multi_node``.

Parallelism model: one instance = ``tp`` GPUs. Attention and dense MLPs are split ``tp`` ways;
an MoE layer's experts are split ``ep`` ways and each expert ``tp / ep`` ways (``ep = tp``: whole
experts per GPU, vLLM's ``--enable-expert-parallel``; ``ep = 1``: every expert split by TP, the
vLLM default).

Attention data parallelism (``attention_dp = D``; SGLang ``--enable-dp-attention --dp-size D``,
vLLM ``--data-parallel-size D`` with expert parallelism, TensorRT-LLM ``enable_attention_dp``):
the ``tp`` GPUs run ``D`` ranks of ``tp / D`` GPUs each (``attention_tp``). Each rank holds its
own copy of everything but the routed experts — attention, dense MLPs, shared experts,
embedding and LM head, split ``tp / D`` ways — its own KV cache and its own batch; the routed
experts are shared by all ranks, split ``ep`` ways by expert and ``tp / ep`` ways within one,
and run on every rank's tokens together. ``rank()`` is the deployment one rank sees.

Pipeline parallelism (``pp`` = P; vLLM ``--pipeline-parallel-size``, SGLang ``--pp-size``,
TensorRT-LLM ``pipeline_parallel_size`` / ``--pp_size``): an instance is ``tp × pp`` GPUs, P
stages of ``tp`` GPUs, each holding consecutive layers (``stage_layers``: vLLM's
``get_pp_indices`` rule — ``num_layers // P`` each, the remainder one layer each to the
stages before the last, from the second-to-last backwards, since the last also holds the
final norm and LM head); the embedding sits on the first stage, the LM head on the last.
``stage(i)`` is the deployment of stage ``i`` alone (a model of its layers, ``pp`` = 1) that
the memory fit sizes; ``tp_group()`` is the whole model on one stage's ``tp`` GPUs, what one
micro-batch's traversal of the pipeline costs in compute (``pipeline.py``). Stages are packed
onto nodes in order, ``gpus_per_node // tp`` per node: a stage boundary between two nodes goes
over the NIC (``boundary_crosses_node``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from hardware.checkpoints import RECIPES
from hardware.precision import WEIGHT_ONLY
from hardware.schema import BYTES_PER_ELEMENT, GpuSpec, ModelSpec
from simulator.latency.memory_rules import padded_expert
from simulator.latency.transfer import kv_bytes_per_gpu, request_state_bytes_per_gpu
from slo.inputfile import InputError

__all__ = [
    "ACTIVATION_PRECISIONS",
    "KV_PRECISIONS",
    "Deployment",
    "Fp8WeightOnly",
    "LinearStatePrecision",
]

#: KV-cache precisions the modelled engines store (fp4 only where the GPU has fp4).
KV_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "fp4")
#: Activation precisions (engines serve with 16-bit activations; fp32 for completeness).
ACTIVATION_PRECISIONS = ("bf16", "fp16", "fp32")
#: Which FP8 layers an engine runs weight-only on a GPU without FP8 tensor cores (``Deployment``).
Fp8WeightOnly = Literal["none", "dense", "all"]
#: The precision of a linear-attention layer's recurrent state (``Deployment``).
LinearStatePrecision = Literal["fp32", "bf16"]
#: Weight precisions that run as weight-only kernels on any GPU (dequantised to 16 bit).
_WEIGHT_ONLY = (*sorted(WEIGHT_ONLY), "fp4")  # dequantised into 16-bit GEMMs (module doc)


@dataclass(frozen=True, slots=True)
class Deployment:
    """One serving instance's model, GPU and parallel layout (validated; see module doc)."""

    model: ModelSpec
    gpu: GpuSpec
    tp: int = 1
    ep: int | None = None
    weight_precision: str = "bf16"
    kv_precision: str = "bf16"
    activation_precision: str = "bf16"
    allow_multi_node: bool = False
    attention_dp: int = 1
    pp: int = 1
    #: Which FP8 layers the serving engine runs weight-only (W8A16, dequantised in a Marlin
    #: kernel) on a GPU without FP8 tensor cores: ``none`` (the engine refuses FP8 there),
    #: ``dense`` (linear layers, not fused-MoE experts), ``all`` (experts too). The backend
    #: preset's ``fp8_weight_only``; ignored on a GPU with FP8 tensor cores.
    fp8_weight_only: Fp8WeightOnly = "none"
    #: The precision of a linear-attention layer's recurrent state (Gated DeltaNet, Mamba):
    #: ``fp32`` (the engines' default) or ``bf16`` (SGLang ``--mamba-ssm-dtype bfloat16``);
    #: the backend preset's ``linear_state_precision`` unless a deployment says otherwise.
    linear_state_precision: LinearStatePrecision = "fp32"
    #: ``(hidden, intermediate)`` alignments the serving engine pads each routed expert's MXFP4
    #: weights to when it loads them (``memory_rules.VLLM_MXFP4_ALIGNMENT``, ``SGLANG_...``; the
    #: intermediate one applies to a TP partition of the expert); ``(1, 1)``: stored as in the
    #: checkpoint. Only MXFP4 experts at the checkpoint's own precision are padded
    #: (``routed_expert_padding``).
    mxfp4_expert_alignment: tuple[int, int] = (1, 1)

    def __post_init__(self) -> None:
        _check_precisions(self)
        _check_dp(self)
        _check_tp(self)
        _check_ep(self)
        _check_pp(self)

    # ----- layout ------------------------------------------------------------------------------
    @property
    def num_gpus(self) -> int:
        """GPUs of one instance (``tp × pp``)."""
        return self.tp * self.pp

    @property
    def num_nodes(self) -> int:
        """Servers one instance spans."""
        return math.ceil(self.num_gpus / self.gpu.gpus_per_node)

    @property
    def attention_tp(self) -> int:
        """GPUs of one attention data-parallel rank (``tp / attention_dp``; ``tp`` without DP)."""
        return self.tp // self.attention_dp

    def rank(self) -> Deployment:
        """The deployment one attention-DP rank runs: ``attention_tp`` GPUs, no DP (itself
        when ``attention_dp`` is 1). Its own routed-expert layout is a placeholder (experts
        split as widely as its GPUs and the expert count allow): callers price the routed
        experts with this instance's layout instead (``data_parallel.py``)."""
        if self.attention_dp == 1:
            return self
        tp = self.attention_tp
        ep = math.gcd(tp, self.model.num_experts) if self.model.is_moe else None
        return Deployment(
            self.model,
            self.gpu,
            tp=tp,
            ep=ep,
            weight_precision=self.weight_precision,
            kv_precision=self.kv_precision,
            activation_precision=self.activation_precision,
            allow_multi_node=self.allow_multi_node,
            fp8_weight_only=self.fp8_weight_only,
            linear_state_precision=self.linear_state_precision,
            mxfp4_expert_alignment=self.mxfp4_expert_alignment,
        )

    # ----- pipeline stages ---------------------------------------------------------------------
    def stage_layers(self) -> tuple[int, ...]:
        """Layers of each pipeline stage, first to last (module doc: vLLM's rule)."""
        base, extra = divmod(self.model.num_layers, self.pp)
        counts = [base] * self.pp
        for i in range(extra):  # the second-to-last stage first, then backwards
            counts[(self.pp - 2 - i) % self.pp] += 1
        return tuple(counts)

    def stage_span(self, index: int) -> tuple[int, int]:
        """``(first layer, end layer)`` of stage ``index`` (end exclusive)."""
        counts = self.stage_layers()
        start = sum(counts[:index])
        return start, start + counts[index]

    def stage(self, index: int) -> Deployment:
        """Stage ``index`` alone: this layout with ``pp`` = 1 on a model of the stage's layers
        (its share of dense, sliding-window and linear-attention layers: the leading dense
        layers where they fall, the other families spread evenly over the depth, as they
        interleave in the catalog's hybrid models). Itself when ``pp`` is 1. The embedding and
        LM head are not part of it: ``memory.py`` adds them to the end stages."""
        if self.pp == 1:
            return self
        start, end = self.stage_span(index)
        m = self.model
        layers = end - start
        update = {
            "num_layers": layers,
            "first_dense_layers": max(0, min(end, m.first_dense_layers) - start),
            "sliding_window_layers": _spread(start, end, m.sliding_window_layers, m.num_layers),
            "linear_attention_layers": _spread(start, end, m.linear_attention_layers, m.num_layers),
        }
        # A copy without re-validation: a stage may legitimately be all dense layers.
        return dataclasses.replace(self, model=m.model_copy(update=update), pp=1)

    def tp_group(self) -> Deployment:
        """The whole model on one stage's ``tp`` GPUs (``pp`` = 1): the compute of one
        micro-batch's traversal of every stage (``pipeline.py``). Itself when ``pp`` is 1."""
        return self if self.pp == 1 else dataclasses.replace(self, pp=1)

    def boundary_crosses_node(self, index: int) -> bool:
        """Whether the hop from stage ``index`` to ``index + 1`` leaves the node: stages are
        packed in order, ``gpus_per_node // tp`` to a node (one stage per node, or several
        nodes per stage, when ``tp`` fills a node)."""
        per_node = max(1, self.gpu.gpus_per_node // self.tp)
        return (index + 1) % per_node == 0

    def _kv_stage(self) -> Deployment:
        """The stage holding the most KV bytes per token per GPU (itself without PP)."""
        if self.pp == 1:
            return self
        stages = [self.stage(i) for i in range(self.pp)]
        return max(stages, key=lambda s: s.kv_bytes_per_token_per_gpu())

    @property
    def expert_parallel(self) -> int:
        """Ways the experts are split (``ep``, default ``tp``; 1 for a dense model)."""
        if not self.model.is_moe:
            return 1
        return self.tp if self.ep is None else self.ep

    @property
    def expert_tp(self) -> int:
        """Ways each expert's FFN is split (``tp / ep``)."""
        return self.tp // self.expert_parallel if self.model.is_moe else self.tp

    def routed_expert_padding(self) -> float:
        """Resident bytes of the routed experts over their checkpoint bytes: the engine's
        padding of MXFP4 experts (``mxfp4_expert_alignment``) to whole tiles of the hidden size
        and of each GPU's share of the expert FFN; 1 for any other expert format."""
        recipe = RECIPES[self.model.checkpoint_recipe]
        if (
            not self.model.is_moe
            or recipe.moe_format != "mxfp4"
            or self.weight_precision != recipe.weights
        ):
            return 1.0
        hidden = self.model.hidden_size
        share = self.model.expert_ffn_size / self.expert_tp
        padded_hidden, padded_share = padded_expert(hidden, share, self.mxfp4_expert_alignment)
        return (padded_hidden / hidden) * (padded_share / share)

    @property
    def heads_per_gpu(self) -> int:
        """Query heads one GPU computes (split ``attention_tp`` ways)."""
        return self.model.num_attention_heads // self.attention_tp

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads one GPU stores: ``num_kv_heads / attention_tp``, at least 1 (replicated
        when ``attention_tp > num_kv_heads``). For MLA: 1, the shared latent, replicated on
        every GPU of a rank."""
        if self.model.attention == "mla":
            return 1
        return max(1, self.model.num_kv_heads // self.attention_tp)

    # ----- sizes -------------------------------------------------------------------------------
    @property
    def activation_bytes(self) -> float:
        """Bytes of one activation element."""
        return BYTES_PER_ELEMENT[self.activation_precision]

    @property
    def weight_only(self) -> bool:
        """Whether the GEMMs dequantise the weights into 16-bit math on this GPU: a weight-only
        precision (int4, int8_wo), or one the GPU has no tensor cores for (fp4 on Hopper, fp8
        on Ampere where the engine allows it)."""
        return self.weight_precision in WEIGHT_ONLY or not self.gpu.supports(self.weight_precision)

    @property
    def weight_label(self) -> str:
        """The weight precision as messages name it: ``'fp8 (weight-only)'`` where
        ``weight_only``, else the precision."""
        precision = self.weight_precision
        return f"{precision} (weight-only)" if self.weight_only else precision

    @property
    def kv_element_bytes(self) -> float:
        """Bytes of one KV-cache element."""
        return BYTES_PER_ELEMENT[self.kv_precision]

    def kv_bytes_per_token_per_gpu(self) -> float:
        """KV bytes one token occupies on each GPU of the instance (all layers).

        GQA: ``2 · kv_heads_per_gpu · head_dim`` per layer, so replicated KV heads count on every
        GPU that holds them. MLA: the whole latent on every GPU (vLLM and SGLang replicate it
        across TP ranks). Times ``tp``, this exceeds ``ModelSpec.kv_bytes_per_token`` exactly when
        something is replicated. With attention DP the split is the rank's (``attention_tp``):
        each rank stores its own requests' tokens. With PP, the stage with the most: each GPU
        holds its own stage's layers only.
        """
        if self.pp > 1:
            return self._kv_stage().kv_bytes_per_token_per_gpu()
        return kv_bytes_per_gpu(self.model, 1, self.kv_precision, self.attention_tp)

    def request_state_bytes_per_gpu(self) -> float:
        """Bytes one running request holds on each GPU besides its cached tokens' KV: its
        sliding-window KV and linear-attention state (``transfer.request_state_bytes_per_gpu``;
        0 for a model with full attention only). With PP, that of the stage with the most KV
        per token (``kv_bytes_per_token_per_gpu``)."""
        if self.pp > 1:
            return self._kv_stage().request_state_bytes_per_gpu()
        return request_state_bytes_per_gpu(
            self.model, self.kv_precision, self.attention_tp, self.linear_state_precision
        )

    def describe(self) -> str:
        """Short label, e.g. ``'Llama-3.1-70B bf16 on h100_sxm TP4'`` (``'… fp8 (weight-only)
        on a100_sxm …'`` where the GEMMs compute in 16 bit: ``weight_only``)."""
        short = self.model.name.rsplit("/", 1)[-1]
        ep = f" EP{self.expert_parallel}" if self.model.is_moe else ""
        dp = f" DP{self.attention_dp}" if self.attention_dp > 1 else ""
        pp = f" PP{self.pp}" if self.pp > 1 else ""
        return f"{short} {self.weight_label} on {self.gpu.name} TP{self.tp}{pp}{dp}{ep}"


def _spread(start: int, end: int, count: int, total: int) -> int:
    """Of ``count`` layers spread evenly over ``total``, those in ``[start, end)``."""
    return end * count // total - start * count // total


def _where(d: Deployment) -> str:
    return f"deployment of {d.model.name} on {d.gpu.name}"


def _check_precisions(d: Deployment) -> None:
    for field, value in (
        ("weight_precision", d.weight_precision),
        ("kv_precision", d.kv_precision),
        ("activation_precision", d.activation_precision),
    ):
        if value not in BYTES_PER_ELEMENT:
            known = ", ".join(BYTES_PER_ELEMENT)
            raise InputError(f"{_where(d)}: {field}: unknown precision '{value}'; known: {known}")
    if d.weight_precision not in _WEIGHT_ONLY and not d.gpu.supports(d.weight_precision):
        _check_unsupported_weights(d)
    if d.kv_precision not in KV_PRECISIONS:
        raise InputError(
            f"{_where(d)}: kv_precision: '{d.kv_precision}' is not a KV-cache precision the "
            f"engines store; expected one of {', '.join(KV_PRECISIONS)}"
        )
    if d.kv_precision == "fp4" and not d.gpu.supports("fp4"):
        raise InputError(f"{_where(d)}: kv_precision: fp4 KV cache needs fp4 support")
    if d.activation_precision not in ACTIVATION_PRECISIONS:
        raise InputError(
            f"{_where(d)}: activation_precision: expected one of {', '.join(ACTIVATION_PRECISIONS)}"
        )


def _check_unsupported_weights(d: Deployment) -> None:
    """A weight precision without tensor cores on ``d.gpu``: allowed only where the engine runs
    it weight-only (``Deployment.fp8_weight_only``), else a one-line error saying why."""
    supported = ", ".join(d.gpu.dense_tflops)
    problem = f"{d.gpu.name} has no {d.weight_precision} tensor cores (supports {supported})"
    if d.weight_precision == "fp8":
        if d.fp8_weight_only == "all" or (d.fp8_weight_only == "dense" and not d.model.is_moe):
            return
        if d.fp8_weight_only == "dense":
            problem += (
                "; the backend runs FP8 weight-only there for dense layers only, not for the "
                "fused-MoE experts of this model"
            )
        else:
            problem += "; the backend does not run FP8 weights on such a GPU"
    raise InputError(f"{_where(d)}: weight_precision: {problem}")


def _check_dp(d: Deployment) -> None:
    if not isinstance(d.tp, int) or d.tp < 1:
        raise InputError(f"{_where(d)}: tp: expected a positive integer, got {d.tp!r}")
    dp = d.attention_dp
    if not isinstance(dp, int) or dp < 1 or d.tp % dp:
        raise InputError(
            f"{_where(d)}: attention_dp={dp!r} must be a positive divisor of tp={d.tp}"
        )
    if dp > 1 and not d.model.is_moe:
        raise InputError(
            f"{_where(d)}: attention_dp={dp} needs an MoE model (the ranks share routed "
            f"experts); a dense model is replicated with more instances instead"
        )


def _check_tp(d: Deployment) -> None:
    m, tp = d.model, d.attention_tp
    # With attention DP the heads are split within a rank: name that split in the messages.
    name = "tp" if d.attention_dp == 1 else "attention TP (tp/attention_dp)"
    if m.num_attention_heads % tp:
        raise InputError(
            f"{_where(d)}: {name}={tp} does not divide the {m.num_attention_heads} attention heads"
        )
    kv = m.num_kv_heads
    if m.attention == "gqa" and (kv % tp if tp <= kv else tp % kv):
        raise InputError(
            f"{_where(d)}: {name}={tp} must divide the {kv} KV heads or be a multiple of them "
            "(KV heads are replicated when tp exceeds them)"
        )
    if m.linear_attention_layers and (m.linear_num_key_heads % tp or m.linear_num_value_heads % tp):
        raise InputError(
            f"{_where(d)}: {name}={tp} does not divide the {m.linear_num_key_heads} key / "
            f"{m.linear_num_value_heads} value heads of the linear-attention layers"
        )
    has_dense_mlp = m.num_layers > m.num_moe_layers
    if has_dense_mlp and m.ffn_size % tp:
        raise InputError(f"{_where(d)}: {name}={tp} does not divide ffn_size {m.ffn_size}")
    if d.tp > d.gpu.gpus_per_node and not d.allow_multi_node:
        raise InputError(
            f"{_where(d)}: tp={d.tp} exceeds the {d.gpu.gpus_per_node} GPUs of one "
            f"{d.gpu.name} node; allow multi-node tensor parallelism to span nodes"
        )


def _check_ep(d: Deployment) -> None:
    m = d.model
    if not m.is_moe:
        if d.ep not in (None, 1):
            raise InputError(f"{_where(d)}: ep={d.ep} applies to MoE models only")
        return
    ep = d.expert_parallel
    if not isinstance(ep, int) or ep < 1 or d.tp % ep:
        raise InputError(f"{_where(d)}: ep={ep!r} must be a positive divisor of tp={d.tp}")
    if m.num_experts % ep:
        raise InputError(f"{_where(d)}: ep={ep} does not divide the {m.num_experts} experts")
    if m.expert_ffn_size % (d.tp // ep):
        raise InputError(
            f"{_where(d)}: tp/ep={d.tp // ep} does not divide expert_ffn_size {m.expert_ffn_size}"
        )


def _check_pp(d: Deployment) -> None:
    pp, m = d.pp, d.model
    if not isinstance(pp, int) or pp < 1 or pp > m.num_layers:
        raise InputError(
            f"{_where(d)}: pp={pp!r} must be a positive integer of at most the "
            f"{m.num_layers} layers"
        )
    if pp == 1:
        return
    if d.attention_dp > 1:
        raise InputError(
            f"{_where(d)}: pp={pp} with attention_dp={d.attention_dp} is not modelled; use one"
        )
    for i in range(pp):
        if d.stage(i).model.full_attention_layers < 1:
            start, end = d.stage_span(i)
            raise InputError(
                f"{_where(d)}: pp={pp} leaves stage {i} (layers {start}-{end - 1}) without a "
                "full-attention layer; use fewer stages"
            )
    if d.num_gpus > d.gpu.gpus_per_node and not d.allow_multi_node:
        raise InputError(
            f"{_where(d)}: tp x pp = {d.num_gpus} GPUs exceed the {d.gpu.gpus_per_node} GPUs "
            f"of one {d.gpu.name} node; allow multi-node to put stages on other nodes"
        )
