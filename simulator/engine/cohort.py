"""The decode cohort of one instance: steady decoders whose per-step counters are held lazily.

Why: under overload every step mixes a prefill chunk with every running decode, so steps cannot
be batched into decode runs, and three Python passes over the ~120 running requests of each step
(schedule, price, apply) were ~40% of the event loop. A *member* is a running request that has
decoded one token in every step of its instance since it joined; its counters then follow from
the instance's step count alone, and a step costs the cohort O(octaves of KV length), not
O(members).

Contract (``EngineInstance`` keeps it; ``check`` verifies it under ``check_invariants``):

- ``members`` is a prefix of the instance's ``running`` list, in its order: requests join at its
  end (``extend``, after a step) and leave anywhere (order kept), so they are the first entries
  of every batch the scheduler builds with ``take`` (one token each).
- Every instance step while the cohort is not empty is a *cohort step* (``take`` at scheduling,
  ``commit`` at its end), else the cohort is dissolved first (every member written back, the
  eager passes take over): a budget that does not cover every member, a step that preempted,
  a decode run.
- A member's ``processed``, ``generated``, ``computed_total``, ``last_token_s`` and ``max_gap_s``
  are those at its base tick ``req.cohort_base``; ``n`` cohort steps later its eager values are
  ``+ n`` on the three counts, the last step's end, and the maximum with the step gaps since the
  base (``_write``). They are written back at its next block boundary (before its ``grow``), its
  last token, its preemption, a dissolution, and for any reader outside the three passes
  (``sync``).

Bit-identical to the eager passes: a member's gap in a step is ``end − last_token_s`` with its
last token at the previous step's end, so it is the one subtraction ``end − previous end`` the
cohort does per step; maxima and integer KV sums do not depend on order; the members' grows,
finishes and gaps come in batch order (by ``cohort_seq``, their order in ``running``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import TYPE_CHECKING, Protocol

from simulator.engine.request import RUNNING, EngineRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CohortHost", "DecodeCohort"]

#: Due entries: ``(cohort_seq, request)`` (the seq orders them and tells a stale entry).
_Due = list[tuple[int, EngineRequest]]

#: Fewest decoders a cohort forms with. A cohort step has a fixed cost of a few µs (buckets,
#: their merge, the commit), an eager decode ~0.3 µs: a handful of members (a lightly loaded
#: engine) would cost more than it saves. Only speed depends on it, never a result.
MIN_MEMBERS = 24


class CohortHost(Protocol):
    """What ``take`` calls on the instance: the scheduler host's ``grow`` and preemptions."""

    preempted: list[int]

    def grow(self, req: EngineRequest, n_tokens: int) -> bool:
        """``SchedulerHost.grow``."""
        ...


