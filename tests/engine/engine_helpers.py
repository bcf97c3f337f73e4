"""Helpers for the engine tests: a tiny catalog, request builders, a hand-wired instance."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hardware.catalog import shipped_catalog
from hardware.schema import Catalog, GpuSpec, ModelSpec, StorageTierSpec
from simulator.build import Pool, build_pool
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.engine import (
    CacheTier,
    EngineInstance,
    EngineParams,
    KVManager,
    LoadLink,
    PrefetchChannel,
)
from simulator.engine.steps import StepTimer
from simulator.kvcache.policies import POLICIES
from simulator.records import Recorder, RequestRecord
from simulator.workload.request import TraceRequest

BT = 16  # tokens per block in the hand-made workloads


def tiny_catalog() -> Catalog:
    """A catalog with one small model, one GPU, DRAM and an SSD (numbers are made up)."""
    gpu = GpuSpec(
        name="toy_gpu",
        vendor="other",
        dense_tflops={"bf16": 100.0, "fp8": 200.0},
        hbm_gib=16.0,
        hbm_tb_per_s=1.0,
        gpu_link="nvlink",
        gpu_link_gb_per_s=100.0,
        pcie_gb_per_s=32.0,
        nic_gb_per_s=25.0,
        gpus_per_node=8,
        usd_per_gpu_hour=2.0,
    )
    model = ModelSpec(
        name="toy/Toy-1B",
        num_layers=2,
        hidden_size=256,
        num_attention_heads=4,
        num_kv_heads=2,
        head_dim=64,
        ffn_size=512,
        vocab_size=1000,
        max_context_tokens=100_000,
    )
    big = ModelSpec(
        name="toy/Huge",
        num_layers=80,
        hidden_size=16384,
        num_attention_heads=128,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=53248,
        vocab_size=128000,
        max_context_tokens=100_000,
    )
    dram = StorageTierSpec(
        name="dram",
        kind="dram",
        read_gb_per_s=20.0,
        write_gb_per_s=20.0,
        latency_us=5.0,
        capacity_gib_min=0.0,
        capacity_gib_max=1024.0,
        default_capacity_gib=64.0,
        usd_per_gib_month=3.0,
    )
    ssd = StorageTierSpec(
        name="ssd",
        kind="ssd",
        read_gb_per_s=5.0,
        write_gb_per_s=3.0,
        latency_us=80.0,
        capacity_gib_min=1.0,
        capacity_gib_max=4096.0,
        default_capacity_gib=100.0,
        usd_per_gib_month=0.1,
        shared=True,
    )
    return Catalog(
        gpus={"toy_gpu": gpu},
        storage={"dram": dram, "ssd": ssd},
        models={"toy/toy-1b": model, "toy/huge": big},
    )


def request(
    index: int, time_s: float, prompt: int, output: int, blocks: Sequence[int] | None = None
) -> TraceRequest:
    """A request whose blocks default to fresh ids 1000·(index+1) + k."""
    n = -(-prompt // BT)
    ids = tuple(blocks) if blocks is not None else tuple(1000 * (index + 1) + k for k in range(n))
    return TraceRequest(index, time_s, prompt, output, ids)


@dataclass
class Rig:
    """One hand-wired instance with LRU tiers, for tests that need exact control."""

    kernel: Kernel
    recorder: Recorder
    instance: EngineInstance

    def arrive(self, *requests: TraceRequest) -> None:
        for req in requests:
            self.kernel.at(req.timestamp_s, functools.partial(self.instance.on_arrival, req))

    def run(self) -> dict[int, RequestRecord]:
        self.kernel.run()
        return {r.index: r for r in self.recorder.records}


def make_rig(
    timer: StepTimer,
    *,
    l1: int,
    l2: int = 0,
    l3: int = 0,
    l3_blocks: Sequence[int] = (),
    load_s_per_block: float = 0.0,
    prefetch_s_per_block: float = 0.0,
    write_through: bool = True,
    check: bool = True,
    **params: Any,
) -> Rig:
    """An instance with the given tier capacities (blocks) and per-block transfer times."""
    kernel, recorder = Kernel(), Recorder()
    rng = np.random.default_rng(0)

    def tier(name: str, cap: int) -> CacheTier:
        return CacheTier(name, POLICIES["lru"](cap, rng=rng))

    store = tier("L3", l3) if l3 else None
    for block in l3_blocks:
        assert store is not None
        store.insert(block)
    kv = KVManager(
        tier("L1", l1),
        tier("L2", l2) if l2 else None,
        store,
        block_tokens=BT,
        write_through=write_through,
    )

    def per_block(s: float) -> Callable[[float], float]:
        return lambda nbytes: nbytes * s

    link = LoadLink(per_block(load_s_per_block), 1.0)
    channel = PrefetchChannel(kernel, per_block(prefetch_s_per_block), 1.0) if store else None
    defaults: dict[str, Any] = {
        "block_tokens": BT,
        "scheduler": "chunked",
        "max_batched_tokens": 4096,
        "max_running": 64,
        "chunk_tokens": 4096,
    }
    defaults.update(params)
    engine_params = EngineParams(**defaults)
    instance = EngineInstance(
        0,
        kernel,
        engine_params,
        timer=timer,
        kv=kv,
        load_link=link,
        prefetch=channel,
        recorder=recorder,
        check_invariants=check,
    )
    return Rig(kernel, recorder, instance)


def built_pool(**fields: Any) -> Pool:
    """``build_pool`` of a Qwen3-8B H100 ``ServingConfig`` with ``fields`` (presets applied)."""
    config = ServingConfig(model="Qwen/Qwen3-8B", gpu="h100_sxm", **fields)
    pool = build_pool(
        config,
        shipped_catalog(),
        block_tokens=16,
        kernel=Kernel(),
        recorder=Recorder(),
        seed=np.random.SeedSequence(0),
    )
    assert isinstance(pool, Pool)
    return pool


def built_params(**fields: Any) -> EngineParams:
    """The engine parameters ``built_pool`` resolves for ``fields``."""
    return built_pool(**fields).params
