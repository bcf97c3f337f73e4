"""Memory fit: do the weights fit on each GPU, and how many KV tokens are left?

Per GPU of an instance::

    weights   = attention / tp (KV projections replicated when tp > kv heads; MLA's
                down-projections replicated) + dense MLP / tp + routed experts / tp (ep ways by
                expert × tp/ep ways within one; MXFP4 experts padded as the engine loads
                them, ``Deployment.routed_expert_padding``) + shared experts / tp + router
                + embedding / tp + LM head / tp (vocab-parallel, kept in bf16) + norms
    reserve   = framework_reserve_gib + activation peak at max_batched_tokens
    comm      = collective_gib when tp > 1 (NCCL communicators and all-reduce buffers, set up
                before the pool is sized; pcie_collective_gib on GPUs without NVLink), else 0
    KV pool   = depends on the engine's accounting (``MemoryAccounting``):
      reserve_inside   (vLLM):    hbm · util - weights - reserve - comm
      reserve_outside  (SGLang):  (hbm - startup - comm) · util - weights   (reserve must fit
                                  in the rest; the fraction is of the memory free after the
                                  CUDA context and the distributed set-up, ``startup_gib``)
      fraction_of_free (TRT-LLM): util · (hbm - weights - reserve - comm)
    graphs    = cuda_graph_gib, allocated after the KV pool (vLLM captures its CUDA graphs
                after sizing the pool; TensorRT-LLM's live in the 1 - fraction it leaves): it
                must fit in what the accounting leaves free, or the engine would fail to start.
                With ``cuda_graphs_in_budget`` (vLLM 0.21+, which estimates them while
                profiling) they are one more reserve instead.

Attention DP (``Deployment.attention_dp`` = D): ``tp`` above reads ``tp / D`` for everything
but the routed experts (still split ``tp`` ways), the KV pool is one rank's (its GPUs store
only their rank's requests) and the instance holds D of them; the activation peak is a rank's
at the engine limits, which are per rank (``Deployment.rank``).

Pipeline parallelism (``Deployment.pp`` = P): each stage is fitted on its own
(``Deployment.stage``): weights = the stage's layers as above, plus one vocabulary matrix / tp
on the first stage (the embedding) and on the last (the LM head, and the final norm; a tied
embedding is held by both end stages, as vLLM does) and none in between; KV per token = the
stage's full-attention layers only, so each stage holds ~P times the tokens of the whole model
on the same ``tp``. Every stage must hold every cached token of its layers: the instance's KV
capacity is the smallest stage's, and the fit reports that stage (or the first that does not
fit). Activations are a stage's at the per-micro-batch engine limits (the sampler's logits on
the last stage only).

``hbm_utilization`` None means the engine derives its fraction from the GPU (SGLang 0.5.4+,
``memory_rules.sglang_memory_defaults``). The fit's sentence names the KV dtype, the bytes per
token and the rule, so that ``simulate`` and ``models show`` say how the capacity came about.

The pool is cut into whole blocks of ``block_tokens``. ``memory_fit`` never raises for a
configuration that does not fit: it returns ``MemoryFit(fits=False, reason=...)`` with one
readable sentence, so the optimizer can record it as a violated constraint.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from hardware.checkpoints import RECIPES
from hardware.schema import BYTES_PER_ELEMENT
from simulator.latency.deployment import Deployment
from simulator.latency.memory_rules import sglang_memory_defaults

__all__ = [
    "MemoryAccounting",
    "MemoryFit",
    "MemoryParams",
    "activation_bytes_per_gpu",
    "memory_fit",
    "weight_bytes_per_gpu",
]

GIB = float(2**30)
MemoryAccounting = Literal["reserve_inside", "reserve_outside", "fraction_of_free"]
_LOGIT_BYTES = 4.0  # samplers hold logits in fp32


@dataclass(frozen=True, slots=True)
class MemoryParams:
    """The engine settings memory depends on (from a backend preset; see ``presets.py``)."""

    #: Fraction of HBM the engine may use (vLLM gpu_memory_utilization, SGLang
    #: mem_fraction_static, TRT-LLM free_gpu_memory_fraction — see ``accounting``); None =
    #: derived from the GPU's memory as SGLang 0.5.4+ does (module doc).
    hbm_utilization: float | None = 0.90
    #: How the fraction is applied (module doc).
    accounting: MemoryAccounting = "reserve_inside"
    #: Fixed per-GPU memory outside weights, activations and KV: CUDA graphs, NCCL and cuBLAS
    #: workspaces, allocator slack (GiB; an assumption per engine).
    framework_reserve_gib: float = 1.0
    #: CUDA-graph memory allocated after the KV pool, outside the accounting (GiB; module doc).
    cuda_graph_gib: float = 0.0
    #: Whether the engine estimates its CUDA graphs while profiling and takes them off the pool
    #: (vLLM 0.21+): they are then one more reserve, not memory outside the accounting.
    cuda_graphs_in_budget: bool = False
    #: Per-GPU memory of the collectives' communicators and buffers (NCCL, custom all-reduce)
    #: when the tensor-parallel group spans GPUs (``tp > 1``), allocated before the pool is
    #: sized (GiB; module doc).
    collective_gib: float = 0.0
    #: ``collective_gib`` on GPUs that talk over PCIe only (``GpuSpec.gpu_link`` ``pcie``):
    #: NCCL's few PCIe channels and no NVLink all-reduce buffers (GiB; module doc).
    pcie_collective_gib: float = 0.0
    #: Per-GPU memory already taken when a ``reserve_outside`` engine reads the total its
    #: fraction applies to: the driver's reserve that the catalog's (nvidia-smi) total counts
    #: and the CUDA context (GiB; the other accountings' ``framework_reserve_gib`` covers it).
    startup_gib: float = 0.0
    #: fp32 copies of the logits of ``max_running_requests`` rows that the sampler holds at its
    #: peak, where the engine profiles it after the forward pass (the activation peak is then
    #: the larger of the two, ``activation_bytes_per_gpu``); None: one copy on top of the
    #: forward pass.
    sampler_logit_copies: float | None = None
    #: Token budget of one step: sizes the activation peak.
    max_batched_tokens: int = 8192
    #: Most requests in one step: sizes the sampler's logits buffer.
    max_running_requests: int = 1024
    #: Tokens per KV block (vLLM 16, SGLang 1, TRT-LLM 32).
    block_tokens: int = 16
    #: KV tokens the pool must hold at least (e.g. one longest request); 0 = one block.
    min_kv_tokens: int = 0

    def __post_init__(self) -> None:
        if self.hbm_utilization is not None and not 0 < self.hbm_utilization <= 1:
            raise ValueError("MemoryParams.hbm_utilization must be in (0, 1]")
        sizes = (
            self.framework_reserve_gib,
            self.cuda_graph_gib,
            self.collective_gib,
            self.pcie_collective_gib,
            self.startup_gib,
        )
        if min(*sizes, self.min_kv_tokens) < 0:
            raise ValueError("MemoryParams: reserve and min_kv_tokens must be >= 0")
        if self.sampler_logit_copies is not None and self.sampler_logit_copies <= 0:
            raise ValueError("MemoryParams.sampler_logit_copies must be > 0")
        if min(self.max_batched_tokens, self.max_running_requests, self.block_tokens) < 1:
            raise ValueError("MemoryParams: token and request limits must be >= 1")


@dataclass(frozen=True, slots=True)
class MemoryFit:
    """The outcome of ``memory_fit`` for one GPU of the instance (all GPUs are alike)."""

    fits: bool
    #: One sentence: why it does not fit, or what fits.
    reason: str
    #: KV tokens the instance can hold (every GPU holds its shard of every token of its rank;
    #: with attention DP, ``attention_dp`` ranks' worth).
    kv_tokens: int
    kv_blocks: int
    weights_gib_per_gpu: float
    reserve_gib_per_gpu: float
    #: HBM the engine may use at its utilisation setting.
    usable_gib_per_gpu: float
    kv_gib_per_gpu: float
    kv_bytes_per_token_per_gpu: float


def weight_bytes_per_gpu(d: Deployment) -> float:
    """Bytes of weights on each GPU (module doc). At TP1 this equals
    ``ModelSpec.weight_bytes(weight_precision)``. With attention DP everything but the routed
    experts is split ``attention_tp`` ways (each rank holds a copy), the routed experts ``tp``
    ways (``ep`` by expert × ``tp / ep`` within one) across all ranks. With PP, the heaviest
    stage's (module doc)."""
    if d.pp > 1:
        return max(_weight_bytes(*_stage(d, i), routed_split=None) for i in range(d.pp))
    if d.attention_dp > 1:
        return _weight_bytes(d.rank(), routed_split=d.tp)
    return _weight_bytes(d, routed_split=None)


