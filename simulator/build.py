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

L3 placement and what the deployment pays for: ``simulator/cost.py``.

PD disaggregation (``pd_mode: disaggregated``): two pools, each with its own GPU, TP, memory
fit and latency model, wired by ``cluster/pd.py``; instances are numbered prefill first.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from hardware.schema import Catalog
from simulator.cluster.pd import (
    EntryRouter,
    PDCoordinator,
    PoolSpec,
    TransferTimes,
)
from simulator.cluster.router import Router, make_router
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.cost import Hardware, hardware, l3_stores, pool_specs
from simulator.engine.analytic import parse_analytic
from simulator.engine.instance import EngineInstance
from simulator.engine.kvmanager import KVManager
from simulator.engine.params import EngineParams
from simulator.engine.pool_channel import PoolPort, SharedPoolChannel
from simulator.engine.remote import PdFirstToken
from simulator.engine.speculative import SpeculativeTimer
from simulator.engine.steps import StepTimer
from simulator.engine.store_writer import StoreWriter
from simulator.engine.tiers import CacheTier
from simulator.engine.transfer import (
    Channel,
    DriveClock,
    LoadLink,
    PrefetchChannel,
    TransferTime,
)
from simulator.kvcache.policies import POLICIES
from simulator.latency import (
    Deployment,
    LatencyContext,
    Link,
    kv_bytes,
    link_to_tier,
    make_latency_model,
    memory_fit,
    storage_link,
    transfer_seconds,
    weight_bytes_per_gpu,
)
from simulator.presets import BackendPreset, load_preset
from simulator.records import Recorder
from slo.inputfile import InputError

__all__ = ["Infeasible", "Pool", "build_pool"]

_GIB = 2**30


@dataclass(frozen=True, slots=True)
class Infeasible:
    """Why a configuration cannot run (one sentence)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Pool:
    """A built pool: instances sharing a kernel, a recorder and (optionally) an L3 store.

    Under PD disaggregation ``instances`` holds the prefill pool then the decode pool,
    ``router`` sends arrivals to the prefill pool, and ``params`` / ``l1_blocks`` are the
    prefill pool's (``coordinator`` has the rest).
    """

    instances: tuple[EngineInstance, ...]
    router: Router
    params: EngineParams
    l1_blocks: int
    l2_blocks: int
    l3_blocks: int
    memory: str
    """The memory-fit sentence (or the override that replaced it); one per pool under PD."""
    coordinator: PDCoordinator | None = None
    l3_writers: tuple[StoreWriter, ...] = ()
    """The write queue of every L3 store (one per server for a drive, one for a pool)."""
    weight_bytes_per_gpu: tuple[float, ...] = ()
    """Weights each GPU of an instance loads at start-up, bytes, per pool (one, or prefill
    then decode)."""


def _seconds(link: Link) -> TransferTime:
    return lambda nbytes: transfer_seconds(nbytes, link)


@dataclass(frozen=True, slots=True)
class _Engine:
    """One pool's resolved engine: parameters, step timer, L1 size and PCIe load path."""

    params: EngineParams
    timer: StepTimer
    l1_blocks: int
    memory: str
    load_link: Link | None
    gpu_block_bytes: float
    weight_bytes_per_gpu: float
    #: Blocks a running request holds besides its tokens' (``request_state_blocks``).
    state_blocks: int = 0


def _pool_frontend(
    preset: BackendPreset, config: ServingConfig, role: Literal["prefill", "decode"] | None
) -> dict[str, float]:
    """``EngineParams``' serial front-end costs (s) for an instance of pool ``role``: all of
    them aggregated. A PD prefill instance keeps its tokenising of the prompts it receives
    (the per-prompt-token cost; SGLang's TokenizerManager runs on each server) and none of the
    rest: the decode side streams the responses and the proxy to the clients is not modelled.
    A decode instance has none (it tokenises the same prompt while the prefill runs)."""
    costs = preset.frontend_seconds(config.frontend_us, config.stream_interval)
    if role is None:
        return costs
    if role == "prefill":
        return {"frontend_prompt_token_s": costs["frontend_prompt_token_s"]}
    return {}


