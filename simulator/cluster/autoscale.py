"""Autoscaling an aggregated pool: instances started and drained as the load moves.

The policy is target tracking on concurrency, as Knative's pod autoscaler does it (KPA,
https://knative.dev/docs/serving/autoscaling/): every ``interval_s`` (KPA ``tick-interval``,
2 s) the requests in the system (queued or running, all instances) are averaged over the last
``window_s`` (KPA ``stable-window``, 60 s), and the wanted count is ``ceil(average /
target_concurrency)`` within ``[min_instances, instances]``. Up: at once. Down: only to the
highest count wanted during the last ``scale_down_delay_s`` (Kubernetes HPA's downscale
stabilisation window, 300 s by default, https://kubernetes.io/docs/tasks/run-application/
horizontal-pod-autoscale/#stabilization-window), so a dip does not drop capacity the next
burst needs.

``policy: slo`` scales on the SLO itself instead (a step controller on observed latency, in
the spirit of Dynamo's SLA planner, which sizes pools from observed TTFT/ITL against targets):
every tick it reads the ``slo_percentile`` of TTFT and TPOT over the requests finished in the
last ``window_s`` and the share of their time to first token spent queued
(``slo_signal.RecentLatency``). It wants one instance more than it pays for when TPOT misses its
target, or TTFT misses its target *and* at least ``scale_up_queue_share`` of it is queueing —
more instances shorten the queue, not a long prompt's prefill, so a target below the solo
prefill time starts nothing —, but never while one is still starting (a start's minutes of
load time are not answered with a start per tick). It wants one fewer when every target is met
and less than ``scale_down_queue_share`` of the time is queueing (or nothing is left in the
window or the system), else what it has; the scale-down stabilisation above applies, so it
must have wanted fewer for ``scale_down_delay_s``.

Instances (all built up front; ``ServingConfig.instances`` is the maximum) are in one of four
states: off, starting, serving, draining. The router sees the serving ones, which are always
a prefix ``0 .. k−1`` of the pool (``Router.route`` contract). Scaling up first takes back
draining instances (lowest first), then starts off ones above them; a start takes
``startup_s`` = the weights of one GPU over ``load_gb_per_s`` + ``engine_init_s``, during
which the instance is paid for and serves nothing. Scaling down first cancels starts (newest
first), then drains the highest serving instance: it takes no new requests, finishes what it
has, and is stopped at the first tick it is idle — its L1 and L2 contents and the router's
belief about them are dropped, so a later start begins cold (the L3 store persists: a shared
pool is a separate service; a local drive is assumed kept).

Cost: every instance that is starting, serving or draining is paid for, from the moment it is
started to the tick it stops (``FleetLog.instance_seconds``); the log records the counts
after every change, for the instance-count timeline.

Assumptions, stated: ``load_gb_per_s`` 2 GB/s per GPU (weights read from a local NVMe drive
or a node cache; network storage is slower, a warm page cache faster) and ``engine_init_s``
60 s (process start, CUDA context, memory profiling and CUDA-graph capture of an engine like
vLLM; measured start-up varies from ~20 s to minutes with torch.compile) are defaults to
override, not measurements.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulator.cluster.driver import Cluster
from simulator.cluster.fleet import FleetLog
from simulator.cluster.slo_signal import RecentLatency
from simulator.engine.instance import EngineInstance

__all__ = [
    "FLAT_AUTOSCALE_KEYS",
    "AutoscaleConfig",
    "Autoscaler",
    "ScaledPool",
    "aggregated_pool",
    "fold_autoscale_keys",
]

State = Literal["off", "starting", "serving", "draining"]


class AutoscaleConfig(BaseModel):
    """Target-tracking autoscaling of an aggregated pool (module docstring for semantics)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    policy: Literal["concurrency", "slo"] = Field(
        default="concurrency",
        description="'concurrency': track requests per instance (KPA); 'slo': step on observed "
        "TTFT/TPOT against the targets below (module doc).",
    )
    target_concurrency: float | None = Field(
        default=None,
        gt=0,
        le=1e6,
        description="Requests in the system per serving instance to aim for (policy concurrency).",
    )
    ttft_ms_target: float | None = Field(
        default=None, gt=0, description="Policy slo: TTFT target at slo_percentile, ms."
    )
    tpot_ms_target: float | None = Field(
        default=None, gt=0, description="Policy slo: TPOT target at slo_percentile, ms."
    )
    slo_percentile: float = Field(
        default=90.0, gt=0, le=100, description="Policy slo: the percentile the targets hold."
    )
    scale_up_queue_share: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Policy slo: a TTFT miss starts an instance only if at least this share "
        "of TTFT is queueing.",
    )
    scale_down_queue_share: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="Policy slo: with every target met, stop one when less than this share "
        "of TTFT is queueing.",
    )
    min_instances: int = Field(default=1, ge=1, description="Fewest instances kept running.")
    initial_instances: int | None = Field(
        default=None, ge=1, description="Instances serving at time 0 (None = min_instances)."
    )
    # At least 0.1 s: a tick far below the simulated clock's resolution (1e-300) never moved
    # it, and autoscalers decide every 2-30 s (KPA 2 s, HPA 15 s).
    interval_s: float = Field(
        default=2.0, ge=0.1, le=3600, description="Seconds between decisions (KPA tick, 2 s)."
    )
    window_s: float = Field(
        default=60.0, gt=0, le=86_400, description="Averaging window, s (KPA stable window)."
    )
    scale_down_delay_s: float = Field(
        default=300.0,
        ge=0,
        le=86_400,
        description="A lower count must be all that was wanted this long (HPA: 300 s).",
    )
    load_gb_per_s: float = Field(
        default=2.0, gt=0, le=1e4, description="Weight-load bandwidth per GPU, GB/s."
    )
    engine_init_s: float = Field(
        default=60.0, ge=0, le=86_400, description="Engine start-up besides loading weights, s."
    )

    @model_validator(mode="after")
    def _policy_has_its_targets(self) -> Self:
        if self.policy == "concurrency" and self.target_concurrency is None:
            raise ValueError("policy concurrency needs target_concurrency")
        if self.policy == "slo" and self.ttft_ms_target is None and self.tpot_ms_target is None:
            raise ValueError("policy slo needs ttft_ms_target and/or tpot_ms_target")
        return self

    @model_validator(mode="after")
    def _initial_at_least_min(self) -> Self:
        if self.initial_instances is not None and self.initial_instances < self.min_instances:
            raise ValueError(
                f"initial_instances ({self.initial_instances}) is below min_instances "
                f"({self.min_instances})"
            )
        return self

    def startup_s(self, weight_bytes_per_gpu: float) -> float:
        """Seconds from start to serving: the weights of one GPU, then the engine's init."""
        return weight_bytes_per_gpu / (self.load_gb_per_s * 1e9) + self.engine_init_s


