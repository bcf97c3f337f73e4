"""Synthetic workloads: open-loop arrivals, multi-turn sessions, closed-loop users.

Every generator draws from the ``numpy.random.Generator`` it is given and nothing else, so a
seed fixes the workload. Requests carry real block ids so prefix reuse happens in the engine:

- a **system prompt** (``SystemPrompts``) is a fixed token sequence shared by many requests;
  its full blocks have the same ids in every request that starts with it;
- a **session** (``TokenSequence``) grows turn by turn: turn k's prompt is turn k-1's prompt,
  its answer and the new user text, so the full blocks of the previous context keep their ids
  and only the changed tail gets fresh ones (a partial block's content changes when text is
  appended, so it never keeps its id);
- everything else gets fresh ids from one ``BlockIds`` counter (dense, from 1).

``block_tokens`` is the block size of the ids; the engine uses it as its unit of reuse.

Shapes: ``open_loop`` (independent requests at a Poisson or gamma rate), ``sessions``
(sessions arrive at a rate; turns follow after think times), ``ClosedLoopSource`` (N users,
each sending its next request when the previous one finishes, after an optional think time —
event-driven: the engine calls ``on_finish``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from simulator.workload.rate_profile import TimeWarp
from simulator.workload.request import TraceRequest

__all__ = [
    "BlockIds",
    "ClosedLoopSource",
    "Distribution",
    "Empirical",
    "Exponential",
    "Fixed",
    "GammaArrivals",
    "LogNormal",
    "PoissonArrivals",
    "SessionShape",
    "SystemPrompts",
    "TokenSequence",
    "Uniform",
    "iter_sessions",
    "open_loop",
    "sessions",
]


# ----- distributions ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Fixed:
    """Always ``value``."""

    value: float

    def sample(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``n`` draws."""
        del rng
        return np.full(n, float(self.value))