#: Which ends of the model a pipeline stage holds: (embedding, LM head and final norm).
_Ends = tuple[bool, bool]
_WHOLE: _Ends = (True, True)


def _stage(d: Deployment, index: int) -> tuple[Deployment, _Ends]:
    """Stage ``index`` of ``d`` and the ends it holds."""
    return d.stage(index), (index == 0, index == d.pp - 1)


def _weight_bytes(d: Deployment, ends: _Ends = _WHOLE, *, routed_split: int | None) -> float:
    """``weight_bytes_per_gpu`` of ``d``; ``routed_split`` = ways the routed experts are split
    when that differs from ``d.tp`` (attention DP), None otherwise; ``ends`` = which of the
    embedding and the LM head (with the final norm) it holds (a pipeline stage)."""
    m, tp = d.model, d.tp
    h = m.hidden_size
    head = ends[1]
    # The two norms per layer and the final norm (on the stage with the LM head).
    replicated = 2 * h * m.num_layers + h * head
    sharded = 0.0
    attention = 0.0  # of which attention projections, per GPU (a recipe may keep them bf16)
    if m.attention == "mla":
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        v = m.v_head_dim or m.qk_nope_head_dim
        heads = m.num_attention_heads
        down = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        up = m.kv_lora_rank * heads * (m.qk_nope_head_dim + v) + heads * v * h
        if m.q_lora_rank:
            down += h * m.q_lora_rank + m.q_lora_rank
            up += m.q_lora_rank * heads * qk
        else:
            up += h * heads * qk
        replicated += m.num_layers * down
        sharded += m.num_layers * up
        attention = m.num_layers * (down + up / tp)
    else:
        q_width = m.num_attention_heads * m.head_dim
        gate = q_width if m.attention_output_gate else 0
        per_gpu_kv = 2 * h * d.kv_heads_per_gpu * m.head_dim
        layers = m.softmax_attention_layers
        sharded += layers * h * (2 * q_width + gate)  # Q (and its gate) and O
        replicated += layers * (per_gpu_kv + (2 * m.head_dim if m.qk_norm else 0))
        attention = layers * (h * (2 * q_width + gate) / tp + per_gpu_kv)
    sharded += m.linear_attention_layers * m.linear_mixer_params()  # heads split tp ways
    dense_layers = m.num_layers - m.num_moe_layers
    sharded += dense_layers * m.dense_mlp_params()
    routed = 0.0
    if m.is_moe:
        # The routed experts as the engine holds them (MXFP4 padded to its kernel's tiles).
        held = m.num_experts * d.routed_expert_padding()
        if routed_split is None:
            sharded += m.num_moe_layers * (held + m.num_shared_experts) * m.expert_params()
        else:
            sharded += m.num_moe_layers * m.num_shared_experts * m.expert_params()
            routed = m.num_moe_layers * held * m.expert_params() / routed_split
        replicated += m.num_moe_layers * h * m.num_experts  # router
    quantised = replicated + sharded / tp
    if routed:  # kept apart so that the expression without attention DP is unchanged
        quantised += routed
    kept_bf16 = m.vocab_size * h * _vocab_matrices(m.tie_word_embeddings, ends) / tp
    stored = RECIPES[m.checkpoint_recipe].weight_bytes(d.weight_precision, quantised, attention)
    return math.ceil(stored + kept_bf16 * BYTES_PER_ELEMENT["bf16"])


