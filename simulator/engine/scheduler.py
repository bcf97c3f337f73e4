"""Batch scheduling policies: one code path that gives each request a number of tokens per step.

A scheduler looks at the instance's queues and budgets and returns the next step as a
``StepPlan``: ``{request: n_tokens}`` plus the requests it preempted (vLLM v1's
``SchedulerOutput`` idea): there is no separate prefill or
decode phase, a request simply gets ``n`` tokens — its whole remaining prompt, a chunk of it, or
the one token of a decode step. Memory is taken through the host while scheduling: ``grow``
allocates L1 blocks for a running request (preempting from the tail of the running queue when
L1 is exhausted, as vLLM does) and ``admit`` takes a request off the swapped or waiting queue
(prefix match, pins, L2→L1 load) or reports it blocked. Admission is first-come first-served
with head-of-line blocking, and no request is admitted in a step that preempted one.

Policies (``SCHEDULERS``):

- ``chunked`` (vLLM v1 default): running requests first in admission order, each capped at
  ``chunk_tokens`` (a long prefill is split across steps and mixed with decodes), then new
  requests, each a chunk of up to ``chunk_tokens`` within the remaining token budget.
- ``decode_first``: every decode first, then ongoing prefills, then new requests whose *whole*
  remaining prompt fits in the remaining budget. It does not chunk prompts
  (``chunks_prompts``): the instance rejects on arrival a prompt longer than the step budget,
  as TensorRT-LLM cannot serve a context above ``max_num_tokens`` without chunked prefill
  (only a request preempted for recompute, whose prompt and output so far exceed the budget,
  is split, when it is alone in the step).
- ``prefill_first`` (SGLang's default, vLLM v0 without chunking): if any prefill work can run
  (an unfinished prefill or an admissible new request), the step is prefill-only; otherwise it
  decodes every running request.

What a scheduler is not: it does not time steps, move data or touch the caches itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, ClassVar, Protocol

from simulator.engine.request import RUNNING, EngineRequest

if TYPE_CHECKING:
    from simulator.engine.cohort import DecodeCohort

__all__ = ["SCHEDULERS", "Batch", "Scheduler", "SchedulerHost", "StepPlan", "StepSplit"]

Batch = dict[EngineRequest, int]
"""Tokens each request processes in the next step (insertion order = scheduling order)."""


class StepSplit:
    """A batch's shapes as the step pricer reads them, gathered while it is scheduled.

    For every ``(req, n)`` put in the batch, in order: ``n == 1`` adds ``req.processed + 1``
    to ``kv_lens`` (a decode-shaped request: its KV length after the step), else
    ``(req.processed, n)`` to ``chunks`` and ``n`` to ``chunk_tokens``. It is
    ``steps.StepPricer``'s own split of the finished batch, taken in the pass that builds it
    (the pricer would otherwise walk every running request a second time per step). Valid
    only when no request was preempted while scheduling (a preempted one leaves the batch):
    ``StepPlan.split`` is then None and the pricer splits the batch itself. The decode
    cohort's members (``cohort.py``), the first ``n_bucketed`` entries of the batch, come as
    their octave buckets ``bucketed`` instead of ``kv_lens`` entries.
    """

    __slots__ = ("bucketed", "chunk_tokens", "chunks", "kv_lens", "n_bucketed")

    def __init__(self) -> None:
        self.kv_lens: list[int] = []
        """KV length (tokens) after the step of each decode-shaped request, batch order."""
        self.chunks: list[tuple[int, int]] = []
        """``(cache_len, new_tokens)`` of each request given more than one token."""
        self.chunk_tokens = 0
        """Tokens of the ``chunks`` (the step processes ``len(kv_lens)`` more)."""
        self.bucketed: list[tuple[int, int, int]] = []
        """Decode buckets (exponent, count, KV sum) of the batch's first ``n_bucketed``
        requests, the decode cohort's (``DecodeCohort.buckets``)."""
        self.n_bucketed = 0
        """Decodes counted in ``bucketed`` only (the step processes that many more tokens)."""

    def add(self, processed: int, n: int) -> None:
        """A request that has ``processed`` tokens gets ``n`` more in this step."""
        if n == 1:
            self.kv_lens.append(processed + 1)
        else:
            self.chunks.append((processed, n))
            self.chunk_tokens += n


@dataclass(slots=True)
class StepPlan:
    """What a scheduler decided for the next step (not frozen: one is built per step, and a
    frozen dataclass's ``__init__`` costs several times a plain one's)."""

    tokens: Batch
    """Tokens each request processes (empty: nothing can run now)."""
    preempted: tuple[int, ...]
    """Indices of the requests preempted since the step boundary, in order (their L1 blocks
    were freed or swapped out; none is in ``tokens``)."""
    split: StepSplit | None = None
    """The shapes of ``tokens`` (``StepSplit``); None = not gathered (a step that preempted)."""


