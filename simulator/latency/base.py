"""The ``LatencyModel`` protocol: what the serving engine asks of a latency model.

The engine calls ``step_seconds`` once per engine step (millions of times per simulation), so
implementations precompute per-deployment constants and cache by shape. ``breakdown`` is for
reports and tests (slow is fine). ``transfer_seconds`` prices KV moves between tiers and GPUs.

Contract (``tests/latency/test_contract.py`` runs it over every entry of ``LATENCY_MODELS``):

- deterministic: the same batch gives the same seconds, in any call order;
- positive for a non-empty batch; **an empty batch costs exactly 0** — no step runs, so no
  framework overhead is charged (the engine does not call a step with nothing scheduled);
- non-decreasing in any request's ``new_tokens`` and ``cache_len``, and in adding a request;
- ``breakdown(batch).total`` equals ``step_seconds(batch)`` (up to float rounding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from simulator.latency.batch import BatchLike
from simulator.latency.deployment import Deployment
from simulator.latency.transfer import Link

__all__ = ["LatencyModel", "StepBreakdown"]


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    """Seconds of one step per operator (all layers summed; per GPU of the instance).

    Keys are operator names ('qkv_proj', 'attn_prefill', 'attn_decode', 'all_reduce',
    'moe_experts', 'lm_head', 'elementwise', 'step_overhead', 'request_overhead', ...); launch
    credits are already netted into their operator.
    """

    seconds: Mapping[str, float]

    @classmethod
    def of(cls, seconds: dict[str, float]) -> StepBreakdown:
        """A breakdown owning a read-only copy of ``seconds``."""
        return cls(MappingProxyType(dict(seconds)))

    @property
    def total(self) -> float:
        """The step's seconds."""
        return sum(self.seconds.values())

    def share(self, op: str) -> float:
        """Fraction of the step spent in ``op`` (0 when absent or the step is empty)."""
        total = self.total
        return self.seconds.get(op, 0.0) / total if total > 0 else 0.0


@runtime_checkable
class LatencyModel(Protocol):
    """Seconds of engine steps and KV transfers for one ``Deployment``."""

    @property
    def name(self) -> str:
        """The registry spec that built it, e.g. 'roofline'."""
        ...

    @property
    def deployment(self) -> Deployment:
        """The model, GPU and parallel layout it prices."""
        ...

    def step_seconds(self, batch: BatchLike) -> float:
        """Seconds of one step over ``batch`` (``(cache_len, new_tokens)`` per request)."""
        ...

    def breakdown(self, batch: BatchLike) -> StepBreakdown:
        """``step_seconds`` split by operator."""
        ...

    def transfer_seconds(self, nbytes: float, link: Link) -> float:
        """Seconds to move ``nbytes`` over ``link`` (0 for nothing to move)."""
        ...
