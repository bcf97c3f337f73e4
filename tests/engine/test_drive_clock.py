"""A local L3 drive reads and writes through one device: prefetch reads and copies queue."""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import built_pool

from simulator.core import Kernel
from simulator.engine.pool_channel import PoolPort, SharedPoolChannel
from simulator.engine.store_writer import StoreWriter
from simulator.engine.tiers import CacheTier
from simulator.engine.transfer import DriveClock, PrefetchChannel, Transfer
from simulator.kvcache.policies import POLICIES

MB = 1e6


def _drive() -> tuple[Kernel, CacheTier, StoreWriter, PrefetchChannel]:
    """A drive writing 1 MB blocks in 2 ms and reading them in 1 ms, one device clock."""
    kernel, clock = Kernel(), DriveClock()
    tier = CacheTier("L3", POLICIES["lru"](100, rng=np.random.default_rng(0)))
    writer = StoreWriter(kernel, tier, lambda b: b / 0.5e9, MB, 10.0, clock=clock)
    channel = PrefetchChannel(kernel, lambda b: b / 1e9, MB, clock)
    return kernel, tier, writer, channel


def test_the_clock_hands_out_device_time_in_order_and_takes_back_only_the_last_slot() -> None:
    clock = DriveClock()
    assert clock.reserve(1.0, 2.0) == (1.0, 3.0)
    assert clock.reserve(1.5, 1.0) == (3.0, 4.0)  # waits for the first
    clock.release(3.0, 2.0)  # not the last slot: nothing changes
    assert clock.free_at == 4.0
    clock.release(4.0, 3.5)
    assert clock.free_at == 3.5


def test_a_read_waits_for_the_copies_handed_to_the_drive_before_it() -> None:
    kernel, _, writer, channel = _drive()
    writer.write(range(5))  # 10 ms of writing
    done: list[float] = []
    transfer = channel.submit([100, 101], None, lambda _t: done.append(kernel.now))
    assert transfer.start_s == pytest.approx(0.010)
    kernel.run(until_s=0.009)
    assert channel.arrived(transfer) == 0
    kernel.run()
    assert done == [pytest.approx(0.012)]  # 10 ms of writes, then 2 ms of reading


def test_copies_wait_for_the_reads_ahead_and_count_them_as_backlog() -> None:
    kernel, tier, writer, channel = _drive()
    channel.submit(list(range(100, 110)), None, lambda _t: None)  # 10 ms of reading
    writer.write([1])
    assert writer.backlog_s() == pytest.approx(0.012)
    kernel.run(until_s=0.0115)
    assert not tier.has(1)
    kernel.run()
    assert tier.has(1)


def test_a_cancelled_last_read_gives_the_drive_back() -> None:
    kernel, _, writer, channel = _drive()
    transfer: Transfer = channel.submit(list(range(100, 110)), None, lambda _t: None)
    kernel.at(0.004, lambda: None)  # the clock reads 4 ms
    kernel.run(until_s=0.004)
    assert channel.cancel(transfer) == 4
    assert writer.backlog_s() == 0.0
    writer.write([1])
    assert writer.backlog_s() == pytest.approx(0.002)


def _l3_plumbing(tier: str) -> tuple[StoreWriter, object]:
    pool = built_pool(instances=2, l2_dram_gib=64, l3_tier=tier)
    prefetcher = pool.instances[0].prefetcher
    assert prefetcher is not None
    port = prefetcher.channel
    assert isinstance(port, PoolPort)
    return pool.l3_writers[0], port.channel


def test_a_drive_shares_its_clock_and_a_pool_does_not() -> None:
    writer, channel = _l3_plumbing("nvme_4tib")
    assert isinstance(channel, PrefetchChannel)
    assert channel.clock is writer.clock
    writer, channel = _l3_plumbing("pool_16tib")
    assert isinstance(channel, SharedPoolChannel)
    assert writer.clock is not None  # its own write direction only