class SchedulerHost(Protocol):
    """What a scheduler may read and call on its instance."""

    running: list[EngineRequest]
    waiting: deque[EngineRequest]
    swapped: deque[EngineRequest]
    max_batched_tokens: int
    max_running: int
    chunk_tokens: int
    preempted: list[int]
    """Indices of the requests preempted since the step boundary (while building this batch;
    no request is admitted in a step that preempted one)."""
    admit_cutoff_s: float | None
    """Overlap scheduling: waiting requests queued after this time are not visible to this
    step's admission (None = all are)."""
    cohort: DecodeCohort | None
    """The decode cohort (``cohort.py``) of a scheduler with ``uses_cohort``: its members are
    the first ``len(members)`` running requests (None = the instance keeps none)."""

    @property
    def now(self) -> float:
        """Current simulated time (s); a running request whose ``ready_s`` (end of its L2→L1
        load) is later may not be scheduled yet."""
        ...

    def grow(self, req: EngineRequest, n_tokens: int) -> bool:
        """Allocate L1 for ``n_tokens`` more tokens of running ``req``, preempting from the
        tail of ``running`` if needed; False if ``req`` itself had to be preempted."""
        ...

    def admit(self, req: EngineRequest, max_tokens: int, *, whole: bool) -> int:
        """Admit the head of the swapped or waiting queue; return the tokens it runs this step
        (0 = admitted, still loading) or -1 = blocked (memory, or ``whole`` and the remaining
        prompt exceeds ``max_tokens``). Nothing changes when blocked."""
        ...


class Scheduler(ABC):
    """Base class: subclasses set ``name`` and implement ``schedule``."""

    name: ClassVar[str]
    chunks_prompts: ClassVar[bool] = True
    """Whether a prompt longer than the step budget can run, over several steps."""
    uses_cohort: ClassVar[bool] = False
    """Whether every step starts with every running decode when the budget allows (the
    first ``_run`` pass takes them all): then the instance may keep a decode cohort, which
    ``_take_cohort`` schedules in one go."""

    @abstractmethod
    def schedule(self, host: SchedulerHost) -> StepPlan:
        """The next step; its ``tokens`` are empty when nothing can run now."""

    @staticmethod
    def _admit(
        host: SchedulerHost, batch: Batch, split: StepSplit, budget: int, cap: int, *, whole: bool
    ) -> int:
        """Admit from the swapped queue, then (only when it is empty) the waiting queue, whose
        requests queued after ``host.admit_cutoff_s`` are not seen yet."""
        if host.preempted:
            return budget
        cutoff = host.admit_cutoff_s
        for queue in (host.swapped, host.waiting):
            while queue and budget > 0 and len(host.running) < host.max_running:
                req = queue[0]
                if cutoff is not None and queue is host.waiting and req.enqueue_s > cutoff:
                    return budget
                got = host.admit(req, min(cap, budget), whole=whole and bool(batch))
                if got < 0:
                    return budget
                if got:
                    batch[req] = got
                    split.add(req.processed, got)
                    budget -= got
            if queue:
                return budget
        return budget

    @staticmethod
    def _take_cohort(host: SchedulerHost, cohort: DecodeCohort, split: StepSplit) -> Batch:
        """The step's batch so far: the members of the non-empty decode ``cohort``, one token
        each, with their buckets in ``split`` (``DecodeCohort.take``), or empty (dissolved)."""
        batch = cohort.take(host, host.max_batched_tokens)
        if batch is None:
            return {}
        split.bucketed, split.n_bucketed = cohort.buckets(), len(batch)
        return batch

    @staticmethod
    def _run(
        host: SchedulerHost,
        batch: Batch,
        budget: int,
        cap: int,
        decoding: bool | None,
        *,
        split: StepSplit,
    ) -> int:
        """Give running requests (all, or only decoding / only prefilling ones) their tokens,
        adding each to ``split`` too; the first ``split.n_bucketed`` running requests (the
        decode cohort's) are in ``batch`` already."""
        # The hottest loop of an overloaded engine (every running request, every step): the
        # request's ``remaining`` and ``decoding`` properties and ``split.add`` are inlined.
        now, grow = host.now, host.grow
        kv_lens, chunks = split.kv_lens, split.chunks
        chunk_tokens = split.chunk_tokens
        skip = split.n_bucketed
        # Nothing but the cohort scheduled yet: no request after it can be in the batch.
        fresh = len(batch) == skip
        for req in host.running[skip:]:  # a copy: ``grow`` may preempt from the tail
            if budget <= 0:
                break
            if req.state != RUNNING or req.ready_s > now or (not fresh and req in batch):
                continue
            processed = req.processed
            remaining = req.prompt_len + req.generated - processed
            if remaining == 1:  # decoding when it has generated a token
                if decoding is not None and (req.generated > 0) != decoding:
                    continue
                # ``grow`` has nothing to do within ``kv_room`` (most decodes): skip the call.
                if processed < req.kv_room or grow(req, 1):  # budget and cap are >= 1
                    batch[req] = 1
                    kv_lens.append(processed + 1)
                    budget -= 1
                continue
            if decoding:  # not decoding
                continue
            n = min(remaining, cap, budget)
            if processed + n <= req.kv_room or grow(req, n):
                batch[req] = n
                if n == 1:
                    kv_lens.append(processed + 1)
                else:
                    chunks.append((processed, n))
                    chunk_tokens += n
                budget -= n
        split.chunk_tokens = chunk_tokens
        return budget

    @staticmethod
    def _live(host: SchedulerHost, batch: Batch) -> Batch:
        # A request scheduled early in the step may have been preempted later in it (only
        # when the step preempted one).
        if not host.preempted:
            return batch
        return {req: n for req, n in batch.items() if req.state == RUNNING}

    @classmethod
    def _plan(cls, host: SchedulerHost, batch: Batch, split: StepSplit) -> StepPlan:
        if not host.preempted:
            return StepPlan(batch, (), split)
        live = cls._live(host, batch)
        n = split.n_bucketed
        cohort = host.cohort
        if not n or cohort is None or len(cohort.members) != n:
            # A preempted request may have left the batch: no split (the pricer splits it).
            return StepPlan(live, tuple(host.preempted))
        # The decode cohort's members, the head of the batch, are all still running (only a
        # member's own grow can preempt one, and ``take`` then gives the cohort up): keep
        # their buckets, split the rest again (the pricer cannot split lazy members).
        again = StepSplit()
        again.bucketed, again.n_bucketed = split.bucketed, n
        for req, tokens in islice(live.items(), n, None):
            again.add(req.processed, tokens)
        return StepPlan(live, tuple(host.preempted), again)


