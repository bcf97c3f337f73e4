"""Per-request SLO attainment: which requests met every target, and what share did.

Definition (DistServe-style goodput criterion). A request *meets the SLO* when, for every target
metric in the spec, its own value is at most that metric's **tightest** limit over all statistics
(``ttft_ms: {p90: 2000, p99: 5000}`` → TTFT ≤ 2000 ms for that request). A percentile target is a
statement about a distribution; a single request can only be held to one bar, and the tightest
one is the conservative choice: with ``ttft_ms: {p90: 2000}`` and ``attainment: 0.9``, meeting
the attainment floor implies meeting the p90 target (up to percentile interpolation).

A NaN value means "does not apply to this request" (TPOT of a request with one output token) and
counts as met; ``inf`` (never finished) counts as missed. With no targets every request meets the
SLO; with targets but zero requests, attainment is 0 (nothing was served, so nothing was served
well — never a vacuous 1).

Goodput follows: ``goodput_requests_per_s`` = requests/s × attainment, and the exact
``goodput_tokens_per_s`` is the output tokens of the requests in ``slo_met_mask`` divided by the
run's duration in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from slo._spec import SloSpec

__all__ = ["attainment", "slo_met_mask"]


def slo_met_mask(per_request: Mapping[str, npt.ArrayLike], spec: SloSpec) -> npt.NDArray[np.bool_]:
    """Boolean array: whether each request met every target of ``spec`` (module docstring).

    ``per_request`` maps target metric names (``ttft_ms``, ``tpot_ms``…) to one value per request
    in milliseconds, all arrays the same length; extra keys are ignored. For ``itl_ms`` the caller
    chooses the per-request summary (kvplan's simulator passes each request's worst gap).

    Raises ``KeyError`` when a target metric has no array and ``ValueError`` when lengths differ.
    Returns an empty array when the spec has no targets (the request count is then unknown).
    """
    met: npt.NDArray[np.bool_] | None = None
    for metric, bar in spec.per_request_bars().items():
        if metric not in per_request:
            raise KeyError(
                f"per-request values for {metric!r} are needed by SLO {spec.name!r}; "
                f"given: {', '.join(sorted(per_request)) or '(none)'}"
            )
        values = np.asarray(per_request[metric], dtype=np.float64)
        if values.ndim != 1:
            raise ValueError(f"per-request {metric!r} must be one-dimensional")
        ok = (values <= bar) | np.isnan(values)
        if met is not None and ok.shape != met.shape:
            raise ValueError(
                f"per-request arrays differ in length: {metric!r} has {ok.size}, "
                f"earlier metrics have {met.size}"
            )
        met = ok if met is None else met & ok
    return np.zeros(0, dtype=np.bool_) if met is None else met


def attainment(per_request: Mapping[str, npt.ArrayLike], spec: SloSpec) -> float:
    """Share in [0, 1] of requests that met every target of ``spec`` (module docstring).

    1.0 when the spec has no targets; 0.0 when it has targets but there are no requests.
    """
    if not spec.targets:
        return 1.0
    met = slo_met_mask(per_request, spec)
    return float(met.mean()) if met.size else 0.0
