"""``simulate(config, workload, *, seed) -> SimResult``: the one entry point of the simulator.

Pure and deterministic: the same config, workload and seed give an identical result (every
random choice — synthetic workloads, randomised eviction policies, routers — draws from
generators spawned from ``seed``; nothing reads the clock or the environment).

Failure modes, by design:

- a configuration that cannot run (the weights do not fit in HBM, the GPU lacks the precision,
  no KV block fits) returns ``SimResult(feasible=False, reason=...)`` with its cost filled in,
  never an exception, so the optimizer can record a violated constraint;
- bad user input (unknown model / GPU / storage tier / preset / latency model names, a
  malformed workload file) raises ``InputError`` with one line.

Requests longer than the model's context are dropped before the run and counted in
``diagnostics`` (``overlong_dropped``; ``simulator.cluster.overlong`` says why); with
``drop_overlong_requests=False`` they reach the engine instead. Requests that can never run on
the configuration (prompt + output beyond the whole L1 cache, or an overlong one that was not
dropped) are rejected at arrival and counted (``Summary.n_rejected``).

With prefix caching off (``prefix_caching``, else the backend preset's), every request's blocks
are renamed to ids no other request shares (``simulator.workload.no_reuse``): no hits in any
tier, the same KV footprint per request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from hardware.catalog import shipped_catalog
from hardware.schema import Catalog
from simulator.build import Infeasible, build_pool
from simulator.cluster.driver import Cluster
from simulator.cluster.fleet import FleetSummary
from simulator.cluster.overlong import drop_overlong
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.cost import deployment_cost, pool_specs
from simulator.engine import EngineInstance
from simulator.metrics import (
    LATENCY_METRICS,
    SUMMARY_STATS,
    Cost,
    Summary,
    metrics_for_slo,
    per_request_ms,
    summarize,
)
from simulator.presets import load_preset
from simulator.records import QueueSamples, Recorder, RequestRecord
from simulator.scaling import start_scaling
from simulator.workload.no_reuse import NoPrefixReuse
from simulator.workload.request import TraceRequest
from simulator.workload.source import RequestSource

__all__ = ["SimResult", "WorkloadBuilder", "build_source", "simulate"]


@runtime_checkable
class WorkloadBuilder(Protocol):
    """Anything that makes a request source from a generator (``WorkloadSpec`` does)."""

    def build(self, rng: np.random.Generator) -> RequestSource:
        """A fresh source; all its randomness comes from ``rng``."""
        ...


@dataclass(frozen=True)
class SimResult:
    """Outcome of one simulation; ``summary`` is None when ``feasible`` is False."""

    config: ServingConfig
    seed: int
    feasible: bool
    reason: str
    """Why it is infeasible, or the memory-fit sentence when it ran."""
    cost: Cost
    summary: Summary | None = None
    records: tuple[RequestRecord, ...] = ()
    queue_samples: QueueSamples | None = None
    diagnostics: dict[str, float] = field(default_factory=dict)
    itl_s: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
    """Every inter-token gap (seconds) and its weight (requests that saw it), pooled."""
    engine: str = ""
    """The resolved engine settings (``EngineParams.describe``; per pool under PD)."""
    fleets: dict[str, FleetSummary] = field(default_factory=dict)
    """Each autoscaled pool's instance counts over time and its bill, by pool: ``instances``
    for an aggregated deployment, ``prefill`` / ``decode`` under PD; empty when no pool is
    autoscaled. ``summary``'s cost figures are then the period's average (fixed pools in
    full); ``cost`` stays the price of the largest fleet."""

    @property
    def fleet(self) -> FleetSummary | None:
        """The autoscaled aggregated pool's fleet (None otherwise; PD pools: ``fleets``)."""
        return self.fleets.get("instances")

    def metrics_for_slo(self, stats: Iterable[str] = ()) -> dict[str, float]:
        """Flat metrics for ``slo.evaluate`` (``ttft_ms.p90``, ``usd_per_hour``, …).

        ``stats`` adds percentiles beyond mean/p50/p90/p99 (e.g. ``"p99.9"``). Rejected
        requests count as infinitely late in the latency statistics (``metrics_for_slo`` in
        ``simulator.metrics``). An infeasible result reports its cost, zero throughput and
        infinite latencies, so every SLO target is violated rather than missing.
        """
        if self.summary is None:
            flat = {
                f"{name}.{stat}": float("inf")
                for name in LATENCY_METRICS
                for stat in (*SUMMARY_STATS, *stats)
            }
            flat.update(
                requests_per_s=0.0,
                output_tokens_per_s=0.0,
                input_tokens_per_s=0.0,
                usd_per_hour=self.cost.usd_per_hour,
                usd_per_million_output_tokens=float("inf"),
                gpus=float(self.cost.gpus),
            )
            return flat
        return metrics_for_slo(self.summary, self.records, stats, self.itl_s)

    def per_request_ms(self) -> dict[str, NDArray[np.float64]]:
        """Per-request arrays (``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms``, ``queue_ms``)
        for ``slo.attainment``, with ``inf`` rows for rejected requests; empty when
        infeasible."""
        rejected = self.summary.n_rejected if self.summary is not None else 0
        return per_request_ms(self.records, rejected)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what ``kvplan simulate --json`` prints)."""
        data: dict[str, Any] = {
            "feasible": self.feasible,
            "reason": self.reason,
            "seed": self.seed,
            "config": self.config.model_dump(),
            "cost": {
                "gpus": self.cost.gpus,
                "usd_per_hour": self.cost.usd_per_hour,
                "gpu_usd_per_hour": self.cost.gpu_usd_per_hour,
                "dram_usd_per_hour": self.cost.dram_usd_per_hour,
                "l3_usd_per_hour": self.cost.l3_usd_per_hour,
            },
            "diagnostics": dict(self.diagnostics),
        }
        if self.summary is not None:
            data["summary"] = self.summary.to_dict()
        if self.fleet is not None:
            data["fleet"] = self.fleet.to_dict()
        elif self.fleets:
            data["fleets"] = {name: fleet.to_dict() for name, fleet in self.fleets.items()}
        return data


def build_source(workload: RequestSource | WorkloadBuilder, seed: int) -> RequestSource:
    """The request source ``simulate(..., seed=seed)`` replays (a ready source is returned)."""
    if isinstance(workload, RequestSource):
        return workload
    workload_seed = np.random.SeedSequence(seed).spawn(2)[0]
    return workload.build(np.random.default_rng(workload_seed))


def simulate(
    config: ServingConfig,
    workload: RequestSource | WorkloadBuilder,
    *,
    seed: int,
    catalog: Catalog | None = None,
    sample_interval_s: float = 1.0,
    check_invariants: bool = False,
    drop_overlong_requests: bool = True,
    on_first_token: Callable[[TraceRequest, float, float], None] | None = None,
) -> SimResult:
    """Run ``workload`` on ``config`` and summarise it (module docstring for failure modes).

    ``workload`` is a ready ``RequestSource`` (it is consumed) or a builder such as a
    ``WorkloadSpec``, built here from the seed. ``sample_interval_s`` spaces the queue-length
    samples. ``check_invariants`` verifies queue and block accounting after every step (slow;
    for tests). ``drop_overlong_requests`` removes requests longer than the model's context
    before the run (module docstring). ``on_first_token(request, first_token_s, now_s)`` is
    told of every request's first token (its recorded time, and the simulated time of the step
    that produced it) — for a watcher that decides early (``simulator.give_up``); it may raise
    out of the run.
    """
    catalog = catalog or shipped_catalog()
    cost = deployment_cost(config, catalog)
    pool_seed = np.random.SeedSequence(seed).spawn(2)[1]
    source = build_source(workload, seed)
    kernel, recorder = Kernel(), Recorder()
    pool = build_pool(
        config,
        catalog,
        block_tokens=source.block_tokens,
        kernel=kernel,
        recorder=recorder,
        seed=pool_seed,
        check_invariants=check_invariants,
    )
    if isinstance(pool, Infeasible):
        return SimResult(config, seed, False, pool.reason, cost)
    tally = None
    if drop_overlong_requests:
        source, tally = drop_overlong(source, catalog.model(config.model).max_context_tokens)
    if not _prefix_caching(config):
        source = NoPrefixReuse(source)
    cluster = Cluster(
        kernel,
        pool.instances,
        pool.router,
        source,
        recorder,
        sample_interval_s=sample_interval_s,
        on_first_token=on_first_token,
    )
    scaling = start_scaling(
        config,
        cluster,
        pools=pool_specs(config, catalog),
        cost=cost,
        weight_bytes_per_gpu=pool.weight_bytes_per_gpu,
        coordinator=pool.coordinator,
    )
    cluster.run()
    end = max((r.finish_s for r in recorder.records), default=kernel.now)
    fleets: dict[str, FleetSummary] = {}
    if scaling is not None:
        fleets, cost = scaling.summaries(end)
    stats = [inst.stats(end) for inst in pool.instances]
    kv_util = float(np.mean([s.kv_utilization for s in stats]))
    diagnostics = {
        "events": float(kernel.n_events),
        "steps": float(sum(s.steps for s in stats)),
        "prefill_tokens": float(sum(s.prefill_tokens for s in stats)),
        "decode_tokens": float(sum(s.decode_tokens for s in stats)),
        "l1_blocks_per_instance": float(pool.l1_blocks),
        "l2_blocks_per_instance": float(pool.l2_blocks),
        "l3_blocks": float(pool.l3_blocks),
        "l2_to_l1_blocks": float(sum(s.l2_to_l1_blocks for s in stats)),
        "l3_to_l2_blocks": float(sum(s.l3_to_l2_blocks for s in stats)),
        "l3_blocks_written": float(sum(w.n_written for w in pool.l3_writers)),
        "l3_writes_dropped": float(sum(w.n_dropped for w in pool.l3_writers)),
        "out_of_order_arrivals": float(cluster.n_out_of_order),
        "in_system_request_seconds": recorder.in_system_area(end),
        "overlong_dropped": float(tally.n_overlong if tally else 0),
        "overlong_longest_tokens": float(tally.longest_tokens if tally else 0),
    }
    summary = summarize(
        recorder,
        busy_s=sum(s.busy_s for s in stats),
        kv_utilization=kv_util,
        n_gpu_engines=len(stats),
        preemptions=sum(s.preemptions for s in stats),
        cost=cost,
        sample_interval_s=sample_interval_s,
        extra=diagnostics,
    )
    return SimResult(
        config,
        seed,
        True,
        pool.memory,
        cost,
        summary,
        tuple(recorder.records),
        recorder.queue_samples(sample_interval_s),
        diagnostics,
        recorder.itl_values(),
        _describe_engines(pool.instances),
        fleets,
    )


def _prefix_caching(config: ServingConfig) -> bool:
    """Whether blocks are reused across requests: the config's choice, else the preset's."""
    if config.prefix_caching is not None:
        return config.prefix_caching
    return load_preset(config.backend).prefix_caching


def _describe_engines(instances: Sequence[EngineInstance]) -> str:
    """One line per distinct engine setting, pools in order ("prefill: …; decode: …")."""
    lines = list(dict.fromkeys(inst.params.describe() for inst in instances))
    if len(lines) == 1:
        return lines[0]
    return "; ".join(
        f"{role}: {line}" for role, line in zip(("prefill", "decode"), lines, strict=False)
    )
