"""The latency-model family: spec string → model, through one plain dict.

A spec is ``NAME`` or ``NAME:ARG`` (``roofline``, ``table``, ``calibrated:fit.yaml``).
``make_latency_model`` splits it at the first ':' and calls ``LATENCY_MODELS[NAME]`` with the
deployment, the argument (``None`` without ':') and the framework overheads. Adding a model is
adding one entry here; CLI choices and search-space names derive from the dict's keys.
"""

from __future__ import annotations

import difflib
from typing import Protocol

from simulator.latency.base import LatencyModel
from simulator.latency.calibrated import calibrated_kernels
from simulator.latency.compose import ComposeParams
from simulator.latency.deployment import Deployment
from simulator.latency.model import ComposedLatencyModel, RooflineModel
from simulator.latency.table import table_kernels
from slo.inputfile import InputError

__all__ = ["LATENCY_MODELS", "LatencyModelFactory", "make_latency_model"]


class LatencyModelFactory(Protocol):
    """Builds a latency model for ``deployment``; ``arg`` is the spec's part after ':'."""

    def __call__(
        self, deployment: Deployment, arg: str | None, params: ComposeParams
    ) -> LatencyModel:
        """A ready model; ``InputError`` (one line) for a bad ``arg``."""
        ...


def _roofline(deployment: Deployment, arg: str | None, params: ComposeParams) -> LatencyModel:
    if arg is not None:
        raise InputError(f"latency model 'roofline' takes no argument (got 'roofline:{arg}')")
    return RooflineModel(deployment, params=params)


def _table(deployment: Deployment, arg: str | None, params: ComposeParams) -> LatencyModel:
    """``table`` (shipped profiles) or ``table:DIR`` (profiles measured on this GPU)."""
    timer = table_kernels(deployment.gpu, arg or None)
    name = "table" if arg is None else f"table:{arg}"
    return ComposedLatencyModel(deployment, timer, name=name, params=params)


def _calibrated(deployment: Deployment, arg: str | None, params: ComposeParams) -> LatencyModel:
    """``calibrated`` (shipped calibration) or ``calibrated:FILE`` (from ``kvplan calibrate``)."""
    timer = calibrated_kernels(deployment.gpu, arg or None)
    name = "calibrated" if arg is None else f"calibrated:{arg}"
    return ComposedLatencyModel(deployment, timer, name=name, params=params)


#: Latency models by name.
LATENCY_MODELS: dict[str, LatencyModelFactory] = {
    "roofline": _roofline,
    "table": _table,
    "calibrated": _calibrated,
}


def make_latency_model(
    spec: str, deployment: Deployment, *, params: ComposeParams | None = None
) -> LatencyModel:
    """The model named by ``spec`` (``NAME`` or ``NAME:ARG``) for ``deployment``.

    Raises ``InputError`` naming the known models for an unknown name.
    """
    name, sep, arg = spec.partition(":")
    key = name.strip().lower()
    factory = LATENCY_MODELS.get(key)
    if factory is None:
        known = sorted(LATENCY_MODELS)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise InputError(f"unknown latency model '{spec}'{hint}; known: {', '.join(known)}")
    return factory(deployment, arg.strip() if sep else None, params or ComposeParams())
