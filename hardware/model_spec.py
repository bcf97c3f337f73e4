"""``ModelSpec``: a transformer LLM's shape and the sizes derived from it (parameters, weight
bytes, KV per token and per request by layer family)."""

from __future__ import annotations

import math
from typing import Literal, Self

from pydantic import Field, model_validator

from hardware._frozen import Frozen
from hardware.checkpoints import RECIPES
from hardware.precision import BYTES_PER_ELEMENT

__all__ = ["ModelSpec"]

#: The indexer key's FP8 values share one fp32 scale per this many (vLLM's
#: ``Indexer.quant_block_size`` 128, a 4-byte scale: ``head_dim // quant_block_size * 4``).
_INDEX_KEY_SCALE_BLOCK = 128
_INDEX_KEY_SCALE_BYTES = 4


class ModelSpec(Frozen):
    """A transformer LLM's shape: everything the latency and memory models need.

    Dense layers use a SwiGLU MLP (gate, up, down). MoE models replace the MLP of every layer after
    ``first_dense_layers`` with ``num_experts`` routed experts of ``expert_ffn_size`` (top
    ``experts_per_token``) plus ``num_shared_experts`` always-on experts of the same size.
    ``attention='mla'`` (DeepSeek) caches one compressed latent of ``kv_lora_rank +
    qk_rope_head_dim`` elements per token and layer instead of per-head K and V.

    **DeepSeek Sparse Attention** (DSA: DeepSeek-V3.2, GLM-5; ``index_topk`` > 0, MLA only):
    every MLA layer has a *lightning indexer* — ``index_n_heads`` heads of ``index_head_dim``
    whose queries come from the compressed query (``q_lora_rank``) and whose one key per token
    is cached in FP8 — that scores every earlier token; the layer's attention then reads only the
    ``index_topk`` best of them. The indexer's weights (``wq_b``, ``wk``, its key LayerNorm and
    ``weights_proj``) count with the attention block; its key, ``index_head_dim`` FP8 bytes and
    one fp32 scale per 128 of them (vLLM's ``DeepseekV32IndexerCache``), adds to each cached
    token's KV whatever the KV precision. Every MLA layer has its own indexer (no layers sharing
    another's selection: GLM-5.2's ``index_topk_freq`` is not modelled).
    """

    name: str = Field(description="Hugging Face id, e.g. 'Qwen/Qwen3-32B' (case-insensitive).")
    num_layers: int = Field(ge=1, description="Transformer layers.")
    hidden_size: int = Field(ge=1, description="Model (residual) width.")
    num_attention_heads: int = Field(ge=1, description="Query heads.")
    num_kv_heads: int = Field(ge=1, description="Key/value heads (GQA); = query heads for MHA.")
    head_dim: int = Field(ge=1, description="Width of one attention head (GQA models).")
    ffn_size: int = Field(ge=1, description="Intermediate size of the dense SwiGLU MLP.")
    vocab_size: int = Field(ge=1, description="Vocabulary size (embedding and LM-head rows).")
    tie_word_embeddings: bool = Field(
        default=False, description="Whether the LM head shares the embedding matrix."
    )
    qk_norm: bool = Field(default=False, description="Per-head RMSNorm on Q and K (Qwen3).")
    attention: Literal["gqa", "mla"] = Field(default="gqa", description="Attention kind.")
    max_context_tokens: int = Field(ge=1, description="Longest supported context in tokens.")
    num_experts: int = Field(
        default=0, ge=0, description="Routed experts per MoE layer (0 = dense)."
    )
    experts_per_token: int = Field(default=0, ge=0, description="Routed experts per token (top-k).")
    expert_ffn_size: int = Field(default=0, ge=0, description="Intermediate size of one expert.")
    num_shared_experts: int = Field(default=0, ge=0, description="Always-active shared experts.")
    first_dense_layers: int = Field(
        default=0, ge=0, description="Leading layers that use the dense MLP in an MoE model."
    )
    expert_routing: Literal["skewed", "balanced"] = Field(
        default="skewed",
        description="How a batch's tokens spread over the routed experts: skewed = a "
        "power-law popularity (trained routers are skewed; simulator/latency/moe_table.py "
        "ROUTING_POWER_LAW), balanced = uniform, for a router trained to even expert load "
        "(DeepSeek-V3's auxiliary-loss-free balancing, config topk_method noaux_tc).",
    )
    checkpoint_recipe: Literal[
        "none", "modelopt_fp8", "modelopt_nvfp4", "fp8_block", "fp8_dynamic", "fp8_kv",
        "mxfp4", "int4", "int4_experts", "int8", "int8_wo",
    ] = Field(
        default="none",
        description="Quantisation recipe of the checkpoint published under this name "
        "(hardware/checkpoints.py RECIPES; 'none' = weights in bf16, e.g. DeepSeek-V3 is "
        "'fp8_block').",
    )  # fmt: skip
    q_lora_rank: int = Field(default=0, ge=0, description="MLA query compression rank (0 = none).")
    kv_lora_rank: int = Field(default=0, ge=0, description="MLA KV latent width.")
    qk_nope_head_dim: int = Field(default=0, ge=0, description="MLA per-head non-RoPE Q/K width.")
    qk_rope_head_dim: int = Field(default=0, ge=0, description="MLA per-head RoPE Q/K width.")
    v_head_dim: int = Field(default=0, ge=0, description="MLA per-head value width.")
    # ----- layer families: sliding-window and linear-attention (hybrid) layers ---------------
    sliding_window: int = Field(
        default=0, ge=0, description="Tokens a sliding-window layer attends to (0 = none)."
    )
    sliding_window_layers: int = Field(
        default=0, ge=0, description="Layers with sliding-window attention (gpt-oss: half)."
    )
    linear_attention: Literal["none", "gated_deltanet", "mamba2"] = Field(
        default="none",
        description="Mixer of the linear-attention layers: Gated DeltaNet (Qwen3-Next) or "
        "Mamba-2 (heads = nheads, key width = d_state, key heads = n_groups).",
    )
    linear_attention_layers: int = Field(
        default=0, ge=0, description="Layers whose mixer is linear attention / state space."
    )
    linear_num_key_heads: int = Field(default=0, ge=0, description="Linear-attention key heads.")
    linear_num_value_heads: int = Field(
        default=0, ge=0, description="Linear-attention value heads (= recurrent states)."
    )
    linear_key_head_dim: int = Field(default=0, ge=0, description="Width of a key head.")
    linear_value_head_dim: int = Field(default=0, ge=0, description="Width of a value head.")
    linear_conv_kernel: int = Field(
        default=0, ge=0, description="Causal short-convolution width of linear layers."
    )
    attention_output_gate: bool = Field(
        default=False, description="Full-attention query projection also emits a sigmoid "
        "gate per head (Qwen3-Next: q_proj twice as wide).",
    )  # fmt: skip
    # ----- DeepSeek Sparse Attention (class doc) ----------------------------------------------
    index_topk: int = Field(
        default=0, ge=0, description="DSA: cached tokens each query of an MLA layer attends, "
        "the indexer's top-k (0 = dense attention).",
    )  # fmt: skip
    index_n_heads: int = Field(default=0, ge=0, description="DSA: lightning-indexer heads.")
    index_head_dim: int = Field(
        default=0, ge=0, description="DSA: width of an indexer head and of the indexer key "
        "cached per token and layer (FP8).",
    )  # fmt: skip

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_kv_heads")
        if self.num_experts:
            if not 0 < self.experts_per_token <= self.num_experts or not self.expert_ffn_size:
                raise ValueError(
                    "an MoE model needs 0 < experts_per_token <= num_experts and expert_ffn_size"
                )
            if self.first_dense_layers >= self.num_layers:
                raise ValueError("first_dense_layers must be smaller than num_layers")
        elif self.experts_per_token or self.num_shared_experts:
            raise ValueError("experts_per_token/num_shared_experts need num_experts > 0")
        if self.attention == "mla" and not (
            self.kv_lora_rank and self.qk_rope_head_dim and self.qk_nope_head_dim
        ):
            raise ValueError("MLA needs kv_lora_rank, qk_nope_head_dim and qk_rope_head_dim")
        self._check_layer_families()
        self._check_sparse_attention()
        return self

    def _check_sparse_attention(self) -> None:
        indexer = (self.index_topk, self.index_n_heads, self.index_head_dim)
        if not any(indexer):
            return
        if not all(indexer):
            raise ValueError("index_topk, index_n_heads and index_head_dim go together (all > 0)")
        if self.attention != "mla" or not self.q_lora_rank:
            raise ValueError(
                "DeepSeek Sparse Attention (index_*) is modelled for MLA attention with "
                "q_lora_rank > 0 (the indexer's queries come from the compressed query)"
            )

    def _check_layer_families(self) -> None:
        if bool(self.sliding_window) != bool(self.sliding_window_layers):
            raise ValueError("sliding_window and sliding_window_layers go together (both > 0)")
        if self.sliding_window and self.attention == "mla":
            raise ValueError("sliding-window layers are modelled for GQA attention only")
        linear = (
            self.linear_num_key_heads,
            self.linear_num_value_heads,
            self.linear_key_head_dim,
            self.linear_value_head_dim,
            self.linear_conv_kernel,
        )
        if self.linear_attention_layers and (self.linear_attention == "none" or not all(linear)):
            raise ValueError(
                "linear_attention_layers need linear_attention (gated_deltanet or mamba2) and "
                "linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, "
                "linear_value_head_dim, linear_conv_kernel > 0"
            )
        if self.linear_attention != "none" and not self.linear_attention_layers:
            raise ValueError("linear_attention needs linear_attention_layers > 0")
        if self.full_attention_layers < 1:
            raise ValueError(
                "sliding_window_layers + linear_attention_layers must leave at least one "
                "full-attention layer (the prefix cache is made of their KV)"
            )

    # ----- derived figures -------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """Whether the model has routed experts."""
        return self.num_experts > 0

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def full_attention_layers(self) -> int:
        """Layers attending to the whole context: their KV grows with every token."""
        return self.num_layers - self.sliding_window_layers - self.linear_attention_layers

    @property
    def softmax_attention_layers(self) -> int:
        """Layers with softmax attention (full or sliding-window): they have Q/K/V projections."""
        return self.num_layers - self.linear_attention_layers

    def attention_context(self, tokens: int) -> int:
        """Keys one query of a sliding-window layer attends to at context length ``tokens``."""
        return min(tokens, self.sliding_window) if self.sliding_window else tokens

    @property
    def sparse_attention_layers(self) -> int:
        """Layers with DeepSeek Sparse Attention (every full-attention MLA layer of a model with
        ``index_topk``; 0 otherwise): each runs its own indexer."""
        return self.full_attention_layers if self.index_topk else 0

    def indexer_params_per_layer(self) -> int:
        """Weights of one lightning indexer, in elements: ``wq_b`` (compressed query to every
        indexer head), ``wk`` (hidden to the key), the key's LayerNorm (weight and bias) and
        ``weights_proj`` (hidden to one weight per head); 0 without DSA."""
        if not self.index_topk:
            return 0
        heads, width, h = self.index_n_heads, self.index_head_dim, self.hidden_size
        return self.q_lora_rank * heads * width + h * width + 2 * width + h * heads

    def index_key_bytes_per_layer_token(self) -> int:
        """Bytes of the indexer key one DSA layer caches per token: ``index_head_dim`` FP8
        values and one fp32 scale per 128 of them (vLLM ``DeepseekV32IndexerCache``:
        ``head_dim + head_dim // 128 * 4``; SGLang's index-key pool stores the same); 0
        without DSA. Independent of the KV precision."""
        if not self.index_topk:
            return 0
        blocks = -(-self.index_head_dim // _INDEX_KEY_SCALE_BLOCK)
        return self.index_head_dim + blocks * _INDEX_KEY_SCALE_BYTES

    def attention_params_per_layer(self) -> int:
        """Weights of one attention block (projections and their norms), in elements."""
        h = self.hidden_size
        if self.attention == "mla":
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            v_head = self.v_head_dim or self.qk_nope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank  # down-projection + its norm
                q += self.q_lora_rank * self.num_attention_heads * qk_head
            else:
                q = h * self.num_attention_heads * qk_head
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv += self.kv_lora_rank * self.num_attention_heads * (self.qk_nope_head_dim + v_head)
            o = self.num_attention_heads * v_head * h
            return q + kv + o + self.indexer_params_per_layer()
        q_width = self.num_attention_heads * self.head_dim
        kv_width = self.num_kv_heads * self.head_dim
        gate = q_width if self.attention_output_gate else 0
        params = h * (q_width + gate) + 2 * h * kv_width + q_width * h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    @property
    def linear_conv_channels(self) -> int:
        """Channels of a linear layer's short convolution (its q, k and v streams)."""
        keys = self.linear_num_key_heads * self.linear_key_head_dim
        return 2 * keys + self.linear_num_value_heads * self.linear_value_head_dim

    def linear_mixer_params(self) -> int:
        """Weights of one linear-attention mixer, in elements: the input projection (q, k, v,
        the output gate z and two scalars per value head — Gated DeltaNet's ``in_proj_qkvz`` and
        ``in_proj_ba``; Mamba-2's ``in_proj`` has one scalar, a 0.01% difference), the short
        convolution, per-head decay and bias, the gated norm and the output projection."""
        if not self.linear_attention_layers:
            return 0
        values = self.linear_num_value_heads * self.linear_value_head_dim
        width = self.linear_conv_channels + values + 2 * self.linear_num_value_heads
        conv = self.linear_conv_channels * self.linear_conv_kernel
        small = 2 * self.linear_num_value_heads + self.linear_value_head_dim
        return self.hidden_size * width + conv + small + values * self.hidden_size

    def dense_mlp_params(self) -> int:
        """Weights of one dense SwiGLU MLP (gate, up, down), in elements."""
        return 3 * self.hidden_size * self.ffn_size

    def expert_params(self) -> int:
        """Weights of one expert (SwiGLU), in elements."""
        return 3 * self.hidden_size * self.expert_ffn_size

    def param_count(self) -> int:
        """Total parameters (all experts), in elements."""
        return self._count(all_experts=True)

    def active_param_count(self) -> int:
        """Parameters touched per token (top-k plus shared experts), in elements."""
        return self._count(all_experts=False)

    def _count(self, *, all_experts: bool) -> int:
        h = self.hidden_size
        embedding = self.vocab_size * h
        lm_head = 0 if self.tie_word_embeddings else self.vocab_size * h
        dense_layers = self.num_layers - self.num_moe_layers
        experts = self.num_experts if all_experts else self.experts_per_token
        moe_mlp = (experts + self.num_shared_experts) * self.expert_params()
        moe_mlp += h * self.num_experts  # router
        total = embedding + lm_head + h  # + final norm
        total += self.num_layers * 2 * h  # two RMSNorms per layer
        total += self.softmax_attention_layers * self.attention_params_per_layer()
        total += self.linear_attention_layers * self.linear_mixer_params()
        total += dense_layers * self.dense_mlp_params() + self.num_moe_layers * moe_mlp
        return total

    def weight_bytes(self, precision: str) -> int:
        """Bytes of all weights when the GEMM weights are stored at ``precision``.

        The embedding and LM head stay in bf16 (engines do not quantise them by default); norms and
        router are counted at ``precision`` too, a rounding error of under 0.01%. At the
        checkpoint recipe's own precision its layout counts (``Recipe.weight_bytes``: block
        scales, attention kept in bf16).
        """
        h = self.hidden_size
        kept_bf16 = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        quantised = self.param_count() - kept_bf16
        attention = self.softmax_attention_layers * self.attention_params_per_layer()
        recipe = RECIPES[self.checkpoint_recipe]
        stored = recipe.weight_bytes(precision, quantised, attention)
        return math.ceil(stored + kept_bf16 * BYTES_PER_ELEMENT["bf16"])

    def kv_elements_per_layer_token(self) -> int:
        """KV elements one softmax-attention layer stores per token (K and V, or MLA's latent)."""
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_elements_per_token(self) -> int:
        """KV-cache elements a cached token holds: its K and V (or MLA latent) in every
        full-attention layer. Sliding-window layers and linear-attention state are per request
        (``request_state_bytes``), not per token: a prefix-cache block holds neither."""
        return self.full_attention_layers * self.kv_elements_per_layer_token()

    def kv_bytes_per_token(self, kv_precision: str = "bf16") -> float:
        """KV-cache bytes per cached token, for the whole model (all TP ranks; see
        ``kv_elements_per_token``), with a DSA model's indexer keys (FP8 whatever
        ``kv_precision``: ``index_key_bytes_per_layer_token``)."""
        kv = self.kv_elements_per_token() * BYTES_PER_ELEMENT[kv_precision]
        if self.index_topk:
            kv += self.sparse_attention_layers * self.index_key_bytes_per_layer_token()
        return kv

    def window_kv_bytes(self, kv_precision: str = "bf16") -> float:
        """KV bytes the sliding-window layers hold for one request at most (its last
        ``sliding_window`` tokens in each), for the whole model."""
        per_layer = self.kv_elements_per_layer_token() * BYTES_PER_ELEMENT[kv_precision]
        return self.sliding_window_layers * self.sliding_window * per_layer

    def linear_state_bytes(self, state_precision: str = "fp32") -> float:
        """Bytes of one request's linear-attention state over all its layers, whole model: the
        recurrent state (value heads × key width × value width) in ``state_precision`` — fp32
        by default, SGLang's ``--mamba-ssm-dtype`` default and the precision the recurrence
        accumulates in; bf16 where a deployment says so — and the short convolution's last
        ``kernel - 1`` inputs in bf16."""
        if not self.linear_attention_layers:
            return 0.0
        recurrent = (
            self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        )
        conv = (self.linear_conv_kernel - 1) * self.linear_conv_channels
        state = BYTES_PER_ELEMENT[state_precision]
        per_layer = recurrent * state + conv * BYTES_PER_ELEMENT["bf16"]
        return self.linear_attention_layers * per_layer

    def request_state_bytes(
        self, kv_precision: str = "bf16", state_precision: str = "fp32"
    ) -> float:
        """Memory a running request holds besides its cached tokens' KV (whole model): its
        sliding-window KV and its linear-attention state (0 for a model with neither)."""
        return self.window_kv_bytes(kv_precision) + self.linear_state_bytes(state_precision)
