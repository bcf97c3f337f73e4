"""The parts a workload file is built from: distributions of lengths and think times, the
arrival process, shared system prompts, and the size caps every synthetic shape is checked
against (``spec`` assembles them into the workload shapes).

Caps and checks, as ``spec``'s docstring states them: a distribution's reach is judged by its
largest likely draw (``reach``); numbers must be finite everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

import numpy as np
from pydantic import BeforeValidator, Field, model_validator

from simulator.workload.rate_profile import RateProfile
from simulator.workload.spec_base import (
    MAX_REQUESTS,
    MAX_SECONDS,
    MAX_SESSIONS,
    MAX_TOKENS,
    MAX_TURNS,
    FrozenSpec,
)
from simulator.workload.synthetic import (
    Distribution,
    Empirical,
    Exponential,
    Fixed,
    GammaArrivals,
    LogNormal,
    PoissonArrivals,
    Uniform,
)
from simulator.workload.trace import open_trace

__all__ = [
    "MAX_REQUESTS",
    "MAX_SECONDS",
    "MAX_SESSIONS",
    "MAX_TOKENS",
    "MAX_TURNS",
    "ArrivalSpec",
    "DistSpec",
    "ExponentialDist",
    "FixedDist",
    "FrozenSpec",
    "LogNormalDist",
    "SyntheticSpec",
    "SystemPromptSpec",
    "TraceDist",
    "UniformDist",
    "check_count",
    "check_reach",
    "reach",
]


# ----- distributions ---------------------------------------------------------------------------
class FixedDist(FrozenSpec):
    """Always the same value."""

    dist: Literal["fixed"] = Field(description="Distribution kind.")
    value: float = Field(ge=0, description="The value.")

    def build(self, base: Path) -> Distribution:
        """The sampler."""
        del base
        return Fixed(self.value)


class UniformDist(FrozenSpec):
    """Uniform between two bounds."""

    dist: Literal["uniform"] = Field(description="Distribution kind.")
    low: float = Field(ge=0, description="Lower bound.")
    high: float = Field(ge=0, description="Upper bound (≥ low).")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.high < self.low:
            raise ValueError("high must be at least low")
        return self

    def build(self, base: Path) -> Distribution:
        """The sampler."""
        del base
        return Uniform(self.low, self.high)


class LogNormalDist(FrozenSpec):
    """Log-normal, given by its median and log-space sigma, optionally clipped."""

    dist: Literal["lognormal"] = Field(description="Distribution kind.")
    median: float = Field(gt=0, description="Median.")
    sigma: float = Field(
        ge=0, le=10, description="Standard deviation of the logarithm (at most 10)."
    )
    min: float = Field(default=0.0, ge=0, description="Clip draws below this.")
    max: float | None = Field(default=None, gt=0, description="Clip draws above this.")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max is not None and not self.min <= self.median <= self.max:
            raise ValueError(f"median ({self.median:g}) must lie within min and max")
        return self

    def build(self, base: Path) -> Distribution:
        """The sampler."""
        del base
        return LogNormal(self.median, self.sigma, self.min, self.max or float("inf"))


class ExponentialDist(FrozenSpec):
    """Exponential with a mean."""

    dist: Literal["exponential"] = Field(description="Distribution kind.")
    mean: float = Field(gt=0, description="Mean.")

    def build(self, base: Path) -> Distribution:
        """The sampler."""
        del base
        return Exponential(self.mean)


class TraceDist(FrozenSpec):
    """Lengths resampled from a trace file."""

    dist: Literal["trace"] = Field(description="Distribution kind.")
    path: Path = Field(description="Trace file (JSONL or lcp).")
    field: Literal["input", "output"] = Field(description="Which length to resample.")

    def build(self, base: Path) -> Distribution:
        """The sampler (reads the whole trace once)."""
        reader = open_trace(base / self.path)
        if self.field == "input":
            return Empirical(tuple(float(r.input_length) for r in reader))
        return Empirical(tuple(float(r.output_length) for r in reader))


def _bare_number(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"dist": "fixed", "value": value}
    return value


DistSpec = Annotated[
    FixedDist | UniformDist | LogNormalDist | ExponentialDist | TraceDist,
    BeforeValidator(_bare_number),
    Field(discriminator="dist"),
]


class ArrivalSpec(FrozenSpec):
    """An arrival process."""

    process: Literal["poisson", "gamma"] = Field(description="Inter-arrival distribution.")
    rate_per_s: float = Field(
        ge=1e-6, le=1e7, description="Mean arrivals per second (one per 11.6 days to 10 million)."
    )
    cv: float = Field(
        default=1.0,
        gt=0,
        le=1e3,
        description="Coefficient of variation of the gaps (gamma only).",
    )

    profile: RateProfile | None = Field(
        default=None,
        description="Rate multiplier over time (pieces or a diurnal curve; rate_profile.py).",
    )

    def build(self) -> PoissonArrivals | GammaArrivals:
        """The process."""
        warp = self.profile.warp() if self.profile is not None else None
        if self.process == "poisson":
            return PoissonArrivals(self.rate_per_s, warp)
        return GammaArrivals(self.rate_per_s, self.cv, warp)


class SystemPromptSpec(FrozenSpec):
    """Shared system prompts: a request or session starts with one of them."""

    count: int = Field(default=1, ge=1, le=MAX_SESSIONS, description="Distinct system prompts.")
    tokens: int = Field(ge=1, le=MAX_TOKENS, description="Tokens of each system prompt.")


class SyntheticSpec(FrozenSpec):
    block_tokens: int = Field(
        default=16, ge=1, description="Tokens per block of the generated ids (reuse unit)."
    )


def reach(dist: object) -> float | None:
    """The largest likely draw of a distribution spec (None: a trace's own lengths)."""
    if isinstance(dist, FixedDist):
        return dist.value
    if isinstance(dist, UniformDist):
        return dist.high
    if isinstance(dist, LogNormalDist):
        return dist.max if dist.max is not None else dist.median * float(np.exp(6 * dist.sigma))
    if isinstance(dist, ExponentialDist):
        return 20 * dist.mean
    return None


def check_reach(dist: object, field: str, cap: float, unit: str) -> None:
    """``ValueError`` naming ``field`` when ``dist``'s likely draws reach past ``cap``."""
    largest = reach(dist)
    if largest is not None and largest > cap:
        raise ValueError(
            f"{field}: draws reach {largest:.3g} {unit}; at most {cap:,.0f} {unit} are supported"
        )


def check_count(value: int, field: str, cap: int) -> None:
    """``ValueError`` naming ``field`` when the count ``value`` is above ``cap``."""
    if value > cap:
        raise ValueError(f"{field}: {value:,} is more than the {cap:,} supported")


# ----- shapes ----------------------------------------------------------------------------------