def _engine(
    config: ServingConfig,
    hw: Hardware,
    pool: PoolSpec,
    preset: BackendPreset,
    block_tokens: int,
    *,
    role: Literal["prefill", "decode"] | None,
) -> _Engine | Infeasible:
    """Parameters, memory fit and latency model of an instance of ``pool`` (``role`` for a
    PD pool: its own engine limits, when set)."""
    try:
        deployment = Deployment(
            hw.model,
            pool.gpu,
            tp=pool.tp,
            ep=config.pool_ep(role),
            weight_precision=config.weight_precision,
            kv_precision=config.kv_precision,
            allow_multi_node=config.allow_multi_node,
            attention_dp=config.pool_attention_dp(role),
            pp=pool.pp,
            fp8_weight_only=preset.fp8_weight_only,
            linear_state_precision=(config.linear_state_precision or preset.linear_state_precision),
            mxfp4_expert_alignment=preset.mxfp4_expert_alignment(pool.gpu, config.marlin_moe),
        )
    except InputError as err:
        return Infeasible(str(err))
    budget, running = config.pool_limits(role)
    defaults = preset.limits_for(pool.gpu, pool.tp)
    # An analytic step timer (const:, linear:) states every step's seconds itself: no floor.
    analytic = parse_analytic(config.latency_model)
    eager_layers = 0 if analytic else math.ceil(hw.model.num_layers / pool.pp)
    max_batched = budget or defaults.max_batched_tokens
    max_running = running or defaults.max_running_requests
    # Every running request needs one token of the step's budget.
    max_running = min(max_running, max_batched)
    # Engine limits are per attention-DP rank; the instance runs its ranks' worth at once
    # (simulator/latency/data_parallel.py). The token budget is per pipeline micro-batch (one
    # scheduled batch per stage in flight); the running limit is the instance's (vLLM's
    # max_num_seqs counts the requests of every batch in flight) (latency/pipeline.py).
    ranks = deployment.attention_dp
    scheduler = config.scheduler or preset.scheduler
    rank_batched, rank_running, chunk = preset.rank_limits(
        ranks,
        max_batched,
        max_running,
        config.chunk_tokens or defaults.chunk_tokens,
        scheduler=scheduler,
        running_given=running is not None,
    )
    overlapped = (
        preset.overlap_for(role) if config.overlap_scheduling is None else config.overlap_scheduling
    )
    params = EngineParams(
        block_tokens=block_tokens,
        scheduler=scheduler,
        max_batched_tokens=rank_batched * ranks * deployment.pp,
        max_running=rank_running * ranks,
        chunk_tokens=min(chunk, rank_batched),
        preemption=config.preemption,
        prefetch_policy=config.prefetch_policy,
        prefetch_timeout_base_s=config.prefetch_timeout_base_s,
        prefetch_timeout_per_1k_tokens_s=config.prefetch_timeout_per_1k_tokens_s,
        prefetch_threshold_tokens=config.l3_prefetch_threshold_tokens,
        max_context_tokens=hw.model.max_context_tokens,
        overlap_scheduling=overlapped,
        # A PD prefill pool hands its first tokens off (``remote.py``): not lagged here.
        overlap_prefill_lag=preset.overlap_prefill_lag and role is None,
        kv_admission=config.kv_admission or preset.kv_admission,
        recv_interval=config.scheduler_recv_interval or preset.scheduler_recv_interval,
        tokenize_s_per_prompt_token=(
            preset.tokenize_us_per_prompt_token
            if config.tokenize_us_per_prompt_token is None
            else config.tokenize_us_per_prompt_token
        )
        / 1e6,
        kv_conservativeness=preset.rank_conservativeness(ranks, config.schedule_conservativeness),
        **_pool_frontend(preset, config, role),
        limits_note=defaults.note if budget is None or running is None else "",
        prefill_step_floor_s=preset.eager_prefill_us_per_layer * 1e-6 * eager_layers,
    )
    if config.kv_capacity_tokens is not None:
        kv_tokens, memory = config.kv_capacity_tokens, "KV capacity set by kv_capacity_tokens"
    else:
        mem_params = dataclasses.replace(
            preset.memory_params(pool.tp),
            max_batched_tokens=max_batched,
            max_running_requests=max_running,
        )
        if config.hbm_utilization is not None:
            mem_params = dataclasses.replace(mem_params, hbm_utilization=config.hbm_utilization)
        if config.cuda_graphs_in_kv_budget is not None:
            mem_params = dataclasses.replace(
                mem_params, cuda_graphs_in_budget=config.cuda_graphs_in_kv_budget
            )
        fit = memory_fit(deployment, mem_params)
        if not fit.fits:
            return Infeasible(fit.reason)
        kv_tokens, memory = fit.kv_tokens, fit.reason
    if config.kv_capacity_scale != 1.0:
        kv_tokens = int(kv_tokens * config.kv_capacity_scale)
        memory += f"; x{config.kv_capacity_scale:g} (kv_capacity_scale) = {kv_tokens:,} tokens"
    l1_blocks = kv_tokens // block_tokens
    if l1_blocks < 1:
        return Infeasible(
            f"the KV cache holds {kv_tokens} tokens per instance, less than one "
            f"{block_tokens}-token block of the workload"
        )
    roots = [config.kernel_profiles_dir] if config.kernel_profiles_dir else []
    timer: StepTimer = analytic or make_latency_model(
        config.latency_model,
        deployment,
        params=preset.compose_params(
            overlapped=overlapped,
            marlin_moe=config.marlin_moe,
            mxfp4_moe_activation=config.mxfp4_moe_activation,
            moe_kernel=config.moe_kernel,
        ),
        context=LatencyContext.of(preset.name, roots, config.latency_cache_dir),
    )
    if config.spec_tokens:
        timer = SpeculativeTimer(
            timer,
            config.spec_tokens,
            config.spec_acceptance,
            config.spec_draft_layers / hw.model.num_layers,
        )
    return _Engine(
        params,
        timer,
        l1_blocks,
        memory,
        link_to_tier(pool.gpu, hw.dram, "read") if hw.dram else None,
        deployment.kv_bytes_per_token_per_gpu() * block_tokens,
        weight_bytes_per_gpu(deployment),
        request_state_blocks(deployment, block_tokens),
    )