def _vocab_matrices(tied: bool, ends: _Ends) -> int:
    """Vocabulary-by-hidden matrices a GPU holds: the embedding and the LM head, once when
    tied on a GPU holding both; a pipeline stage holds the one of each end it has (a tied
    embedding is copied to the last stage)."""
    if all(ends):
        return 1 if tied else 2
    return int(ends[0]) + int(ends[1])


def activation_bytes_per_gpu(
    d: Deployment,
    max_batched_tokens: int,
    max_requests: int,
    *,
    logits: bool = True,
    sampler_copies: float | None = None,
) -> float:
    """Peak activation memory of a step of ``max_batched_tokens`` tokens (what an engine's
    profiling run measures): four hidden-state buffers plus the larger of the attention
    projections' output and the MLP's intermediates (fused-MoE workspaces: gate+up, activation
    and output per routed token), plus the sampler's fp32 logits for ``max_requests`` rows.
    With attention DP, the limits are one rank's and the shapes the rank's (``rank()``): an
    approximation for the routed experts' workspace, which runs on every rank's tokens.
    ``logits`` False: a pipeline stage without the LM head.

    ``sampler_copies`` (``MemoryParams.sampler_logit_copies``): an engine whose profiling runs
    the sampler on its own after the forward pass peaks at the larger of the two, the sampler
    holding that many fp32 copies of the ``max_requests`` rows of logits (vLLM)."""
    d = d.rank()
    m, t, a = d.model, max_batched_tokens, d.activation_bytes
    h = m.hidden_size
    hidden = 4.0 * t * h * a
    if m.attention == "mla":
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        attn = t * (d.heads_per_gpu * qk + m.kv_lora_rank + m.qk_rope_head_dim + m.q_lora_rank)
    else:
        attn = t * (d.heads_per_gpu + 2 * d.kv_heads_per_gpu) * m.head_dim
    mlp = 3.0 * t * m.ffn_size / d.tp if m.num_layers > m.num_moe_layers else 0.0
    if m.is_moe:
        expert = 3.0 * m.expert_ffn_size / d.expert_tp + h
        mlp = max(mlp, t * m.experts_per_token * expert)
        mlp += 3.0 * t * m.num_shared_experts * m.expert_ffn_size / d.tp
    forward = hidden + max(attn, mlp) * a
    sampled = min(max_requests, t) * m.vocab_size * _LOGIT_BYTES if logits else 0.0
    if sampler_copies is not None:
        return max(forward, sampled * sampler_copies)
    return forward + sampled


