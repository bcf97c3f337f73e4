"""The request as every part of the simulator sees it, whatever trace format it came from."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TURN_BITS", "TURN_CAP", "TraceRequest"]

#: ``TraceRequest.category`` folds ``type_id`` above the turn, capped at ``TURN_CAP`` in the low
#: ``TURN_BITS`` bits (the chunk readers compute the same fold per request).
TURN_BITS = 16
TURN_CAP = (1 << TURN_BITS) - 1


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace or synthetic workload.

    ``block_ids`` are interned block identities in prefix order (index 0 = nearest the root):
    with ``--block-id prefix`` two requests share an id only if they share the whole path to it.
    The last block may be partial (``input_length`` need not be a multiple of the block size).
    """

    index: int
    """0-based position in the workload (after skipping bad lines)."""
    timestamp_s: float
    """Arrival time in seconds from the start of the workload."""
    input_length: int
    """Prompt tokens."""
    output_length: int
    """Tokens to generate."""
    block_ids: tuple[int, ...]
    """Interned block ids of the prompt, prefix order."""
    chat_id: int = -1
    """Conversation-turn id from the trace (Qwen-Bailian ``chat_id``); -1 if absent."""
    parent_chat_id: int = -1
    """``chat_id`` of the previous turn; -1 for a first turn or when absent."""
    session_id: int = -1
    """Conversation id (root ``chat_id`` of the turn chain); -1 if unknown."""
    turn: int = 0
    """1-based turn number within the conversation; 0 if absent."""
    type_id: int = 0
    """1-based index of the request ``type`` in the trace's type table; 0 = none/unknown."""
    completion_s: float = -1.0
    """Completion time in seconds when a recorded trace knows it; -1.0 = unknown (the usual
    case: JSONL traces never carry it; the simulator computes its own)."""

    @property
    def category(self) -> int:
        """``type_id`` and ``turn`` folded into one opaque id (``RequestContext.category``);
        0 when both are absent."""
        return (self.type_id << TURN_BITS) | min(self.turn, TURN_CAP)

    def at_time(self, timestamp_s: float) -> TraceRequest:
        """This request arriving at ``timestamp_s`` (seconds): ``dataclasses.replace`` without
        its per-call field walk (once per request of every trace read), itself when the time
        is unchanged (a frozen value)."""
        if timestamp_s == self.timestamp_s:
            return self
        return TraceRequest(
            self.index,
            timestamp_s,
            self.input_length,
            self.output_length,
            self.block_ids,
            self.chat_id,
            self.parent_chat_id,
            self.session_id,
            self.turn,
            self.type_id,
            self.completion_s,
        )
