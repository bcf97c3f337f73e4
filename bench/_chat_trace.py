"""The synthetic multi-turn chat workload both replay benchmarks replay (deterministic per seed).

Conversations start from one of ``prompts`` system prompts (Zipf(1.1) popularity) and grow by
one turn of fresh blocks per request. ``active_sessions`` conversations are interleaved, one
picked uniformly per request; a conversation ends (its slot restarts from a prompt) after a
geometric number of turns or when one more turn could pass ``max_context_blocks``. Every new
block gets a fresh id, so ids are prefix-unique and a request's blocks are its whole context:
prefixes are reused at many depths. Holds only the active conversations.

A helper module of ``replay_speed.py`` and ``replay_memory.py`` (each sets its own shape), not a
workload generator for the simulator (that is ``simulator.workload``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["ChatShape", "ChatTurn", "chat_turns"]


@dataclass(frozen=True, slots=True)
class ChatShape:
    """Sizes of the chat workload, in blocks and turns."""

    prompts: int  # distinct system prompts
    prompt_blocks: tuple[int, int]  # system prompt length range (inclusive)
    turn_blocks: tuple[int, int]  # new blocks per turn (user message + previous answer)
    mean_turns: float  # mean conversation length (geometric)
    active_sessions: int  # conversations interleaved at any time
    max_context_blocks: int  # a conversation ends when its next turn could exceed this
    first_id: int = 0  # the first block id handed out


ChatTurn = tuple[int, int, list[int]]  # (conversation id, turn, context)


def chat_turns(n_accesses: int, shape: ChatShape, seed: int) -> Iterator[ChatTurn]:
    """``(conversation id, turn, context)`` per request until ``n_accesses`` block accesses.

    Conversation ids number the first ``active_sessions`` conversations by slot, then new ones in
    order of their start; turns count from 1. ``context`` (prefix order) is the conversation's
    live list, extended by its later turns: copy it before asking for the next request.
    """
    rng = np.random.default_rng(seed)
    next_id = shape.first_id
    prompts: list[list[int]] = []
    for _ in range(shape.prompts):
        length = int(rng.integers(*shape.prompt_blocks, endpoint=True))
        prompts.append(list(range(next_id, next_id + length)))
        next_id += length
    popularity = 1.0 / np.arange(1, shape.prompts + 1) ** 1.1
    popularity /= popularity.sum()

    def new_session() -> list[int]:
        return list(prompts[int(rng.choice(shape.prompts, p=popularity))])

    active = shape.active_sessions
    sessions = [new_session() for _ in range(active)]
    session_ids = list(range(active))  # conversation id per slot
    turns = [0] * active
    n_sessions = active
    total = 0
    while total < n_accesses:
        slot = int(rng.integers(active))
        context = sessions[slot]
        grow = int(rng.integers(*shape.turn_blocks, endpoint=True))
        context.extend(range(next_id, next_id + grow))
        next_id += grow
        turns[slot] += 1
        total += len(context)
        yield session_ids[slot], turns[slot], context
        too_long = len(context) + shape.turn_blocks[1] > shape.max_context_blocks
        # Short-circuit as written: the generator is drawn from only when the context fits.
        if too_long or rng.random() < 1 / shape.mean_turns:
            sessions[slot] = new_session()
            session_ids[slot], turns[slot] = n_sessions, 0
            n_sessions += 1