class ChunkedScheduler(Scheduler):
    """vLLM v1: running first (chunk-capped), then new requests in chunks."""

    name: ClassVar[str] = "chunked"
    uses_cohort: ClassVar[bool] = True

    def schedule(self, host: SchedulerHost) -> StepPlan:
        split = StepSplit()
        cohort = host.cohort  # the call only when it has members (every step of an engine)
        batch = self._take_cohort(host, cohort, split) if cohort and cohort.members else {}
        cap = host.chunk_tokens
        budget = host.max_batched_tokens - len(batch)
        budget = self._run(host, batch, budget, cap, None, split=split)
        self._admit(host, batch, split, budget, cap, whole=False)
        return self._plan(host, batch, split)


class DecodeFirstScheduler(Scheduler):
    """Decodes, then ongoing prefills, then whole new prompts that fit."""

    name: ClassVar[str] = "decode_first"
    chunks_prompts: ClassVar[bool] = False
    uses_cohort: ClassVar[bool] = True

    def schedule(self, host: SchedulerHost) -> StepPlan:
        split = StepSplit()
        cohort = host.cohort
        batch = self._take_cohort(host, cohort, split) if cohort and cohort.members else {}
        budget = host.max_batched_tokens - len(batch)
        budget = self._run(host, batch, budget, budget, True, split=split)
        budget = self._run(host, batch, budget, budget, False, split=split)
        self._admit(host, batch, split, budget, budget, whole=True)
        return self._plan(host, batch, split)


class PrefillFirstScheduler(Scheduler):
    """Prefill-only steps while prefill work can run, decode-only steps otherwise."""

    name: ClassVar[str] = "prefill_first"

    def schedule(self, host: SchedulerHost) -> StepPlan:
        batch: Batch = {}
        split = StepSplit()
        budget = host.max_batched_tokens
        budget = self._run(host, batch, budget, budget, False, split=split)
        self._admit(host, batch, split, budget, budget, whole=True)
        if self._live(host, batch):
            return self._plan(host, batch, split)
        # A decode step is bounded by the running limit, not by the prefill budget (they
        # differ only where attention-DP ranks share a prefill chunk, presets.rank_limits).
        # The prefill pass's requests, if any, were all preempted: ``_plan`` drops them (and
        # the split).
        budget = max(host.max_batched_tokens, host.max_running)
        self._run(host, batch, budget, 1, True, split=split)
        return self._plan(host, batch, split)


#: Every scheduling policy by name; ``ServingConfig.scheduler`` takes one of these keys.
SCHEDULERS: dict[str, type[Scheduler]] = {
    cls.name: cls for cls in (ChunkedScheduler, DecodeFirstScheduler, PrefillFirstScheduler)
}
