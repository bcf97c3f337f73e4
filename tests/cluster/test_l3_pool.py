"""The shared L3 store: reuse across instances, pool bandwidth contention, per-server NVMe."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from hardware.catalog import shipped_catalog
from simulator.api import SimResult, simulate
from simulator.build import Pool, build_pool
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.cost import deployment_cost
from simulator.engine.pool_channel import PoolPort, SharedPoolChannel
from simulator.engine.transfer import PrefetchChannel, Transfer
from simulator.records import Recorder
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

BT = 16
PREFIX_BLOCKS = 250  # 4000 tokens


# ----- the shared channel on its own -------------------------------------------------------
def _channel() -> tuple[Kernel, SharedPoolChannel]:
    kernel = Kernel()
    # 1 ms per block alone, 1 ms latency per read.
    return kernel, SharedPoolChannel(kernel, bytes_per_s=1e9, latency_s=1e-3, bytes_per_block=1e6)


def test_two_simultaneous_reads_take_twice_as_long_as_one() -> None:
    kernel, channel = _channel()
    done: dict[str, float] = {}

    def finish(name: str) -> Any:
        return lambda _transfer: done.setdefault(name, kernel.now)

    channel.submit(range(100), "solo", finish("solo"))
    kernel.run()
    start = kernel.now
    channel.submit(range(100), "a", finish("a"))
    channel.submit(range(100), "b", finish("b"))
    kernel.run()
    assert done["solo"] == pytest.approx(0.101)
    assert done["a"] - start == pytest.approx(0.201)
    assert done["b"] - start == pytest.approx(0.201)
    assert channel.n_blocks_moved == 300


def test_cancelling_a_read_speeds_up_the_others_and_counts_what_arrived() -> None:
    kernel, channel = _channel()
    port_a, port_b = channel.port(), channel.port()
    done: list[float] = []
    port_a.submit(range(100), "a", lambda _t: done.append(kernel.now))
    b = port_b.submit(range(100), "b", lambda _t: pytest.fail("b was cancelled"))
    cut: list[int] = []
    kernel.at(0.051, lambda: cut.append(port_b.cancel(b)))
    kernel.run()
    # Shared for 50 ms at 0.5 GB/s each: 25 blocks each; then a's other 75 alone.
    assert cut == [25]
    assert done == [pytest.approx(0.051 + 0.075)]
    assert (port_a.n_blocks_moved, port_b.n_blocks_moved) == (100, 25)
    assert channel.n_blocks_moved == 125


def test_a_read_in_its_latency_has_delivered_nothing() -> None:
    kernel, channel = _channel()
    transfer: Transfer = channel.submit(range(10), None, lambda _t: None)
    kernel.run(until_s=0.0005)
    assert channel.arrived(transfer) == 0
    assert channel.cancel(transfer) == 0
    kernel.run()
    assert channel.n_blocks_moved == 0


# ----- through the simulator ---------------------------------------------------------------
def _config(l3_tier: str, **extra: Any) -> ServingConfig:
    data: dict[str, Any] = {
        "model": "Qwen/Qwen3-8B",
        "gpu": "h100_sxm",
        "instances": 2,
        "router": "round_robin",
        "latency_model": "constant:0.01",
        "kv_capacity_tokens": 65536,
        "chunk_tokens": 8192,
        "max_batched_tokens": 8192,
        "l2_dram_gib": 4.0,
        "l3_tier": l3_tier,
        "prefetch_policy": "wait_complete",
    }
    data.update(extra)
    return ServingConfig(**data)


def _prefix(tag: int) -> tuple[int, ...]:
    return tuple(tag * 1000 + k for k in range(PREFIX_BLOCKS))


def _workload(readers: Sequence[int]) -> list[TraceRequest]:
    """Writers of prefixes X (instance 0) and Y (instance 1) at 0 s; at 1 s a reader of Y
    (index 2) and then one of X (index 3), each with one new block. Round robin sends reader
    2 to instance 0 and reader 3 to instance 1: each reads what the other instance wrote."""
    x, y = _prefix(1), _prefix(2)
    requests = [
        TraceRequest(0, 0.0, PREFIX_BLOCKS * BT, 2, x),
        TraceRequest(1, 0.0, PREFIX_BLOCKS * BT, 2, y),
    ]
    readers_blocks = {2: (*y, 9_000_001), 3: (*x, 9_000_002)}
    for index in readers:
        requests.append(
            TraceRequest(index, 1.0, (PREFIX_BLOCKS + 1) * BT, 2, readers_blocks[index])
        )
    return requests


def _run(config: ServingConfig, requests: list[TraceRequest]) -> SimResult:
    result = simulate(config, OpenLoopSource(requests, BT), seed=0, check_invariants=True)
    assert result.feasible, result.reason
    return result


def test_prefix_written_by_one_instance_is_prefetched_by_another() -> None:
    result = _run(_config("pool_16tib"), _workload([2]))
    reader = next(r for r in result.records if r.index == 2)
    writer = next(r for r in result.records if r.index == 1)
    assert (writer.instance, reader.instance) == (1, 0)
    assert reader.cached_l3_tokens == PREFIX_BLOCKS * BT
    assert reader.cached_l1_tokens == reader.cached_l2_tokens == 0
    assert reader.prefetch_queue_s > 0
    assert result.diagnostics["l3_to_l2_blocks"] == PREFIX_BLOCKS


def _prefetch_s(result: SimResult, index: int) -> float:
    return next(r.prefetch_queue_s for r in result.records if r.index == index)


def test_pool_bandwidth_is_shared_two_prefetches_take_twice_as_long() -> None:
    config = _config("pool_16tib")
    solo = _prefetch_s(_run(config, _workload([2])), 2)
    both = _run(config, _workload([2, 3]))
    tier = shipped_catalog().storage_tier("pool_16tib")
    block_bytes = shipped_catalog().model("Qwen/Qwen3-8B").kv_bytes_per_token("bf16") * BT
    alone = tier.latency_us * 1e-6 + PREFIX_BLOCKS * block_bytes / (tier.read_gb_per_s * 1e9)
    assert solo == pytest.approx(alone, rel=1e-9)
    for index in (2, 3):
        assert _prefetch_s(both, index) == pytest.approx(
            tier.latency_us * 1e-6 + 2 * (alone - tier.latency_us * 1e-6), rel=1e-9
        )
    assert both.diagnostics["l3_to_l2_blocks"] == 2 * PREFIX_BLOCKS


def test_nvme_reads_of_one_server_queue_behind_each_other() -> None:
    """Both instances (TP1) sit on one 8-GPU server: one drive, one FIFO, one store."""
    config = _config("nvme_4tib")
    solo = _prefetch_s(_run(config, _workload([2])), 2)
    both = _run(config, _workload([2, 3]))
    assert sorted((_prefetch_s(both, 2), _prefetch_s(both, 3))) == pytest.approx(
        [solo, 2 * solo], rel=1e-9
    )


def test_nvme_of_another_server_holds_nothing_of_this_one() -> None:
    """TP8 instances fill a server each: a prefix one wrote is not on the other's drive."""
    result = _run(_config("nvme_4tib", tp=8), _workload([2]))
    reader = next(r for r in result.records if r.index == 2)
    assert reader.instance == 0
    assert reader.cached_l3_tokens == 0
    shared = _run(_config("pool_16tib", tp=8), _workload([2]))
    assert next(r for r in shared.records if r.index == 2).cached_l3_tokens == PREFIX_BLOCKS * BT


