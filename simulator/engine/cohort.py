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
  ``commit`` at its end), or a decode run of every running request with the members at its
  head (``steps_left`` and ``kv_lens`` when it is planned, ``run_ended`` at its end: a run of
  ``n`` steps is ``n`` ticks at once), else the cohort is dissolved first (every member written
  back, the eager passes take over): a budget that does not cover every member, a step that
  preempted.
- A member's ``processed``, ``generated``, ``computed_total``, ``last_token_s`` and ``max_gap_s``
  are those at its base tick ``req.cohort_base``; ``n`` ticks later its eager values are ``+ n``
  on the three counts, the last step's end, and the maximum with the step gaps since the base
  (``_write``). They are written back at its next block boundary (before its ``grow``), its
  last token, its preemption, a dissolution, and for any reader outside the three passes
  (``sync``).

Bit-identical to the eager passes: a member's gap in a step is ``end − last_token_s`` with its
last token at the previous step's end, so it is the one subtraction ``end − previous end`` the
cohort does per step (in a decode run: its first gap, then the run's step durations, which every
request shares); maxima and integer KV sums do not depend on order; the members' grows,
finishes and gaps come in batch order (by ``cohort_seq``, their order in ``running``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from simulator.engine.request import RUNNING, EngineRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CohortHost", "DecodeCohort"]

#: Due entries: ``(cohort_seq, request)`` (the seq orders them and tells a stale entry).
_Due = list[tuple[int, EngineRequest]]

#: Ticks between two looks for the step-gap peaks no member's base needs any more (``_trim``;
#: only memory depends on it).
_TRIM_TICKS = 4096

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
        "_end_s",
        "_grow_due",
        "_offsets",
        "_peak_gaps",
        "_peak_ticks",
        "_seq",
        "_trim_tick",
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
        self._end_s = 0.0
        """End (s) of the step of the current tick: every member's last token."""
        self._peak_ticks: list[int] = []
        """The ticks whose step gap (every member's: the step's end minus the previous one's)
        is at least every later tick's, ascending; a decode run counts as its last tick, with
        its largest gap (a member's base is never inside a run)."""
        self._peak_gaps: list[float] = []
        """Their gaps (s), non-increasing: the largest gap after base tick ``b`` is the first
        of a tick above ``b`` (``_largest_gap_since``), and the first of equal ones, as
        ``max`` over the ticks' gaps would pick."""
        self._offsets: list[int] = []
        """``processed − cohort_base`` of every member, sorted: its KV length in the step
        after tick t is ``offset + t + 1``."""
        self._grow_due: dict[int, _Due] = {}
        """Tick at whose scheduling a member's next token needs a new block → entries."""
        self._done_due: dict[int, _Due] = {}
        """Tick at whose commit a member produces its last token → entries."""
        self._seq = 0
        self._trim_tick = _TRIM_TICKS
        """Tick from which ``_trim`` next looks for peaks no member needs."""

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
        gap = end_s - self._end_s  # each member's ``end_s - last_token_s``, the same float
        self.tick += 1
        self._end_s = end_s
        self._add_gap(gap)
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

    @property
    def end_s(self) -> float:
        """End (s) of the last step of the current tick: every member's last token."""
        return self._end_s

    def steps_left(self, k: int) -> int:
        """``k``, or the steps until the first member produces its last token if fewer (a
        decode run's bound, ``steps.quiescent_decode_steps``): from the due ticks."""
        done_due = self._done_due
        while done_due:
            first = min(done_due)
            if any(req.cohort_seq == seq and req.cohort_base >= 0 for seq, req in done_due[first]):
                return min(k, first - self.tick)
            del done_due[first]  # every entry stale: those members left
        return k

    def kv_lens(self) -> list[int]:
        """Every member's processed tokens now, ascending (a decode run's pricing and memory
        bound read them; the members are not written back)."""
        tick = self.tick
        return [offset + tick for offset in self._offsets]

    def run_ended(
        self,
        n_steps: int,
        end_s: float,
        top_gap_s: float,
        grow: Callable[[EngineRequest, int], None],
    ) -> list[EngineRequest]:
        """A decode run of ``n_steps`` steps of every running request, the members at its
        head, ended at ``end_s``; ``top_gap_s`` is each member's largest gap in it (its first
        gap or a step's duration). The members advance ``n_steps`` ticks; those whose KV grew
        past the blocks they hold are written back and grown (``grow(req, processed)``, as
        ``progress.apply_run`` grows every request, in batch order); those that produced their
        last token are written back and leave. Returns the latter, in batch order."""
        start = self.tick
        tick = self.tick = start + n_steps
        self._end_s = end_s
        self._add_gap(top_gap_s)
        # A member's block boundary at tick t < ``tick`` fell inside the run (its entry at
        # ``tick`` is the next scheduling's, ``take``'s); entries are never older than the run
        # (``take`` took those of its start).
        for seq, req in self._due_between(self._grow_due, start + 1, tick):
            if req.cohort_seq == seq and req.cohort_base >= 0:
                self._write(req)
                if req.processed > req.kv_room:
                    grow(req, req.processed)
                self._due_grow(seq, req, tick)
        done = []
        for seq, req in self._due_between(self._done_due, start + 1, tick + 1):
            if req.cohort_seq == seq and req.cohort_base >= 0:
                self.leave(req)
                done.append(req)
        return done

    def leave(self, req: EngineRequest) -> None:
        """``req`` (a member) leaves with its counters written back."""
        self._write(req)
        del self.members[req]
        offsets = self._offsets
        del offsets[bisect_left(offsets, req.processed - req.cohort_base)]
        req.cohort_base = -1

    def sync(self) -> None:
        """Write back every member's counters (they stay members): for readers outside the
        three passes. (``_write`` inlined: every member may be read.)"""
        tick, end_s = self.tick, self._end_s
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
                top = tops[base] = self._largest_gap_since(base)
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
            if req.last_token_s != self._end_s:
                raise AssertionError(f"{req}: its last token is not the last step's")
            done_at = self.tick + req.stop_at - req.generated
            if (req.cohort_seq, req) not in self._done_due.get(done_at, ()):
                raise AssertionError(f"{req}: its last token is not due at tick {done_at}")

    # ----- internals ------------------------------------------------------------------------------
    def _reset(self, end_s: float) -> None:
        """A new cohort forms after the step that ended at ``end_s``."""
        self._end_s = end_s
        self._peak_ticks.clear()
        self._peak_gaps.clear()
        self._grow_due.clear()
        self._done_due.clear()

    def _add_gap(self, gap_s: float) -> None:
        """Every member's gap (s) in the step (or decode run) that brought the current tick:
        the peaks it tops are dropped (amortised O(1))."""
        ticks, gaps = self._peak_ticks, self._peak_gaps
        while gaps and gaps[-1] < gap_s:
            ticks.pop()
            gaps.pop()
        ticks.append(self.tick)
        gaps.append(gap_s)
        if self.tick >= self._trim_tick:
            self._trim()

    def _largest_gap_since(self, base: int) -> float:
        """The largest step gap (s) of the ticks after ``base`` up to the current one (at
        least one), the first of equal ones."""
        return self._peak_gaps[bisect_right(self._peak_ticks, base)]

    def _trim(self) -> None:
        """Drop the peaks at or before every member's base (memory only: gaps that shrink
        tick after tick add one each; O(members) once per ``_TRIM_TICKS`` ticks)."""
        self._trim_tick = self.tick + _TRIM_TICKS
        oldest = min((req.cohort_base for req in self.members), default=self.tick)
        drop = bisect_right(self._peak_ticks, oldest)
        del self._peak_ticks[:drop]
        del self._peak_gaps[:drop]

    @staticmethod
    def _due_between(due: dict[int, _Due], first: int, end: int) -> _Due:
        """The entries of ``due`` at ticks ``first`` to ``end − 1``, removed, in batch order
        (stale ones included): by tick where the run is shorter than the entries, by entry
        otherwise."""
        ticks = range(first, end) if end - first < len(due) else list(due)
        entries = [entry for t in ticks if first <= t < end for entry in due.pop(t, ())]
        entries.sort()
        return entries

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
        req.last_token_s = self._end_s
        top = self._largest_gap_since(base)
        if top > req.max_gap_s:  # noqa: PLR1730  (the eager passes' comparison)
            req.max_gap_s = top
        req.cohort_base = tick
