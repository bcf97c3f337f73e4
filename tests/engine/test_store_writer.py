"""The L3 write queue on its own: bandwidth, FIFO order, no rewrites, drops past the backlog.

Through the simulator (matchable only once landed): tests/cluster/test_l3_pool.py."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.core import Kernel
from simulator.engine.store_writer import StoreWriter
from simulator.engine.tiers import CacheTier
from simulator.kvcache.policies import POLICIES


def _writer(backlog_s: float = 10.0) -> tuple[Kernel, CacheTier, StoreWriter]:
    kernel = Kernel()
    tier = CacheTier("L3", POLICIES["lru"](1000, rng=np.random.default_rng(0)))
    # 1 ms per block (1 MB at 1 GB/s) plus 0.5 ms per batch.
    writer = StoreWriter(kernel, tier, lambda nbytes: 5e-4 + nbytes / 1e9, 1e6, backlog_s)
    return kernel, tier, writer


def test_a_batch_lands_whole_after_latency_plus_bytes() -> None:
    kernel, tier, writer = _writer()
    writer.write(range(10))
    kernel.run(until_s=0.0104)
    assert not tier.has(0)
    kernel.run(until_s=0.0106)
    assert all(tier.has(b) for b in range(10))
    assert writer.n_written == 10


def test_batches_queue_behind_each_other_and_repeats_are_not_rewritten() -> None:
    kernel, tier, writer = _writer()
    writer.write(range(10))
    writer.write(range(5, 20))  # 5..9 are queued already: only 10 new blocks
    assert writer.backlog_s() == pytest.approx(2 * 0.0105)
    kernel.run(until_s=0.015)
    assert tier.has(9)
    assert not tier.has(10)
    kernel.run()
    assert kernel.now == pytest.approx(0.021)
    assert writer.n_written == 20
    writer.write(range(20))  # all stored: nothing to do
    assert writer.backlog_s() == 0.0


def test_a_store_that_falls_behind_drops_new_copies() -> None:
    kernel, tier, writer = _writer(backlog_s=0.005)
    writer.write(range(10))  # 10.5 ms of work: the queue is now over the 5 ms backlog
    writer.write(range(10, 12))
    assert writer.n_dropped == 2
    kernel.run()
    assert not tier.has(10)
    assert writer.n_written == 10
    writer.write(range(10, 12))  # caught up: accepted again
    kernel.run()
    assert tier.has(11)
