"""What a finished step does to its requests: tokens, output timestamps, KV growth, records.

Called by ``EngineInstance`` at the end of a step (``apply_step``) or of a decode run
(``apply_run``); both return the requests that produced their last token. What this module is
not: it does not schedule, preempt or time anything.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from itertools import islice

import numpy as np
from numpy.typing import NDArray

from simulator.engine.cohort import DecodeCohort
from simulator.engine.kvmanager import KVManager, PrefixMatch
from simulator.engine.request import EngineRequest
from simulator.engine.scheduler import Batch
from simulator.records import Recorder, RequestRecord

__all__ = ["Progress", "apply_run", "apply_step", "hit_tokens", "record_of"]

#: No repeated gaps (``Recorder.gaps`` with individual gaps only).
_NO_GAPS: NDArray[np.float64] = np.empty(0)

#: Indices of ``EngineRequest.queue_s``.
Q_PREFETCH, Q_WAITING, Q_SWAPPED = 0, 1, 2


@dataclass(slots=True)
class Progress:
    """What one step or run did, for the instance's counters."""

    done: list[EngineRequest]
    """Requests that produced their last token here (``stop_at``), in batch order."""
    prefill_tokens: int = 0
    decode_tokens: int = 0
    steps: int = 1
    first: list[EngineRequest] = field(default_factory=list)
    """Requests that produced their first token here (set only by ``apply_step``: a decode
    run's requests have theirs), in batch order."""
    members: int = 0
    """Requests at the head of the batch that were the decode cohort's (``apply_step``)."""


def apply_step(
    batch: Batch,
    end_s: float,
    kv: KVManager,
    recorder: Recorder,
    cohort: DecodeCohort | None = None,
) -> Progress:
    """Apply one step of ``batch`` that ended at ``end_s``.

    A request whose processed tokens reach prompt + generated emits a token: its first (TTFT)
    or the next one (an inter-token gap). Prompt blocks it completed are written through.
    The members of a decode ``cohort`` (not empty) are the first requests of ``batch``
    (``cohort.py``): the cohort applies them (``DecodeCohort.commit``: one token each, one
    gap for all, the counters held there), this function the rest.
    """
    progress = Progress([])
    done, first, gaps = progress.done, progress.first, []
    _commit_members(progress, cohort, end_s, recorder)
    prefill_tokens, decode_tokens = 0, progress.members
    # The members come first (none: islice from 0 costs a few ns an item, no branch).
    for req, n in islice(batch.items(), decode_tokens, None):
        before = req.processed
        prompt_len, generated = req.prompt_len, req.generated
        if n == 1 and generated > 0 and before + 1 == prompt_len + generated:
            # A decode (the bulk of an overloaded step): its token, and a gap (it has had its
            # first token), in fewer operations than the general path below.
            decode_tokens += 1
            req.processed = before + 1
            req.computed_total += 1
            req.generated = generated + 1
            gap = end_s - req.last_token_s
            gaps.append(gap)
            if gap > req.max_gap_s:  # noqa: PLR1730  (max() without the call)
                req.max_gap_s = gap
            req.last_token_s = end_s
            if generated + 1 >= req.stop_at:
                done.append(req)
            continue
        if generated > 0 and before + 1 == prompt_len + generated:  # req.decoding
            decode_tokens += n
        else:
            prefill_tokens += n
        processed = req.processed = before + n
        req.computed_total += n
        if before < prompt_len:
            kv.written(req, before, processed)
        if processed == prompt_len + generated:
            req.generated = generated + 1
            if req.first_token_s < 0:
                req.first_token_s = end_s
                first.append(req)
            else:
                gap = end_s - req.last_token_s
                gaps.append(gap)
                req.max_gap_s = max(req.max_gap_s, gap)
            req.last_token_s = end_s
            if generated + 1 >= req.stop_at:
                done.append(req)
    if gaps:
        recorder.gaps(gaps, _NO_GAPS, 0)
    progress.prefill_tokens = prefill_tokens
    progress.decode_tokens = decode_tokens
    return progress


def _commit_members(
    progress: Progress, cohort: DecodeCohort | None, end_s: float, recorder: Recorder
) -> None:
    """The decode cohort's part of a step that ended at ``end_s`` (``DecodeCohort.commit``;
    none when ``cohort`` is None): counts its members in ``progress`` and its finished ones
    in ``done``, and records the members' gaps (all equal), before the rest of the batch's
    (batch order)."""
    if cohort is None:
        return
    members = len(cohort.members)
    gap, members_done = cohort.commit(end_s)
    progress.members = members
    progress.done.extend(members_done)
    recorder.same_gaps(gap, members)


