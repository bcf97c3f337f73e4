"""One engine step's batch: per request, the tokens already cached and the tokens computed now.

A batch is what the latency model prices: for each scheduled request a pair
``(cache_len, new_tokens)`` — ``cache_len`` tokens whose KV is already in HBM (prefix-cache hits
and earlier chunks or decode steps), ``new_tokens`` tokens run through the model in this step.
A decode step is ``new_tokens == 1``; a prefill chunk is ``new_tokens > 1``. The pair, not an
average, is the unit: attention cost depends on each request's own context (see
``compose.py``), so a batch is never reduced to one "typical" shape.

``Batch`` pre-sorts the requests once into what the cost model needs (total tokens, decode KV
lengths as an array and grouped by octave, distinct prefill shapes with their counts), so that
``step_seconds`` does no per-request work. Build it with ``Batch.of(pairs)`` or, when the
caller already keeps arrays, ``Batch.from_arrays(cache_lens, new_tokens)``. ``of`` groups a
small batch (up to ``_SMALL`` requests, every engine step of a typical run) in plain Python and
a larger one with numpy: a numpy call costs about a microsecond however small its array, which
made the grouping of a 16-request step cost more than pricing it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np
import numpy.typing as npt

__all__ = ["Batch", "BatchLike", "DecodeRun", "as_batch", "merge_buckets", "split_groups"]

IntArray = npt.NDArray[np.int64]

#: What ``Batch.of`` takes as it is (anything else is listed first).
_SEQUENCES = (list, tuple)

#: Largest batch that ``Batch.of`` groups in plain Python rather than with numpy (measured
#: break-even on the development machine: 256 to 512 requests).
_SMALL = 256


@dataclass(frozen=True, slots=True, eq=False)
class Batch:
    """A step's requests, pre-grouped for pricing. Build with ``of`` or ``from_arrays``.

    Attributes:
        size: requests in the step.
        num_tokens: new tokens over all requests (the GEMM ``m`` dimension).
        logit_tokens: rows that go through the LM head: one per request that samples a token in
            this step (decode requests and prefills whose last chunk this is). Defaults to
            ``size`` — every request — which is what vLLM v1 computes (it discards the sample of a
            partial prefill); an engine that knows better passes the exact count.
        decode_kv_lens: for each decode request (``new_tokens == 1``), the KV length its
            attention reads, ``cache_len + 1`` (the new token's own KV is written first), int64.
        prefill_groups: distinct prefill shapes as ``(cache_len, new_tokens, count)``, sorted.
        decode_buckets: the decode KV lengths by octave ``[2^(e-1), 2^e)``, as
            ``(e, count, sum of KV lengths)`` for each non-empty octave, by increasing ``e``
            (``e`` is the KV length's ``int.bit_length()``, numpy's ``frexp`` exponent).

    Not a scheduler decision: it carries no request identities, only shapes.
    """

    size: int
    num_tokens: int
    logit_tokens: int
    decode_kv_lens: IntArray
    prefill_groups: tuple[tuple[int, int, int], ...]
    decode_buckets: tuple[tuple[int, int, int], ...]

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]], *, logit_tokens: int | None = None) -> Batch:
        """A batch from ``(cache_len, new_tokens)`` pairs."""
        seq = pairs if isinstance(pairs, _SEQUENCES) else list(pairs)
        if not seq:
            return cls(0, 0, _logits(logit_tokens, 0), np.zeros(0, dtype=np.int64), (), ())
        cache, new = zip(*seq, strict=True)
        if min(new) < 1 or min(cache) < 0:
            raise ValueError("need cache_len >= 0 and new_tokens >= 1 for every request")
        size = len(seq)
        if size > _SMALL:
            return cls.from_arrays(
                np.fromiter(cache, np.int64, size),
                np.fromiter(new, np.int64, size),
                logit_tokens=logit_tokens,
            )
        if max(new) == 1:  # all decode, the common step
            kv_lens = [c + 1 for c in cache]
            prefill: tuple[tuple[int, int, int], ...] = ()
            num_tokens = size
        else:
            kv_lens = [c + 1 for c, n in seq if n == 1]
            prefill = _prefill_groups([pair for pair in seq if pair[1] > 1])
            num_tokens = sum(new)
        return cls(
            size=size,
            num_tokens=num_tokens,
            logit_tokens=_logits(logit_tokens, size),
            decode_kv_lens=np.array(kv_lens, dtype=np.int64),
            prefill_groups=prefill,
            decode_buckets=_octaves(kv_lens),
        )

    @classmethod
    def of_split(cls, kv_lens: list[int], chunks: list[tuple[int, int]], num_tokens: int) -> Batch:
        """``of(pairs)`` from pairs already split by the caller (the engine's fast path: one
        pass over its requests instead of a list of pairs and several passes here).
        ``kv_lens`` are the decodes' ``cache_len + 1`` and ``chunks`` the other pairs, each in
        batch order; ``num_tokens`` is ``len(kv_lens)`` plus the chunks' new tokens. Not
        validated (``of`` checks ``cache_len >= 0`` and ``new_tokens >= 1``)."""
        size = len(kv_lens) + len(chunks)
        decode_kv_lens = np.array(kv_lens, dtype=np.int64)
        return cls(
            size=size,
            num_tokens=num_tokens,
            logit_tokens=size,
            decode_kv_lens=decode_kv_lens,
            prefill_groups=_prefill_groups(chunks) if chunks else (),
            decode_buckets=_octaves(kv_lens) if size <= _SMALL else _octaves_np(decode_kv_lens),
        )

    @classmethod
    def from_arrays(
        cls,
        cache_lens: npt.ArrayLike,
        new_tokens: npt.ArrayLike,
        *,
        logit_tokens: int | None = None,
    ) -> Batch:
        """A batch from two equally long integer arrays (vectorised; the engine's fast path)."""
        cache = np.asarray(cache_lens, dtype=np.int64)
        new = np.asarray(new_tokens, dtype=np.int64)
        if cache.shape != new.shape or cache.ndim != 1:
            raise ValueError("cache_lens and new_tokens must be 1-D arrays of the same length")
        size = int(new.shape[0])
        if size and (int(new.min()) < 1 or int(cache.min()) < 0):
            raise ValueError("need cache_len >= 0 and new_tokens >= 1 for every request")
        is_decode = new == 1
        prefill: Counter[tuple[int, int]] = Counter()
        for i in np.flatnonzero(~is_decode).tolist():
            prefill[int(cache[i]), int(new[i])] += 1
        kv_lens = cache[is_decode] + 1
        return cls(
            size=size,
            num_tokens=int(new.sum()),
            logit_tokens=_logits(logit_tokens, size),
            decode_kv_lens=kv_lens,
            prefill_groups=tuple(sorted((c, n, k) for (c, n), k in prefill.items())),
            decode_buckets=_octaves_np(kv_lens),
        )

    @property
    def num_decode(self) -> int:
        """Requests that compute one token in this step."""
        return int(self.decode_kv_lens.shape[0])

    @property
    def num_prefill(self) -> int:
        """Requests that compute more than one token in this step."""
        return self.size - self.num_decode

    def pairs(self) -> list[tuple[int, int]]:
        """The ``(cache_len, new_tokens)`` pairs back, prefills first (order is not kept)."""
        out = [(c, n) for c, n, k in self.prefill_groups for _ in range(k)]
        out.extend((int(kv) - 1, 1) for kv in self.decode_kv_lens)
        return out


class DecodeRun:
    """The batches of a decode run: the same requests, each one token further per step.

    ``at(k)`` is the pure-decode batch of step ``k`` (request ``i``'s KV length ``c_i + 1 + k``),
    equal in every field the cost model reads to ``Batch.of([(c + k, 1) for c in cache_lens])``
    (its KV lengths in sorted order), for a few bisections instead of a pass over the requests:
    the lengths are sorted and prefix-summed once, and an octave's requests at step ``k`` are
    the sorted run between two shifted powers of two.
    """

    __slots__ = ("_base", "_prefix", "_sorted")

    def __init__(self, cache_lens: Sequence[int]) -> None:
        ordered = sorted(cache_lens)
        if not ordered or ordered[0] < 0:
            raise ValueError("need at least one request and cache_len >= 0 for every request")
        self._sorted = ordered
        self._prefix = [0, *accumulate(ordered)]
        # ``at``'s KV lengths, built on first use: a composed model prices from ``buckets``
        # alone, and the array costs about as much as a bucketing.
        self._base: IntArray | None = None

    @property
    def size(self) -> int:
        """Requests in every step of the run."""
        return len(self._sorted)

    def buckets(self, k: int) -> list[tuple[int, int, int]]:
        """``decode_buckets`` of step ``k`` (≥ 0) of the run, as a list."""
        ordered, prefix, shift = self._sorted, self._prefix, 1 + k
        n = len(ordered)
        buckets = []
        i = 0
        while i < n:
            e = (ordered[i] + shift).bit_length()
            j = bisect_left(ordered, (1 << e) - shift, i)
            buckets.append((e, j - i, prefix[j] - prefix[i] + (j - i) * shift))
            i = j
        return buckets

    def steady(self) -> tuple[list[tuple[int, int, int]], int]:
        """``buckets(0)``, and the last step ``k`` up to which no request leaves its octave:
        ``buckets(k)`` then has the same exponents and counts, each KV sum ``count × k``
        larger (-1 when there is no such step: an empty run)."""
        buckets = self.buckets(0)
        ordered = self._sorted
        last, i = -1, 0
        for e, count, _ in buckets:
            i += count
            # The octave's longest KV after step k, ``ordered[i - 1] + 1 + k``, stays < 2^e.
            bound = (1 << e) - 2 - ordered[i - 1]
            if bound < last or last < 0:
                last = bound
        return buckets, last

    def at(self, k: int) -> Batch:
        """The batch of step ``k`` (≥ 0) of the run."""
        n = len(self._sorted)
        base = self._base
        if base is None:
            base = self._base = np.array(self._sorted, dtype=np.int64) + 1
        # size, num_tokens, logit_tokens, decode_kv_lens, prefill_groups, decode_buckets
        # (positional: this is called a few times per decode run).
        return Batch(n, n, n, base + k, (), tuple(self.buckets(k)))


#: Anything ``step_seconds`` accepts as a batch.
BatchLike = Batch | Sequence[tuple[int, int]]


def as_batch(batch: BatchLike) -> Batch:
    """``batch`` itself when it is a ``Batch``, else ``Batch.of(batch)``."""
    return batch if isinstance(batch, Batch) else Batch.of(batch)


def split_groups(
    kv_lens: list[int], chunks: list[tuple[int, int]]
) -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    """``(prefill_groups, decode_buckets)`` of ``Batch.of_split(kv_lens, chunks, ...)``, without
    the batch (a latency model that prices them directly skips the object and the array)."""
    groups = _prefill_groups(chunks) if chunks else ()
    if len(kv_lens) + len(chunks) <= _SMALL:
        return groups, _octaves(kv_lens)
    return groups, _octaves_np(np.array(kv_lens, dtype=np.int64))


def merge_buckets(
    a: Sequence[tuple[int, int, int]], b: Sequence[tuple[int, int, int]]
) -> tuple[tuple[int, int, int], ...]:
    """The decode buckets of two sets of decodes together: ``(exponent, count, kv_sum)``
    entries in increasing exponent, those of one octave added (integers: exact, so the result
    equals the buckets of the union however it was split)."""
    if not a:
        return tuple(b)
    if not b:
        return tuple(a)
    merged: dict[int, tuple[int, int]] = {e: (n, s) for e, n, s in a}
    for e, n, s in b:
        n0, s0 = merged.get(e, (0, 0))
        merged[e] = (n0 + n, s0 + s)
    return tuple((e, n, s) for e, (n, s) in sorted(merged.items()))


def _prefill_groups(chunks: list[tuple[int, int]]) -> tuple[tuple[int, int, int], ...]:
    """``Batch.prefill_groups`` of the ``(cache_len, new_tokens)`` prefill pairs ``chunks``."""
    if len(chunks) == 1:  # one prefill chunk, the usual mixed step: no counting
        ((c, n),) = chunks
        return ((c, n, 1),)
    # Sorted, equal pairs counted as they come together: a few chunks, where a ``Counter``
    # would cost more than the whole step's pricing.
    groups: list[tuple[int, int, int]] = []
    for c, n in sorted(chunks):
        if groups and groups[-1][:2] == (c, n):
            groups[-1] = (c, n, groups[-1][2] + 1)
        else:
            groups.append((c, n, 1))
    return tuple(groups)


def _octaves(kv_lens: list[int]) -> tuple[tuple[int, int, int], ...]:
    """``Batch.decode_buckets`` of positive KV lengths, in plain Python (small batches): sort,
    then one bisection per octave (a batch spans a few octaves)."""
    ordered = sorted(kv_lens)
    out = []
    i, n = 0, len(ordered)
    while i < n:
        e = ordered[i].bit_length()
        j = bisect_left(ordered, 1 << e, i)
        out.append((e, j - i, sum(ordered[i:j])))
        i = j
    return tuple(out)


def _octaves_np(kv_lens: IntArray) -> tuple[tuple[int, int, int], ...]:
    """``Batch.decode_buckets`` of positive KV lengths with numpy (large batches)."""
    if not kv_lens.shape[0]:
        return ()
    exponents = np.frexp(kv_lens)[1]  # kv in [2^(e-1), 2^e): e == kv.bit_length()
    counts = np.bincount(exponents)
    sums = np.bincount(exponents, weights=kv_lens)  # exact: integer sums below 2^53
    present = np.flatnonzero(counts)
    return tuple(
        (e, b, int(s))
        for e, b, s in zip(
            present.tolist(), counts[present].tolist(), sums[present].tolist(), strict=True
        )
    )


def _logits(logit_tokens: int | None, size: int) -> int:
    if logit_tokens is None:
        return size
    if not 0 <= logit_tokens <= size:
        raise ValueError(f"logit_tokens={logit_tokens} must lie in [0, {size}] (one per request)")
    return logit_tokens