def _pool(config: ServingConfig) -> Pool:
    pool = build_pool(
        config,
        shipped_catalog(),
        block_tokens=BT,
        kernel=Kernel(),
        recorder=Recorder(),
        seed=np.random.SeedSequence(0),
    )
    assert isinstance(pool, Pool)
    return pool


@pytest.mark.parametrize("policy", ["lru", "fifo", "s3fifo"])
def test_one_l3_store_with_the_chosen_policy_for_every_instance(policy: str) -> None:
    pool = _pool(_config("pool_16tib", instances=3, l3_policy=policy))
    stores = {id(inst.kv.l3) for inst in pool.instances}
    assert len(stores) == 1
    store = pool.instances[0].kv.l3
    assert store is not None
    assert store.policy.name == policy
    ports = [inst.prefetcher.channel if inst.prefetcher else None for inst in pool.instances]
    assert all(isinstance(port, PoolPort) for port in ports)
    assert len({id(port.channel) for port in ports if isinstance(port, PoolPort)}) == 1


def test_nvme_stores_and_channels_are_per_server_and_pd_pools_share_the_pool() -> None:
    one_server = _pool(_config("nvme_4tib", instances=2))
    assert len({id(inst.kv.l3) for inst in one_server.instances}) == 1
    ports = [inst.prefetcher.channel if inst.prefetcher else None for inst in one_server.instances]
    assert all(isinstance(p, PoolPort) and isinstance(p.channel, PrefetchChannel) for p in ports)
    assert len({id(p.channel) for p in ports if isinstance(p, PoolPort)}) == 1
    # 3 instances of TP4 on 8-GPU servers: two on the first server, one on the second.
    two_servers = _pool(_config("nvme_4tib", instances=3, tp=4))
    stores = [id(inst.kv.l3) for inst in two_servers.instances]
    assert stores[0] == stores[1] != stores[2]
    pd = _pool(
        _config(
            "pool_16tib",
            instances=1,
            pd_mode="disaggregated",
            prefill_instances=2,
            decode_instances=1,
        )
    )
    assert len({id(inst.kv.l3) for inst in pd.instances}) == 1


