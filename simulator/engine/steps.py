"""Step times: the latency-model seam of the engine and the decode-run fast path.

The engine times every step with ``StepTimer.step_seconds(batch)`` where ``batch`` holds one
``(cache_len, new_tokens)`` pair per scheduled request: ``cache_len`` tokens already have KV,
``new_tokens`` are processed in this step (a decode step has ``new_tokens == 1``). Latency
models in ``simulator/latency`` satisfy it, and so do the analytic models in ``analytic.py``.

Decode runs. When a batch is pure decode and nothing can change until a request finishes or an
event arrives, the engine advances ``K`` steps in one event. Step ``k`` of the run times the
batch ``[(c_i + k, 1)]``. A timer may provide ``decode_run_seconds(cache_lens, n_steps)`` to
answer for all ``k`` at once (exact); otherwise ``decode_run_durations`` evaluates
``step_seconds`` (or, cheaper, the timer's optional ``decode_step_pricer(cache_lens)(k)``,
which must give the same seconds) at both ends and bisects while the midpoint deviates from the
straight line by more than ``rel_tol`` (0.2%) — exact for models that are affine in the KV
length (the memory-bound decode attention of a roofline is), and within ``rel_tol`` per step
elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from itertools import islice
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from simulator.latency.base import LatencyModel
from simulator.latency.batch import Batch as StepShapes

if TYPE_CHECKING:
    from simulator.engine.request import EngineRequest
    from simulator.engine.scheduler import StepSplit

__all__ = [
    "DecodeRunTimer",
    "LazyDecoders",
    "StepPricer",
    "StepTimer",
    "decode_run_durations",
    "memory_bound",
    "quiescent_decode_steps",
    "split_of",
]

#: Largest relative deviation from linear interpolation accepted inside a decode run.
REL_TOL = 0.002
#: Runs this short are evaluated step by step (interpolation would not save calls).
_EXACT_STEPS = 4


@runtime_checkable
class StepTimer(Protocol):
    """Seconds one engine step takes for a batch of ``(cache_len, new_tokens)`` pairs."""

    def step_seconds(self, batch: Sequence[tuple[int, int]]) -> float:
        """Duration of one forward step (plus per-step overheads) in seconds; ``batch`` is
        non-empty."""
        ...


@runtime_checkable
class DecodeRunTimer(Protocol):
    """Optional closed form for a run of identical decode steps."""

    def decode_run_seconds(self, cache_lens: Sequence[int], n_steps: int) -> NDArray[np.float64]:
        """Durations of ``n_steps`` decode steps; step ``k`` has KV lengths ``c + k``."""
        ...


class SplitTimer(Protocol):
    """``ComposedLatencyModel.split_step_seconds``: seconds of one step from its decode KV
    lengths, prefill chunks and new tokens, plus ``n_bucketed`` decodes given as octave
    buckets ``bucketed`` (the decode cohort's)."""

    def __call__(
        self,
        kv_lens: list[int],
        chunks: list[tuple[int, int]],
        num_tokens: int,
        bucketed: Sequence[tuple[int, int, int]] = (),
        n_bucketed: int = 0,
    ) -> float:
        """Seconds of the step (``num_tokens`` counts the bucketed decodes too)."""
        ...


class StepPricer:
    """Seconds of one engine step of a ``{request: new_tokens}`` batch, from a ``StepTimer``.

    A ``LatencyModel`` (``simulator/latency``) also takes a prebuilt ``latency.Batch``: the
    pricer then splits the step's requests into decode KV lengths and prefill chunks in one
    pass (``Batch.of_split``), the same batch ``step_seconds(pairs)`` would build for several
    times the work on a large step. Any other timer gets the pairs. Only a composed model
    takes decodes as octave buckets (``takes_buckets``: the decode cohort's).
    """

    __slots__ = ("_closed_form", "_prefill_floor_s", "_run_pricer", "_shapes", "_split", "timer")

    def __init__(self, timer: StepTimer, prefill_floor_s: float = 0.0) -> None:
        self.timer = timer
        # A step with a prefill chunk lasts at least this long (EngineParams.prefill_step_floor_s).
        self._prefill_floor_s = prefill_floor_s
        # Once per instance: a runtime protocol check costs more than a step.
        self._shapes = isinstance(timer, LatencyModel)
        # A composed model prices the split directly (no ``latency.Batch`` object).
        self._split: SplitTimer | None = getattr(timer, "split_step_seconds", None)
        # ``decode_run_durations``'s look-ups, once (a missed getattr costs ~1 µs a run).
        self._closed_form: RunSeconds | None = getattr(timer, "decode_run_seconds", None)
        self._run_pricer: RunPricer | None = getattr(timer, "decode_step_pricer", None)

    @property
    def takes_buckets(self) -> bool:
        """Whether ``step`` prices a gathered split's ``bucketed`` decodes (a decode cohort
        needs it: its members' KV lengths are not listed)."""
        return self._split is not None

    def step(self, batch: Mapping[EngineRequest, int], gathered: StepSplit | None = None) -> float:
        """Seconds of one step of ``batch`` (non-empty); ``gathered`` is its split if the
        scheduler gathered it (``scheduler.StepSplit``: what ``split_of`` would return). A
        step with a prefill chunk lasts at least the prefill floor (``__init__``)."""
        seconds = self._timed(batch, gathered)
        floor = self._prefill_floor_s
        if floor and seconds < floor and self._has_prefill(batch, gathered):
            return floor
        return seconds

    @staticmethod
    def _has_prefill(batch: Mapping[EngineRequest, int], gathered: StepSplit | None) -> bool:
        """Whether the step runs a prefill chunk (a request given more than one token)."""
        if gathered is not None:
            return bool(gathered.chunks)
        return any(n > 1 for n in batch.values())

    def _timed(self, batch: Mapping[EngineRequest, int], gathered: StepSplit | None) -> float:
        """The timer's seconds of the step (``step`` without the floor)."""
        if not self._shapes:
            return self.timer.step_seconds([(req.processed, n) for req, n in batch.items()])
        if gathered is not None:
            kv_lens, chunks, chunk_tokens = gathered.kv_lens, gathered.chunks, gathered.chunk_tokens
        else:
            kv_lens, chunks, chunk_tokens = split_of(batch)
        split = self._split
        if split is not None:
            if gathered is not None and gathered.n_bucketed:
                n = gathered.n_bucketed
                tokens = len(kv_lens) + n + chunk_tokens
                return split(kv_lens, chunks, tokens, gathered.bucketed, n)
            return split(kv_lens, chunks, len(kv_lens) + chunk_tokens)
        shapes = StepShapes.of_split(kv_lens, chunks, len(kv_lens) + chunk_tokens)
        # A LatencyModel's step_seconds takes the prebuilt batch (BatchLike).
        return self.timer.step_seconds(shapes)  # type: ignore[arg-type]

    def decode_run(
        self,
        batch: Iterable[EngineRequest],
        n_steps: int,
        cache_lens: Sequence[int] | None = None,
    ) -> NDArray[np.float64]:
        """Durations of ``n_steps`` decode steps of ``batch`` (``decode_run_durations``);
        ``cache_lens``: its requests' processed tokens, in any order, where they are not
        their ``processed`` (a decode cohort's members)."""
        if cache_lens is None:
            cache_lens = [req.processed for req in batch]
        closed_form, pricer = self._closed_form, self._run_pricer
        return _run_durations(self.timer, cache_lens, n_steps, closed_form, pricer=pricer)


def split_of(batch: Mapping[EngineRequest, int]) -> tuple[list[int], list[tuple[int, int]], int]:
    """``(kv_lens, chunks, chunk_tokens)`` of ``batch``: the KV length after the step of each
    request given one token, ``(cache_len, new_tokens)`` of the others, and their tokens
    (``scheduler.StepSplit`` holds the same, gathered while scheduling)."""
    kv_lens: list[int] = []
    chunks: list[tuple[int, int]] = []
    chunk_tokens = 0
    for req, n in batch.items():
        if n == 1:
            kv_lens.append(req.processed + 1)
        else:
            chunks.append((req.processed, n))
            chunk_tokens += n
    return kv_lens, chunks, chunk_tokens


def decode_run_durations(
    timer: StepTimer, cache_lens: Sequence[int], n_steps: int, rel_tol: float = REL_TOL
) -> NDArray[np.float64]:
    """Durations (seconds) of ``n_steps`` decode steps of the requests with ``cache_lens``."""
    # getattr, not isinstance: a runtime protocol check costs more than the whole run.
    closed_form = getattr(timer, "decode_run_seconds", None)
    pricer = getattr(timer, "decode_step_pricer", None)
    return _run_durations(timer, cache_lens, n_steps, closed_form, pricer=pricer, rel_tol=rel_tol)


#: ``DecodeRunTimer.decode_run_seconds`` and a composed model's ``decode_step_pricer``.
RunSeconds = Callable[[Sequence[int], int], NDArray[np.float64]]
RunPricer = Callable[[Sequence[int]], Callable[[int], float]]


def _run_durations(
    timer: StepTimer,
    cache_lens: Sequence[int],
    n_steps: int,
    closed_form: RunSeconds | None,
    *,
    pricer: RunPricer | None,
    rel_tol: float = REL_TOL,
) -> NDArray[np.float64]:
    """``decode_run_durations`` with the timer's optional methods looked up already."""
    if closed_form is not None:
        return np.asarray(closed_form(cache_lens, n_steps), dtype=np.float64)
    if pricer is not None:
        at: Callable[[int], float] = pricer(cache_lens)
    else:
        step = timer.step_seconds

        def at(k: int) -> float:
            return step([(c + k, 1) for c in cache_lens])

    if n_steps <= _EXACT_STEPS:
        out = np.empty(n_steps, dtype=np.float64)
        for k in range(n_steps):
            out[k] = at(k)
        return out
    # ``_fill`` over the whole run, its first bisection unrolled: most runs are one straight
    # piece, built as one array (no copy into a buffer, no work stack).
    hi = n_steps - 1
    f_lo, f_hi = at(0), at(hi)
    mid = hi // 2
    f_mid = at(mid)
    if _on_line(0, hi, mid, f_lo, f_hi, f_mid, rel_tol):
        out = _linspace(n_steps, f_lo, f_hi)
        out[mid] = f_mid
        return out
    out = np.empty(n_steps, dtype=np.float64)
    _fill(out, at, [(0, mid, f_lo, f_mid), (mid, hi, f_mid, f_hi)], rel_tol=rel_tol)
    return out


class LazyDecoders(Protocol):
    """Steady decoders at the head of a batch whose counters are held elsewhere
    (``cohort.DecodeCohort``): what a decode run's length needs of them."""

    @property
    def members(self) -> Sized:
        """The decoders, the first ``len(members)`` entries of the batch."""
        ...

    def steps_left(self, k: int) -> int:
        """``k``, or fewer: the steps until the first of them produces its last token."""
        ...

    def kv_lens(self) -> list[int]:
        """Tokens each has processed (its KV length before the next step)."""
        ...


def quiescent_decode_steps(
    batch: Mapping[EngineRequest, int],
    max_steps: int,
    block_tokens: int,
    budget: int,
    lazy: LazyDecoders | None = None,
) -> int:
    """Steps a batch of every running request can repeat unchanged, at most ``max_steps``:
    1 unless every request decodes (one token each), else until the first one finishes or
    the KV growth exceeds ``budget`` free + evictable L1 blocks (``memory_bound``). The
    first ``len(lazy.members)`` requests are ``lazy``'s decoders (their counters are not
    read; ``None``: none)."""
    if max(batch.values()) != 1:  # a prefill chunk (checked in C: batches are large)
        return 1
    k, head = max_steps, 0
    if lazy is not None:
        k, head = lazy.steps_left(k), len(lazy.members)
    rest = islice(batch, head, None) if head else batch
    for req in rest:
        generated = req.generated
        # ``req.decoding``, inlined (every request of every decode run passes here).
        if not (generated > 0 and req.processed + 1 == req.prompt_len + generated):
            return 1
        left = req.stop_at - generated
        if left < k:  # noqa: PLR1730  (min() without the call)
            k = left
    if k <= 1:
        return 1
    kv_lens: Iterable[int] = (req.processed for req in islice(batch, head, None))
    if lazy is not None:
        kv_lens = [*kv_lens, *lazy.kv_lens()]
    return memory_bound(kv_lens, k, block_tokens, budget)


def memory_bound(kv_lens: Iterable[int], k: int, block_tokens: int, budget: int) -> int:
    """Largest decode-run length ≤ ``k`` whose KV growth fits in ``budget`` free + evictable
    L1 blocks, for requests that have processed ``kv_lens`` tokens (any order).

    Step 0 is already allocated; step j ≥ 1 of a request that has processed ``c`` tokens
    needs a new block when ``c + j`` is a multiple of the block size.
    """
    bt = block_tokens
    offsets: list[int] = []
    for processed in kv_lens:
        first = (-processed) % bt or bt
        if first < k:  # most requests meet no block boundary in a run: no range to add
            offsets.extend(range(first, k, bt))
    if len(offsets) <= budget:
        return k
    offsets.sort()
    return max(1, offsets[budget])


def _fill(
    out: NDArray[np.float64],
    at: Callable[[int], float],
    stack: list[tuple[int, int, float, float]],
    *,
    rel_tol: float,
) -> None:
    """Fill ``out[lo..hi]`` of every segment ``(lo, hi, at(lo), at(hi))`` of ``stack`` by
    adaptive linear interpolation (iterative bisection; a segment's values depend on it
    alone, so the order segments are taken in does not matter)."""
    while stack:
        lo, hi, f_lo, f_hi = stack.pop()
        out[lo], out[hi] = f_lo, f_hi
        if hi - lo <= 1:
            continue
        mid = (lo + hi) // 2
        f_mid = at(mid)
        if _on_line(lo, hi, mid, f_lo, f_hi, f_mid, rel_tol):
            _linspace_into(out, lo, hi, f_lo, f_hi)
            out[mid] = f_mid
        else:
            stack.append((lo, mid, f_lo, f_mid))
            stack.append((mid, hi, f_mid, f_hi))


def _on_line(  # noqa: PLR0917  (a segment and its three values, positional in the hot path)
    lo: int, hi: int, mid: int, f_lo: float, f_hi: float, f_mid: float, rel_tol: float
) -> bool:
    """Whether ``f_mid`` at ``mid`` lies within ``rel_tol`` (relative) of the straight line
    from ``(lo, f_lo)`` to ``(hi, f_hi)``: the segment is then interpolated."""
    line = f_lo + (f_hi - f_lo) * (mid - lo) / (hi - lo)
    return abs(f_mid - line) <= rel_tol * abs(f_mid)


def _linspace_into(out: NDArray[np.float64], lo: int, hi: int, f_lo: float, f_hi: float) -> None:
    """``out[lo..hi] = np.linspace(f_lo, f_hi, hi - lo + 1)``, bit for bit (``_linspace``)."""
    out[lo : hi + 1] = _linspace(hi - lo + 1, f_lo, f_hi)


def _linspace(n: int, f_lo: float, f_hi: float) -> NDArray[np.float64]:
    """``np.linspace(f_lo, f_hi, n)`` (``n`` ≥ 2), bit for bit (numpy's own steps: arange,
    times the step, plus the start, the end set exactly) without its per-call overhead, which
    dominated short decode runs."""
    div = n - 1
    y = np.arange(n, dtype=np.float64)
    delta = f_hi - f_lo
    step = delta / div
    if step == 0:  # numpy's branch for denormal steps
        y /= div
        y *= delta
    else:
        y *= step
    y += f_lo
    y[-1] = f_hi
    return y
