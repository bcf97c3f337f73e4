"""The engine's side of PD disaggregation: hand-off seams and the decode-side admission.

A PD **prefill** instance runs a request until its first token (``stop_at == 1``), then keeps
its L1 blocks (state ``SENDING``) and calls ``Handoff.send``. The coordinator
(``simulator/cluster/pd.py``) picks a decode instance, which queues a fresh ``EngineRequest``
whose ``remote`` says where the KV is. The decode instance admits it like any waiting request
— first come first served, within ``max_running`` and L1 room — by ``admit_remote`` below: it
reserves L1 for the prompt and the first decode token, then asks ``remote.start`` to move the
prompt blocks it does not already hold; the request is scheduled once they have arrived
(``ready_s``, as an L2→L1 load). The coordinator frees the prefill side's blocks when the
transfer ends. So a decode pool short of memory back-pressures prefill: the KV stays on the
prefill instance, taking its L1, until the decode side admits the request.

Where the client's first token comes from (``PdFirstToken``, the coordinator's setting; see
``simulator/cluster/pd.py`` for the engines' sources): ``prefill`` — the continuation carries
the first token the prefill instance emitted; ``decode_ready`` — it carries the prefill's token
unsent, and ``admit_remote`` emits it when the KV has arrived (``ready_s``); ``decode_step`` —
it carries no token: ``admit_remote`` leaves the last prompt token to compute (``processed =
prompt − 1``), so the request's first step on the decode instance produces its first token.

What this module is not: it does not time transfers or choose instances (the coordinator
does), and it never touches the prefill instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from simulator.engine.host import Host
from simulator.engine.progress import Q_WAITING
from simulator.engine.request import RUNNING, EngineRequest

if TYPE_CHECKING:
    from simulator.engine.instance import EngineInstance

__all__ = [
    "Handoff",
    "PdFirstToken",
    "RemoteKV",
    "admit_remote",
    "blocks_to_move",
    "continuation",
]

PdFirstToken = Literal["prefill", "decode_ready", "decode_step"]
"""Where a handed-off request's first token reaches its client (module docstring)."""


class RemoteKV(Protocol):
    """Where a decode-side request's KV comes from (set by the PD coordinator)."""

    def start(self, now_s: float, n_blocks: int) -> float:
        """The decode instance has reserved L1 for the request: move ``n_blocks`` blocks of
        its prompt KV now; return when all have arrived (≥ ``now_s``). Called once."""
        ...

    def blocked(self) -> None:
        """The decode instance tried to admit the request and had no L1 room for it."""
        ...


class Handoff(Protocol):
    """What a PD prefill instance calls; implemented by the coordinator."""

    max_blocks: int
    """Most KV blocks (prompt + output − 1 tokens) one request may need on the decode side;
    a longer request is rejected at arrival, as one larger than L1 is."""

    def send(self, source: EngineInstance, req: EngineRequest) -> None:
        """``req`` finished its prefill on ``source`` and holds its KV there (``SENDING``)."""
        ...


def continuation(
    req: EngineRequest, instance: int, block_tokens: int, first_token: PdFirstToken = "prefill"
) -> EngineRequest:
    """The decode-side request continuing prefilled ``req`` on ``instance``: its queue times,
    hits and counters carried over, no KV held yet (``remote`` is set by the caller).

    ``first_token`` (module docstring): ``prefill`` — one token generated, at
    ``req.first_token_s``; ``decode_ready`` — one token generated, not yet sent
    (``first_token_s`` −1 until ``admit_remote``); ``decode_step`` — none generated (the decode
    instance computes the first token), ``first_token_s`` −1.
    """
    new = EngineRequest(req.trace, block_tokens, instance, req.arrival_s)
    if first_token == "prefill":
        new.generated = req.generated
        new.first_token_s = req.first_token_s
        new.last_token_s = req.last_token_s
        new.max_gap_s = req.max_gap_s
    elif first_token == "decode_ready":
        new.generated = req.generated
    new.queue_s = list(req.queue_s)
    new.cached_tokens = req.cached_tokens
    new.computed_total = req.computed_total
    new.preemptions = req.preemptions
    return new


def blocks_to_move(inst: Host, req: EngineRequest) -> int:
    """Prompt blocks of ``req`` that ``inst`` does not hold in L1 (distinct cacheable blocks,
    plus the anonymous blocks of a prompt longer than its block ids)."""
    has = inst.kv.l1.has
    n_blocks = -(-req.prompt_len // inst.block_tokens)
    missing = sum(1 for block in set(req.blocks) if not has(block))
    return missing + max(0, n_blocks - len(req.blocks))


def admit_remote(inst: Host, req: EngineRequest) -> int:
    """Admit the head of ``inst``'s waiting queue, a handed-off request (see the module
    docstring); return 1 if its KV is already here (it runs one token this step: a decode, or
    the last prompt token under ``decode_step``), 0 if it is on its way, -1 if L1 cannot hold
    its prompt and first decode token now (nothing changes)."""
    kv, prompt = inst.kv, req.prompt_len
    remote = req.remote
    assert remote is not None
    # ``decode_step``: the last prompt token is computed here (its step emits the first token).
    processed = prompt if req.generated else prompt - 1
    if kv.grow_need(req, prompt + 1) > kv.l1.available():
        remote.blocked()
        return -1
    now = inst.now
    inst.waiting.popleft()
    req.queue_s[Q_WAITING] += now - req.enqueue_s
    kv.announce(req)
    n_move = blocks_to_move(inst, req)
    kv.grow(req, prompt)
    req.remote = None  # from now on it is a local request (a preemption recomputes here)
    req.processed = processed
    req.ready_s = remote.start(now, n_move)
    if req.first_token_s < 0 and req.generated:  # ``decode_ready``: sent once the KV is here
        req.first_token_s = req.last_token_s = req.ready_s
    req.state = RUNNING
    inst.running.append(req)
    if req.ready_s > now:
        return 0
    kv.grow(req, prompt + 1)
    return 1