def apply_run(
    batch: Batch,
    ends: NDArray[np.float64],
    end_s: float,
    kv: KVManager,
    recorder: Recorder,
    *,
    cohort: DecodeCohort | None = None,
) -> Progress:
    """Apply ``len(ends)`` identical decode steps ending at ``ends`` (absolute times; the
    last, ``end_s``, as a float: the run has it, and each numpy read costs a call).

    Every request gains one token per step; its first gap is from its previous token to
    ``ends[0]``, the others are the step durations (recorded once, weighted by the batch
    size). The L1 blocks the growth needs are allocated here (the run length was bounded so
    that they fit). The members of a decode ``cohort`` (not empty) are the first requests of
    ``batch``: the cohort advances them (``DecodeCohort.run_ended``: their first gaps are all
    ``ends[0]`` minus its last step's end), this function the rest, after them.
    """
    m = len(ends)
    durations = ends[1:] - ends[:-1]  # np.diff, without its dispatch
    # The largest duration through ``argmax`` (the first maximum, or the first NaN, as the
    # ufunc's reduce would give): a fraction of the dispatch of ``ndarray.max`` or of the
    # reduce, which dominated on runs of a few hundred steps.
    repeated_max: float = durations.item(durations.argmax()) if m > 1 else 0.0
    first_end: float = ends.item(0)  # ``item``: a Python float in one call
    members = len(cohort.members) if cohort is not None else 0
    rest: Collection[EngineRequest] = list(islice(batch, members, None)) if members else batch
    first_gaps = [first_end - req.last_token_s for req in rest]
    progress = Progress([], decode_tokens=m * len(batch), steps=m)
    done = progress.done
    if cohort is not None and members:
        member_gap = first_end - cohort.end_s
        recorder.same_gaps(member_gap, members)  # before the others' (batch order)
        recorder.gaps(first_gaps, durations, len(batch))
        top = member_gap if member_gap > repeated_max else repeated_max
        done += cohort.run_ended(m, end_s, top, kv.grow)
    else:
        recorder.gaps(first_gaps, durations, len(batch))
    for req, gap in zip(rest, first_gaps, strict=True):
        processed = req.processed = req.processed + m
        generated = req.generated = req.generated + m
        req.computed_total += m
        req.last_token_s = end_s
        # ``max(req.max_gap_s, gap, repeated_max)`` without the call (every request, every run)
        top = gap if gap > repeated_max else repeated_max
        if top > req.max_gap_s:  # noqa: PLR1730  (max() without the call)
            req.max_gap_s = top
        if processed > req.kv_room:  # ``kv.grow`` has nothing to do within it
            kv.grow(req, processed)
        if generated >= req.stop_at:
            done.append(req)
    return progress


def hit_tokens(
    req: EngineRequest, match: PrefixMatch, cached: int, block_tokens: int
) -> tuple[int, int, int]:
    """Prompt tokens of ``req`` served from L1, L2 and L3 when it is admitted with ``match``
    and ``cached`` tokens skipped; L2 blocks its prefetch brought count as L3. Tokens beyond
    ``cached`` (the recomputed last token, a cap) are taken from the lowest tier first."""
    bt, prompt = block_tokens, req.prompt_len
    if not match.n_l2_blocks:
        # Every matched block in L1 (most admissions): the sizes below add up to this.
        counts = [min(prompt, match.n_blocks * bt), 0, 0]
    else:
        counts = [0, 0, 0]
        l3 = req.l3_blocks
        for i, (block, in_l2) in enumerate(zip(req.blocks, match.from_l2, strict=False)):
            size = min(prompt, (i + 1) * bt) - i * bt
            slot = (2 if block in l3 else 1) if in_l2 else 0
            counts[slot] += size
    surplus = sum(counts) - cached
    for slot in (2, 1, 0):
        take = min(surplus, counts[slot])
        counts[slot] -= take
        surplus -= take
    return counts[0], counts[1], counts[2]


def record_of(req: EngineRequest, instance: int) -> RequestRecord:
    """The per-request record of a finished request."""
    l1, l2, l3 = req.cached_tokens or (0, 0, 0)
    queue = req.queue_s
    # Positional, in the field order (one per finished request: keywords cost a quarter more).
    return RequestRecord(
        req.index,  # index
        instance,  # instance
        req.arrival_s,  # arrival_s
        req.first_token_s,  # first_token_s
        req.finish_s,  # finish_s
        req.prompt_len,  # input_tokens
        req.output_len,  # output_tokens
        l1,  # cached_l1_tokens
        l2,  # cached_l2_tokens
        l3,  # cached_l3_tokens
        queue[Q_PREFETCH],  # prefetch_queue_s
        queue[Q_WAITING],  # waiting_queue_s
        queue[Q_SWAPPED],  # swapped_queue_s
        req.preemptions,  # preemptions
        req.computed_total,  # computed_tokens
        req.max_gap_s,  # max_itl_s
    )