@dataclass(frozen=True, slots=True)
class Uniform:
    """Uniform on [``low``, ``high``]."""

    low: float
    high: float

    def sample(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``n`` draws."""
        return rng.uniform(self.low, self.high, n)


@dataclass(frozen=True, slots=True)
class LogNormal:
    """Log-normal with the given ``median`` and log-space ``sigma``, clipped to [low, high]."""

    median: float
    sigma: float
    low: float = 0.0
    high: float = math.inf

    def sample(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``n`` draws."""
        return np.clip(rng.lognormal(math.log(self.median), self.sigma, n), self.low, self.high)


@dataclass(frozen=True, slots=True)
class Exponential:
    """Exponential with the given ``mean``."""

    mean: float

    def sample(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``n`` draws."""
        return rng.exponential(self.mean, n)


@dataclass(frozen=True, slots=True)
class Empirical:
    """Uniform resampling (with replacement) of observed ``values`` (e.g. a trace's lengths)."""

    values: tuple[float, ...]

    def sample(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``n`` draws."""
        return rng.choice(np.asarray(self.values, dtype=np.float64), n)


Distribution = Fixed | Uniform | LogNormal | Exponential | Empirical


def _tokens(dist: Distribution, rng: np.random.Generator, n: int) -> list[int]:
    """``n`` token counts (rounded, at least 1)."""
    return _rounded(dist.sample(rng, n))


# ----- arrivals --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PoissonArrivals:
    """Exponential inter-arrival gaps at ``rate_per_s`` (on the process's own clock; ``warp``
    maps it to real time when the load follows a rate profile, ``rate_profile.py``)."""

    rate_per_s: float
    warp: TimeWarp | None = None

    def gaps(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``n`` gaps in seconds."""
        return rng.exponential(1.0 / self.rate_per_s, n)


@dataclass(frozen=True, slots=True)
class GammaArrivals:
    """Gamma inter-arrival gaps at ``rate_per_s`` with coefficient of variation ``cv``
    (cv = 1 is Poisson; cv > 1 is burstier)."""

    rate_per_s: float
    cv: float
    warp: TimeWarp | None = None

    def gaps(self, rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        """``n`` gaps in seconds."""
        shape = 1.0 / self.cv**2
        return rng.gamma(shape, 1.0 / (self.rate_per_s * shape), n)


Arrivals = PoissonArrivals | GammaArrivals


def arrival_time(arrivals: Arrivals, clock_s: float) -> float:
    """The real time of an arrival at ``clock_s`` on the process's own clock."""
    return clock_s if arrivals.warp is None else arrivals.warp(clock_s)


# ----- block ids -------------------------------------------------------------------------------
class BlockIds:
    """A counter of fresh block ids (1, 2, 3, …): one per workload."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 1

    def fresh(self, n: int) -> list[int]:
        """``n`` ids never handed out before."""
        start = self._next
        self._next = start + n
        return list(range(start, start + n))


@dataclass(slots=True)
class TokenSequence:
    """A growing token sequence (a conversation's context) and the ids of its blocks."""

    block_tokens: int
    full: list[int] = field(default_factory=list)
    """Ids of the full blocks, prefix order."""
    tail: int = 0
    """Tokens in the trailing partial block (0 = none)."""

    @property
    def tokens(self) -> int:
        """Length of the sequence."""
        return len(self.full) * self.block_tokens + self.tail

    def extend(self, n_tokens: int, ids: BlockIds) -> None:
        """Append ``n_tokens`` tokens; blocks that fill up get fresh ids."""
        total = self.tail + n_tokens
        self.full.extend(ids.fresh(total // self.block_tokens))
        self.tail = total % self.block_tokens

    def prompt_blocks(self, ids: BlockIds) -> tuple[int, ...]:
        """Block ids of the sequence as a prompt: the partial tail gets a fresh id."""
        return (*self.full, *ids.fresh(1)) if self.tail else tuple(self.full)

    def copy(self) -> TokenSequence:
        """An independent sequence with the same blocks (a session starting from a prompt)."""
        return TokenSequence(self.block_tokens, list(self.full), self.tail)


class SystemPrompts:
    """``count`` shared prompts of ``tokens`` tokens each; a request picks one uniformly."""

    def __init__(self, count: int, tokens: int, block_tokens: int, ids: BlockIds) -> None:
        if count < 1 or tokens < 0:
            raise ValueError("system prompts need count >= 1 and tokens >= 0")
        self.prompts = []
        for _ in range(count):
            seq = TokenSequence(block_tokens)
            seq.extend(tokens, ids)
            self.prompts.append(seq)

    def pick(self, rng: np.random.Generator) -> TokenSequence:
        """A copy of one prompt, drawn uniformly."""
        return self.prompts[int(rng.integers(len(self.prompts)))].copy()


# ----- open loop -------------------------------------------------------------------------------
def open_loop(
    *,
    n_requests: int,
    arrivals: Arrivals,
    input_tokens: Distribution,
    output_tokens: Distribution,
    block_tokens: int,
    rng: np.random.Generator,
    system_prompts: tuple[int, int] | None = None,
) -> Iterator[TraceRequest]:
    """Independent requests; the first arrives at its first gap after 0. Generated as a
    stream: memory is a chunk of draws, whatever ``n_requests`` is.

    With ``system_prompts = (count, tokens)`` every prompt is a shared system prompt followed by
    ``input_tokens`` tokens of its own.
    """
    ids = BlockIds()
    prompts = SystemPrompts(*system_prompts, block_tokens, ids) if system_prompts else None
    # A stream, in the order of draws an eager generator makes (all gaps, then all inputs, then
    # all outputs, then one system-prompt pick per request): each stream starts from the state
    # one draw of ``n_requests`` would have left ``rng`` in, so a seed gives the same workload
    # while only a chunk of each stream is held (``STREAM_CHUNK``).
    streams = []
    for draw, chunk_safe in (
        (arrivals.gaps, True),
        (input_tokens.sample, _chunk_safe(input_tokens)),
        (output_tokens.sample, _chunk_safe(output_tokens)),
    ):
        streams.append(_draws(draw, _fork(rng), n_requests, chunk_safe))
        for _ in _draws(draw, rng, n_requests, chunk_safe):  # move ``rng`` past this stream
            pass
    gaps, inputs, outputs = streams
    clock = 0.0
    for index, (gap, prompt, output) in enumerate(
        zip(_floats(gaps), _counts(inputs), _counts(outputs), strict=True)
    ):
        clock += gap  # the float64 running sum one ``np.cumsum`` over all gaps computes
        seq = prompts.pick(rng) if prompts else TokenSequence(block_tokens)
        seq.extend(prompt, ids)
        time_s = arrival_time(arrivals, clock)
        yield TraceRequest(index, time_s, seq.tokens, output, seq.prompt_blocks(ids))


#: Draws per chunk of a streamed synthetic workload.
STREAM_CHUNK = 65_536


def _chunk_safe(dist: Distribution) -> bool:
    """Whether ``dist`` draws each value in turn, so chunks concatenate to one draw of all
    (``Empirical`` draws bounded integers, which numpy buffers within one call)."""
    return not isinstance(dist, Empirical)


def _fork(rng: np.random.Generator) -> np.random.Generator:
    """An independent generator in ``rng``'s current state."""
    bits = type(rng.bit_generator)()
    bits.state = rng.bit_generator.state
    return np.random.Generator(bits)


def _draws(
    draw: Callable[[np.random.Generator, int], NDArray[np.float64]],
    rng: np.random.Generator,
    n: int,
    chunk_safe: bool,
) -> Iterator[NDArray[np.float64]]:
    """``draw(rng, n)`` in chunks of ``STREAM_CHUNK`` (one chunk unless ``chunk_safe``)."""
    step = STREAM_CHUNK if chunk_safe else max(n, 1)
    for start in range(0, n, step):
        yield np.array(draw(rng, min(step, n - start)), dtype=np.float64)


def _floats(chunks: Iterator[NDArray[np.float64]]) -> Iterator[float]:
    for chunk in chunks:
        yield from chunk.tolist()


def _counts(chunks: Iterator[NDArray[np.float64]]) -> Iterator[int]:
    for chunk in chunks:
        yield from _rounded(chunk)


def _rounded(values: NDArray[np.float64]) -> list[int]:
    """Token counts from draws (rounded, at least 1), as ``_tokens``."""
    return [int(x) for x in np.maximum(1, np.rint(values))]


@dataclass(frozen=True, slots=True)
class SessionShape:
    """What a multi-turn conversation looks like."""

    turns: Distribution
    """Turns per session (rounded, at least 1)."""
    user_tokens: Distribution
    """New user tokens per turn."""
    output_tokens: Distribution
    """Answer tokens per turn (they join the next turn's prompt)."""
    think_time_s: Distribution
    """Seconds between a turn's answer (closed loop) or arrival (open loop) and the next."""
    system_prompts: tuple[int, int] | None = None
    """``(count, tokens)`` shared system prompts a session starts with; None = none."""


class _Conversation:
    """One session's state: its context, turns left, id (shared by its requests)."""

    __slots__ = ("context", "session_id", "turn", "turns_left")

    def __init__(self, context: TokenSequence, session_id: int, turns: int) -> None:
        self.context = context
        self.session_id = session_id
        self.turn = 0
        self.turns_left = turns


class _SessionFactory:
    """Draws sessions and their turns from a ``SessionShape`` (shared by open/closed loop)."""

    def __init__(self, shape: SessionShape, block_tokens: int, rng: np.random.Generator):
        self.shape = shape
        self.rng = rng
        self.ids = BlockIds()
        self.block_tokens = block_tokens
        prompts = shape.system_prompts
        self.prompts = SystemPrompts(*prompts, block_tokens, self.ids) if prompts else None
        self.n_sessions = 0

    def new(self) -> _Conversation:
        context = self.prompts.pick(self.rng) if self.prompts else TokenSequence(self.block_tokens)
        turns = _tokens(self.shape.turns, self.rng, 1)[0]
        self.n_sessions += 1
        return _Conversation(context, self.n_sessions - 1, turns)

    def turn(self, conv: _Conversation, index: int, time_s: float) -> TraceRequest:
        """The conversation's next request; its answer is appended to the context."""
        rng, ids = self.rng, self.ids
        conv.context.extend(_tokens(self.shape.user_tokens, rng, 1)[0], ids)
        output = _tokens(self.shape.output_tokens, rng, 1)[0]
        request = TraceRequest(
            index,
            time_s,
            conv.context.tokens,
            output,
            conv.context.prompt_blocks(ids),
            session_id=conv.session_id,
            turn=conv.turn + 1,
        )
        conv.context.extend(output, ids)
        conv.turn += 1
        conv.turns_left -= 1
        return request

    def think(self) -> float:
        return max(0.0, float(self.shape.think_time_s.sample(self.rng, 1)[0]))


def sessions(
    *,
    n_sessions: int,
    arrivals: Arrivals,
    shape: SessionShape,
    block_tokens: int,
    rng: np.random.Generator,
) -> list[TraceRequest]:
    """Open-loop conversations: sessions start at ``arrivals``; turn k+1 arrives a think time
    after turn k *arrived* (open loop does not wait for answers). Sorted by arrival time."""
    return list(
        iter_sessions(
            n_sessions=n_sessions,
            arrivals=arrivals,
            shape=shape,
            block_tokens=block_tokens,
            rng=rng,
        )
    )


def iter_sessions(
    *,
    n_sessions: int,
    arrivals: Arrivals,
    shape: SessionShape,
    block_tokens: int,
    rng: np.random.Generator,
) -> Iterator[TraceRequest]:
    """``sessions`` as a stream: memory is the sessions in progress and a chunk of start
    times, not the workload.

    The draws are those of generating eagerly — every start gap, then every session's opening
    (system prompt, turn count) in start order, then the turns in arrival order — each kind
    from the generator state the eager order reaches it in, so a seed gives the same requests
    and leaves ``rng`` where the eager generator left it.
    """
    factory = _SessionFactory(shape, block_tokens, rng)
    gaps = _draws(arrivals.gaps, _fork(rng), n_sessions, chunk_safe=True)
    for _ in _draws(arrivals.gaps, rng, n_sessions, chunk_safe=True):
        pass
    openings = _SessionFactory(shape, block_tokens, _fork(rng))
    openings.ids, openings.prompts = factory.ids, factory.prompts
    for _ in range(n_sessions):  # move ``rng`` past the openings (they draw nothing else)
        factory.new()
    starts = _floats(gaps)
    heap: list[tuple[float, int, _Conversation]] = []
    pending = n_sessions
    next_start = next(starts, 0.0)  # a running sum, as one cumsum over the gaps
    start_s = arrival_time(arrivals, next_start)  # real time (the warp is monotone)
    index = 0
    while heap or pending:
        # Open sessions in start order while the next one starts before the next turn due:
        # keys (time, session id) are unique and grow along the starts, so the heap's top is
        # what it would be with every session queued at once.
        while pending and (not heap or (start_s, openings.n_sessions) < heap[0][:2]):
            conv = openings.new()
            heapq.heappush(heap, (start_s, conv.session_id, conv))
            pending -= 1
            if pending:
                next_start += next(starts)
                start_s = arrival_time(arrivals, next_start)
        time_s, sid, conv = heapq.heappop(heap)
        yield factory.turn(conv, index, time_s)
        index += 1
        if conv.turns_left > 0:
            heapq.heappush(heap, (time_s + factory.think(), sid, conv))


class ClosedLoopSource:
    """``users`` concurrent users, ``n_requests`` requests in all (a ``RequestSource``).

    Each user sends a request at time ``user × ramp_s``; when it finishes (or is rejected) the
    user thinks for a ``think_time_s`` draw and sends the next, until ``n_requests`` have been
    issued. Users hold multi-turn sessions (a new one when the last ends); a session of one turn
    with no system prompt is a stream of independent requests.
    """

    def __init__(
        self,
        *,
        users: int,
        n_requests: int,
        shape: SessionShape,
        block_tokens: int,
        rng: np.random.Generator,
        ramp_s: float = 0.0,
    ) -> None:
        if users < 1 or n_requests < 0 or ramp_s < 0:
            raise ValueError("closed loop needs users >= 1, n_requests >= 0, ramp_s >= 0")
        self.block_tokens = block_tokens
        self.users = users
        self.n_requests = n_requests
        self.ramp_s = ramp_s
        self._factory = _SessionFactory(shape, block_tokens, rng)
        self._issued = 0
        self._user_of: dict[int, int] = {}
        self._conv: dict[int, _Conversation] = {}

    def start(self) -> Iterator[TraceRequest]:
        """The first request of every user (fewer if ``n_requests`` < users)."""
        for user in range(min(self.users, self.n_requests)):
            yield self._next_for(user, user * self.ramp_s)

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        """The finishing request's user sends its next one after a think time."""
        user = self._user_of.pop(request.index, None)
        if user is None or self._issued >= self.n_requests:
            return None
        return self._next_for(user, now_s + self._factory.think())

    def _next_for(self, user: int, time_s: float) -> TraceRequest:
        conv = self._conv.get(user)
        if conv is None or conv.turns_left <= 0:
            conv = self._conv[user] = self._factory.new()
        request = self._factory.turn(conv, self._issued, time_s)
        self._user_of[request.index] = user
        self._issued += 1
        return request
