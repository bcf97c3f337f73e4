"""Workload files: one YAML (or TOML/JSON) document describing what arrives.

``kind`` selects the shape; every other key is a field of that shape::

    kind: trace                      # replay a trace file
    path: mooncake_conversation_trace.jsonl
    time_scale: 0.5                  # multiply timestamps (0.5 = twice the rate)
    max_requests: 2000               # optional; also start_s / end_s (original seconds)

    kind: open_loop                  # independent requests at a rate
    requests: 1000
    arrival: {process: poisson, rate_per_s: 4}         # or gamma with cv
    input_tokens: {dist: lognormal, median: 2000, sigma: 0.8, max: 32000}
    output_tokens: 256                                 # a bare number = fixed
    system_prompt: {count: 4, tokens: 1500}            # optional shared prefixes

    kind: sessions                   # multi-turn conversations, open loop
    sessions: 200
    arrival: {process: poisson, rate_per_s: 0.5}
    turns: {dist: uniform, low: 1, high: 8}
    user_tokens: 300
    output_tokens: 250
    think_time_s: {dist: exponential, mean: 20}

    kind: closed_loop                # N users, next request when the last one finishes
    users: 32
    requests: 2000
    input_tokens: 1000               # per turn (user tokens); turns default to 1
    output_tokens: 200

Distributions: ``fixed`` (``value``), ``uniform`` (``low``, ``high``), ``lognormal``
(``median``, ``sigma``, optional ``min``/``max``), ``exponential`` (``mean``), ``trace``
(``path``, ``field``: input/output — resample the lengths of a trace). A relative ``path``
is taken relative to the workload file (``load_workload``) or the working directory.

Errors are one line naming the file and the field (``InputError``).

Sizes are capped before anything is generated (``MAX_REQUESTS``, ``MAX_SESSIONS``,
``MAX_TURNS``, ``MAX_TOKENS``, ``MAX_SECONDS``): a generated workload is held in memory, so a
mistyped exponent (``sessions: 1e9`` asked for a 7.45 GiB array) must be one line, not a
``MemoryError`` or an hour of generation. A distribution's reach is judged by its largest
likely draw (``_reach``: the bound of a bounded one, the median × e^(6σ) of an unclipped
log-normal, 20 means of an exponential). Numbers must be finite everywhere.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import numpy as np
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    model_validator,
)

from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource, RequestSource
from simulator.workload.synthetic import (
    ClosedLoopSource,
    Distribution,
    Empirical,
    Exponential,
    Fixed,
    GammaArrivals,
    LogNormal,
    PoissonArrivals,
    SessionShape,
    Uniform,
    open_loop,
    sessions,
)
from simulator.workload.trace import open_trace
from slo.inputfile import load_mapping, validate

__all__ = [
    "MAX_REQUESTS",
    "MAX_SECONDS",
    "MAX_SESSIONS",
    "MAX_TOKENS",
    "MAX_TURNS",
    "WorkloadSpec",
    "load_workload",
]

#: Most requests a synthetic workload may generate (open loop, closed loop, sessions × turns).
MAX_REQUESTS = 10_000_000
#: Most sessions (or closed-loop users) of a synthetic workload.
MAX_SESSIONS = 1_000_000
#: Most turns of one session.
MAX_TURNS = 1_000
#: Most tokens of one prompt part or answer (ten times the longest context a model ships with).
MAX_TOKENS = 10_000_000
#: Longest think time or ramp, seconds (about 116 days).
MAX_SECONDS = 1e7


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# ----- distributions ---------------------------------------------------------------------------
class FixedDist(_Frozen):
    """Always the same value."""

    dist: Literal["fixed"] = Field(description="Distribution kind.")
    value: float = Field(ge=0, description="The value.")

    def build(self, base: Path) -> Distribution:
        """The sampler."""
        del base
        return Fixed(self.value)


class UniformDist(_Frozen):
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


class LogNormalDist(_Frozen):
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


class ExponentialDist(_Frozen):
    """Exponential with a mean."""

    dist: Literal["exponential"] = Field(description="Distribution kind.")
    mean: float = Field(gt=0, description="Mean.")

    def build(self, base: Path) -> Distribution:
        """The sampler."""
        del base
        return Exponential(self.mean)


class TraceDist(_Frozen):
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


class ArrivalSpec(_Frozen):
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

    def build(self) -> PoissonArrivals | GammaArrivals:
        """The process."""
        if self.process == "poisson":
            return PoissonArrivals(self.rate_per_s)
        return GammaArrivals(self.rate_per_s, self.cv)


class SystemPromptSpec(_Frozen):
    """Shared system prompts: a request or session starts with one of them."""

    count: int = Field(default=1, ge=1, le=MAX_SESSIONS, description="Distinct system prompts.")
    tokens: int = Field(ge=1, le=MAX_TOKENS, description="Tokens of each system prompt.")


class _Synthetic(_Frozen):
    block_tokens: int = Field(
        default=16, ge=1, description="Tokens per block of the generated ids (reuse unit)."
    )


def _reach(dist: object) -> float | None:
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


def _check_reach(dist: object, field: str, cap: float, unit: str) -> None:
    reach = _reach(dist)
    if reach is not None and reach > cap:
        raise ValueError(
            f"{field}: draws reach {reach:.3g} {unit}; at most {cap:,.0f} {unit} are supported"
        )


def _check_count(value: int, field: str, cap: int) -> None:
    if value > cap:
        raise ValueError(f"{field}: {value:,} is more than the {cap:,} supported")


# ----- shapes ----------------------------------------------------------------------------------
class TraceWorkload(_Frozen):
    """Replay of a trace file (Mooncake / Qwen-Bailian JSONL, lcp)."""

    kind: Literal["trace"] = Field(description="Workload shape.")
    path: Path = Field(description="The trace file.")
    time_scale: float = Field(
        default=1.0,
        ge=1e-6,
        le=1e6,
        description="Factor on timestamps: 0.5 replays twice as fast (1e-6 to 1e6).",
    )
    max_requests: int | None = Field(default=None, ge=1, description="Stop after this many.")
    start_s: float = Field(
        default=0.0,
        ge=0,
        description="Skip requests before this time "
        "(original trace seconds); the window starts at time 0.",
    )
    end_s: float | None = Field(
        default=None, gt=0, description="Skip requests from this time on (original trace seconds)."
    )
    block_tokens: int | None = Field(
        default=None, ge=1, description="Override the trace's block size (512 Mooncake, 16 Qwen)."
    )

    @model_validator(mode="after")
    def _window(self) -> Self:
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError("end_s must be after start_s")
        return self

    def build(self, rng: np.random.Generator, base: Path = Path(".")) -> RequestSource:
        """A streaming source over the trace (``rng`` is unused: a trace is fixed)."""
        del rng
        reader = open_trace(base / self.path, block_size_tokens=self.block_tokens)

        def requests() -> Iterator[TraceRequest]:
            selected = (
                r
                for r in reader
                if r.timestamp_s >= self.start_s
                and (self.end_s is None or r.timestamp_s < self.end_s)
            )
            for request in itertools.islice(selected, self.max_requests):
                time_s = (request.timestamp_s - self.start_s) * self.time_scale
                yield replace(request, timestamp_s=time_s)

        return OpenLoopSource(_Reiterable(requests), reader.info.block_size_tokens)


class _Reiterable:
    """An iterable that calls a generator function afresh on every ``iter``."""

    def __init__(self, make: Callable[[], Iterator[TraceRequest]]) -> None:
        self._make = make

    def __iter__(self) -> Iterator[TraceRequest]:
        return iter(self._make())


class OpenLoopWorkload(_Synthetic):
    """Independent requests arriving at a rate."""

    kind: Literal["open_loop"] = Field(description="Workload shape.")
    requests: int = Field(ge=1, description="Number of requests.")
    arrival: ArrivalSpec = Field(description="Arrival process.")
    input_tokens: DistSpec = Field(description="Prompt tokens (after any system prompt).")
    output_tokens: DistSpec = Field(description="Tokens to generate.")
    system_prompt: SystemPromptSpec | None = Field(
        default=None, description="Shared system prompts in front of every prompt."
    )

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        _check_count(self.requests, "requests", MAX_REQUESTS)
        _check_reach(self.input_tokens, "input_tokens", MAX_TOKENS, "tokens")
        _check_reach(self.output_tokens, "output_tokens", MAX_TOKENS, "tokens")
        return self

    def build(self, rng: np.random.Generator, base: Path = Path(".")) -> RequestSource:
        """The requests, generated from ``rng``."""
        prompts = (
            (self.system_prompt.count, self.system_prompt.tokens) if self.system_prompt else None
        )
        generated = list(
            open_loop(
                n_requests=self.requests,
                arrivals=self.arrival.build(),
                input_tokens=self.input_tokens.build(base),
                output_tokens=self.output_tokens.build(base),
                block_tokens=self.block_tokens,
                rng=rng,
                system_prompts=prompts,
            )
        )
        return OpenLoopSource(generated, self.block_tokens)


class _Conversational(_Synthetic):
    turns: DistSpec = Field(default=1, validate_default=True, description="Turns per session.")
    output_tokens: DistSpec = Field(description="Answer tokens per turn.")
    think_time_s: DistSpec = Field(
        default=0, validate_default=True, description="Seconds between turns."
    )
    system_prompt: SystemPromptSpec | None = Field(
        default=None, description="Shared system prompts sessions start with."
    )

    def _check_conversation(self, user_tokens: DistSpec, users: int) -> None:
        """Caps shared by open and closed sessions (``users``: sessions or concurrent users)."""
        _check_count(
            users, "sessions" if isinstance(self, SessionsWorkload) else "users", MAX_SESSIONS
        )
        lowest = (
            self.turns.value
            if isinstance(self.turns, FixedDist)
            else self.turns.low
            if isinstance(self.turns, UniformDist)
            else 1.0
        )
        if lowest < 1:
            raise ValueError(f"turns: a session has at least one turn, got {lowest:g}")
        _check_reach(self.turns, "turns", MAX_TURNS, "turns")
        _check_reach(user_tokens, "user_tokens", MAX_TOKENS, "tokens")
        _check_reach(self.output_tokens, "output_tokens", MAX_TOKENS, "tokens")
        _check_reach(self.think_time_s, "think_time_s", MAX_SECONDS, "s")

    def _shape(self, user_tokens: DistSpec, base: Path) -> SessionShape:
        prompts = (
            (self.system_prompt.count, self.system_prompt.tokens) if self.system_prompt else None
        )
        return SessionShape(
            turns=self.turns.build(base),
            user_tokens=user_tokens.build(base),
            output_tokens=self.output_tokens.build(base),
            think_time_s=self.think_time_s.build(base),
            system_prompts=prompts,
        )


class SessionsWorkload(_Conversational):
    """Multi-turn conversations arriving at a rate (open loop)."""

    kind: Literal["sessions"] = Field(description="Workload shape.")
    sessions: int = Field(ge=1, description="Number of conversations.")
    arrival: ArrivalSpec = Field(description="Arrival process of new conversations.")
    user_tokens: DistSpec = Field(description="New user tokens per turn.")

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        self._check_conversation(self.user_tokens, self.sessions)
        turns = _reach(self.turns) or 1.0
        if self.sessions * turns > MAX_REQUESTS:
            raise ValueError(
                f"sessions x turns: up to {self.sessions * turns:,.0f} requests; at most "
                f"{MAX_REQUESTS:,} are supported"
            )
        return self

    def build(self, rng: np.random.Generator, base: Path = Path(".")) -> RequestSource:
        """The conversations' requests, generated from ``rng``."""
        generated = sessions(
            n_sessions=self.sessions,
            arrivals=self.arrival.build(),
            shape=self._shape(self.user_tokens, base),
            block_tokens=self.block_tokens,
            rng=rng,
        )
        return OpenLoopSource(generated, self.block_tokens)