def request_state_blocks(deployment: Deployment, block_tokens: int) -> int:
    """A running request's sliding-window KV and linear-attention state in blocks of the
    simulation's ``block_tokens``, to the nearest block (at least 1 when there is any): the
    simulated blocks are the workload's (often 512 tokens), coarser than an engine's 16-token
    pages, so rounding up would charge up to a whole block too much per request."""
    state = deployment.request_state_bytes_per_gpu()
    if state <= 0:
        return 0
    block = deployment.kv_bytes_per_token_per_gpu() * block_tokens
    return max(1, math.floor(state / block + 0.5))


class _Builder:
    """Makes tiers and instances that share one kernel, recorder, L3 store and pool channel."""

    def __init__(
        self,
        config: ServingConfig,
        hw: Hardware,
        *,
        block_tokens: int,
        kernel: Kernel,
        recorder: Recorder,
        seeds: Iterator[np.random.SeedSequence],
        extra_seeds: Iterator[np.random.SeedSequence],
        pools: list[PoolSpec],
        check_invariants: bool,
    ) -> None:
        self.config, self.kernel, self.recorder = config, kernel, recorder
        self.seeds = seeds
        self.check_invariants = check_invariants
        self.block_tokens = block_tokens
        self.block_bytes = kv_bytes(hw.model, block_tokens, config.kv_precision)
        self.l2_blocks = int(config.l2_dram_gib * _GIB // self.block_bytes) if hw.dram else 0
        self.l3_blocks = int(hw.l3_gib * _GIB // self.block_bytes) if hw.l3 else 0
        self.l3_placement = l3_stores(pools, hw.l3) if hw.l3 and self.l3_blocks else None
        # The first store takes the seed a single L3 always took; more stores draw theirs
        # from ``extra_seeds`` so that adding servers leaves every other stream unchanged.
        self._extra_seeds = extra_seeds
        first = self.tier("L3", config.l3_policy, self.l3_blocks) if self.l3_placement else None
        self.l3_link = storage_link(hw.l3, "read") if hw.l3 and first is not None else None
        self._hw = hw
        self._stores: list[tuple[CacheTier, Channel | None, StoreWriter]] = []
        if first is not None:
            self._add_store(first)

    def tier(self, name: str, policy: str, capacity: int) -> CacheTier:
        rng = np.random.default_rng(next(self.seeds))
        return CacheTier(name, POLICIES[policy](capacity, rng=rng))

    def router(self, spec: str, n_instances: int, l1_blocks: int) -> Router:
        spec = _trees_sized_to_cache(spec, l1_blocks)
        return make_router(spec, n_instances, np.random.default_rng(next(self.seeds)))

    def _new_channel(self, clock: DriveClock | None) -> Channel | SharedPoolChannel | None:
        """The read channel of one store: fair-shared for a remote pool, FIFO for a drive (on
        the drive's ``clock``, shared with its writer)."""
        link, tier = self.l3_link, self._hw.l3
        if link is None or tier is None:
            return None
        if tier.kind == "remote_pool":
            return SharedPoolChannel(
                self.kernel,
                bytes_per_s=link.bytes_per_s,
                latency_s=link.latency_s,
                bytes_per_block=self.block_bytes,
            )
        return PrefetchChannel(self.kernel, _seconds(link), self.block_bytes, clock)

    def l3_of(self, index: int) -> tuple[CacheTier | None, Channel | None, StoreWriter | None]:
        """Instance ``index``'s L3 store, its own port on the store's read channel, and the
        store's writer."""
        if self.l3_placement is None:
            return None, None, None
        store = self.l3_placement.store_of[index]
        while len(self._stores) <= store:
            rng = np.random.default_rng(next(self._extra_seeds))
            policy = POLICIES[self.config.l3_policy](self.l3_blocks, rng=rng)
            self._add_store(CacheTier(f"L3[server {len(self._stores)}]", policy))
        tier, channel, writer = self._stores[store]
        return tier, (PoolPort(channel) if channel is not None else None), writer

    def _add_store(self, tier: CacheTier) -> None:
        hw = self._hw
        assert hw.l3 is not None
        # A drive reads and writes through one device; a pool's link has two directions.
        clock = None if hw.l3.kind == "remote_pool" else DriveClock()
        writer = StoreWriter(
            self.kernel,
            tier,
            _seconds(storage_link(hw.l3, "write")),
            self.block_bytes,
            self.config.l3_write_backlog_s,
            clock=clock,
        )
        self._stores.append((tier, self._new_channel(clock), writer))

    @property
    def writers(self) -> tuple[StoreWriter, ...]:
        """The write queue of every L3 store built so far."""
        return tuple(writer for _, _, writer in self._stores)

    def instances(self, engine: _Engine, first: int, count: int) -> list[EngineInstance]:
        """``count`` instances of ``engine`` numbered from ``first``."""
        config = self.config
        made = []
        for index in range(first, first + count):
            l1 = self.tier(f"L1[{index}]", config.l1_policy, engine.l1_blocks)
            l2 = (
                self.tier(f"L2[{index}]", config.l2_policy, self.l2_blocks)
                if self.l2_blocks > 0
                else None
            )
            l3, channel, writer = self.l3_of(index)
            kv = KVManager(
                l1,
                l2,
                l3,
                block_tokens=self.block_tokens,
                write_through=config.write_policy == "write_through",
                l3_write=writer.write if writer is not None else None,
                state_blocks=engine.state_blocks,
            )
            link = (
                LoadLink(_seconds(engine.load_link), engine.gpu_block_bytes)
                if engine.load_link
                else LoadLink(_never, 1)
            )
            made.append(
                EngineInstance(
                    index,
                    self.kernel,
                    engine.params,
                    timer=engine.timer,
                    kv=kv,
                    load_link=link,
                    prefetch=channel,
                    recorder=self.recorder,
                    check_invariants=self.check_invariants,
                )
            )
        return made


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
    hw = hardware(config, catalog)
    preset = load_preset(config.backend)
    pools = pool_specs(config, catalog)
    engines = []
    roles: tuple[Literal["prefill", "decode"] | None, ...] = (
        ("prefill", "decode") if len(pools) > 1 else (None,)
    )
    for name, role, pool in zip(("prefill", "decode"), roles, pools, strict=False):
        engine = _engine(config, hw, pool, preset, block_tokens, role=role)
        if isinstance(engine, Infeasible):
            prefix = f"{name} pool: " if len(pools) > 1 else ""
            return Infeasible(prefix + engine.reason)
        engines.append(engine)
    n_instances = sum(p.instances for p in pools)
    # Aggregated: one seed per tier, plus the L3 and the router (as before PD existed).
    seeds = iter(seed.spawn(2 * n_instances + 1 + len(pools)))
    builder = _Builder(
        config,
        hw,
        block_tokens=block_tokens,
        kernel=kernel,
        recorder=recorder,
        seeds=seeds,
        extra_seeds=iter(seed.spawn(n_instances)),  # at most one L3 store per instance
        pools=pools,
        check_invariants=check_invariants,
    )
    if len(pools) == 1:
        router = builder.router(config.router, config.instances, engines[0].l1_blocks)
        instances = builder.instances(engines[0], 0, config.instances)
        recorder.set_pools([range(len(instances))])
        return Pool(
            tuple(instances),
            router,
            engines[0].params,
            engines[0].l1_blocks,
            builder.l2_blocks,
            builder.l3_blocks,
            engines[0].memory,
            l3_writers=builder.writers,
            weight_bytes_per_gpu=(engines[0].weight_bytes_per_gpu,),
        )
    first_token = config.pd_first_token or preset.pd_first_token
    return _pd_pool(config, hw, pools, engines, builder, first_token=first_token)


def _pd_pool(
    config: ServingConfig,
    hw: Hardware,
    pools: list[PoolSpec],
    engines: list[_Engine],
    builder: _Builder,
    *,
    first_token: PdFirstToken,
) -> Pool:
    """Prefill and decode pools wired by a ``PDCoordinator`` (``cluster/pd.py``); the client's
    first token comes from where ``first_token`` says (the config's, else the preset's)."""
    prefill_pool, decode_pool = pools
    entry = builder.router(config.router, prefill_pool.instances, engines[0].l1_blocks)
    decode_router = builder.router(
        config.decode_router(), decode_pool.instances, engines[1].l1_blocks
    )
    prefill = builder.instances(engines[0], 0, prefill_pool.instances)
    decode = builder.instances(engines[1], prefill_pool.instances, decode_pool.instances)
    times = TransferTimes(prefill_pool, decode_pool, bytes_per_block=builder.block_bytes)
    coordinator = PDCoordinator(
        builder.kernel,
        prefill,
        decode,
        decode_router,
        times,
        overlap=config.pd_transfer_overlap,
        n_layers=hw.model.num_layers,
        first_token=first_token,
    )
    builder.recorder.set_pools([[inst.index for inst in prefill], [inst.index for inst in decode]])
    memory = f"prefill: {engines[0].memory}; decode: {engines[1].memory}"
    return Pool(
        (*prefill, *decode),
        EntryRouter(entry, np.random.default_rng(0)),
        engines[0].params,
        engines[0].l1_blocks,
        builder.l2_blocks,
        builder.l3_blocks,
        memory,
        coordinator,
        builder.writers,
        tuple(engine.weight_bytes_per_gpu for engine in engines),
    )


def _trees_sized_to_cache(spec: str, l1_blocks: int) -> str:
    """``cache_aware`` without an explicit ``max_tree_blocks`` gets trees the size of one
    instance's L1: a larger tree remembers prefixes the instance has already evicted and sends
    requests after them (bench/router_study.py: on the Mooncake trace, TTFT p90 1.65 s with
    32,768-block trees vs 1.21 s with trees of the 869-block cache)."""
    name, _, rest = spec.partition(":")
    if name.strip() != "cache_aware" or "max_tree_blocks" in rest:
        return spec
    return f"{spec}{',' if rest.strip() else ':'}max_tree_blocks={max(1, l1_blocks)}"


def _never(nbytes: float) -> float:
    # Without L2 nothing is ever loaded into L1; a load of zero blocks takes no time.
    del nbytes
    return 0.0
