"""Screening before simulation: per-request latency lower bounds that can rule a point out.

Every request's TTFT is at least the time to prefill the part of its prompt no cache can hold,
alone on an idle instance; its TPOT at least one decode step of that request alone at its prompt
length. Per request:

- **cached tokens ≤** the prompt's blocks seen in any earlier request (an infinite cache that
  hits past gaps), and at most ``prompt − 1`` (an engine always computes the last token);
- **TTFT ≥** the solo prefill steps of the rest, in chunks of the engine's chunk size when its
  scheduler chunks prompts (each step ≥ that chunk alone: step time grows with batch content);
- **TPOT ≥** one solo decode step at the prompt length (the context only grows);
- **E2E ≥** TTFT bound + (output − 1) × TPOT bound.

Percentiles of element-wise lower bounds are lower bounds of the percentiles, and a request
whose bound misses its bar misses it in any run, so when the bounds alone break a target, or
more requests than the attainment allows, the point is infeasible and costs no simulation.
``MARGIN`` (10%) absorbs what the bounds assume about the step model (splitting a prompt into
smaller chunks never makes it cheaper). Not screened: PD deployments (two pools and a KV
transfer), speculative decoding (several tokens per step), closed-loop workloads (follow-up
turns exist only in a run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hardware.schema import Catalog
from simulator.api import WorkloadBuilder, build_source
from simulator.build import Infeasible, build_pool
from simulator.cluster.overlong import tokens_of
from simulator.config import ServingConfig
from simulator.core import Kernel
from simulator.records import Recorder
from slo import SloSpec

__all__ = ["MARGIN", "Shapes", "screen", "workload_shapes"]

#: Slack on every bound before it rules a point out (module docstring).
MARGIN = 0.10

Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Shapes:
    """The workload's requests as the bounds see them (one entry per request)."""

    prompt: npt.NDArray[np.int64]
    cached_max: npt.NDArray[np.int64]
    """Upper bound on the prompt tokens any cache can serve (module docstring)."""
    output: npt.NDArray[np.int64]
    overlong: npt.NDArray[np.bool_]
    """Longer than the model's context and not dropped: rejected, a miss in any run."""
    block_tokens: int


def workload_shapes(
    builder: WorkloadBuilder, *, seed: int, max_context_tokens: int, drop_overlong: bool
) -> Shapes:
    """The requests every trial replays (built from ``seed``), reduced to their shapes."""
    source = build_source(builder, seed)
    seen: set[int] = set()
    prompt, cached, output, overlong = [], [], [], []
    for request in source.start():
        too_long = tokens_of(request) > max_context_tokens
        if too_long and drop_overlong:
            continue
        hits = sum(1 for block in request.block_ids if block in seen)
        seen.update(request.block_ids)
        length = max(1, request.input_length)
        prompt.append(length)
        cached.append(min(length - 1, hits * source.block_tokens))
        output.append(max(1, request.output_length))
        overlong.append(too_long)
    return Shapes(
        np.asarray(prompt, dtype=np.int64),
        np.asarray(cached, dtype=np.int64),
        np.asarray(output, dtype=np.int64),
        np.asarray(overlong, dtype=np.bool_),
        source.block_tokens,
    )


def _bounds_ms(config: ServingConfig, catalog: Catalog, shapes: Shapes) -> dict[str, Array] | None:
    """Per-request lower bounds (ms) of TTFT, TPOT and E2E on ``config``; None: not screened."""
    pool = build_pool(
        config, catalog, block_tokens=shapes.block_tokens, kernel=Kernel(), recorder=Recorder(),
        seed=np.random.SeedSequence(0),
    )  # fmt: skip
    if isinstance(pool, Infeasible):
        return None  # the simulation says why, at no cost either
    engine = pool.instances[0]
    chunk = min(engine.chunk_tokens, engine.max_batched_tokens)
    timer = engine.timer
    memo: dict[tuple[int, int], float] = {}

    def step(batch: list[tuple[int, int]]) -> float:
        # Sizes rounded down to a 1/16-octave grid: a smaller batch never takes longer, so the
        # bound stays a bound, and the few distinct shapes are timed once each.
        ((cache_len, new),) = batch
        key = (_grid_down(cache_len), max(1, _grid_down(new)))
        if key not in memo:
            memo[key] = timer.step_seconds([key])
        return memo[key]

    ttft = np.empty(len(shapes.prompt))
    tpot = np.empty(len(shapes.prompt))
    for i, (length, cached, out) in enumerate(
        zip(shapes.prompt, shapes.cached_max, shapes.output, strict=True)
    ):
        done, seconds = int(cached), 0.0
        while done < length:
            size = int(length - done)
            if engine.scheduler.chunks_prompts:
                size = min(size, chunk)
            seconds += step([(done, size)])
            done += size
        ttft[i] = seconds * 1e3
        tpot[i] = step([(int(length), 1)]) * 1e3 if out > 1 else math.nan
    ttft[shapes.overlong] = math.inf
    e2e = ttft + np.nan_to_num(tpot) * (shapes.output - 1)
    return {"ttft_ms": ttft, "tpot_ms": tpot, "e2e_ms": e2e}


def _grid_down(n: int) -> int:
    """``n`` rounded down to the nearest 2^(k/16) (0 stays 0)."""
    if n <= 16:
        return n
    return int(2 ** (math.floor(math.log2(n) * 16) / 16))


def _stat(values: Array, stat: str) -> float:
    clean = values[~np.isnan(values)]
    if not len(clean):
        return 0.0
    if stat == "mean":
        return float(clean.mean())
    with np.errstate(invalid="ignore"):  # inf - inf between two rejected requests
        value = float(np.percentile(clean, float(stat.removeprefix("p"))))
    return math.inf if math.isnan(value) else value  # as simulator.metrics computes it


def screen(config: ServingConfig, catalog: Catalog, shapes: Shapes, spec: SloSpec) -> str:
    """Why ``config`` provably misses ``spec`` without simulating it ('' when it may meet it)."""
    if config.pd_mode == "disaggregated" or config.spec_tokens or not len(shapes.prompt):
        return ""
    bounds = _bounds_ms(config, catalog, shapes)
    if bounds is None:
        return ""
    for metric, stat, limit in spec.target_items():
        if metric in bounds and (stat == "mean" or stat.startswith("p")):
            low = _stat(bounds[metric], stat)
            if low > limit * (1 + MARGIN):
                return (
                    f"screened without simulation: {metric}.{stat} ≥ {low:,.0f} ms on solo "
                    f"prefill/decode steps alone > target {limit:,.0f} ms"
                )
    if spec.attainment is None:
        return ""
    miss = np.zeros(len(shapes.prompt), dtype=bool)
    for metric, bar in spec.per_request_bars().items():
        if metric in bounds:
            miss |= bounds[metric] > bar * (1 + MARGIN)
    if miss.mean() > 1 - spec.attainment:
        return (
            f"screened without simulation: {miss.mean():.0%} of requests miss a target on solo "
            f"prefill/decode steps alone; attainment {spec.attainment:.0%} allows "
            f"{1 - spec.attainment:.0%}"
        )
    return ""
