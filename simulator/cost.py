"""What a deployment is made of and pays for: its pools, catalog hardware, L3 stores and cost.

L3 placement: a ``shared`` tier (a remote pool) is one store for the whole deployment, its read
bandwidth one resource shared fairly by all instances (``engine/pool_channel.py``), paid once.
Any other tier is a server's local drive: instances are packed onto servers of
``gpus_per_node`` GPUs (``place_on_nodes``), each server has its own store of the tier's
capacity, reached by its instances through one first-come-first-served channel at the tier's
rate, and the tier is paid per server (an instance spanning several servers pays for each).
Each store has one write queue at the tier's write rate (``engine/store_writer.py``): a copy
is matchable once it has landed, and dropped when the queue is ``l3_write_backlog_s`` behind.

Cost (USD per hour): the GPUs of every pool (``tp × pp`` per instance) at the catalog's
per-GPU price, host DRAM (L2) per instance, and the L3 tier per store (``l3_stores``). One
function, ``deployment_cost``, used by ``simulate()`` and by the optimizer's budget check
before a trial spends a simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

from hardware.schema import Catalog, GpuSpec, ModelSpec, StorageTierSpec
from simulator.cluster.pd import PoolSpec, place_on_nodes
from simulator.config import ServingConfig
from simulator.metrics import Cost
from simulator.pool_config import POOLS

__all__ = [
    "DRAM_TIER",
    "Hardware",
    "L3Stores",
    "deployment_cost",
    "hardware",
    "l3_stores",
    "pool_specs",
]

#: Catalog name of the host-DRAM storage tier (L2).
DRAM_TIER = "dram"


@dataclass(frozen=True, slots=True)
class Hardware:
    """The catalog entries a configuration runs on (its first pool's GPU)."""

    model: ModelSpec
    gpu: GpuSpec
    dram: StorageTierSpec | None
    l3: StorageTierSpec | None
    l3_gib: float


def hardware(config: ServingConfig, catalog: Catalog) -> Hardware:
    dram = catalog.storage_tier(DRAM_TIER) if config.l2_dram_gib > 0 else None
    l3 = catalog.storage_tier(config.l3_tier) if config.l3_tier else None
    l3_gib = (config.l3_capacity_gib or l3.default_capacity_gib) if l3 else 0.0
    return Hardware(catalog.model(config.model), catalog.gpu(config.gpu), dram, l3, l3_gib)


def pool_specs(config: ServingConfig, catalog: Catalog) -> list[PoolSpec]:
    """The pools of the deployment: one, or prefill then decode."""
    if config.pd_mode == "aggregated":
        return [PoolSpec(catalog.gpu(config.gpu), config.tp, config.instances, config.pp)]
    return [
        PoolSpec(catalog.gpu(gpu), tp, count, config.pool_pp(pool))
        for pool in POOLS
        for gpu, tp, count in (config.pool_shape(pool),)
    ]


def deployment_cost(config: ServingConfig, catalog: Catalog) -> Cost:
    """USD per hour of the configuration: GPUs of every pool, L2 DRAM per instance, the L3."""
    hw = hardware(config, catalog)
    pools = pool_specs(config, catalog)
    gpus = sum(p.instances * p.gpus for p in pools)
    gpu_usd = sum(p.instances * p.gpus * p.gpu.usd_per_gpu_hour for p in pools)
    n_instances = sum(p.instances for p in pools)
    dram = hw.dram.usd_per_hour(config.l2_dram_gib) * n_instances if hw.dram else 0.0
    l3 = hw.l3.usd_per_hour(hw.l3_gib) * l3_stores(pools, hw.l3).servers if hw.l3 else 0.0
    return Cost(gpus, gpu_usd, dram, l3)


@dataclass(frozen=True, slots=True)
class L3Stores:
    """Where the L3 content lives (module docstring)."""

    store_of: tuple[int, ...]
    """Store of every instance, pools in order (all 0 for a shared tier)."""
    servers: int
    """Servers whose copy of the tier is paid for (1 for a shared tier)."""


def l3_stores(pools: list[PoolSpec], tier: StorageTierSpec) -> L3Stores:
    """One store for a shared tier; one per server for a local drive."""
    n_instances = sum(p.instances for p in pools)
    if tier.shared:
        return L3Stores((0,) * n_instances, 1)
    nodes = place_on_nodes(pools)
    index: dict[tuple[str, int], int] = {}
    spans: list[int] = []
    widths = [p.nodes_per_instance for p in pools for _ in range(p.instances)]
    for node, width in zip(nodes, widths, strict=True):
        if node not in index:
            index[node] = len(index)
            spans.append(width)  # an instance wider than a server spans several
    return L3Stores(tuple(index[node] for node in nodes), sum(spans))
