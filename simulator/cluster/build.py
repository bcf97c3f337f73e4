"""From a ``ServingConfig`` to a runnable pool: catalog lookups, preset defaults, memory fit,
latency model, links, KV tiers and instances.

Resolution order for every engine knob: the config's value, else the backend preset's. A
configuration that cannot run (the weights do not fit, the GPU lacks the precision, TP beyond
a node, no KV block fits) yields ``Infeasible(reason)``; unknown catalog names and malformed
specs raise ``InputError`` (user mistakes, not design points).

Capacity conversions (documented choice): the engine's unit of prefix reuse is the workload's
block (``block_tokens``, 512 for Mooncake). L1 holds ``kv_tokens // block_tokens`` blocks, where
``kv_tokens`` comes from the memory fit (in the preset's KV-block granularity) or from
``kv_capacity_tokens``. L2 and L3 hold ``GiB × 2**30 // bytes_per_block`` blocks with
``bytes_per_block`` = the model's KV bytes per token (each KV head once) × ``block_tokens``.
L2→L1 loads move each GPU's shard over its own PCIe link in parallel (per-GPU bytes); L3→L2
reads move the whole block over the host's path to the tier.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from hardware.schema import Catalog, GpuSpec, ModelSpec, StorageTierSpec
from simulator.cluster.router import ROUTERS, Router
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.engine.analytic import parse_analytic
from simulator.engine.instance import EngineInstance
from simulator.engine.kvmanager import KVManager
from simulator.engine.params import EngineParams
from simulator.engine.steps import StepTimer
from simulator.engine.tiers import CacheTier
from simulator.engine.transfer import LoadLink, PrefetchChannel, TransferTime
from simulator.kvcache.policies import POLICIES
from simulator.latency import (
    Deployment,
    Link,
    kv_bytes,
    link_to_tier,
    load_preset,
    make_latency_model,
    memory_fit,
    storage_link,
    transfer_seconds,
)
from simulator.metrics import Cost, Recorder
from slo.inputfile import InputError

__all__ = ["Infeasible", "Pool", "build_pool", "deployment_cost"]

_GIB = 2**30
#: Catalog name of the host-DRAM storage tier (L2).
DRAM_TIER = "dram"


@dataclass(frozen=True, slots=True)
class Infeasible:
    """Why a configuration cannot run (one sentence)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Pool:
    """A built pool: instances sharing a kernel, a recorder and (optionally) an L3 store."""

    instances: tuple[EngineInstance, ...]
    router: Router
    params: EngineParams
    l1_blocks: int
    l2_blocks: int
    l3_blocks: int
    memory: str
    """The memory-fit sentence (or the override that replaced it)."""


@dataclass(frozen=True, slots=True)
class _Hardware:
    model: ModelSpec
    gpu: GpuSpec
    dram: StorageTierSpec | None
    l3: StorageTierSpec | None
    l3_gib: float


def _hardware(config: ServingConfig, catalog: Catalog) -> _Hardware:
    dram = catalog.storage_tier(DRAM_TIER) if config.l2_dram_gib > 0 else None
    l3 = catalog.storage_tier(config.l3_tier) if config.l3_tier else None
    l3_gib = (config.l3_capacity_gib or l3.default_capacity_gib) if l3 else 0.0
    return _Hardware(catalog.model(config.model), catalog.gpu(config.gpu), dram, l3, l3_gib)


def deployment_cost(config: ServingConfig, catalog: Catalog) -> Cost:
    """USD per hour of the configuration: GPUs, L2 DRAM per instance, the L3 store."""
    hw = _hardware(config, catalog)
    gpus = config.instances * config.tp
    dram = hw.dram.usd_per_hour(config.l2_dram_gib) * config.instances if hw.dram else 0.0
    l3 = hw.l3.usd_per_hour(hw.l3_gib) if hw.l3 else 0.0
    return Cost(gpus, gpus * hw.gpu.usd_per_gpu_hour, dram, l3)


def _seconds(link: Link) -> TransferTime:
    return lambda nbytes: transfer_seconds(nbytes, link)


