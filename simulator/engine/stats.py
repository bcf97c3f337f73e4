"""``InstanceStats``: what one engine instance did over a run, as ``simulate()`` reports it.

A snapshot, taken by ``EngineInstance.stats(until_s)`` when the run is over, of the running
``StepTotals`` the instance keeps and of its KV and link counters. What this module is not: it
records no per-request metrics (those are the ``Recorder``'s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.engine.progress import Progress

__all__ = ["InstanceStats", "StepTotals"]


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


@dataclass(slots=True)
class StepTotals:
    """Running totals of one instance's steps (fields: as in ``InstanceStats``)."""

    busy_s: float = 0.0
    steps: int = 0
    preemptions: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0

    def add(self, progress: Progress, seconds: float) -> None:
        """A step or decode run that lasted ``seconds`` did ``progress``."""
        self.busy_s += seconds
        self.steps += progress.steps
        self.prefill_tokens += progress.prefill_tokens
        self.decode_tokens += progress.decode_tokens

    def snapshot(
        self, *, kv_utilization: float, l2_to_l1_blocks: int, l3_to_l2_blocks: int
    ) -> InstanceStats:
        """These totals with the instance's KV utilisation and link counters."""
        return InstanceStats(
            busy_s=self.busy_s,
            steps=self.steps,
            preemptions=self.preemptions,
            prefill_tokens=self.prefill_tokens,
            decode_tokens=self.decode_tokens,
            kv_utilization=kv_utilization,
            l2_to_l1_blocks=l2_to_l1_blocks,
            l3_to_l2_blocks=l3_to_l2_blocks,
        )
