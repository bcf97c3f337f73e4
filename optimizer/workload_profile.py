"""What the workload is, for the report: requests, rate, length distributions, overlong ones.

One pass over the requests the workload knows up front, built exactly as every trial builds it
(same seed), so the figures describe the sample the study simulated. A closed-loop workload
creates follow-up turns only as earlier ones finish: its profile covers the first request of
each user (``closed_loop`` says so).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from optimizer.workloads import describe_workload
from simulator.api import WorkloadBuilder, build_source
from simulator.cluster.overlong import OverlongTally

__all__ = ["LengthStats", "WorkloadProfile", "profile_workload"]


@dataclass(frozen=True, slots=True)
class LengthStats:
    """A token-length distribution (tokens)."""

    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: list[int]) -> LengthStats:
        """Statistics of ``values`` (all zero when empty)."""
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0, 0.0)
        arr = np.asarray(values, dtype=float)
        p50, p90, p99 = np.percentile(arr, [50, 90, 99])
        return cls(float(arr.mean()), float(p50), float(p90), float(p99), float(arr.max()))


@dataclass(frozen=True, slots=True)
class WorkloadProfile:
    """The study's workload sample, as the report states it (JSON-able via ``to_dict``)."""

    source: dict[str, Any]
    """``describe_workload``: kind, file name, time scale, request cap…"""
    n_requests: int
    span_s: float
    """Seconds from the first arrival to the last."""
    requests_per_s: float
    """Offered load: requests over the span (0 when all arrive at once)."""
    prompt_tokens: LengthStats
    output_tokens: LengthStats
    max_context_tokens: int
    n_overlong: int
    """Requests whose prompt + output exceed the model's context."""
    longest_tokens: int
    overlong_policy: str
    closed_loop: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON and the study's user attributes."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkloadProfile:
        """The inverse of ``to_dict``."""
        fields = dict(data)
        fields["prompt_tokens"] = LengthStats(**fields["prompt_tokens"])
        fields["output_tokens"] = LengthStats(**fields["output_tokens"])
        return cls(**fields)


def profile_workload(
    builder: WorkloadBuilder, *, seed: int, max_context_tokens: int, overlong_policy: str
) -> WorkloadProfile:
    """Profile the requests ``builder`` makes for ``seed`` (module docstring)."""
    source = build_source(builder, seed)
    prompts: list[int] = []
    outputs: list[int] = []
    times: list[float] = []
    tally = OverlongTally(max_context_tokens)
    for request in source.start():
        prompts.append(request.input_length)
        outputs.append(request.output_length)
        times.append(request.timestamp_s)
        tally.see(request)
    span = (max(times) - min(times)) if times else 0.0
    description = describe_workload(builder)
    return WorkloadProfile(
        source=description,
        n_requests=len(prompts),
        span_s=span,
        requests_per_s=len(prompts) / span if span > 0 else 0.0,
        prompt_tokens=LengthStats.of(prompts),
        output_tokens=LengthStats.of(outputs),
        max_context_tokens=max_context_tokens,
        n_overlong=tally.n_overlong,
        longest_tokens=tally.longest_tokens,
        overlong_policy=overlong_policy,
        closed_loop=description.get("kind") == "closed_loop",
    )
