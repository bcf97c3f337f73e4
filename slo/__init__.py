"""SLO files: schema and loader, evaluation of measured metrics, per-request attainment.

``slo`` is the bottom layer of kvplan: it imports nothing else of ours and evaluates a plain
mapping of flat metric names (``ttft_ms.p90``, ``usd_per_hour``…) to floats::

    spec = load_slo("examples/slo/chat.yaml")
    report = evaluate(metrics, spec)
    report.feasible, report.violations          # violations ≤ 0 are feasible (Optuna)
    report.objective_values(), report.directions
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slo._attainment import attainment, slo_met_mask
    from slo._evaluate import (
        ConstraintResult,
        SloReport,
        check_budget,
        evaluate,
        objective_values,
    )
    from slo._metrics import HOURS_PER_MONTH, MissingMetricError, metric_value
    from slo._spec import (
        COST_METRICS,
        OBJECTIVE_ROLES,
        TARGET_METRIC_HELP,
        TARGET_METRICS,
        THROUGHPUT_METRICS,
        Budget,
        Objective,
        Objectives,
        SloSpec,
        canonical_stat,
        load_slo,
        percentile_of,
    )
    from slo.inputfile import InputError

#: Where each exported name lives. Imported on first use (PEP 562): a command that only needs
#: ``InputError`` (``replay``, ``analyze``, ``convert``) does not build the SLO schema's
#: pydantic models at start-up (~0.1 s).
_HOMES = {
    "attainment": "slo._attainment",
    "slo_met_mask": "slo._attainment",
    **dict.fromkeys(
        ("ConstraintResult", "SloReport", "check_budget", "evaluate", "objective_values"),
        "slo._evaluate",
    ),
    **dict.fromkeys(("HOURS_PER_MONTH", "MissingMetricError", "metric_value"), "slo._metrics"),
    **dict.fromkeys(
        (
            "COST_METRICS",
            "OBJECTIVE_ROLES",
            "TARGET_METRIC_HELP",
            "TARGET_METRICS",
            "THROUGHPUT_METRICS",
            "Budget",
            "Objective",
            "Objectives",
            "SloSpec",
            "canonical_stat",
            "load_slo",
            "percentile_of",
        ),
        "slo._spec",
    ),
    "InputError": "slo.inputfile",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'slo' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "COST_METRICS",
    "HOURS_PER_MONTH",
    "OBJECTIVE_ROLES",
    "TARGET_METRICS",
    "TARGET_METRIC_HELP",
    "THROUGHPUT_METRICS",
    "Budget",
    "ConstraintResult",
    "InputError",
    "MissingMetricError",
    "Objective",
    "Objectives",
    "SloReport",
    "SloSpec",
    "attainment",
    "canonical_stat",
    "check_budget",
    "evaluate",
    "load_slo",
    "metric_value",
    "objective_values",
    "percentile_of",
    "slo_met_mask",
]