#: Flat names of the autoscaling fields (``autoscale_target_concurrency``, ...): a search
#: space's dimensions are flat, so ``optimize`` can search the policy's parameters.
FLAT_AUTOSCALE_KEYS: tuple[str, ...] = tuple(f"autoscale_{f}" for f in AutoscaleConfig.model_fields)


def fold_autoscale_keys(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its flat ``autoscale_<field>`` keys moved into ``autoscale``; a field
    given both ways with different values raises ``ValueError`` naming both."""
    flat = [key for key in data if key in FLAT_AUTOSCALE_KEYS]
    if not flat:
        return data
    out = dict(data)
    nested = dict(out.get("autoscale") or {})
    for key in flat:
        field, value = key.removeprefix("autoscale_"), out.pop(key)
        if value is None:
            continue
        if nested.get(field) not in (None, value):
            raise ValueError(f"{key} ({value!r}) and autoscale.{field} ({nested[field]!r}) differ")
        nested[field] = value
    if nested:
        out["autoscale"] = nested
    return out


@dataclass(frozen=True, slots=True)
class ScaledPool:
    """The instances one autoscaler drives, and how it tells their router which serve.

    ``set_routable(k)``: the router picks among the pool's first ``k`` instances from now on;
    ``forget(i)``: the pool's instance ``i`` stopped (its cache is gone). ``queue_signal``:
    whether policy ``slo`` reads the share of TTFT spent queueing (the queue in front of this
    pool's prefills; a PD decode pool's latency is TPOT only, whose queue that is not).
    """

    name: str
    instances: Sequence[EngineInstance]
    set_routable: Callable[[int], None]
    forget: Callable[[int], None]
    queue_signal: bool = True


def aggregated_pool(cluster: Cluster) -> ScaledPool:
    """Every instance of ``cluster``, routed by its router through ``Cluster.routable``."""

    def set_routable(k: int) -> None:
        cluster.routable = k

    return ScaledPool("instances", cluster.instances, set_routable, cluster.router.forget)


class Autoscaler:
    """Drives the states of one pool's instances (module docstring) and the serving prefix
    its router picks from (``ScaledPool.set_routable``)."""

    def __init__(
        self,
        cluster: Cluster,
        config: AutoscaleConfig,
        *,
        startup_s: float,
        pool: ScaledPool | None = None,
    ) -> None:
        """Drives ``pool`` (default: every instance of ``cluster``); the ticks stop once no
        request will arrive any more (``cluster.arrivals_done``) and every instance of the
        cluster is idle (a PD pool's work can still come from the other pool)."""
        pool = pool or aggregated_pool(cluster)
        instances = pool.instances
        initial = config.initial_instances or config.min_instances  # ≥ min_instances
        if initial > len(instances):
            raise ValueError(
                f"autoscale: {initial} instances to start with, but the pool has "
                f"{len(instances)} (the most it may run)"
            )
        self.cluster = cluster
        self.kernel = cluster.kernel
        self.pool = pool
        self.instances = instances
        self.config = config
        self.startup_s = startup_s
        serving: list[State] = ["serving"] * initial
        self.state: list[State] = serving + ["off"] * (len(instances) - initial)
        self.routable = initial
        """Serving prefix ``0 .. routable − 1`` of the pool (what its router picks from)."""
        pool.set_routable(initial)
        self._samples: deque[tuple[float, int]] = deque()
        self._sum = 0
        self._wanted: deque[tuple[float, int]] = deque()
        self._last_tick_s = 0.0
        self._latency = RecentLatency(cluster.recorder, config.window_s)
        self.log = FleetLog(startup_s=startup_s)
        self._record()

    # ----- the loop -----------------------------------------------------------------------------
    def start(self) -> None:
        """Schedule the first decision (at ``interval_s``)."""
        self.kernel.after(self.config.interval_s, self._tick)

    def _tick(self) -> None:
        now = self.kernel.now
        self._bill(now)
        self._stop_idle_drained()
        wanted = self._wanted_now(now)
        paid = self.routable + self._count("starting")
        if wanted > paid:
            self._scale_up(wanted - paid)
        else:
            floor = self._stabilised(now, wanted)
            if floor < paid:
                self._scale_down(paid - floor)
        if self.cluster.arrivals_done() and not self._busy():
            self._stop_idle_drained()  # what this tick chose to drain is idle already
            return  # nothing will ever arrive again: let the run end
        self.kernel.after(self.config.interval_s, self._tick)

    def _wanted_now(self, now: float) -> int:
        if self.config.policy == "slo":
            return self._wanted_by_slo(now)
        target = self.config.target_concurrency
        assert target is not None  # AutoscaleConfig checks it for this policy
        load = sum(inst.n_outstanding for inst in self.instances)
        self._samples.append((now, load))
        self._sum += load
        # The newest sample always counts (a window shorter than a tick: the load now).
        while len(self._samples) > 1 and self._samples[0][0] <= now - self.config.window_s:
            self._sum -= self._samples.popleft()[1]
        average = self._sum / len(self._samples)
        wanted = math.ceil(average / target - 1e-9)
        return min(len(self.instances), max(self.config.min_instances, wanted))

    def _wanted_by_slo(self, now: float) -> int:
        """Policy slo (module doc): one more, one fewer, or as many as are paid for."""
        c, signal = self.config, self._latency
        paid = self.routable + self._count("starting")
        held = signal.update(now)
        ttft = _ratio(signal.percentile("ttft_ms", c.slo_percentile), c.ttft_ms_target)
        tpot = _ratio(signal.percentile("tpot_ms", c.slo_percentile), c.tpot_ms_target)
        queued = signal.queue_share() if self.pool.queue_signal else 0.0
        wanted = paid
        if tpot > 1.0 or (ttft > 1.0 and queued >= c.scale_up_queue_share):
            wanted = paid if self._count("starting") else paid + 1
        elif held == 0 and not any(inst.n_outstanding for inst in self.instances):
            wanted = paid - 1  # idle
        elif max(ttft, tpot) <= 1.0 and queued < c.scale_down_queue_share:
            wanted = paid - 1
        return min(len(self.instances), max(c.min_instances, wanted))

    def _stabilised(self, now: float, wanted: int) -> int:
        """The highest count wanted within the scale-down delay (this tick's included)."""
        window = self._wanted
        window.append((now, wanted))
        while window[0][0] < now - self.config.scale_down_delay_s:
            window.popleft()
        return max(count for _, count in window)

    # ----- transitions --------------------------------------------------------------------------
    def _scale_up(self, n: int) -> None:
        for i in range(len(self.instances)):
            if n == 0:
                break
            if self.state[i] == "draining":  # take it back: it still has its cache
                self.state[i] = "serving"
                n -= 1
        self._settle_routable()
        for i in range(len(self.instances)):
            if n == 0:
                break
            if self.state[i] == "off":
                self.state[i] = "starting"
                self.log.n_started += 1
                self.kernel.after(self.startup_s, functools.partial(self._ready, i))
                n -= 1
        self._record()

    def _scale_down(self, n: int) -> None:
        for i in reversed(range(len(self.instances))):
            if n == 0:
                break
            if self.state[i] == "starting":
                self.state[i] = "off"  # cancelled; ``_ready`` will find it off
                n -= 1
        for i in reversed(range(self.routable)):
            if n == 0:
                break
            self.state[i] = "draining"
            n -= 1
        self._settle_routable()
        self._record()

    def _ready(self, index: int) -> None:
        if self.state[index] != "starting":
            return  # cancelled while starting
        self.state[index] = "serving"
        self._settle_routable()
        self._record()

    def _stop_idle_drained(self) -> None:
        stopped = False
        for i, inst in enumerate(self.instances):
            if self.state[i] == "draining" and inst.n_outstanding == 0:
                self.state[i] = "off"
                inst.cold_restart()
                self.pool.forget(i)
                self.log.n_stopped += 1
                stopped = True
        if stopped:
            self._record()

    def _settle_routable(self) -> None:
        """The serving prefix: instances serve in index order (starts complete in order)."""
        k = 0
        while k < len(self.state) and self.state[k] == "serving":
            k += 1
        self.routable = k
        self.pool.set_routable(k)

    # ----- accounting ---------------------------------------------------------------------------
    def _count(self, state: State) -> int:
        return sum(1 for s in self.state if s == state)

    def _busy(self) -> bool:
        everywhere = self.cluster.instances  # a PD pool's work may still come from the other
        return any(inst.n_outstanding for inst in everywhere) or self._count("starting") > 0

    def _bill(self, now: float) -> None:
        paid = sum(1 for s in self.state if s != "off")
        self.log.instance_seconds += paid * (now - self._last_tick_s)
        self._last_tick_s = now

    def _record(self) -> None:
        log = self.log
        log.times_s.append(self.kernel.now)
        log.serving.append(self._count("serving"))
        log.starting.append(self._count("starting"))
        log.draining.append(self._count("draining"))


def _ratio(value: float, target: float | None) -> float:
    """``value / target``; 0 without a target or without observations (nothing to act on)."""
    if target is None or math.isnan(value):
        return 0.0
    return value / target
