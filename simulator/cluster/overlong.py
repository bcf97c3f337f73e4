"""Requests longer than the model's context, handled at the edge of a simulation.

A request whose prompt + output exceeds the model's ``max_context_tokens`` can never be served
by any configuration: an engine refuses it at the API (vLLM answers HTTP 400 "maximum context
length"). Counting it as an SLO miss would make an attainment target unreachable for reasons no
configuration can change, so the default (``drop``) removes such requests from the workload
before they reach the router and reports how many there were. ``count-as-miss`` keeps them:
the engine rejects each at arrival and the SLO evaluation counts it as infinitely late (the
behaviour before this policy existed). Refusing the run outright (``reject``) is the caller's
decision and needs only ``OverlongTally`` from a pre-scan (``scan_overlong``).

Tokens are counted as the engine does: ``max(1, input) + max(1, output)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from simulator.workload.request import TraceRequest
from simulator.workload.source import RequestSource

__all__ = [
    "OVERLONG_POLICIES",
    "OverlongPolicy",
    "OverlongTally",
    "drop_overlong",
    "scan_overlong",
    "tokens_of",
]

OverlongPolicy = Literal["drop", "count-as-miss", "reject"]
#: The policies, in the order the CLI lists them (the first is the default).
OVERLONG_POLICIES: tuple[OverlongPolicy, ...] = ("drop", "count-as-miss", "reject")


def tokens_of(request: TraceRequest) -> int:
    """Context tokens the request needs (prompt + output, each at least one, as engines count)."""
    return max(1, request.input_length) + max(1, request.output_length)


@dataclass(slots=True)
class OverlongTally:
    """What a pass over a workload saw: requests, the overlong ones, the longest of them."""

    max_context_tokens: int
    n_requests: int = 0
    n_overlong: int = 0
    longest_tokens: int = 0
    """Context tokens of the longest request seen (overlong or not)."""

    def see(self, request: TraceRequest) -> bool:
        """Count ``request``; return whether it fits the context."""
        tokens = tokens_of(request)
        self.n_requests += 1
        self.longest_tokens = max(self.longest_tokens, tokens)
        if tokens > self.max_context_tokens:
            self.n_overlong += 1
            return False
        return True

    @property
    def share(self) -> float:
        """Overlong requests as a fraction of all requests seen (0 when none were seen)."""
        return self.n_overlong / self.n_requests if self.n_requests else 0.0


class _DropOverlong:
    """A source that passes through the requests of ``inner`` that fit the context."""

    def __init__(self, inner: RequestSource, tally: OverlongTally) -> None:
        self._inner = inner
        self.tally = tally
        self.block_tokens = inner.block_tokens

    def start(self) -> Iterator[TraceRequest]:
        return (r for r in self._inner.start() if self.tally.see(r))

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        follow = self._inner.on_finish(request, now_s)
        # A closed-loop user whose next turn is overlong skips it, as a client would after a
        # 400 answer; the turn after it (if any) is asked for at the same instant.
        while follow is not None and not self.tally.see(follow):
            follow = self._inner.on_finish(follow, now_s)
        return follow


def drop_overlong(
    source: RequestSource, max_context_tokens: int
) -> tuple[RequestSource, OverlongTally]:
    """``source`` without its overlong requests, and the tally that fills as it is consumed."""
    tally = OverlongTally(max_context_tokens)
    return _DropOverlong(source, tally), tally


def scan_overlong(source: RequestSource, max_context_tokens: int) -> OverlongTally:
    """Count the overlong requests among those ``source`` knows up front (consumes it).

    Closed-loop follow-up turns are created only as earlier turns finish, so a pre-scan sees
    each user's first request only; the ``drop`` policy's tally during a run sees them all.
    """
    tally = OverlongTally(max_context_tokens)
    for request in source.start():
        tally.see(request)
    return tally
