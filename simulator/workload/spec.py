"""Workload files: one YAML (or TOML/JSON) document describing what arrives.

``kind`` selects the shape; every other key is a field of that shape::

    kind: trace                      # replay a trace file
    path: mooncake_conversation_trace.jsonl
    time_scale: 0.5                  # multiply timestamps (0.5 = twice the rate)
    max_requests: 2000               # optional; also start_s / end_s (original seconds)
    rate_profile: {pieces: [{until_s: 600, scale: 1}, {until_s: 1200, scale: 3}]}  # optional

    kind: open_loop                  # independent requests at a rate
    requests: 1000
    arrival: {process: poisson, rate_per_s: 4}         # or gamma with cv
    #   + profile: {diurnal: {low: 0.2, high: 1.5}}    # load over the day (rate_profile.py)
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
likely draw (``reach``: the bound of a bounded one, the median × e^(6σ) of an unclipped
log-normal, 20 means of an exponential). Numbers must be finite everywhere.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Literal, Self

import numpy as np
from pydantic import (
    ConfigDict,
    Field,
    RootModel,
    model_validator,
)

from simulator.workload.rate_profile import RateProfile
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource, RequestSource
from simulator.workload.spec_parts import (
    MAX_REQUESTS,
    MAX_SECONDS,
    MAX_SESSIONS,
    MAX_TOKENS,
    MAX_TURNS,
    ArrivalSpec,
    DistSpec,
    FixedDist,
    FrozenSpec,
    SyntheticSpec,
    SystemPromptSpec,
    UniformDist,
    check_count,
    check_reach,
    reach,
)
from simulator.workload.synthetic import (
    ClosedLoopSource,
    SessionShape,
    iter_sessions,
    open_loop,
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


class TraceWorkload(FrozenSpec):
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
    rate_profile: RateProfile | None = Field(
        default=None,
        description="Rate multiplier over time applied to the (scaled) timestamps "
        "(rate_profile.py).",
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

        warp = self.rate_profile.warp() if self.rate_profile is not None else None

        def requests() -> Iterator[TraceRequest]:
            selected = (
                r
                for r in reader
                if r.timestamp_s >= self.start_s
                and (self.end_s is None or r.timestamp_s < self.end_s)
            )
            for request in itertools.islice(selected, self.max_requests):
                time_s = (request.timestamp_s - self.start_s) * self.time_scale
                if warp is not None:
                    time_s = warp(time_s)
                yield request.at_time(time_s)

        return OpenLoopSource(_Reiterable(requests), reader.info.block_size_tokens)


def _replay_of(rng: np.random.Generator) -> Callable[[], np.random.Generator]:
    """Generators that each start from ``rng``'s state now, so a synthetic workload can be
    drawn afresh (streamed) on every pass instead of held whole. ``rng`` is the workload's own
    (``api.build_source`` spawns it), so leaving it unadvanced changes no other draw."""
    state = rng.bit_generator.state
    kind = type(rng.bit_generator)

    def replay() -> np.random.Generator:
        bits = kind()
        bits.state = state
        return np.random.Generator(bits)

    return replay


class _Reiterable:
    """An iterable that calls a generator function afresh on every ``iter``."""

    def __init__(self, make: Callable[[], Iterator[TraceRequest]]) -> None:
        self._make = make

    def __iter__(self) -> Iterator[TraceRequest]:
        return iter(self._make())


class OpenLoopWorkload(SyntheticSpec):
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
        check_count(self.requests, "requests", MAX_REQUESTS)
        check_reach(self.input_tokens, "input_tokens", MAX_TOKENS, "tokens")
        check_reach(self.output_tokens, "output_tokens", MAX_TOKENS, "tokens")
        return self

    def build(self, rng: np.random.Generator, base: Path = Path(".")) -> RequestSource:
        """The requests, generated from ``rng``."""
        prompts = (
            (self.system_prompt.count, self.system_prompt.tokens) if self.system_prompt else None
        )
        arrivals = self.arrival.build()
        input_tokens = self.input_tokens.build(base)
        output_tokens = self.output_tokens.build(base)
        replay = _replay_of(rng)

        def generate() -> Iterator[TraceRequest]:
            return open_loop(
                n_requests=self.requests,
                arrivals=arrivals,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                block_tokens=self.block_tokens,
                rng=replay(),
                system_prompts=prompts,
            )

        return OpenLoopSource(_Reiterable(generate), self.block_tokens)


class _Conversational(SyntheticSpec):
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
        check_count(
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
        check_reach(self.turns, "turns", MAX_TURNS, "turns")
        check_reach(user_tokens, "user_tokens", MAX_TOKENS, "tokens")
        check_reach(self.output_tokens, "output_tokens", MAX_TOKENS, "tokens")
        check_reach(self.think_time_s, "think_time_s", MAX_SECONDS, "s")

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
        turns = reach(self.turns) or 1.0
        if self.sessions * turns > MAX_REQUESTS:
            raise ValueError(
                f"sessions x turns: up to {self.sessions * turns:,.0f} requests; at most "
                f"{MAX_REQUESTS:,} are supported"
            )
        return self

    def build(self, rng: np.random.Generator, base: Path = Path(".")) -> RequestSource:
        """The conversations' requests, generated from ``rng``."""
        arrivals = self.arrival.build()
        shape = self._shape(self.user_tokens, base)
        replay = _replay_of(rng)

        def generate() -> Iterator[TraceRequest]:
            return iter_sessions(
                n_sessions=self.sessions,
                arrivals=arrivals,
                shape=shape,
                block_tokens=self.block_tokens,
                rng=replay(),
            )

        return OpenLoopSource(_Reiterable(generate), self.block_tokens)


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
        check_count(self.requests, "requests", MAX_REQUESTS)
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
