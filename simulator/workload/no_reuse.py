"""Prefix caching off: a source whose requests never share a KV block with one another.

``ServingConfig.prefix_caching = False`` (vLLM ``--no-enable-prefix-caching``, SGLang
``--disable-radix-cache``, TensorRT-LLM ``enable_block_reuse: false``) means an engine computes
every prompt in full and keeps each request's KV to itself. ``NoPrefixReuse`` expresses that
exactly without touching the engine or the cache: it renames each request's blocks to ids that
no other request ever carries, so lookups never hit (in any tier, through any router), while a
request still holds the same number of blocks as with caching on.

Fresh ids are negative (-1, -2, …): interned ids are positive and raw trace hashes are
non-negative, so a renamed block can never collide with an id from the trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from simulator.workload.request import TraceRequest
from simulator.workload.source import RequestSource

__all__ = ["NoPrefixReuse"]


class NoPrefixReuse:
    """``inner`` with every request's ``block_ids`` replaced by ids unique to that request.

    ``on_finish`` hands ``inner`` the request it made (with its own ids), so closed-loop
    sources that derive the next turn from the last see what they produced.
    """

    def __init__(self, inner: RequestSource) -> None:
        self._inner = inner
        self.block_tokens = inner.block_tokens
        self._next_id = -1
        self._original: dict[int, TraceRequest] = {}
        """Requests in flight, by index: what ``inner`` made before renaming."""

    def _rename(self, request: TraceRequest) -> TraceRequest:
        n = len(request.block_ids)
        start = self._next_id
        self._next_id -= n
        self._original[request.index] = request
        return replace(request, block_ids=tuple(range(start, start - n, -1)))

    def start(self) -> Iterator[TraceRequest]:
        """``inner``'s requests, renamed."""
        return (self._rename(r) for r in self._inner.start())

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        """``inner``'s follow-up to the original request, renamed."""
        original = self._original.pop(request.index, request)
        follow = self._inner.on_finish(original, now_s)
        return self._rename(follow) if follow is not None else None
