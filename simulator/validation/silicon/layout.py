"""A benchmarked worker's parallel layout, in ``ServingConfig`` terms.

aiconfigurator's silicon rows (aggregated, and each role of a disaggregated row) record
``tp_size`` (the attention TP of one data-parallel rank), ``attention_dp_size`` D (ranks per
worker; empty = 1), ``moe_tp_size`` and ``moe_ep_size`` (how the routed experts are split over
the worker's GPUs; 0 or empty = 1). A worker has ``tp_size × D`` GPUs and
``moe_tp × moe_ep`` equals that count (aiconfigurator's own constraint). The simulator's worker
is ``tp = tp_size × D`` GPUs with ``attention_dp = D`` and ``ep = moe_ep`` (expert TP
``tp / ep`` = ``moe_tp``); any other split cannot be expressed and becomes the skip reason.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PP_ROW_REASON", "worker_layout"]

#: Why a row with ``pp_size`` > 1 is skipped although the simulator models PP
#: (``simulator/latency/pipeline.py``): how such a row's GPU count and batch size map onto
#: ``tp`` / ``pp`` / engine limits was never checked, the H100 file having no such row.
PP_ROW_REASON = (
    "not mapped onto a simulated layout yet (the H100 silicon file has no pp_size > 1 row to "
    "check the mapping of its GPU count and batch size against)"
)


def worker_layout(
    tp: int, attention_dp: int, moe_tp: int, moe_ep: int, *, moe: bool, role: str = ""
) -> dict[str, Any] | str:
    """``{"tp", "attention_dp", "ep"}`` of a worker (module doc), or why it cannot be
    expressed; ``role`` prefixes the column names (``"prefill_"``)."""
    ranks = max(1, attention_dp)
    gpus = tp * ranks
    if not moe:
        # A dense model's attention-DP ranks are independent replicas: only MoE shares work.
        if ranks > 1:
            return (
                f"{role}attention_dp_size={ranks} on a dense model: the ranks are separate "
                "replicas, not one worker"
            )
        return {"tp": tp, "attention_dp": 1, "ep": None}
    split_tp, split_ep = moe_tp or 1, moe_ep or 1
    if split_tp * split_ep != gpus:
        dp = f" × {role}attention_dp_size={ranks}" if ranks > 1 else ""
        return (
            f"MoE layout {role}moe_tp_size={split_tp} × {role}moe_ep_size={split_ep} != "
            f"{role}tp_size={tp}{dp} cannot be expressed"
        )
    return {"tp": gpus, "attention_dp": ranks, "ep": split_ep}
