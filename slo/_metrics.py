"""Looking up flat metric values, deriving the few that follow from others.

The evaluator reads a plain mapping of flat names to floats (``ttft_ms.p90``, ``usd_per_hour``,
``gpus``, ``attainment``, ``output_tokens_per_s``…). A value present in the mapping always wins;
a missing one is derived when a rule below defines it, otherwise it is a programming error
(``MissingMetricError``), not bad user input: whoever computes metrics must supply what the SLO
file asks for (``SloSpec.required_metrics()`` lists it).

Derivations (all rates per second of simulated time):

- ``attainment`` = 1.0 when the spec has no targets (every request meets an empty set of
  targets); with targets it must be supplied (``slo.attainment`` computes it).
- ``goodput_requests_per_s`` = ``requests_per_s`` × ``attainment``: exact, since attainment is
  the share of requests meeting every target.
- ``goodput_tokens_per_s`` = ``output_tokens_per_s`` × ``attainment``: an approximation that
  assumes requests meeting the SLO have the average output length. The exact value is the output
  tokens of those requests over the run's duration; supply it to override this rule.
- ``usd_per_month`` = ``usd_per_hour`` × 730 (hours in an average month).
- ``usd_per_million_output_tokens`` = ``usd_per_hour`` / (``output_tokens_per_s`` × 3600) × 1e6;
  infinite when nothing was output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from slo._spec import SloSpec
from slo.units import HOURS_PER_MONTH

__all__ = ["HOURS_PER_MONTH", "MissingMetricError", "metric_value"]


class MissingMetricError(KeyError):
    """The metrics mapping lacks a value the SLO needs and no rule derives it.

    A programming error in whoever computed the metrics, not a user mistake (so not
    ``InputError``). ``str(err)`` is the plain message (``KeyError`` would quote it).
    """

    def __init__(self, name: str, wanted: str, spec: SloSpec, metrics: Mapping[str, float]) -> None:
        available = ", ".join(sorted(metrics)) or "(none)"
        via = "" if name == wanted else f" (to derive {wanted!r})"
        self.metric = name
        self.message = (
            f"metric {name!r}{via} is needed by SLO {spec.name!r} but is missing from the "
            f"metrics mapping and cannot be derived; available: {available}"
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


_Lookup = Callable[[str], float]


def _attainment(get: _Lookup, spec: SloSpec) -> float:
    del get  # attainment follows from no other metric; only the spec can make it trivial
    if spec.targets:
        raise KeyError("attainment")
    return 1.0


def _per_million_output_tokens(get: _Lookup, spec: SloSpec) -> float:
    del spec
    tokens_per_hour = get("output_tokens_per_s") * 3600.0
    if tokens_per_hour <= 0:
        return math.inf
    return get("usd_per_hour") / tokens_per_hour * 1e6


# Plug-in table: a derived metric's name -> how to compute it from the others.
_DERIVED: dict[str, Callable[[_Lookup, SloSpec], float]] = {
    "attainment": _attainment,
    "goodput_requests_per_s": lambda get, _: get("requests_per_s") * get("attainment"),
    "goodput_tokens_per_s": lambda get, _: get("output_tokens_per_s") * get("attainment"),
    "usd_per_month": lambda get, _: get("usd_per_hour") * HOURS_PER_MONTH,
    "usd_per_million_output_tokens": _per_million_output_tokens,
}


def metric_value(metrics: Mapping[str, float], name: str, spec: SloSpec) -> float:
    """The value of flat metric ``name``: from ``metrics``, else derived (module docstring).

    Raises ``MissingMetricError`` naming the first metric that is neither present nor derivable.
    """

    def get(key: str) -> float:
        if key in metrics:
            return float(metrics[key])
        rule = _DERIVED.get(key)
        if rule is None:
            raise KeyError(key)
        return rule(get, spec)

    try:
        return get(name)
    except KeyError as err:
        raise MissingMetricError(str(err.args[0]), name, spec, metrics) from None
