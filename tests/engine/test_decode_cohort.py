"""The decode cohort (``engine/cohort.py``) against the eager passes it replaces.

A member's counters are held lazily and written back at its block boundary (before its
``grow``), its last token, its preemption, a dissolution, a decode run and any outside reader;
with ``check_invariants`` every step writes them all back and checks the cohort. Every result
(records, pooled ITL arrays, diagnostics, summary, queue samples) must be bit-identical to a run
without a cohort, and each kind of write-back point must have been reached by the cases.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.engine import instance as instance_module
from simulator.engine.cohort import CohortHost, DecodeCohort
from simulator.engine.request import EngineRequest
from simulator.latency.batch import Batch, merge_buckets, split_groups
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

BT = 16  # tokens per block: many block boundaries, so members grow often

#: Cases: a config's overrides, the number of requests, the arrival window (s).
CASES: dict[str, tuple[dict[str, Any], int, float]] = {
    "chunked_preempting": ({"kv_capacity_tokens": 12_000}, 160, 2.0),
    "chunked_roomy": ({}, 160, 4.0),
    "decode_first": ({"scheduler": "decode_first", "kv_capacity_tokens": 12_000}, 160, 2.0),
    "swap": ({"preemption": "swap", "kv_capacity_tokens": 12_000, "l2_dram_gib": 4.0}, 160, 2.0),
    "least_load": ({"instances": 2, "router": "least_load"}, 200, 2.0),
    "frontend": ({"frontend_us": (2000.0, 1.0, 300.0), "kv_capacity_tokens": 12_000}, 160, 2.0),
    "sglang_overlap": (
        {"backend": "sglang", "scheduler": "chunked", "kv_admission": "on_demand"},
        160,
        2.0,
    ),
    "trtllm": ({"backend": "trtllm", "kv_capacity_tokens": 20_000}, 160, 2.0),
}


def _workload(seed: int, n: int, window_s: float) -> list[TraceRequest]:
    """Short and long prompts, 1–400 output tokens, some shared prefixes, a burst of
    arrivals in ``[0, window_s)``: prefills keep queueing behind the running decodes."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, window_s, n))
    out = []
    for i, t in enumerate(times):
        prompt = int(rng.choice([20, 200, 700, 2000]))
        root = int(rng.integers(3))
        blocks = tuple(
            (root * 1_000 + k) if k < 4 else (100_000 * (i + 1) + k)
            for k in range(-(-prompt // BT))
        )
        out.append(TraceRequest(i, float(t), prompt, int(rng.integers(1, 400)), blocks))
    return out


def _config(overrides: dict[str, Any]) -> ServingConfig:
    base: dict[str, Any] = {
        "model": "Qwen/Qwen3-8B",
        "gpu": "h100_sxm",
        "latency_model": "roofline",
        "max_batched_tokens": 1024,
        "max_running_requests": 64,
        "chunk_tokens": 512,
    }
    return ServingConfig.model_validate({**base, **overrides})


def _digest(result: SimResult) -> str:
    h = hashlib.sha256()
    h.update(repr((result.feasible, result.reason)).encode())
    for record in result.records:
        h.update(repr(record).encode())
    h.update(repr(sorted(result.diagnostics.items())).encode())
    if result.summary is not None:
        h.update(repr(result.summary.to_dict()).encode())
    for array in result.itl_s or ():
        h.update(np.asarray(array).tobytes())
    samples = result.queue_samples
    if samples is not None:
        for name in ("time_s", "waiting", "prefetch", "running", "swapped", "weight"):
            h.update(getattr(samples, name).tobytes())
    return h.hexdigest()


class _Counting(DecodeCohort):
    """A cohort that counts its write-back points (class-wide, per test)."""

    seen: Counter[str] = Counter()  # noqa: RUF012  (reset before each counted run)

    def __init__(self) -> None:
        super().__init__(min_members=1)  # form with any decoder: more write-back points

    def take(self, host: CohortHost, budget: int) -> dict[EngineRequest, int] | None:
        due = self._grow_due.get(self.tick, ())
        batch = super().take(host, budget)
        self.seen["take" if batch is not None else "take_dissolved"] += 1
        self.seen["grow_due"] += len(due)
        return batch

    def commit(self, end_s: float) -> tuple[float, list[EngineRequest]]:
        gap, done = super().commit(end_s)
        self.seen["members_stepped"] += len(self.members) + len(done)
        self.seen["last_token"] += len(done)
        return gap, done

    def run_ended(
        self, n_steps: int, end_s: float, top_gap_s: float, grow: Any
    ) -> list[EngineRequest]:
        self.seen["decode_run"] += 1
        done = super().run_ended(n_steps, end_s, top_gap_s, grow)
        self.seen["last_token"] += len(done)
        return done

    def leave(self, req: EngineRequest) -> None:
        super().leave(req)
        # Not its last token (``commit``, ``run_ended``): its preemption.
        self.seen["leave" if req.generated >= req.stop_at else "preempted"] += 1

    def dissolve(self) -> None:
        self.seen["dissolve_members"] += len(self.members)
        super().dissolve()

    def _join(self, req: EngineRequest) -> None:
        self.seen["join"] += 1
        super()._join(req)


def _run(name: str, *, cohort: bool, check: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    overrides, n, window = CASES[name]
    factory: Any = _Counting if cohort else (lambda: None)
    monkeypatch.setattr(instance_module, "DecodeCohort", factory)
    source = OpenLoopSource(_workload(7, n, window), BT)
    result = simulate(_config(overrides), source, seed=0, check_invariants=check)
    assert result.summary is not None
    assert result.summary.n_requests > 0
    return _digest(result)


@pytest.mark.parametrize("name", list(CASES))
def test_cohort_results_equal_the_eager_passes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _Counting.seen = Counter()
    eager = _run(name, cohort=False, check=False, monkeypatch=monkeypatch)
    lazy = _run(name, cohort=True, check=False, monkeypatch=monkeypatch)
    assert _Counting.seen["join"] > 0, "the cohort never formed: the case tests nothing"
    # Checked: every step writes every member back (``sync``) and checks the cohort.
    _Counting.seen = Counter()
    checked = _run(name, cohort=True, check=True, monkeypatch=monkeypatch)
    assert eager == lazy == checked


def test_every_write_back_point_was_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the cases, each kind of write-back happened. Counted here, over a run of every
    case, rather than from the equality tests: a parallel run (pytest-xdist) may give those
    to another worker, whose counts this one never sees."""
    seen: Counter[str] = Counter()
    for name in CASES:
        _Counting.seen = Counter()
        _run(name, cohort=True, check=False, monkeypatch=monkeypatch)
        seen.update(_Counting.seen)
    for kind in ("grow_due", "last_token", "decode_run", "preempted", "dissolve_members"):
        assert seen[kind] > 0, f"no {kind} write-back in any case: {dict(seen)}"
    assert seen["members_stepped"] > 10 * seen["join"], "members should step many times"


def _member(index: int, prompt: int, generated: int) -> EngineRequest:
    trace = TraceRequest(index, 0.0, prompt, 50, (index,))
    req = EngineRequest(trace, BT, 0, 0.0)
    req.state = 2  # RUNNING
    req.processed = prompt + generated - 1
    req.generated = generated
    req.computed_total = req.processed
    req.kv_room = 10_000
    req.first_token_s = 0.5
    req.last_token_s = 1.0
    return req


class _Host:
    preempted: list[int] = []  # noqa: RUF012

    def grow(self, req: EngineRequest, n_tokens: int) -> bool:
        raise AssertionError(f"{req} reached a block boundary ({n_tokens} tokens)")


def test_written_back_counters_equal_eager_steps() -> None:
    """A member's counters after ``n`` cohort steps (written back by ``sync``, ``leave``, the
    last token) equal ``n`` eager decode steps, gaps and maxima included."""
    lazy = [_member(i, 100 + 37 * i, 1 + i) for i in range(5)]
    eager = [_member(i, 100 + 37 * i, 1 + i) for i in range(5)]
    cohort = DecodeCohort(min_members=1)
    cohort.extend(lazy, 1.0)
    assert list(cohort.members) == lazy
    ends = [1.0 + 0.01 * k + 0.003 * (k % 3) for k in range(1, 12)]
    for k, end_s in enumerate(ends):
        batch = cohort.take(_Host(), 1_000)
        assert batch is not None
        assert list(batch) == list(cohort.members)
        expected = split_groups([e.processed + 1 for e in eager if e.generated < e.stop_at], [])
        assert tuple(cohort.buckets()) == expected[1]
        _, done = cohort.commit(end_s)
        for req in eager:
            if req.generated >= req.stop_at:
                continue
            req.processed += 1
            req.computed_total += 1
            req.generated += 1
            req.max_gap_s = max(req.max_gap_s, end_s - req.last_token_s)
            req.last_token_s = end_s
        assert not done
        if k == 4:
            cohort.leave(lazy[2])  # e.g. preempted
            eager[2].stop_at = 0  # stops stepping
        if k == 7:
            cohort.sync()
    cohort.dissolve()
    for a, b in zip(lazy, eager, strict=True):
        fields = ("processed", "generated", "computed_total", "last_token_s", "max_gap_s")
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]


def test_a_cohort_forms_only_with_enough_decoders() -> None:
    few = [_member(i, 100, 1) for i in range(3)]
    cohort = DecodeCohort(min_members=4)
    cohort.extend(few, 1.0)
    assert not cohort.members
    many = [*few, _member(3, 100, 1)]
    cohort.extend(many, 1.0)
    assert list(cohort.members) == many


def test_merged_buckets_equal_the_union() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        a = [int(x) for x in rng.integers(1, 5_000, size=int(rng.integers(0, 40)))]
        b = [int(x) for x in rng.integers(1, 5_000, size=int(rng.integers(0, 40)))]
        union = Batch.of([(c - 1, 1) for c in a + b]).decode_buckets if a + b else ()
        merged = merge_buckets(split_groups(a, [])[1], split_groups(b, [])[1])
        assert merged == tuple(union)


def test_largest_gap_since_a_base_is_max_over_the_ticks_after_it() -> None:
    """The peaks the cohort keeps answer ``max(gaps of ticks base+1 .. now)`` for every base,
    bit for bit: the first of equal gaps (0.0 before -0.0 keeps its sign), as ``max`` picks."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        cohort = DecodeCohort(min_members=1)
        gaps = [0.0]  # tick 0: the cohort forms (no gap read)
        for _ in range(int(rng.integers(1, 60))):
            gap = float(rng.choice([0.0, -0.0, 0.25, 0.5, float(rng.random())]))
            cohort.tick += 1
            cohort._add_gap(gap)
            gaps.append(gap)
        for base in range(cohort.tick):
            expected = max(gaps[base + 1 :])
            got = cohort._largest_gap_since(base)
            assert (got, math.copysign(1.0, got)) == (expected, math.copysign(1.0, expected))
