"""The ground floor of workload files: the frozen spec base and the size caps every synthetic
shape is checked against (``spec`` states why the caps exist)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["MAX_REQUESTS", "MAX_SECONDS", "MAX_SESSIONS", "MAX_TOKENS", "MAX_TURNS", "FrozenSpec"]

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


class FrozenSpec(BaseModel):
    """Base of every workload-file model: frozen, unknown keys refused, finite numbers only."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
