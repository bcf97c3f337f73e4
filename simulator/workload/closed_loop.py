"""The workload of a serving benchmark: N users sending fixed-length requests back to back.

``closed_loop_workload`` gives every prompt fresh block ids (no shared prefixes, as a
benchmark's random-token prompts have none). ``kvplan simulate --concurrency`` and
``kvplan validate`` both use it.
"""

from __future__ import annotations

from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError, validate

__all__ = ["closed_loop_workload"]


def closed_loop_workload(
    *,
    users: int,
    requests: int,
    input_tokens: int,
    output_tokens: int,
    block_tokens: int = 16,
    ramp_s: float = 0.0,
    turnaround_s: float = 0.0,
    source: str = "command line",
) -> WorkloadSpec:
    """``users`` concurrent users, ``requests`` in all, fixed lengths, no shared prefixes.

    Every request is a one-turn session with no system prompt, so its prompt blocks are fresh
    ids (a benchmark's random-token prompts share nothing), and a user's next request reaches
    the engine ``turnaround_s`` after the last one finished (the client's own time; 0 = at
    once). User k sends its first request at ``k × ramp_s`` (0: all at once, as a benchmark
    starts). Raises ``InputError`` naming ``source`` for non-positive counts or lengths.
    """
    for name, value in (
        ("concurrency", users),
        ("requests", requests),
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
    ):
        if value < 1:
            raise InputError(f"{source}: {name}: expected a positive integer, got {value}")
    data = {
        "kind": "closed_loop",
        "users": users,
        "requests": requests,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        # One-turn sessions: independent back-to-back requests, the turnaround apart.
        "turns": 1,
        "think_time_s": turnaround_s,
        "block_tokens": block_tokens,
        "ramp_s": ramp_s,
    }
    return validate(WorkloadSpec, data, source)