def build_pool(
    config: ServingConfig,
    catalog: Catalog,
    *,
    block_tokens: int,
    kernel: Kernel,
    recorder: Recorder,
    seed: np.random.SeedSequence,
    check_invariants: bool = False,
) -> Pool | Infeasible:
    """Build the instances of ``config`` (see the module docstring); nothing runs yet."""
    hw = _hardware(config, catalog)
    preset = load_preset(config.backend)
    try:
        deployment = Deployment(
            hw.model,
            hw.gpu,
            tp=config.tp,
            ep=config.ep,
            weight_precision=config.weight_precision,
            kv_precision=config.kv_precision,
        )
    except InputError as err:
        return Infeasible(str(err))
    max_batched = config.max_batched_tokens or preset.max_batched_tokens
    max_running = config.max_running_requests or preset.max_running_requests
    # Every running request needs one token of the step's budget.
    max_running = min(max_running, max_batched)
    params = EngineParams(
        block_tokens=block_tokens,
        scheduler=config.scheduler or preset.scheduler,
        max_batched_tokens=max_batched,
        max_running=max_running,
        chunk_tokens=min(config.chunk_tokens or preset.chunked_prefill_tokens, max_batched),
        preemption=config.preemption,
        prefetch_policy=config.prefetch_policy,
        prefetch_timeout_base_s=config.prefetch_timeout_base_s,
        prefetch_timeout_per_1k_tokens_s=config.prefetch_timeout_per_1k_tokens_s,
        prefetch_threshold_tokens=config.l3_prefetch_threshold_tokens,
        max_context_tokens=hw.model.max_context_tokens,
    )
    if config.kv_capacity_tokens is not None:
        kv_tokens, memory = config.kv_capacity_tokens, "KV capacity set by kv_capacity_tokens"
    else:
        mem_params = dataclasses.replace(
            preset.memory_params(config.tp),
            max_batched_tokens=max_batched,
            max_running_requests=max_running,
        )
        if config.hbm_utilization is not None:
            mem_params = dataclasses.replace(mem_params, hbm_utilization=config.hbm_utilization)
        fit = memory_fit(deployment, mem_params)
        if not fit.fits:
            return Infeasible(fit.reason)
        kv_tokens, memory = fit.kv_tokens, fit.reason
    l1_blocks = kv_tokens // block_tokens
    if l1_blocks < 1:
        return Infeasible(
            f"the KV cache holds {kv_tokens} tokens per instance, less than one "
            f"{block_tokens}-token block of the workload"
        )
    timer: StepTimer = parse_analytic(config.latency_model) or make_latency_model(
        config.latency_model, deployment, params=preset.compose_params()
    )
    block_bytes = kv_bytes(hw.model, block_tokens, config.kv_precision)
    gpu_block_bytes = deployment.kv_bytes_per_token_per_gpu() * block_tokens
    l2_blocks = int(config.l2_dram_gib * _GIB // block_bytes) if hw.dram else 0
    l3_blocks = int(hw.l3_gib * _GIB // block_bytes) if hw.l3 else 0
    seeds = iter(seed.spawn(2 * config.instances + 2))

    def tier(name: str, policy: str, capacity: int) -> CacheTier:
        rng = np.random.default_rng(next(seeds))
        return CacheTier(name, POLICIES[policy](capacity, rng=rng))

    l3 = tier("L3", config.l3_policy, l3_blocks) if l3_blocks > 0 else None
    router = ROUTERS[config.router](config.instances, np.random.default_rng(next(seeds)))
    load_link = link_to_tier(hw.gpu, hw.dram, "read") if hw.dram else None
    instances = []
    for index in range(config.instances):
        l1 = tier(f"L1[{index}]", config.l1_policy, l1_blocks)
        l2 = tier(f"L2[{index}]", config.l2_policy, l2_blocks) if l2_blocks > 0 else None
        kv = KVManager(
            l1,
            l2,
            l3,
            block_tokens=block_tokens,
            write_through=config.write_policy == "write_through",
        )
        link = LoadLink(_seconds(load_link), gpu_block_bytes) if load_link else LoadLink(_never, 1)
        channel = None
        if l3 is not None and hw.l3 is not None:
            channel = PrefetchChannel(kernel, _seconds(storage_link(hw.l3, "read")), block_bytes)
        instances.append(
            EngineInstance(
                index,
                kernel,
                params,
                timer=timer,
                kv=kv,
                load_link=link,
                prefetch=channel,
                recorder=recorder,
                check_invariants=check_invariants,
            )
        )
    return Pool(tuple(instances), router, params, l1_blocks, l2_blocks, l3_blocks, memory)


def _never(nbytes: float) -> float:
    # Without L2 nothing is ever loaded into L1; a load of zero blocks takes no time.
    del nbytes
    return 0.0
