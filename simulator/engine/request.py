"""A request inside one engine instance: its progress, the KV it holds, its timestamps.

Token accounting (one code path for prefill and decode, vLLM v1 style)::

    prompt P tokens                       generated g tokens
    |------------------------------------|----------------|
    |<---------- processed ---------->|  next step computes up to P + g - processed tokens

``processed`` counts tokens whose KV is in L1 (cache hits included). A step that brings
``processed`` to ``P + g`` produces one output token (g += 1). The first such step ends the
prefill (TTFT); after it every step processes exactly the last generated token (decode). A
recompute preemption sets ``processed`` back to 0, so the next prefill covers ``P + g`` tokens.

KV held in L1 (in trace blocks of ``block_tokens`` tokens): the first ``n_pinned`` prompt blocks
(cacheable, pinned) and ``n_private`` anonymous blocks for tokens past the prompt's blocks.

PD disaggregation: on a prefill instance a request leaves after its first token
(``stop_at == 1``) and waits in the ``SENDING`` state, still holding its L1 blocks, until its KV
has reached a decode instance; there a new ``EngineRequest`` (``remote`` set) continues it from
the second token, or, under ``pd_first_token: decode_step``, from the last prompt token
(``remote.continuation``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.workload.request import TraceRequest

if TYPE_CHECKING:
    from simulator.engine.remote import RemoteKV
    from simulator.engine.transfer import Transfer

__all__ = [
    "FINISHED",
    "PREFETCHING",
    "RUNNING",
    "SENDING",
    "SWAPPED",
    "WAITING",
    "EngineRequest",
]

# Request states (plain ints: compared on the hot path).
PREFETCHING = 0
"""In the prefetch queue: its L3 blocks are on their way to L2 (wait_complete / timeout)."""
WAITING = 1
"""In the waiting queue: not admitted, holds no L1 blocks."""
RUNNING = 2
"""Admitted: holds L1 blocks; scheduled each step once its L2→L1 load is done (``ready_s``)."""
SWAPPED = 3
"""Preempted by swapping: its KV sits pinned in L2 until it is resumed."""
FINISHED = 4
"""Done: its prompt blocks stay cached (unpinned) in L1."""
SENDING = 5
"""PD prefill side: prefill done, its L1 blocks held until the decode side has the KV."""


class EngineRequest:
    """Mutable per-request state of one instance (slotted; identity-hashed)."""

    __slots__ = (
        "arrival_s",
        "blocks",
        "cached_tokens",
        "cohort_base",
        "cohort_seq",
        "computed_total",
        "enqueue_s",
        "finish_s",
        "first_token_s",
        "generated",
        "index",
        "instance",
        "kv_room",
        "l2_pins",
        "l3_blocks",
        "last_token_s",
        "max_gap_s",
        "n_pinned",
        "n_private",
        "n_state",
        "output_len",
        "preemptions",
        "prefetch",
        "processed",
        "prompt_len",
        "queue_s",
        "ready_s",
        "remote",
        "start_s",
        "state",
        "stop_at",
        "swap_private",
        "trace",
    )

    def __init__(self, trace: TraceRequest, block_tokens: int, instance: int, now: float) -> None:
        self.trace = trace
        self.index = trace.index
        self.instance = instance
        self.prompt_len = max(1, trace.input_length)
        self.output_len = max(1, trace.output_length)
        self.stop_at = self.output_len
        """Output tokens after which it leaves this instance (1 on a PD prefill instance)."""
        n_blocks = -(-self.prompt_len // block_tokens)
        self.blocks: tuple[int, ...] = trace.block_ids[:n_blocks]
        """Cacheable prompt blocks (trace ids), prefix order; missing ids become private."""
        self.state = WAITING
        self.processed = 0
        self.generated = 0
        self.n_pinned = 0
        self.n_private = 0
        self.n_state = 0
        """Private blocks of its sliding-window KV and linear-attention state while admitted."""
        self.kv_room = 0
        """Tokens whose KV fits in the L1 blocks it holds, so that growing to that many needs
        no allocation: ``(len(blocks) + n_private) × block_tokens`` once every prompt block is
        pinned, else 0 (``KVManager`` keeps it; the per-step hot paths test it instead of
        calling ``grow``)."""
        self.ready_s = 0.0
        """Time its L2→L1 load (or PD KV transfer) completes; it is not scheduled before."""
        self.start_s = -1.0
        """When its KV began to be computed: the ``ready_s`` of its latest admission."""
        self.remote: RemoteKV | None = None
        """PD decode side, until admitted: where its KV comes from (``cluster.pd``)."""
        self.arrival_s = now
        self.enqueue_s = now
        """When it entered its current queue."""
        self.queue_s = [0.0, 0.0, 0.0]
        """Seconds spent in the prefetch, waiting and swapped queues."""
        self.first_token_s = -1.0
        self.last_token_s = -1.0
        self.finish_s = -1.0
        self.max_gap_s = 0.0
        """Largest gap between two consecutive output tokens (ITL worst case)."""
        self.cached_tokens: tuple[int, int, int] | None = None
        """Prompt tokens served from L1, L2, L3 at first admission (None until admitted)."""
        self.computed_total = 0
        """Tokens processed by the GPU for this request, recomputation included."""
        self.preemptions = 0
        self.prefetch: Transfer | None = None
        """The L3→L2 transfer in flight for it (``transfer.Transfer``), if any."""
        self.l3_blocks: frozenset[int] = frozenset()
        """Blocks its prefetch brought from L3 (their hits are credited to L3)."""
        self.l2_pins: list[int] = []
        """L2 blocks it pins (prefetched, or its swapped-out prompt blocks)."""
        self.swap_private = 0
        """Private blocks it holds in L2 while swapped."""
        self.cohort_base = self.cohort_seq = -1
        """Decode cohort (``cohort.py``): ``cohort_base`` is the cohort tick as of which its
        counters (``processed``, ``generated``, ``computed_total``, ``last_token_s``,
        ``max_gap_s``) are written (-1: not a member, every counter current); ``cohort_seq``
        numbers its latest join (unique per instance: orders members, dates due entries)."""

    @property
    def remaining(self) -> int:
        """Tokens to process before its next output token (1 while decoding)."""
        return self.prompt_len + self.generated - self.processed

    @property
    def owed(self) -> int:
        """Prompt tokens not yet prefilled (none for a handed-off PD request, whose KV comes
        from its prefill instance) plus output tokens not yet generated here."""
        prompt = 0 if self.remote is not None else max(0, self.prompt_len - self.processed)
        return prompt + self.stop_at - self.generated

    @property
    def decoding(self) -> bool:
        """Whether the prefill is done and each step now processes one token."""
        return self.generated > 0 and self.processed + 1 == self.prompt_len + self.generated

    def __repr__(self) -> str:
        return (
            f"EngineRequest(index={self.index}, state={self.state}, processed={self.processed}, "
            f"generated={self.generated}/{self.output_len})"
        )