class ClosedLoopWorkload(_Conversational):
    """Concurrent users, each sending its next request when the previous one finishes."""

    kind: Literal["closed_loop"] = Field(description="Workload shape.")
    users: int = Field(ge=1, description="Concurrent users (the benchmark's concurrency).")
    requests: int = Field(ge=1, description="Requests issued in all.")
    input_tokens: DistSpec = Field(description="New user tokens per request (per turn).")
    ramp_s: float = Field(
        default=0.0, ge=0, le=MAX_SECONDS, description="User k starts at k × ramp_s."
    )

    @model_validator(mode="after")
    def _bounded(self) -> Self:
        self._check_conversation(self.input_tokens, self.users)
        _check_count(self.requests, "requests", MAX_REQUESTS)
        return self

    def build(self, rng: np.random.Generator, base: Path = Path(".")) -> RequestSource:
        """An event-driven source (it reacts to finished requests)."""
        return ClosedLoopSource(
            users=self.users,
            n_requests=self.requests,
            shape=self._shape(self.input_tokens, base),
            block_tokens=self.block_tokens,
            rng=rng,
            ramp_s=self.ramp_s,
        )


_Shape = Annotated[
    TraceWorkload | OpenLoopWorkload | SessionsWorkload | ClosedLoopWorkload,
    Field(discriminator="kind"),
]


class WorkloadSpec(RootModel[_Shape]):
    """A workload file: one of the shapes, selected by ``kind`` (module docstring)."""

    model_config = ConfigDict(frozen=True)

    def build(self, rng: np.random.Generator, base: Path = Path(".")) -> RequestSource:
        """The request source (``simulate`` calls this with a generator from its seed)."""
        return self.root.build(rng, base)


class _Anchored:
    """A spec with the directory its relative paths are resolved against."""

    def __init__(self, spec: WorkloadSpec, base: Path) -> None:
        self.spec = spec
        self.base = base

    def build(self, rng: np.random.Generator) -> RequestSource:
        return self.spec.build(rng, self.base)


def load_workload(path: str | Path) -> _Anchored:
    """Read a workload file; relative paths inside it are relative to the file.

    Returns a builder for ``simulate`` (``.spec`` is the validated ``WorkloadSpec``). Raises
    ``InputError`` with one line naming the file and field.
    """
    path = Path(path)
    spec = validate(WorkloadSpec, load_mapping(path), str(path))
    return _Anchored(spec, path.parent)
