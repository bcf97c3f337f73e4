"""``InstanceStats``: what one engine instance did over a run, as ``simulate()`` reports it.

A snapshot, taken by ``EngineInstance.stats(until_s)`` when the run is over; the instance keeps
the running totals. What this module is not: it records no per-request metrics (those are the
``Recorder``'s).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["InstanceStats"]


@dataclass(frozen=True, slots=True)
class InstanceStats:
    """Totals of one instance from time 0 to the snapshot."""

    busy_s: float
    """Seconds a step or decode run was in progress."""
    steps: int
    """Engine steps run (each step of a decode run counts)."""
    preemptions: int
    """Requests preempted (recompute or swap)."""
    prefill_tokens: int
    """Tokens processed in prefill (prompt, or recomputed prompt and output after a
    preemption)."""
    decode_tokens: int
    """Tokens processed as decodes (one per decoding request per step)."""
    kv_utilization: float
    """Time-averaged share of L1 held by in-flight requests, 0 … 1."""
    l2_to_l1_blocks: int
    """KV blocks copied L2 → L1 (prefix hits and swap-ins)."""
    l3_to_l2_blocks: int
    """KV blocks prefetched L3 → L2 (0 without L3)."""
