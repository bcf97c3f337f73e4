"""The contract every scheduling policy of ``SCHEDULERS`` passes (``engine/scheduler.py``).

Checked on a real engine instance (Qwen3-8B on one H100 from the shipped catalog, a constant
0.01 s step, small limits so that budgets bind and KV pressure preempts), with every plan the
scheduler returns inspected before the step runs:

- a step carries at most ``max_batched_tokens`` tokens, each request at least one, and at most
  ``max_running`` requests run;
- only running requests are scheduled, and no request the step preempted;
- a request gets no more tokens than it has left to compute (prompt + generated − processed);
- every request of a mixed workload (short and long prompts, bursts) is served or rejected with
  a reason — nothing starves — and the run is deterministic.

Each check takes a registry name and raises ``AssertionError`` naming what broke.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np

from hardware.catalog import shipped_catalog
from simulator.build import Pool, build_pool
from simulator.cluster.driver import Cluster
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.engine.request import RUNNING
from simulator.engine.scheduler import SCHEDULERS, Scheduler, SchedulerHost, StepPlan
from simulator.records import Recorder, RequestRecord
from simulator.testing._check import fail_unless
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

__all__ = ["CHECKS", "LIMITS", "check_scheduler", "mixed_workload", "serve_checked"]

#: Engine limits of the checks: small enough that the budget, the cap and KV pressure bind.
LIMITS = {"max_batched_tokens": 512, "max_running_requests": 6, "kv_capacity_tokens": 3300}
_BLOCK_TOKENS = 16


def mixed_workload(seed: int, n: int = 60) -> list[TraceRequest]:
    """Bursts of short and long prompts (16–3,000 tokens) with 1–299 output tokens, fresh
    blocks (no shared prefixes), arrivals in [0, 2) s: under ``LIMITS`` the running requests
    outgrow the KV cache, so schedulers that admit on demand preempt."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, 2.0, n))
    out = []
    for i, t in enumerate(times):
        prompt = int(rng.choice([16, 100, 500, 3000]))
        blocks = tuple(10_000 * (i + 1) + k for k in range(-(-prompt // _BLOCK_TOKENS)))
        out.append(TraceRequest(i, float(t), prompt, int(rng.integers(1, 300)), blocks))
    return out


class _Watched(Scheduler):
    """Delegates to the scheduler under test and checks every plan it returns."""

    name: ClassVar[str] = "watched"

    def __init__(self, inner: Scheduler, label: str) -> None:
        self.inner = inner
        self.label = label
        self.chunks_prompts = inner.chunks_prompts  # type: ignore[misc]
        self.steps = 0

    def schedule(self, host: SchedulerHost) -> StepPlan:
        plan = self.inner.schedule(host)
        self.steps += bool(plan.tokens)
        where = f"{self.label}, step {self.steps}"
        total = sum(plan.tokens.values())
        fail_unless(
            total <= host.max_batched_tokens,
            f"{where}: {total} tokens > budget {host.max_batched_tokens}",
        )
        fail_unless(
            len(host.running) <= host.max_running,
            f"{where}: {len(host.running)} running > cap {host.max_running}",
        )
        preempted = set(plan.preempted)
        for req, n in plan.tokens.items():
            fail_unless(n >= 1, f"{where}: request {req.index} scheduled {n} tokens")
            fail_unless(req.state == RUNNING, f"{where}: request {req.index} is not running")
            fail_unless(req.index not in preempted, f"{where}: request {req.index} preempted")
            left = req.prompt_len + req.generated - req.processed  # P + g - processed
            fail_unless(n <= left, f"{where}: request {req.index} gets {n} > {left} left")
        return plan


def serve_checked(name: str, seed: int) -> tuple[list[RequestRecord], Recorder, int]:
    """Serve ``mixed_workload(seed)`` with scheduler ``name`` (every plan checked)."""
    config = ServingConfig(
        model="Qwen/Qwen3-8B",
        gpu="h100_sxm",
        scheduler=name,
        latency_model="constant:0.01",
        chunk_tokens=256,
        **LIMITS,
    )
    kernel, recorder = Kernel(), Recorder()
    pool = build_pool(
        config,
        shipped_catalog(),
        block_tokens=_BLOCK_TOKENS,
        kernel=kernel,
        recorder=recorder,
        seed=np.random.SeedSequence(seed),
        check_invariants=True,
    )
    fail_unless(isinstance(pool, Pool), f"{name}: the check deployment does not build: {pool}")
    assert isinstance(pool, Pool)  # for the type checker
    watched = []
    for instance in pool.instances:
        instance.scheduler = _Watched(instance.scheduler, name)
        watched.append(instance.scheduler)
    source = OpenLoopSource(mixed_workload(seed), _BLOCK_TOKENS)
    Cluster(kernel, pool.instances, pool.router, source, recorder).run()
    return list(recorder.records), recorder, sum(w.steps for w in watched)


def plans_respect_the_limits(name: str) -> None:
    """Every plan of two seeded runs passes the per-step checks (module docstring)."""
    for seed in (0, 1):
        _, _, steps = serve_checked(name, seed)
        fail_unless(steps > 0, f"{name}: no step ran")


def every_request_is_served_or_rejected(name: str) -> None:
    """Nothing starves: finished + rejected = offered, and every finish has its output."""
    records, recorder, _ = serve_checked(name, 2)
    offered = len(mixed_workload(2))
    fail_unless(
        len(records) + recorder.n_rejected == offered,
        f"{name}: {len(records)} served + {recorder.n_rejected} rejected of {offered}",
    )
    for record in records:
        fail_unless(
            record.finish_s >= record.first_token_s >= record.arrival_s,
            f"{name}: request {record.index} finished before its first token or arrival",
        )


def deterministic(name: str) -> None:
    """Two runs of one seed give identical records."""
    first, _, _ = serve_checked(name, 3)
    again, _, _ = serve_checked(name, 3)
    fail_unless(first == again, f"{name}: two runs with one seed differ")


#: Every check of the contract by name.
CHECKS: dict[str, Callable[[str], None]] = {
    check.__name__: check
    for check in (plans_respect_the_limits, every_request_is_served_or_rejected, deterministic)
}


def check_scheduler(name: str) -> None:
    """Run every check of the contract on the scheduler registered as ``name``."""
    fail_unless(name in SCHEDULERS, f"{name}: not in SCHEDULERS")
    for check in CHECKS.values():
        check(name)