class DecodeCohort:
    """One instance's decode cohort (module docstring)."""

    __slots__ = (
        "_done_due",
        "_ends",
        "_first",
        "_gaps",
        "_grow_due",
        "_offsets",
        "_seq",
        "members",
        "min_members",
        "tick",
    )

    def __init__(self, min_members: int = MIN_MEMBERS) -> None:
        self.min_members = min_members
        """Fewest decoders a new cohort forms with (``MIN_MEMBERS``; tests take 1)."""
        self.members: dict[EngineRequest, int] = {}
        """The members, in ``running`` order (its first ``len(members)`` entries), each with
        its one token of a step: ``take`` copies it as the head of the step's batch (a copy
        of a dict costs a fraction of building one), and a member leaves in O(1)."""
        self.tick = 0
        """The cohort's clock: its steps and the steps of decode runs it lived through (it
        never goes back); a member advances one token per tick."""
        self._first = 0
        """Tick of ``_ends[0]``: no member's base tick is older (set when the cohort forms and
        after a decode run, which writes every member back)."""
        self._ends: list[float] = [0.0]
        """End (s) of the step of each tick from ``_first`` on."""
        self._gaps: list[float] = [0.0]
        """``_gaps[i] = _ends[i] − _ends[i − 1]`` (s), i ≥ 1: every member's gap in the step
        of tick ``_first + i``."""
        self._offsets: list[int] = []
        """``processed − cohort_base`` of every member, sorted: its KV length in the step
        after tick t is ``offset + t + 1``."""
        self._grow_due: dict[int, _Due] = {}
        """Tick at whose scheduling a member's next token needs a new block → entries."""
        self._done_due: dict[int, _Due] = {}
        """Tick at whose commit a member produces its last token → entries."""
        self._seq = 0

    # ----- the three passes -----------------------------------------------------------------------
    def take(self, host: CohortHost, budget: int) -> dict[EngineRequest, int] | None:
        """Schedule the members (one token each, ``running`` order) as the first entries of
        the next step's batch, or dissolve the cohort and return None (the scheduler's eager
        pass then does what it always did): ``budget`` tokens do not cover them, or growing a
        member at its block boundary preempted (the same ``grow`` calls in the same order as
        the eager pass; it resumes from there)."""
        members = self.members
        if budget < len(members):
            self.dissolve()
            return None
        due = self._grow_due.pop(self.tick, None)
        if due:
            due.sort()
            for seq, req in due:
                if req.cohort_seq != seq or req.cohort_base < 0:
                    continue  # left since (its stale entry)
                self._write(req)
                if req.processed < req.kv_room:
                    continue
                if not host.grow(req, 1) or host.preempted:
                    self.dissolve()
                    return None
                self._due_grow(seq, req, self.tick + 1)
        return members.copy()

    def buckets(self) -> list[tuple[int, int, int]]:
        """The members' decode buckets in the step being scheduled (``latency.Batch``'s
        ``decode_buckets``: exponent, count, sum of KV lengths after the step), from the sorted
        offsets: one bisection and one slice sum per octave, as ``DecodeRun.buckets``."""
        ordered, shift = self._offsets, self.tick + 1
        n, i = len(ordered), 0
        out = []
        while i < n:
            e = (ordered[i] + shift).bit_length()
            j = bisect_left(ordered, (1 << e) - shift, i)
            out.append((e, j - i, sum(ordered[i:j]) + (j - i) * shift))
            i = j
        return out

    def commit(self, end_s: float) -> tuple[float, list[EngineRequest]]:
        """A cohort step ended at ``end_s``: ``(every member's gap (s), the members that
        produced their last token, written back and out of the cohort, in batch order)``."""
        gap = end_s - self._ends[-1]  # each member's ``end_s - last_token_s``, the same float
        self.tick += 1
        self._ends.append(end_s)
        self._gaps.append(gap)
        due = self._done_due.pop(self.tick, None)
        if not due:
            return gap, []
        due.sort()
        done = []
        for seq, req in due:
            if req.cohort_seq == seq and req.cohort_base >= 0:
                self.leave(req)
                done.append(req)
        return gap, done

    # ----- membership -----------------------------------------------------------------------------
    def extend(self, running: Sequence[EngineRequest], end_s: float) -> None:
        """After a step that ended at ``end_s`` (a cohort step, or any step when the cohort is
        empty): the requests after the members in ``running`` that decoded in it join, up to
        the first that did not (the members stay a prefix of ``running``); a new cohort forms
        only with ``min_members`` at least."""
        i = len(self.members)
        n = len(running)
        if i == n:
            return
        j = i
        while j < n:
            req = running[j]
            # Emitted in this step, and its next step is a decode (``req.decoding``).
            if req.last_token_s != end_s or req.processed + 1 != req.prompt_len + req.generated:
                break
            j += 1
        if not i:
            if j < self.min_members:
                return
            self._reset(end_s)
        for req in running[i:j]:
            self._join(req)

    def after_run(self, end_s: float, n_steps: int, done: Sequence[EngineRequest]) -> None:
        """A decode run of ``n_steps`` steps of every running request ended at ``end_s``,
        applied eagerly to the members (``sync``ed when it was planned): the cohort goes on
        from there, ``n_steps`` ticks later (offsets and due ticks unchanged: counters and
        base ticks moved alike), without the members in ``done`` (their last token was the
        run's)."""
        tick = self.tick = self.tick + n_steps
        self._restart_ends(end_s)
        for req in self.members:
            req.cohort_base = tick
        # A member whose boundary came during the run may have been grown by it (its
        # ``kv_room`` moved): enter those again; the others' ``kv_room`` did not change.
        grow_due = self._grow_due
        for t in [t for t in grow_due if t <= tick]:
            for seq, req in grow_due.pop(t):
                if req.cohort_seq == seq and req.cohort_base >= 0:
                    self._due_grow(seq, req, tick)
        for req in done:
            if req.cohort_base >= 0:
                self.leave(req)

    def leave(self, req: EngineRequest) -> None:
        """``req`` (a member) leaves with its counters written back."""
        self._write(req)
        del self.members[req]
        offsets = self._offsets
        del offsets[bisect_left(offsets, req.processed - req.cohort_base)]
        req.cohort_base = -1

    def sync(self) -> None:
        """Write back every member's counters (they stay members): for readers outside the
        three passes. (``_write`` inlined: this runs before every decode run.)"""
        tick, gaps, first = self.tick, self._gaps, self._first
        end_s = self._ends[-1]
        tops: dict[int, float] = {}  # the members that joined or synced together share it
        for req in self.members:
            base = req.cohort_base
            n = tick - base
            if n <= 0:
                continue
            req.processed += n
            req.generated += n
            req.computed_total += n
            req.last_token_s = end_s
            top = tops.get(base)
            if top is None:
                top = tops[base] = max(gaps[base + 1 - first : tick + 1 - first])
            if top > req.max_gap_s:  # noqa: PLR1730  (the eager passes' comparison)
                req.max_gap_s = top
            req.cohort_base = tick

    def dissolve(self) -> None:
        """Every member leaves, written back (the next steps are eager until some rejoin)."""
        for req in self.members:
            self._write(req)
            req.cohort_base = -1
        self.members.clear()
        self._offsets.clear()
        self._grow_due.clear()
        self._done_due.clear()

    def processed_of(self, req: EngineRequest) -> int:
        """``req.processed`` as the eager passes would hold it (``req`` a member or not)."""
        base = req.cohort_base
        return req.processed if base < 0 else req.processed + self.tick - base

    def check(self, running: Sequence[EngineRequest]) -> None:
        """Raise ``AssertionError`` unless the members are ``running``'s prefix, decoding, with
        their offsets and due entries consistent (call after ``sync``)."""
        members, n = self.members, len(self.members)
        if list(running[:n]) != list(members):
            raise AssertionError("the decode cohort is not a prefix of the running queue")
        if any(r.cohort_base >= 0 for r in running[n:]):
            raise AssertionError("a request after the decode cohort is marked as a member")
        if sorted(r.processed - r.cohort_base for r in members) != self._offsets:
            raise AssertionError("the decode cohort's KV offsets disagree with its members")
        for req in members:
            if req.state != RUNNING or not req.decoding or req.cohort_base != self.tick:
                raise AssertionError(f"{req}: not a steady decoder in step with the cohort")
            if req.last_token_s != self._ends[-1]:
                raise AssertionError(f"{req}: its last token is not the last step's")
            done_at = self.tick + req.stop_at - req.generated
            if (req.cohort_seq, req) not in self._done_due.get(done_at, ()):
                raise AssertionError(f"{req}: its last token is not due at tick {done_at}")

    # ----- internals ------------------------------------------------------------------------------
    def _reset(self, end_s: float) -> None:
        """A new cohort forms after the step that ended at ``end_s``."""
        self._restart_ends(end_s)
        self._grow_due.clear()
        self._done_due.clear()

    def _restart_ends(self, end_s: float) -> None:
        """Every member's base is the current tick, whose step ended at ``end_s``: older step
        ends are not needed any more."""
        self._first = self.tick
        self._ends = [end_s]
        self._gaps = [0.0]

    def _join(self, req: EngineRequest) -> None:
        tick = self.tick
        seq = self._seq
        self._seq = seq + 1
        req.cohort_base, req.cohort_seq = tick, seq
        self.members[req] = 1
        insort(self._offsets, req.processed - tick)
        done_at = tick + req.stop_at - req.generated
        self._done_due.setdefault(done_at, []).append((seq, req))
        self._due_grow(seq, req, tick)

    def _due_grow(self, seq: int, req: EngineRequest, earliest: int) -> None:
        """Enter the tick at whose scheduling member ``req`` (written back now) outgrows the
        blocks it holds, its ``processed`` reaching ``kv_room``; not before ``earliest`` (the
        next tick once it was grown at this one: a ``kv_room`` of 0 grows every step)."""
        at = self.tick + req.kv_room - req.processed
        self._grow_due.setdefault(max(at, earliest), []).append((seq, req))

    def _write(self, req: EngineRequest) -> None:
        """Bring member ``req``'s counters to the current tick (its eager values)."""
        base, tick = req.cohort_base, self.tick
        n = tick - base
        if n <= 0:
            return
        req.processed += n
        req.generated += n
        req.computed_total += n
        req.last_token_s = self._ends[-1]
        first = self._first
        top = max(self._gaps[base + 1 - first : tick + 1 - first])
        if top > req.max_gap_s:  # noqa: PLR1730  (the eager passes' comparison)
            req.max_gap_s = top
        req.cohort_base = tick
