"""Operator composition: which kernel calls one engine step makes, per GPU.

``OperatorPlanner`` turns a ``Deployment`` and a batch's shapes into ``KernelCall``s — one
primitive of ``KernelTimer`` (``kernels.py``) with its per-GPU sizes and how many times a step
makes it (layers × groups). Any kernel source then prices the same plan. Per layer:

- attention projections: GQA QKV (``m`` = new tokens, ``n = (heads + 2·kv_heads)·head_dim / tp``,
  ``k`` = hidden) and O; MLA (DeepSeek) its fused down-projections (replicated), the per-head
  up-projections, O, the decompression of each prefill's cached and new latents, and for decode
  tokens the two absorption GEMMs;
- MLP: dense SwiGLU as one fused gate+up GEMM and a down GEMM; MoE as a router GEMM, the routed
  experts (below) and the shared experts;
- attention: every prefill request on its own shape (causal over its cached prefix and its new
  tokens — never an averaged shape; identical shapes share one call with ``batch_size`` > 1) and
  decode requests grouped by KV length;
- two TP all-reduces (after attention, after the MLP) of ``tokens × hidden`` activations (priced
  by the kernel source's NCCL all-reduce, or the engine's custom all-reduce where faster:
  ``ComposeParams.custom_all_reduce``);
- memory-bound elementwise work (fused add+RMSNorm ×2, RoPE, KV-cache write, SwiGLU activation,
  MoE permutation), priced from HBM bandwidth (``ComposeParams``) because ``KernelTimer`` has no
  elementwise primitive.

Per step: the embedding gather (plus its vocab-parallel all-reduce), the final norm, and the LM
head only for ``logit_tokens`` rows (plus gathering the vocab-split logits).

**Routed experts.** ``T`` tokens pick ``k`` of ``E`` experts each; routers are skewed, so the
``T·k`` picks are drawn from a power-law popularity over the experts
(``moe_table.ROUTING_POWER_LAW``) and touch ``D = Σ_i 1 - (1 - p_i)^(T·k)`` distinct experts
(``moe_table.distinct_experts``; uniform routing would touch ``E·(1 - (1 - 1/E)^(T·k))``, more at
decode batch sizes, and does for a model whose router is trained to even expert load:
``ModelSpec.expert_routing`` balanced, DeepSeek-V3's family). Only their weights are read: each
GPU runs ``D / ep`` experts with ``T·k / D`` tokens each (rounded to at least 1).
The engines run them as one grouped GEMM (a fused MoE kernel), priced as a single GEMM of those
``T·k / D`` rows against all ``D / ep`` experts' weights side by side (gate+up ``n`` and down ``k``
= experts × per-expert width): the same FLOPs and weight bytes, one launch, and the tile
efficiency of a wide GEMM. Pricing each expert as its own narrow GEMM (``n`` = 256, ``k`` = 128
per GPU for DeepSeek-R1 at expert TP 16) took the measured standalone time of a shape the
grouped kernel never runs: 3.5-4.4× the measured fused-MoE layer on H100 at 16-512 tokens
(SGLang ``fused_moe_triton`` profile), against 0.9-1.1× for the single wide GEMM. Those two GEMMs
and the experts' activation and token permutation (``ROUTED_EXPERT_OPS``) are what a fused-MoE
kernel does; a kernel source with measured fused-MoE layers prices them as one
(``moe_shape``, ``model.py``), this composition is the fallback.

**Fused launches.** A ragged attention kernel is one launch over many
sub-problems, so it pays the fixed per-kernel cost once: the plan prices each sub-problem on its
own and adds a *launch credit*, the smallest call of that kind with count ``-(n - 1)``. This works
for any kernel source, measured or modelled.

**DeepSeek Sparse Attention** (DSA; ``ModelSpec.index_topk``: DeepSeek-V3.2, GLM-5). Each MLA
layer's queries attend only the ``index_topk`` cached tokens its lightning indexer picks:

- attention: the MLA calls above with every query's keys capped at ``min(position, topk)``
  — a decode reads ``min(kv_len, topk)`` latents; a prefill is the causal shape of the same
  pairs (``min(cached + i + 1, topk)`` for its ``i``-th new token), written as sliding-window
  layers are (``_capped_prefill_call``). Up to ``topk`` tokens of context this is exactly the
  dense MLA layer;
- the indexer: its projections per token (``wq_b`` from the compressed query at the attention
  weights' precision, ``wk`` and ``weights_proj`` fused in bf16, as vLLM runs them; replicated
  on every GPU, not split by TP — vLLM's and SGLang's ``ReplicatedLinear``), its key norm,
  RoPE, FP8 quantisation and key-cache write as elementwise traffic (op ``dsa_indexer_proj``);
  and its scoring of *every* earlier token (op ``dsa_indexer``: ``2 · index_n_heads ·
  index_head_dim`` FP8 FLOPs per query-key pair, the keys read once per request and step:
  ``roofline.dsa_indexer_work``), one call per prefill shape and one per step for all decodes
  (the engines' paged-logits kernel takes the whole decode batch). No measured profile times
  the indexer (``shared/data/profiles`` has none), so every kernel source prices it with the
  deployment GPU's roofline (``kernels.IndexerTimer``).

Approximations: the top-k selection is counted as one write and one read of the fp32 scores,
not its sorting; the sparse kernels' gather of ``topk`` scattered latents is priced as a dense
read of that many (a measured MLA table, where the model has DeepSeek's latent shape, answers
with the dense kernel at ``min(kv_len, topk)``); beyond ``topk`` tokens the engines run prefill
absorbed into the latent space (FlashMLA's sparse prefill, 2-3.4x the FLOPs per attended pair,
no decompression) where this keeps the dense-MLA form (decompressed K/V of every cached token,
pairs capped); vLLM's FP8 latent layout (656 bytes: the RoPE part in bf16 and four scales) is
counted as ``kv_precision`` latents; every layer runs its own indexer (GLM-5.2's shared
indexers, ``index_topk_freq``, are not modelled).

What this is not: a scheduler (the batch is given), or a simulator of overlap between
communication and compute (all-reduces are serial, as in vLLM's default TP).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hardware.checkpoints import RECIPES
from simulator.latency.deployment import Deployment
from simulator.latency.moe_table import MoeShape, Mxfp4Activation

__all__ = ["ROUTED_EXPERT_OPS", "CallKind", "ComposeParams", "KernelCall", "OperatorPlanner"]

#: The ops of one MoE layer's routed experts after the router: what a fused-MoE kernel runs
#: (grouped gate+up and down GEMMs; activation and token permutation as ``moe_permute``).
ROUTED_EXPERT_OPS = frozenset({"moe_experts", "moe_permute"})

CallKind = Literal[
    "gemm", "context_attention", "generation_attention", "nccl", "elementwise", "dsa_indexer"
]

#: Chunk length of the chunked linear-attention kernels (flash-linear-attention's Gated DeltaNet
#: and Mamba-2 SSD kernels use 64-token chunks), and the precision they compute in.
_LINEAR_CHUNK = 64
_RECURRENCE_DTYPE = "bf16"
_ROUTER_DTYPE = "bf16"  # routers and LM heads stay in 16 bit in every engine we model
_LM_HEAD_DTYPE = "bf16"
#: vLLM fuses the DSA indexer's ``wk`` and ``weights_proj`` into one unquantised GEMM
#: (``Indexer.wk_weights_proj``: ``quant_config=None``, FP8 ``wk`` upcast to bf16 at load).
_INDEXER_WK_DTYPE = "bf16"


@dataclass(frozen=True, slots=True)
class KernelCall:
    """One primitive call of a step, ``count`` times (negative for a launch credit).

    ``args`` are the positional arguments of the ``KernelTimer`` method for ``kind`` ('nccl' =
    ``all_reduce``); for 'elementwise' they are ``(bytes, kernels)``, priced by the composer;
    for 'dsa_indexer' those of ``kernels.IndexerTimer.dsa_indexer``.
    ``op`` names the operator in breakdowns ('qkv_proj', 'attn_decode', ...).
    """

    op: str
    kind: CallKind
    args: tuple[Any, ...]
    count: float


@dataclass(frozen=True, slots=True)
class ComposeParams:
    """Costs outside the four kernel primitives (seconds; fractions).

    The step and request overheads are the framework's CPU time that is not hidden behind GPU
    work (scheduling, input preparation, sampling, output processing). Defaults are the ``vllm``
    preset's (assumptions, documented there); ``presets.BackendPreset.compose_params`` gives the
    others.
    """

    #: Fixed CPU cost of one engine step not overlapped with GPU work.
    step_overhead_s: float = 1.0e-3
    #: CPU cost per scheduled request per step (input preparation, detokenisation hand-off).
    request_overhead_s: float = 20.0e-6
    #: Fraction of HBM bandwidth that norms, RoPE and activations reach. An assumption in line
    #: with the memory-bound GEMM rows of the H100 profile (median 0.80).
    elementwise_memory_efficiency: float = 0.80
    #: Fixed GPU time of one elementwise kernel, like the smallest profiled GEMMs (~2.5 µs).
    elementwise_launch_s: float = 2.5e-6
    #: Whether TP all-reduces of up to ``custom_all_reduce_max_bytes`` may use the engine's own
    #: one-shot/two-shot all-reduce kernel (vLLM ``CustomAllreduce``, SGLang's and TensorRT-LLM's
    #: custom all-reduce) over NVLink, at most 8 GPUs of a node, instead of NCCL: each all-reduce
    #: costs the faster of the two. vLLM enables it by default (``disable_custom_all_reduce``
    #: False) and uses it for messages below its 8 MiB buffer.
    custom_all_reduce: bool = True
    custom_all_reduce_max_bytes: float = 8.0 * (1 << 20)
    #: Latency floor of the custom all-reduce, ``base + per_gpu · (n - 1)``: SGLang's H100
    #: measurement of its custom all-reduce on 512-4096 fp16 elements (sgl-project/sglang
    #: PR #2904) is 3.7-3.9 µs on 2 GPUs, 3.7-4.8 µs on 4 and 5.7-5.9 µs on 8 — against the
    #: NCCL profile's 6.3 / 9.5 / 15.7 µs, which the roofline's floor matches.
    custom_all_reduce_base_s: float = 3.3e-6
    custom_all_reduce_per_gpu_s: float = 0.37e-6
    #: Ring-equivalent bus bandwidth of the custom all-reduce as a fraction of the GPU link's:
    #: the same measurement from 64 Ki to 1 Mi elements (128 KiB-2 MiB) costs 7.8, 13.3 and
    #: 13.2 µs per MiB more on 2, 4 and 8 GPUs, i.e. 2(n-1)/n·bytes at 112-133 GB/s of the H100's
    #: 450 GB/s per direction (0.28).
    custom_all_reduce_link_efficiency: float = 0.28
    #: Whether the engine runs a weight-only MoE of a precision the GPU has no tensor cores for
    #: (MXFP4 on Hopper) through vLLM's Marlin kernel (``moe_table.MARLIN_DTYPES``): the routed
    #: experts then cost at least the kernel source's Marlin layer carried to the model's shape
    #: (``MarlinMoeTimer``; ``moe_table.py``, "Marlin layers carried to another shape"),
    #: whatever fused layer the table measured. vLLM does under ``VLLM_MXFP4_USE_MARLIN=1``
    #: (``ServingConfig.marlin_moe``; its own default on Hopper is OpenAI's Triton kernel, see
    #: its preset); no preset turns it on.
    marlin_moe: bool = False
    #: The activation precision of an MXFP4 MoE where the kernel runs either (FlashInfer's
    #: trtllm-gen kernel on Blackwell): ``bf16`` or ``mxfp8``. A profile's rows of that
    #: precision price the layer first (``moe_table.MoeShape.activation``); defaults per engine
    #: in the presets (``mxfp4_moe_activation``).
    mxfp4_moe_activation: Mxfp4Activation = "bf16"
    #: The fused-MoE kernel the deployment runs where it is not the engine's default, as the
    #: profiles name it (part of a ``kernel_source``: ``flashinfer_trtllm``, ``marlin``, …;
    #: ``moe_table.MoeShape.kernel``); empty: the kernel each profile's rows were kept for.
    moe_kernel: str = ""

    def __post_init__(self) -> None:
        if min(self.step_overhead_s, self.request_overhead_s, self.elementwise_launch_s) < 0:
            raise ValueError("ComposeParams: overheads must be >= 0")
        for name in ("elementwise_memory_efficiency", "custom_all_reduce_link_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"ComposeParams: {name} must be in (0, 1]")
        floors = (self.custom_all_reduce_base_s, self.custom_all_reduce_per_gpu_s)
        if min(*floors, self.custom_all_reduce_max_bytes) < 0:
            raise ValueError("ComposeParams: custom all-reduce costs must be >= 0")


class OperatorPlanner:
    """The kernel calls of a step for one ``Deployment`` (per GPU; counts include layers).

    Per-deployment constants are computed once here; each ``*_calls`` method is a pure function
    of its shape arguments, so callers may cache their cost by those arguments.
    """

    def __init__(self, deployment: Deployment) -> None:
        d = self.deployment = deployment
        m = d.model
        self.layers = m.num_layers
        # Layer families: full attention over the whole context, sliding-window attention over
        # the last ``window`` tokens, linear attention (a recurrence, no KV; ``_linear_mixer``).
        self.full_layers = m.full_attention_layers
        self.window_layers, self.window = m.sliding_window_layers, m.sliding_window
        self.attention_layers = m.softmax_attention_layers  # the layers that launch attention
        self.linear_layers = m.linear_attention_layers
        self.moe_layers = m.num_moe_layers
        self.dense_layers = m.num_layers - m.num_moe_layers
        self.tp = d.tp
        self.hidden = m.hidden_size
        self.heads = d.heads_per_gpu
        self.kv_heads = d.kv_heads_per_gpu
        self.wdtype = d.weight_precision
        # A checkpoint served at its own precision keeps its layout (``hardware/checkpoints.py``,
        # as the memory fit counts it): gpt-oss's MXFP4 leaves the attention projections in
        # bf16. A re-quantised checkpoint (another precision) is ``weight_precision`` throughout.
        recipe = RECIPES[m.checkpoint_recipe]
        own_layout = d.weight_precision == recipe.weights
        self.attn_wdtype = "bf16" if own_layout and recipe.attention_bf16 else self.wdtype
        self.moe_format = recipe.moe_format if own_layout else ""
        self.kvdtype = d.kv_precision
        self.act = d.activation_bytes
        self.kv_bytes = d.kv_element_bytes
        self.mla = m.attention == "mla"
        if self.mla:
            self.qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
            self.v_dim = m.v_head_dim or m.qk_nope_head_dim
            self.latent = m.kv_lora_rank + m.qk_rope_head_dim
            # Protocol shapes that reproduce MLA's FLOPs and bytes (see prefill_args and
            # decode_args): width = mean of the QK and V widths; half the latent for decode.
            self.attn_dim = (self.qk_dim + self.v_dim) // 2
            self.decode_dim = self.latent // 2
        else:
            self.attn_dim = m.head_dim
        # DeepSeek Sparse Attention (module doc): 0 layers and no cap without an indexer.
        self.sparse_layers = m.sparse_attention_layers
        self.topk = m.index_topk

    # ----- attention shapes -------------------------------------------------------------------
    def prefill_args(self, count: int, new: int, cached: int) -> tuple[Any, ...]:
        """``context_attention`` arguments for ``count`` prefills of one shape.

        MLA prefill runs as multi-head attention on decompressed K/V (16-bit) whose QK width
        (nope + rope) differs from V's; ``head_dim`` = their mean gives the FLOPs (QKᵀ + PV) and
        the K+V bytes exactly.
        """
        if self.mla:
            return (count, new, cached, self.heads, self.heads, self.attn_dim, "bf16")
        return (count, new, cached, self.heads, self.kv_heads, self.attn_dim, self.kvdtype)

    def decode_args(self, count: int, kv_len: int) -> tuple[Any, ...]:
        """``generation_attention`` arguments for ``count`` decodes reading ``kv_len`` tokens.

        MLA decode (absorbed) is multi-query attention of all heads over one latent of
        ``kv_lora_rank + rope`` elements that serves as both K and V. The protocol counts K and
        V separately, so it is passed as twice the heads over half the width: the latent's bytes
        are then exact and the FLOPs within 6% (QK over the full latent, PV over the rank).
        """
        if self.mla:
            return (count, kv_len, 2 * self.heads, 1, self.decode_dim, self.kvdtype)
        return (count, kv_len, self.heads, self.kv_heads, self.attn_dim, self.kvdtype)

    def prefill_floor(self) -> KernelCall:
        """The smallest prefill call: one launch's fixed cost, for launch credits (count 1)."""
        return KernelCall("attn_prefill", "context_attention", self.prefill_args(1, 1, 0), 1)

    def decode_floor(self) -> KernelCall:
        """The smallest decode call (count 1)."""
        return KernelCall("attn_decode", "generation_attention", self.decode_args(1, 1), 1)

    # ----- calls by what they depend on -------------------------------------------------------
    def token_calls(self, tokens: int) -> list[KernelCall]:
        """Everything that depends only on the step's total new tokens ``T``: embedding,
        projections, MLP/MoE, all-reduces, norms and activations."""
        t, h, a = tokens, self.hidden, self.act
        calls = [KernelCall("embedding", "elementwise", (t * h * (2.0 + a), 1), 1)]
        if self.tp > 1:  # vocab-parallel embedding sums its shards
            calls.append(KernelCall("all_reduce", "nccl", (t * h * a, self.tp), 1))
        calls += self._mla_projections(t) if self.mla else self._gqa_projections(t)
        if self.sparse_layers:
            calls += self._indexer_projections(t)
        if self.linear_layers:
            calls += self._linear_mixer(t)
        if self.tp > 1:
            calls.append(KernelCall("all_reduce", "nccl", (t * h * a, self.tp), 2 * self.layers))
        calls.append(self._attention_elementwise(t))
        if self.dense_layers:
            calls += self._dense_mlp(t)
        if self.moe_layers:
            calls += self._moe(t)
        calls.append(KernelCall("elementwise", "elementwise", (3.0 * t * h * a, 1), 1))
        return calls

    def logit_calls(self, logit_tokens: int) -> list[KernelCall]:
        """LM head over the rows that sample, and the gather of vocab-split logits (an
        all-gather of the full logits ≈ an all-reduce of half of them on a ring)."""
        if logit_tokens <= 0:
            return []
        vocab, h = self.deployment.model.vocab_size, self.hidden
        calls = [
            KernelCall(
                "lm_head", "gemm", (logit_tokens, -(-vocab // self.tp), h, _LM_HEAD_DTYPE), 1
            )
        ]
        if self.tp > 1:
            message = logit_tokens * vocab * self.act / 2
            calls.append(KernelCall("logits_gather", "nccl", (message, self.tp), 1))
        return calls

    def prefill_calls(self, groups: tuple[tuple[int, int, int], ...]) -> list[KernelCall]:
        """Attention of prefill groups ``(cache_len, new_tokens, count)``: one call per distinct
        shape, a launch credit for the ragged kernel, and MLA's latent decompression."""
        calls = []
        for c, n, k in groups:
            if self.topk:
                calls.append(
                    self._capped_prefill_call(c, n, k, self.topk, "attn_prefill", self.full_layers)
                )
                calls.append(self.indexer_prefill_call(c, n, k))
            else:
                args = self.prefill_args(k, n, c)
                calls.append(
                    KernelCall("attn_prefill", "context_attention", args, self.full_layers)
                )
            if self.window_layers:
                calls.append(self._window_prefill_call(c, n, k))
        if len(groups) > 1:
            floor = self.prefill_floor()
            credit = -(len(groups) - 1) * self.attention_layers
            calls.append(KernelCall(floor.op, floor.kind, floor.args, credit))
        if self.mla:
            calls += [self.mla_decompress_call(c, n, k) for c, n, k in groups]
        return calls

    def _capped_prefill_call(  # noqa: PLR0917  (a group's shape, then its layer family)
        self, cached: int, new: int, count: int, limit: int, op: str, layers: int
    ) -> KernelCall:
        """A prefill of ``new`` tokens after ``cached`` ones in layers whose queries attend at
        most ``limit`` keys (a sliding window; DSA's top-k), as causal calls of the same FLOPs:
        query ``i`` attends to ``min(cached + i + 1, limit)`` keys. Up to ``limit`` new tokens
        this is one call over an equivalent shorter prefix (the plain call itself while
        ``cached + new <= limit``); longer prefills are ``ceil(new / limit)`` equal chunks, each
        over the prefix that gives the chunk its share of the FLOPs (K/V bytes follow the same
        shape, approximately)."""
        w = limit
        chunks = -(-new // w)
        size = -(-new // chunks)
        first = max(0, min(w - cached, new))  # queries whose window is not yet full
        keys = first * cached + first * (first + 1) // 2 + (new - first) * w
        prefix = max(0, round((keys / chunks - size * (size + 1) / 2) / size))
        args = self.prefill_args(count * chunks, size, prefix)
        return KernelCall(op, "context_attention", args, layers)

    def _window_prefill_call(self, cached: int, new: int, count: int) -> KernelCall:
        """A sliding-window layer's prefill (``_capped_prefill_call`` at the window)."""
        return self._capped_prefill_call(
            cached, new, count, self.window, "attn_prefill_window", self.window_layers
        )

    def indexer_prefill_call(self, cached: int, new: int, count: int) -> KernelCall:
        """The DSA indexer of ``count`` prefills of ``new`` tokens after ``cached``: each new
        token scores every earlier token and itself (``new·cached + new(new+1)/2`` pairs per
        request), reading the request's ``cached + new`` keys once (module doc)."""
        pairs = count * (new * cached + new * (new + 1) // 2)
        args = (count * new, pairs, count * (cached + new), *self._indexer_heads())
        return KernelCall("dsa_indexer", "dsa_indexer", args, self.sparse_layers)

    def indexer_decode_call(self, num_decode: int, total_kv: int) -> KernelCall:
        """The DSA indexer of ``num_decode`` decodes whose KV lengths sum to ``total_kv``: one
        call for the whole batch, each decode scoring (and reading the key of) every cached
        token (module doc)."""
        args = (num_decode, total_kv, total_kv, *self._indexer_heads())
        return KernelCall("dsa_indexer", "dsa_indexer", args, self.sparse_layers)

    def _indexer_heads(self) -> tuple[int, int]:
        m = self.deployment.model
        return m.index_n_heads, m.index_head_dim

    def sparse_kv(self, kv_len: int) -> int:
        """Cached tokens one decode of a full-attention layer reads at ``kv_len``: the DSA
        top-k where the model has one."""
        return min(kv_len, self.topk) if self.topk else kv_len

    def mla_decompress_call(self, cached: int, new: int, count: int) -> KernelCall:
        """MLA prefill: up-project the cached and new latents of ``count`` requests to K and V."""
        n = self.heads * (self.deployment.model.qk_nope_head_dim + self.v_dim)
        rank = self.deployment.model.kv_lora_rank
        return KernelCall(
            "mla_kv_decompress",
            "gemm",
            (cached + new, n, rank, self.attn_wdtype),
            count * self.layers,
        )

    def decode_calls(self, groups: list[tuple[int, int]]) -> list[KernelCall]:
        """Attention of decode groups ``(kv_len, count)`` plus the launch credit."""
        calls = []
        for kv, k in groups:
            args = self.decode_args(k, self.sparse_kv(kv))
            calls.append(KernelCall("attn_decode", "generation_attention", args, self.full_layers))
            if self.window_layers:
                args = self.decode_args(k, min(kv, self.window))
                op = "attn_decode_window"
                calls.append(KernelCall(op, "generation_attention", args, self.window_layers))
        if len(groups) > 1:
            floor = self.decode_floor()
            credit = -(len(groups) - 1) * self.attention_layers
            calls.append(KernelCall(floor.op, floor.kind, floor.args, credit))
        if self.sparse_layers and groups:
            total = sum(kv * k for kv, k in groups)
            calls.append(self.indexer_decode_call(sum(k for _, k in groups), total))
        return calls

    def decode_token_calls(self, num_decode: int) -> list[KernelCall]:
        """Work that depends on the number of decode requests: MLA's absorption GEMMs (query
        into latent space, latent output back to per-head values) and the linear-attention
        layers' state update (each decode reads and writes its recurrent state once per layer,
        memory-bound). Empty for plain GQA."""
        if num_decode <= 0:
            return []
        calls = self._linear_state_calls(num_decode) if self.linear_layers else []
        if not self.mla:
            return calls
        m = self.deployment.model
        rank, nope = m.kv_lora_rank, m.qk_nope_head_dim
        return [
            *calls,
            KernelCall(
                "mla_absorb",
                "gemm",
                (num_decode, self.heads * rank, nope, self.attn_wdtype),
                self.attention_layers,
            ),
            KernelCall(
                "mla_absorb",
                "gemm",
                (num_decode, self.heads * self.v_dim, rank, self.attn_wdtype),
                self.attention_layers,
            ),
        ]

    # ----- pieces of token_calls --------------------------------------------------------------
    def _gqa_projections(self, t: int) -> list[KernelCall]:
        h, d, w, n_layers = self.hidden, self.attn_dim, self.attn_wdtype, self.attention_layers
        gate = self.heads if self.deployment.model.attention_output_gate else 0
        qkv_n = (self.heads + gate + 2 * self.kv_heads) * d
        return [
            KernelCall("qkv_proj", "gemm", (t, qkv_n, h, w), n_layers),
            KernelCall("o_proj", "gemm", (t, h, self.heads * d, w), n_layers),
        ]

    def _mla_projections(self, t: int) -> list[KernelCall]:
        m = self.deployment.model
        h, w, n_layers = self.hidden, self.attn_wdtype, self.attention_layers
        q_n = self.heads * self.qk_dim
        calls: list[KernelCall] = []
        if m.q_lora_rank:
            # vLLM fuses the replicated q_a and kv_a down-projections into one GEMM.
            calls.append(
                KernelCall(
                    "mla_down_proj", "gemm", (t, m.q_lora_rank + self.latent, h, w), n_layers
                )
            )
            calls.append(KernelCall("q_proj", "gemm", (t, q_n, m.q_lora_rank, w), n_layers))
        else:
            calls.append(KernelCall("mla_down_proj", "gemm", (t, self.latent, h, w), n_layers))
            calls.append(KernelCall("q_proj", "gemm", (t, q_n, h, w), n_layers))
        calls.append(KernelCall("o_proj", "gemm", (t, h, self.heads * self.v_dim, w), n_layers))
        return calls

    def _indexer_projections(self, t: int) -> list[KernelCall]:
        """The DSA indexer's per-token work in every sparse layer, replicated on each GPU
        (module doc): ``wq_b`` (compressed query to all indexer heads), ``wk`` and
        ``weights_proj`` as one bf16 GEMM, and as elementwise traffic the key's LayerNorm,
        RoPE on queries and key, the queries' FP8 quantisation and the FP8 key-cache write."""
        m, h, a = self.deployment.model, self.hidden, self.act
        heads, width = m.index_n_heads, m.index_head_dim
        queries = heads * width
        moved = t * queries * (3.0 * a + 1.0)  # RoPE in place, then read again and write FP8
        moved += t * width * 4.0 * a  # key LayerNorm and RoPE
        moved += t * (width * a + m.index_key_bytes_per_layer_token())  # FP8 key-cache write
        n = self.sparse_layers
        return [
            KernelCall(
                "dsa_indexer_proj", "gemm", (t, queries, m.q_lora_rank, self.attn_wdtype), n
            ),
            KernelCall("dsa_indexer_proj", "gemm", (t, width + heads, h, _INDEXER_WK_DTYPE), n),
            KernelCall("dsa_indexer_proj", "elementwise", (moved, 3), n),
        ]

    def _attention_elementwise(self, t: int) -> KernelCall:
        """Per layer: two fused add+RMSNorms (read x and residual, write both), RoPE on Q and K,
        the KV-cache write; MLA adds the two latent norms; Qwen3 its per-head Q/K norms."""
        h, a = self.hidden, self.act
        moved = 2 * 4.0 * t * h * a
        kernels = 4
        if self.mla:
            m = self.deployment.model
            moved += 2.0 * t * (m.q_lora_rank + m.kv_lora_rank) * a  # latent norms
            moved += 2.0 * t * (self.heads + 1) * m.qk_rope_head_dim * a  # RoPE
            moved += t * self.latent * (a + self.kv_bytes)  # latent cache write
            kernels += 2
        else:
            qk = t * (self.heads + self.kv_heads) * self.attn_dim
            moved += 2.0 * qk * a  # RoPE in place
            moved += t * 2 * self.kv_heads * self.attn_dim * (a + self.kv_bytes)  # cache write
            if self.deployment.model.qk_norm:
                moved += 2.0 * qk * a
                kernels += 1
        return KernelCall("elementwise", "elementwise", (moved, kernels), self.layers)

    def _linear_mixer(self, t: int) -> list[KernelCall]:
        """A linear-attention layer on ``t`` new tokens, heads split ``tp`` ways: input and output
        projections; the chunked recurrence (chunks of ``_LINEAR_CHUNK`` tokens: each token
        updates and reads a ``key × value`` state per head, ``4·dk·dv`` FLOPs, plus attention
        within its chunk, ``2·chunk·(dk + dv)``), priced as GEMMs of those FLOPs; the short
        convolution and gates as elementwise traffic."""
        m, h, w, a = self.deployment.model, self.hidden, self.wdtype, self.act
        heads = m.linear_num_value_heads // self.tp
        dk, dv = m.linear_key_head_dim, m.linear_value_head_dim
        values = heads * dv
        width = m.linear_conv_channels // self.tp + values + 2 * heads
        n = self.linear_layers
        moved = 2.0 * t * (m.linear_conv_channels // self.tp + 2 * values) * a
        return [
            KernelCall("linear_in_proj", "gemm", (t, width, h, w), n),
            KernelCall("linear_recurrence", "gemm", (t, values, dk, _RECURRENCE_DTYPE), 2 * n),
            KernelCall(
                "linear_chunk_attention",
                "gemm",
                (t, _LINEAR_CHUNK * heads, dk + dv, _RECURRENCE_DTYPE),
                n,
            ),
            KernelCall("linear_out_proj", "gemm", (t, h, values, w), n),
            KernelCall("linear_conv_gates", "elementwise", (moved, 3), n),
        ]

    def _linear_state_calls(self, num_decode: int) -> list[KernelCall]:
        """Each decode reads and writes its recurrent and convolution state in every linear
        layer (``ModelSpec.linear_state_bytes`` per request at the deployment's state
        precision, split ``tp`` ways)."""
        d, m = self.deployment, self.deployment.model
        state = m.linear_state_bytes(d.linear_state_precision)
        per_layer = state / m.linear_attention_layers / self.tp
        moved = 2.0 * num_decode * per_layer
        return [KernelCall("linear_state", "elementwise", (moved, 2), self.linear_layers)]

    def _dense_mlp(self, t: int) -> list[KernelCall]:
        h, w, n_layers = self.hidden, self.wdtype, self.dense_layers
        ffn = self.deployment.model.ffn_size // self.tp
        return [
            KernelCall("mlp_gate_up", "gemm", (t, 2 * ffn, h, w), n_layers),
            KernelCall("mlp_down", "gemm", (t, h, ffn, w), n_layers),
            KernelCall("elementwise", "elementwise", (3.0 * t * ffn * self.act, 1), n_layers),
        ]

    def moe_shape(self) -> MoeShape | None:
        """The routed-expert layer each GPU runs (None for a dense model): the key of a
        measured fused-MoE table (``moe_table.py``)."""
        d, m = self.deployment, self.deployment.model
        if not self.moe_layers:
            return None
        return MoeShape(
            num_experts=m.num_experts,
            top_k=m.experts_per_token,
            hidden=self.hidden,
            inter=m.expert_ffn_size,
            moe_tp=d.expert_tp,
            moe_ep=d.expert_parallel,
            dtype=self.wdtype,
            balanced=m.expert_routing == "balanced",
            expert_format=self.moe_format,
        )

    def routed_expert_calls(self, t: int) -> list[KernelCall]:
        """The routed experts of every MoE layer for ``t`` tokens, composed (module doc,
        "Routed experts"): the grouped GEMMs and, as ``moe_permute``, the experts' activation
        and the token permutation to and from them (ops ``ROUTED_EXPERT_OPS``)."""
        shape = self.moe_shape()
        if shape is None:
            return []
        h, w, a, n_layers = self.hidden, self.wdtype, self.act, self.moe_layers
        # The grouped GEMM over this GPU's experts, priced as one GEMM as wide as all of them
        # (module doc, "Routed experts"; ``MoeShape.routing``).
        tokens_each, width, local = shape.routing(t)
        ffn = shape.inter // shape.moe_tp
        moved = 3.0 * local * ffn * a + 4.0 * local * h * a  # activation, permute
        return [
            KernelCall("moe_experts", "gemm", (tokens_each, 2 * width, h, w), n_layers),
            KernelCall("moe_experts", "gemm", (tokens_each, h, width, w), n_layers),
            KernelCall("moe_permute", "elementwise", (moved, 3), n_layers),
        ]

    def _moe(self, t: int) -> list[KernelCall]:
        m = self.deployment.model
        h, w, a, n_layers = self.hidden, self.wdtype, self.act, self.moe_layers
        experts = m.num_experts
        calls = [
            KernelCall("moe_router", "gemm", (t, experts, h, _ROUTER_DTYPE), n_layers),
            *self.routed_expert_calls(t),
        ]
        moved = 4.0 * t * experts  # router softmax and top-k
        kernels = 1
        if m.num_shared_experts:
            shared = m.num_shared_experts * m.expert_ffn_size // self.tp
            calls.append(KernelCall("moe_shared", "gemm", (t, 2 * shared, h, w), n_layers))
            calls.append(KernelCall("moe_shared", "gemm", (t, h, shared, w), n_layers))
            moved += 3.0 * t * shared * a
            kernels += 1
        calls.append(KernelCall("elementwise", "elementwise", (moved, kernels), n_layers))
        return calls
