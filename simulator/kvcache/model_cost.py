"""The prefill cost of a block derived from a model's shape: ``model:NAME,BLOCK_TOKENS``.

``cost(p)`` is the prefill FLOPs (in GFLOP) of the ``BLOCK_TOKENS`` tokens of block ``p``, computed
after the ``p`` blocks before it: what a prefix-cache hit on that block saves. Per token at
0-based position ``t``:

- the weights it passes through: ``2 ·`` active parameters (embedding and LM head left out — the
  gather is not compute and only a prompt's last token reaches the LM head), plus every
  linear-attention layer's recurrence (``4 · value heads · key width · value width``);
- attention: ``4 · heads · head_dim`` FLOPs per key (QKᵀ and PV; MLA: ``2 · heads · (QK + V
  width)``), over ``t + 1`` keys in a full-attention layer and ``min(t + 1, window)`` in a
  sliding-window layer; a DeepSeek Sparse Attention layer attends ``min(t + 1, index_topk)``
  keys and its indexer scores all ``t + 1`` (``2 · index_n_heads · index_head_dim`` FLOPs per
  key; its projections are among the active parameters).

So a deep block of a full-attention model costs more than a shallow one (the ``position``
model's shape, with the model's own intercept), while for gpt-oss half the layers stop growing
at the window: deep blocks are relatively cheaper to recompute, and a cache that keeps them
saves less compute than its block hit ratio suggests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing only: replay imports this module without the catalog's pydantic
    from hardware.schema import ModelSpec

__all__ = ["model_block_cost"]

_GFLOP = 1e9


def model_block_cost(model: ModelSpec, block_tokens: int) -> Callable[[int], float]:
    """``cost(p)`` of ``model`` at ``block_tokens`` per block, GFLOP (module doc)."""
    if block_tokens < 1:
        raise ValueError("block_tokens must be >= 1")
    b = block_tokens
    h = model.hidden_size
    embeddings = model.vocab_size * h * (1 if model.tie_word_embeddings else 2)
    per_token = 2.0 * (model.active_param_count() - embeddings)
    recurrence = model.linear_num_value_heads * model.linear_key_head_dim
    per_token += 4.0 * model.linear_attention_layers * recurrence * model.linear_value_head_dim
    if model.attention == "mla":
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        per_key = 2.0 * model.num_attention_heads * (qk + (model.v_head_dim or qk))
    else:
        per_key = 4.0 * model.num_attention_heads * model.head_dim
    full, windowed, window = (
        model.full_attention_layers,
        model.sliding_window_layers,
        model.sliding_window,
    )
    topk = model.index_topk
    per_index_key = 2.0 * model.index_n_heads * model.index_head_dim

    def cost(p: int) -> float:
        first = p * b
        keys_full = b * first + b * (b + 1) // 2  # sum of t + 1 over the block
        keys_window = sum(min(t + 1, window) for t in range(first, first + b)) if windowed else 0
        attended = _capped_keys(first, b, topk) if topk else keys_full
        flops = per_token * b + per_key * (full * attended + windowed * keys_window)
        if topk:
            flops += per_index_key * model.sparse_attention_layers * keys_full
        return flops / _GFLOP

    return cost


def _capped_keys(first: int, tokens: int, limit: int) -> int:
    """``sum(min(t + 1, limit) for t in range(first, first + tokens))``, in closed form."""
    ramp = max(0, min(limit - first, tokens))  # tokens whose t + 1 is still below the limit
    return ramp * first + ramp * (ramp + 1) // 2 + (tokens - ramp) * limit