def memory_fit(d: Deployment, params: MemoryParams | None = None) -> MemoryFit:
    """How the instance's HBM divides into weights, reserve and KV (never raises for a
    non-fit; see ``MemoryFit``). With PP, the first stage that does not fit, else the stage
    holding the fewest KV tokens (module doc)."""
    p = params or MemoryParams()
    if d.pp == 1:
        return _sizes(d, p, _WHOLE, "").outcome()
    fits = []
    for i in range(d.pp):
        stage, ends = _stage(d, i)
        start, end = d.stage_span(i)
        held = [name for name, held in zip(("embedding", "LM head"), ends, strict=True) if held]
        label = f" PP{d.pp} (stage {i}: layers {start}-{end - 1}{''.join(', ' + h for h in held)})"
        fits.append(_sizes(stage, p, ends, label))
    failed = [f for f in fits if f.problem() is not None]
    return (failed or sorted(fits, key=lambda f: f.tokens))[0].outcome()


def _sizes(d: Deployment, p: MemoryParams, ends: _Ends, stage: str) -> _Sizes:
    """The sizes of one GPU of ``d`` (a whole instance, or one pipeline stage holding
    ``ends``, labelled ``stage``)."""
    hbm = d.gpu.hbm_bytes
    rule = ""
    if p.hbm_utilization is None:
        derived = sglang_memory_defaults(hbm, d.tp)
        rule = derived.explain(hbm / 2**20)
        p = dataclasses.replace(p, hbm_utilization=derived.mem_fraction_static)
    util = float(p.hbm_utilization or 0.0)
    weights = (
        weight_bytes_per_gpu(d) if ends == _WHOLE else _weight_bytes(d, ends, routed_split=None)
    )
    per_gpu = p.pcie_collective_gib if d.gpu.gpu_link == "pcie" else p.collective_gib
    collectives = per_gpu * GIB if d.tp > 1 else 0.0
    startup = p.startup_gib * GIB if p.accounting == "reserve_outside" else 0.0
    reserve = p.framework_reserve_gib * GIB + activation_bytes_per_gpu(
        d,
        p.max_batched_tokens,
        p.max_running_requests,
        logits=ends[1],
        sampler_copies=p.sampler_logit_copies,
    )
    if p.cuda_graphs_in_budget:
        reserve += p.cuda_graph_gib * GIB
    if p.accounting == "reserve_outside":
        # SGLang's fraction applies to the memory free after the context and distributed set-up.
        usable = (hbm - startup - collectives) * util
        kv = usable - weights
    else:
        # vLLM profiles the collectives as non-torch memory; TensorRT-LLM's free memory is
        # read after them: either way they are one more reserve.
        reserve += collectives
        if p.accounting == "fraction_of_free":
            usable = float(hbm)
            kv = util * (hbm - weights - reserve)
        else:
            usable = hbm * util
            kv = usable - weights - reserve
    per_token = d.kv_bytes_per_token_per_gpu()
    # Per rank with attention DP (each rank's GPUs hold their own requests' tokens); the
    # instance holds ``attention_dp`` ranks' worth.
    blocks = max(0, int(kv // (per_token * p.block_tokens))) if kv > 0 else 0
    tokens = blocks * p.block_tokens
    state_blocks = math.ceil(d.request_state_bytes_per_gpu() / (per_token * p.block_tokens))
    return _Sizes(
        d, p, util, weights, reserve, usable, max(kv, 0.0), tokens, blocks, state_blocks, rule,
        stage, collectives, startup,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Sizes:
    """The numbers of one fit, and the sentences that explain them."""

    d: Deployment
    p: MemoryParams
    util: float
    weights: float
    reserve: float
    usable: float
    kv: float
    tokens: int
    blocks: int
    state_blocks: int
    #: How a derived fraction came about ("" when it was given).
    rule: str = ""
    #: Which pipeline stage these are, e.g. " PP2 (stage 1: layers 40-79, LM head)" ("" for
    #: a whole instance).
    stage: str = ""
    #: Bytes of collective buffers per GPU (``MemoryParams.collective_gib`` at ``tp > 1``);
    #: inside ``reserve`` unless the accounting is ``reserve_outside``.
    collectives: float = 0.0
    #: Bytes taken before a ``reserve_outside`` fraction applies (``MemoryParams.startup_gib``;
    #: 0 for the other accountings).
    startup: float = 0.0

    def outcome(self) -> MemoryFit:
        """The ``MemoryFit`` these sizes make."""
        reason = self.problem()
        ranks = self.d.attention_dp
        return MemoryFit(
            fits=reason is None,
            reason=reason or self.summary(),
            kv_tokens=self.tokens * ranks,
            kv_blocks=self.blocks * ranks,
            weights_gib_per_gpu=self.weights / GIB,
            reserve_gib_per_gpu=self.reserve / GIB,
            usable_gib_per_gpu=self.usable / GIB,
            kv_gib_per_gpu=self.kv / GIB,
            kv_bytes_per_token_per_gpu=self.d.kv_bytes_per_token_per_gpu(),
        )

    def _head(self) -> str:
        d = self.d
        name = d.model.name.rsplit("/", 1)[-1]
        ep = f" EP{d.expert_parallel}" if d.model.is_moe and d.expert_parallel > 1 else ""
        dp = f" DP{d.attention_dp}" if d.attention_dp > 1 else ""
        return (
            f"{name} {d.weight_label} needs {self.weights / GIB:.1f} GiB of weights per GPU "
            f"at TP{d.tp}{dp}{ep}{self.stage}"
        )

    def _budget(self) -> str:
        d, p = self.d, self.p
        if p.accounting == "fraction_of_free":
            return f"{d.gpu.name} has {d.gpu.hbm_gib:.1f} GiB"
        return (
            f"{d.gpu.name} has {d.gpu.hbm_gib:.1f} GiB at {self.util:.2f} utilisation = "
            f"{self.usable / GIB:.1f} GiB"
        )

    def problem(self) -> str | None:
        """The sentence saying why it does not fit, or ``None`` when it fits."""
        p = self.p
        head, budget = self._head(), self._budget()
        room = self.d.gpu.hbm_bytes if p.accounting == "fraction_of_free" else self.usable
        room -= self.weights
        if room <= 0:
            return f"{head}; {budget}"
        if p.accounting != "reserve_outside" and room < self.reserve:
            left, need = _gib_pair(room, self.reserve)
            return f"{head}; {budget}, leaving {left} GiB < {need} GiB reserve"
        outside = self.d.gpu.hbm_bytes - self.startup - self.collectives - self.usable
        if p.accounting == "reserve_outside" and outside < self.reserve:
            left, need = _gib_pair(outside, self.reserve)
            return f"{head}; {budget}, and the other {left} GiB cannot hold the {need} GiB reserve"
        graphs = 0.0 if p.cuda_graphs_in_budget else p.cuda_graph_gib * GIB
        if p.accounting == "fraction_of_free":
            spare = (1 - self.util) * (self.d.gpu.hbm_bytes - self.weights - self.reserve)
        elif p.accounting == "reserve_outside":
            spare = outside - self.reserve
        else:
            spare = self.d.gpu.hbm_bytes - self.usable
        if graphs > spare:
            free, need = _gib_pair(max(spare, 0.0), graphs)
            return f"{head}; {budget}, leaving {free} GiB < {need} GiB of CUDA graphs"
        needed = max(p.min_kv_tokens, p.block_tokens) + self.state_blocks * p.block_tokens
        if self.tokens < needed:
            return (
                f"{head}; {budget}, leaving {self.kv / GIB:.1f} GiB for KV = {self.tokens:,} "
                f"tokens < {needed:,} tokens needed"
            )
        return None

    def summary(self) -> str:
        """The sentence for a configuration that fits."""
        d, p = self.d, self.p
        name = d.model.name.rsplit("/", 1)[-1]
        weights, reserve, kv = self.weights / GIB, self.reserve / GIB, self.kv / GIB
        comm = self.collectives / GIB
        if p.accounting == "reserve_outside":
            held = [f"{self.startup / GIB:g} GiB at start-up"] if self.startup else []
            held += [f"{comm:g} GiB of collective buffers"] if comm else []
            after = f" of what {' and '.join(held)} leave" if held else ""
            split = (
                f"{weights:.1f} GiB of weights per GPU leave {kv:.1f} GiB of the "
                f"{self.util:.3f} static fraction{after} for KV ({reserve:.1f} GiB reserve "
                "outside it)"
            )
        else:
            within = f" (collective buffers {comm:g} GiB of it)" if comm else ""
            if p.accounting == "fraction_of_free":
                split = (
                    f"{weights:.1f} GiB of weights + {reserve:.1f} GiB reserve{within} per "
                    f"GPU, {self.util:.2f} of the rest = {kv:.1f} GiB for KV"
                )
            else:
                split = (
                    f"{self.util:.2f} x {d.gpu.hbm_gib:.1f} GiB = {self.usable / GIB:.1f} GiB, "
                    f"of which {weights:.1f} GiB of weights + {reserve:.1f} GiB reserve{within} "
                    f"per GPU leave {kv:.1f} GiB for KV"
                )
        if p.cuda_graph_gib:
            where = "in the reserve" if p.cuda_graphs_in_budget else "outside"
            split += f" ({p.cuda_graph_gib:g} GiB of CUDA graphs {where})"
        per_token = d.kv_bytes_per_token_per_gpu() / 1024
        rule = f"; {self.rule}" if self.rule else ""
        dp, ranks = "", ""
        if d.attention_dp > 1:
            dp = f" DP{d.attention_dp}"
            ranks = f" per rank x {d.attention_dp} ranks = {self.tokens * d.attention_dp:,} tokens"

        return (
            f"{name} {d.weight_label} fits on {d.gpu.name} at TP{d.tp}{dp}{self.stage}: "
            f"{split} = "
            f"{self.tokens:,} tokens ({self.blocks:,} blocks of {p.block_tokens}){ranks} of "
            f"{d.kv_precision} KV at {per_token:g} KiB per token per GPU{self._layers()}{rule}"
            f"{self._stages()}{self._padding()}"
        )

    def _padding(self) -> str:
        """What the engine's padding of MXFP4 experts adds ("" when it adds nothing)."""
        factor = self.d.routed_expert_padding()
        if factor == 1.0:
            return ""
        return (
            f"; the weights count its MXFP4 experts padded to the MoE kernel's tiles, "
            f"{factor - 1:.1%} over the checkpoint"
        )

    def _stages(self) -> str:
        """What a pipeline stage's capacity means ("" for a whole instance)."""
        if not self.stage:
            return ""
        return "; the fewest of its stages (each holds its own layers' KV of every token)"

    def _layers(self) -> str:
        """How the layer families enter the capacity ("" for a full-attention-only model)."""
        m = self.d.model
        if m.full_attention_layers == m.num_layers:
            return ""
        kinds = []
        if m.sliding_window_layers:
            kinds.append(f"{m.sliding_window_layers} sliding-window ({m.sliding_window} tokens)")
        if m.linear_attention_layers:
            kinds.append(f"{m.linear_attention_layers} {m.linear_attention}")
        state = self.d.request_state_bytes_per_gpu()
        tokens = state / self.d.kv_bytes_per_token_per_gpu()
        return (
            f" (its {m.full_attention_layers} full-attention layers of {m.num_layers}; the "
            f"{' and '.join(kinds)} layers hold {state / 2**20:.2f} MiB per running request "
            f"per GPU, the KV of {tokens:,.0f} tokens)"
        )


def _gib_pair(smaller: float, larger: float) -> tuple[str, str]:
    """Both sizes in GiB with the fewest decimals (1 to 3) that tell them apart."""
    for digits in (1, 2, 3):
        a, b = f"{smaller / GIB:.{digits}f}", f"{larger / GIB:.{digits}f}"
        if a != b:
            break
    return a, b