@pytest.mark.parametrize(
    ("tier", "instances", "tp", "servers"),
    [
        ("nvme_4tib", 2, 1, 1),  # both on one 8-GPU server
        ("nvme_4tib", 3, 4, 2),
        ("nvme_4tib", 4, 8, 4),
        ("nvme_4tib", 2, 16, 4),  # an instance across two servers pays both drives
        ("pool_16tib", 4, 8, 1),  # one pool for the deployment
    ],
)
def test_l3_is_paid_per_server_unless_shared(
    tier: str, instances: int, tp: int, servers: int
) -> None:
    catalog = shipped_catalog()
    config = _config(tier, instances=instances, tp=tp, allow_multi_node=tp > 8)
    cost = deployment_cost(config, catalog)
    spec = catalog.storage_tier(tier)
    assert cost.l3_usd_per_hour == pytest.approx(
        spec.usd_per_hour(spec.default_capacity_gib) * servers
    )


# ----- L3 writes (engine/store_writer.py) ---------------------------------------------------
def _write_seconds() -> float:
    catalog = shipped_catalog()
    tier = catalog.storage_tier("nvme_4tib")
    block_bytes = catalog.model("Qwen/Qwen3-8B").kv_bytes_per_token("bf16") * BT
    return tier.latency_us * 1e-6 + PREFIX_BLOCKS * block_bytes / (tier.write_gb_per_s * 1e9)


def _reader_l3_tokens(reader_at_s: float, **extra: Any) -> tuple[int, dict[str, float]]:
    """A writer of a 250-block prefix on instance 0 at 0 s; a reader of it (instance 1, same
    server, so only the L3 drive can serve it) at ``reader_at_s``."""
    prefix = _prefix(1)
    requests = [
        TraceRequest(0, 0.0, PREFIX_BLOCKS * BT, 2, prefix),
        TraceRequest(1, reader_at_s, (PREFIX_BLOCKS + 1) * BT, 2, (*prefix, 9_000_001)),
    ]
    result = _run(_config("nvme_4tib", **extra), requests)
    reader = next(r for r in result.records if r.index == 1)
    assert reader.instance == 1
    return reader.cached_l3_tokens, result.diagnostics


def test_a_prefix_is_read_from_l3_only_after_its_write_landed() -> None:
    write_s = _write_seconds()
    assert write_s > 0.1  # 250 blocks of 16 Qwen3-8B tokens at the drive's 3.5 GB/s
    # The writer's prompt is computed in one 10 ms step, then the copy takes write_s.
    early, _ = _reader_l3_tokens(0.01 + 0.5 * write_s)
    late, diagnostics = _reader_l3_tokens(0.01 + 1.5 * write_s)
    assert early == 0
    assert late == PREFIX_BLOCKS * BT
    assert diagnostics["l3_blocks_written"] >= PREFIX_BLOCKS
    assert diagnostics["l3_writes_dropped"] == 0


def test_with_no_backlog_allowed_copies_behind_a_busy_queue_are_dropped() -> None:
    _, diagnostics = _reader_l3_tokens(0.005, l3_write_backlog_s=0.0)
    # The reader's own new block arrives while the writer's copy is still queued.
    assert diagnostics["l3_writes_dropped"] >= 1
