"""Which pools of a deployment are autoscaled, their autoscalers, and what the period cost.

An aggregated deployment has one pool (``ServingConfig.autoscale``). A disaggregated one has
two, each with its own policy or none (``prefill.autoscale``, ``decode.autoscale``): the
prefill pool's autoscaler drives the serving prefix the entry router picks from
(``Cluster.routable``), the decode pool's the prefix hand-offs go to
(``PDCoordinator.decode_routable``). Each pool is priced on its own (its GPUs and TP, host DRAM
per instance); a pool without a policy is paid in full for the period, and an L3 tier is paid
throughout (``fleet.fleet_summary``).

What this module is not: the policies (``cluster/autoscale.py``) or the figures per window
(``cluster/fleet.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.cluster.autoscale import AutoscaleConfig, Autoscaler, ScaledPool
from simulator.cluster.driver import Cluster
from simulator.cluster.fleet import FleetSummary, fleet_summary
from simulator.cluster.pd import PDCoordinator, PoolSpec
from simulator.config import ServingConfig
from simulator.metrics import Cost
from simulator.pool_config import POOLS

__all__ = ["PoolScaling", "Scaling", "start_scaling"]


@dataclass(frozen=True, slots=True)
class PoolScaling:
    """One pool: its autoscaler (None: a fixed pool), instance count and full price."""

    name: str
    autoscaler: Autoscaler | None
    instances: int
    cost: Cost
    """The pool at its full instance count (an aggregated pool's with the L3 tier, which its
    fleet pays throughout; a PD pool's without, ``Scaling`` pays it once)."""


@dataclass(frozen=True, slots=True)
class Scaling:
    """The autoscaled deployment: its pools, and the L3 price paid throughout."""

    pools: tuple[PoolScaling, ...]
    l3_usd_per_hour: float
    """The L3 tier when the pools do not carry it (PD: one tier for both pools)."""

    def summaries(self, period_s: float) -> tuple[dict[str, FleetSummary], Cost]:
        """Each autoscaled pool's fleet over ``period_s``, and the period's average cost of
        the whole deployment (fixed pools in full, the L3 once)."""
        fleets: dict[str, FleetSummary] = {}
        gpu_usd = dram_usd = 0.0
        l3_usd = self.l3_usd_per_hour
        gpus = 0
        for pool in self.pools:
            gpus += pool.cost.gpus
            if pool.autoscaler is None:
                paid = pool.cost
            else:
                fleet = fleet_summary(pool.autoscaler.log, pool.cost, pool.instances, period_s)
                fleets[pool.name] = fleet
                paid = fleet.average_cost
            gpu_usd += paid.gpu_usd_per_hour
            dram_usd += paid.dram_usd_per_hour
            l3_usd += paid.l3_usd_per_hour
        return fleets, Cost(gpus, gpu_usd, dram_usd, l3_usd)


def start_scaling(
    config: ServingConfig,
    cluster: Cluster,
    *,
    pools: list[PoolSpec],
    cost: Cost,
    weight_bytes_per_gpu: tuple[float, ...],
    coordinator: PDCoordinator | None,
) -> Scaling | None:
    """Start an autoscaler for every pool of ``config`` with a policy; None when none has one.

    ``pools`` are the deployment's pools (one, or prefill then decode; ``cost.pool_specs``),
    ``cost`` its full price, ``weight_bytes_per_gpu`` what a GPU of each pool loads at
    start-up, ``coordinator`` the PD hand-off (None for an aggregated deployment).
    """
    if coordinator is None:
        if config.autoscale is None:
            return None
        scaler = _started(cluster, config.autoscale, weight_bytes_per_gpu[0], None)
        return Scaling((PoolScaling("instances", scaler, config.instances, cost),), 0.0)
    policies = [config.pool(name).autoscale for name in POOLS]
    if all(policy is None for policy in policies):
        return None
    dram_per_instance = cost.dram_usd_per_hour / max(1, sum(p.instances for p in pools))
    prefill_count = pools[0].instances
    out = []
    for index, (name, policy, spec) in enumerate(zip(POOLS, policies, pools, strict=True)):
        handle = _pd_pool(name, cluster, coordinator, prefill_count)
        started = (
            None
            if policy is None
            else _started(cluster, policy, weight_bytes_per_gpu[index], handle)
        )
        price = Cost(
            spec.instances * spec.gpus,
            spec.instances * spec.gpus * spec.gpu.usd_per_gpu_hour,
            spec.instances * dram_per_instance,
            0.0,
        )
        out.append(PoolScaling(name, started, spec.instances, price))
    return Scaling(tuple(out), cost.l3_usd_per_hour)


def _started(
    cluster: Cluster, policy: AutoscaleConfig, weight_bytes: float, pool: ScaledPool | None
) -> Autoscaler:
    scaler = Autoscaler(cluster, policy, startup_s=policy.startup_s(weight_bytes), pool=pool)
    scaler.start()
    return scaler


def _pd_pool(
    name: str, cluster: Cluster, coordinator: PDCoordinator, prefill_count: int
) -> ScaledPool:
    """The prefill pool (the cluster's first instances, picked by the entry router) or the
    decode pool (picked by the coordinator's router when a prefill ends)."""
    if name == "prefill":

        def set_prefill(k: int) -> None:
            cluster.routable = k  # the entry router looks at the first prefill_count only

        instances = cluster.instances[:prefill_count]
        return ScaledPool(name, instances, set_prefill, cluster.router.forget)

    def set_decode(k: int) -> None:
        coordinator.decode_routable = k

    return ScaledPool(
        name, coordinator.decode, set_decode, coordinator.router.forget, queue_signal=False
    )
