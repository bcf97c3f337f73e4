"""Speculative decoding (EAGLE, MTP, draft models) as a step-time transformation.

With ``k`` draft tokens per step, each decoding request proposes ``k`` tokens with a small
draft (one extra layer for MTP and EAGLE), the target model verifies them together with the
next token (``k + 1`` query tokens per request), and the accepted prefix plus one token is
emitted. With each draft token accepted with probability ``α`` given the ones before it, a
step emits on average ``E = (1 − α^(k+1)) / (1 − α)`` tokens per request (``k + 1`` at α = 1).

Model (documented choice; ``SpeculativeTimer``): the engine keeps one token per request per
step, and the timer stretches time instead — a pure decode step costs the verify step (every
decode priced with ``k + 1`` new tokens) plus ``k`` draft passes (each ``draft_fraction`` of a
plain decode step), divided by ``E``. Mean TPOT, throughput, KV growth per emitted token and
the time to finish a request are then right on average; what is lost is the burstiness (tokens
arrive in groups, so inter-token gaps are uneven) and the variance of acceptance. A step that
also prefills is priced the same way but not divided: its decodes are counted as one token
each, which is pessimistic for mixed steps (their prefill part does not speed up). The step's
token budget still counts one token per decode, where engines count ``k + 1``.

What this is not: a model of acceptance; ``α`` is an input (it depends on the draft, the
model and the data).
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.engine.steps import StepTimer

__all__ = ["SpeculativeTimer", "tokens_per_step"]


def tokens_per_step(draft_tokens: int, acceptance: float) -> float:
    """Expected tokens a decoding request emits per verify step (module docstring)."""
    if draft_tokens < 0 or not 0 < acceptance <= 1:
        raise ValueError("need draft_tokens >= 0 and 0 < acceptance <= 1")
    if acceptance == 1:
        return float(draft_tokens + 1)
    return (1 - acceptance ** (draft_tokens + 1)) / (1 - acceptance)


class SpeculativeTimer:
    """``inner``'s step times under speculative decoding (module docstring)."""

    __slots__ = ("draft_fraction", "draft_tokens", "inner", "speedup")

    def __init__(
        self, inner: StepTimer, draft_tokens: int, acceptance: float, draft_fraction: float
    ) -> None:
        if draft_tokens < 1:
            raise ValueError("speculative decoding needs draft_tokens >= 1")
        if draft_fraction < 0:
            raise ValueError("draft_fraction must be >= 0")
        self.inner = inner
        self.draft_tokens = draft_tokens
        self.draft_fraction = draft_fraction
        self.speedup = tokens_per_step(draft_tokens, acceptance)

    def step_seconds(self, batch: Sequence[tuple[int, int]]) -> float:
        """Verify plus draft cost; divided by the tokens emitted when the step only decodes."""
        decodes = [(c, n) for c, n in batch if n == 1]
        if not decodes:
            return self.inner.step_seconds(batch)
        k = self.draft_tokens
        verify = self.inner.step_seconds([(c, k + 1) if n == 1 else (c, n) for c, n in batch])
        draft = k * self.draft_fraction * self.inner.step_seconds(decodes)
        if len(decodes) == len(batch):
            return (verify + draft) / self.speedup
        return verify + draft
