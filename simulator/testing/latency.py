"""The contract every latency model of ``LATENCY_MODELS`` satisfies (``latency/base.py``).

A check takes ``build``, a function that returns a fresh model for one deployment (so that
determinism can be checked against a rebuilt one), and raises ``AssertionError`` naming what
broke: the protocol; an empty batch costs nothing; steps positive and finite (< 60 s);
non-decreasing in a request's new tokens and in its context; deterministic and independent of
the order batches are priced in; the breakdown sums to the step; transfers priced as bytes over
the link plus its latency; two decodes in different KV buckets cost no less than in one.

``RTOL`` is the slack for "non-decreasing": float rounding of cached sums.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from simulator.latency import LATENCY_MODELS, Batch, LatencyModel
from simulator.latency.transfer import Link
from simulator.testing._check import fail_unless

__all__ = ["CHECKS", "RTOL", "Build", "check_latency_model", "nondecreasing"]

#: Relative slack for "non-decreasing" (float rounding of cached sums).
RTOL = 1e-9

Build = Callable[[], LatencyModel]


def nondecreasing(values: list[float]) -> bool:
    """Each value at least the one before it, within ``RTOL``."""
    return all(b >= a * (1 - RTOL) for a, b in itertools.pairwise(values))


def satisfies_protocol(build: Build) -> None:
    """An instance of ``LatencyModel`` whose name starts with its registry key."""
    model = build()
    fail_unless(isinstance(model, LatencyModel), f"{model!r}: not a LatencyModel")
    fail_unless(
        model.name.split(":")[0] in LATENCY_MODELS, f"{model.name}: name not in the registry"
    )


def empty_batch_costs_nothing(build: Build) -> None:
    """An empty batch (list or ``Batch``) and its breakdown are 0 s."""
    model = build()
    fail_unless(model.step_seconds([]) == 0.0, f"{model.name}: an empty list costs time")
    fail_unless(model.step_seconds(Batch.of([])) == 0.0, f"{model.name}: an empty Batch costs")
    fail_unless(model.breakdown([]).total == 0.0, f"{model.name}: an empty breakdown costs")


def positive_and_finite(build: Build) -> None:
    """A decode, 64 decodes at 5 k context, an 8 k prefill, a long-context chunk: 0 < s < 60."""
    model = build()
    for batch in ([(0, 1)], [(5000, 1)] * 64, [(0, 8192)], [(100_000, 16)]):
        seconds = model.step_seconds(batch)
        fail_unless(0 < seconds < 60, f"{model.name}: {seconds} s for {batch[:2]}…")


def monotone_in_new_tokens(build: Build) -> None:
    """More new tokens never cost less; 8,192 cost more than twice 16.

    With nothing cached the count starts at 2: ``(0, 1)`` reads as a decode step over an
    empty context, which no engine runs (a request decodes after its prompt), and for MLA
    models a decode takes the absorbed path while a prefill decompresses the latents, whose
    fixed costs differ by a few launches per layer (``compose.py``)."""
    model = build()
    for cache_len in (0, 4096, 65536):
        counts = (1, 2, 3, 16, 128, 1024, 8192) if cache_len else (2, 3, 16, 128, 1024, 8192)
        values = [model.step_seconds([(cache_len, n)]) for n in counts]
        fail_unless(nondecreasing(values), f"{model.name}: falls with new tokens at {cache_len}")
    fail_unless(
        model.step_seconds([(0, 8192)]) > 2 * model.step_seconds([(0, 16)]),
        f"{model.name}: an 8,192-token prefill costs no more than twice 16 tokens",
    )


def monotone_in_context(build: Build) -> None:
    """A longer context never costs less (block edges included), and 128 k costs more than 0."""
    model = build()
    for new in (1, 512):
        lens = (0, 1, 15, 16, 17, 1000, 4095, 4096, 4097, 32768, 131071)
        values = [model.step_seconds([(c, new)]) for c in lens]
        fail_unless(nondecreasing(values), f"{model.name}: falls with context ({new} new)")
        fail_unless(values[-1] > values[0], f"{model.name}: context is free ({new} new)")


def deterministic_and_order_independent(build: Build) -> None:
    """The same batches cost the same in any pricing order and on a rebuilt model."""
    model = build()
    batches = [[(c, 1) for c in range(50, 5000, 50)], [(0, 2000), (300, 1)], [(9, 1)]]
    first = [model.step_seconds(b) for b in batches]
    again = [model.step_seconds(b) for b in reversed(batches)][::-1]
    fail_unless(first == again, f"{model.name}: the pricing order changes the price")
    fresh = build()
    fail_unless(
        [fresh.step_seconds(b) for b in batches] == first, f"{model.name}: a rebuild differs"
    )


def breakdown_matches_step(build: Build) -> None:
    """The operator breakdown is non-negative and sums to the step time."""
    model = build()
    batch = [(c, 1) for c in range(1, 3000, 7)] + [(1024, 4096), (0, 33)]
    parts = model.breakdown(batch)
    fail_unless(
        math.isclose(parts.total, model.step_seconds(batch), rel_tol=1e-9),
        f"{model.name}: breakdown {parts.total} s vs step {model.step_seconds(batch)} s",
    )
    fail_unless(all(v >= 0 for v in parts.seconds.values()), f"{model.name}: a negative part")


def transfer_seconds_are_bytes_over_the_link(build: Build) -> None:
    """0 bytes take 0 s; 1 GB over 10 GB/s with 10 µs latency takes 0.1 s + 10 µs."""
    model = build()
    link = Link("test", gb_per_s=10.0, latency_s=1e-5)
    fail_unless(model.transfer_seconds(0, link) == 0.0, f"{model.name}: 0 bytes take time")
    fail_unless(
        math.isclose(model.transfer_seconds(1e9, link), 0.1 + 1e-5, rel_tol=1e-6),
        f"{model.name}: 1 GB at 10 GB/s is not 0.1 s + latency",
    )


def decodes_split_across_kv_buckets_cost_no_less(build: Build) -> None:
    """Two decodes at KV 1 and 0 (two buckets) cost no less than two at KV 0 (one bucket):
    merging their launches must not also credit away one request's work."""
    model = build()
    same = model.step_seconds([(0, 1), (0, 1)])
    split = model.step_seconds([(1, 1), (0, 1)])
    fail_unless(split >= same * (1 - RTOL), f"{model.name}: {split} s < {same} s")


#: Every check of the contract by name.
CHECKS: dict[str, Callable[[Build], None]] = {
    check.__name__: check
    for check in (
        satisfies_protocol,
        empty_batch_costs_nothing,
        positive_and_finite,
        monotone_in_new_tokens,
        monotone_in_context,
        deterministic_and_order_independent,
        breakdown_matches_step,
        transfer_seconds_are_bytes_over_the_link,
        decodes_split_across_kv_buckets_cost_no_less,
    )
}


def check_latency_model(build: Build) -> None:
    """Run every check of the contract on the models ``build`` returns."""
    for check in CHECKS.values():
        check(build)
