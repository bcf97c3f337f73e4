"""Analytic step-time models for tests and what-if studies: constant and linear.

``constant:S`` — every step takes ``S`` seconds whatever the batch (the M/D/1 model of the
analytic tests). ``linear:BASE,PER_TOKEN[,PER_CONTEXT_TOKEN]`` — a step takes ``BASE +
PER_TOKEN × Σ new_tokens + PER_CONTEXT_TOKEN × Σ cache_len`` seconds. Both answer decode runs in
closed form. They are not models of any real GPU: the roofline, table and calibrated models in
``simulator/latency`` are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from slo.inputfile import InputError

__all__ = ["ANALYTIC_MODELS", "ConstantLatency", "LinearLatency", "parse_analytic"]


class ConstantLatency:
    """Every step takes ``step_s`` seconds."""

    __slots__ = ("step_s",)
    name = "constant"

    def __init__(self, step_s: float) -> None:
        if not step_s > 0:
            raise ValueError(f"constant latency must be > 0 seconds, got {step_s}")
        self.step_s = step_s

    def step_seconds(self, batch: Sequence[tuple[int, int]]) -> float:
        """``step_s`` for any non-empty batch."""
        del batch
        return self.step_s

    def decode_run_seconds(self, cache_lens: Sequence[int], n_steps: int) -> NDArray[np.float64]:
        """``n_steps`` copies of ``step_s``."""
        del cache_lens
        return np.full(n_steps, self.step_s, dtype=np.float64)


class LinearLatency:
    """``base_s + per_token_s × Σ new + per_context_token_s × Σ cache_len`` seconds per step."""

    __slots__ = ("base_s", "per_context_token_s", "per_token_s")
    name = "linear"

    def __init__(self, base_s: float, per_token_s: float, per_context_token_s: float = 0.0):
        if base_s < 0 or per_token_s < 0 or per_context_token_s < 0:
            raise ValueError("linear latency coefficients must be ≥ 0")
        if base_s == 0 and per_token_s == 0:
            raise ValueError("linear latency needs base_s > 0 or per_token_s > 0")
        self.base_s = base_s
        self.per_token_s = per_token_s
        self.per_context_token_s = per_context_token_s

    def step_seconds(self, batch: Sequence[tuple[int, int]]) -> float:
        """The affine formula over the batch."""
        new = sum(n for _, n in batch)
        context = sum(c for c, _ in batch) if self.per_context_token_s else 0
        return self.base_s + self.per_token_s * new + self.per_context_token_s * context

    def decode_run_seconds(self, cache_lens: Sequence[int], n_steps: int) -> NDArray[np.float64]:
        """Closed form: each step adds ``len(cache_lens)`` context tokens."""
        b = len(cache_lens)
        first = self.base_s + self.per_token_s * b + self.per_context_token_s * sum(cache_lens)
        return first + self.per_context_token_s * b * np.arange(n_steps, dtype=np.float64)


def _constant(args: list[float]) -> ConstantLatency:
    if len(args) != 1:
        raise ValueError("expected constant:SECONDS")
    return ConstantLatency(args[0])


def _linear(args: list[float]) -> LinearLatency:
    if len(args) not in (2, 3):
        raise ValueError("expected linear:BASE_S,PER_TOKEN_S[,PER_CONTEXT_TOKEN_S]")
    return LinearLatency(*args)


#: Analytic latency models by spec prefix (``constant:0.02``, ``linear:0.005,1e-4``).
ANALYTIC_MODELS: dict[str, Callable[[list[float]], ConstantLatency | LinearLatency]] = {
    "constant": _constant,
    "linear": _linear,
}


def parse_analytic(spec: str) -> ConstantLatency | LinearLatency | None:
    """The analytic model ``spec`` names, or ``None`` if it names another family.

    Raises ``InputError`` (one line) for a malformed analytic spec or a non-finite figure.
    """
    name, _, rest = spec.partition(":")
    factory = ANALYTIC_MODELS.get(name.strip().lower())
    if factory is None:
        return None
    try:
        args = [float(part) for part in rest.split(",")] if rest.strip() else []
        if not all(math.isfinite(arg) for arg in args):
            raise ValueError("figures must be finite")
        return factory(args)
    except ValueError as err:
        raise InputError(f"latency model {spec!r}: {err}") from None
