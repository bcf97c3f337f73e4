"""The schema of ``results.json`` (and ``kvplan optimize --json``), as pydantic models.

``optimizer.cli.optimize_output`` validates every object against ``ResultsFile`` before writing
it, so a file that exists is one a consumer can parse with these models (``ResultsFile.
model_validate_json(path.read_text())``). Numbers that are undefined (a metric of a run that
had no requests, say) are ``null``, never ``NaN``: the file is strict JSON.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ObjectiveEntry", "ResultsFile", "TrialEntry"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ObjectiveEntry(_Strict):
    """What one objective is."""

    metric: str = Field(description="The flat metric optimised, e.g. 'ttft_ms.p90'.")
    unit: str = Field(description="Its unit ('ms', 'tok/s', 'req/s', 'USD/h'; '' if none).")
    target: float | None = Field(description="Its SLO target in that unit, if the SLO sets one.")


class TrialEntry(_Strict):
    """One trial on the front or picked."""

    trial: int = Field(ge=0, description="Optuna trial number.")
    params: dict[str, Any] = Field(description="The configuration (space names).")
    objectives: dict[str, float | None] = Field(description="Objective role -> value.")
    metrics: dict[str, float | None] = Field(description="Flat metrics (units in the names).")


class PickEntry(TrialEntry):
    """A recommended trial and why."""

    why: str = Field(description="One paragraph: the numbers behind the pick, what it gives up.")


class ResultsFile(_Strict):
    """The whole file."""

    directions: dict[str, Literal["minimize", "maximize"]] = Field(
        description="Objective role -> direction, in the study's order."
    )
    objectives: dict[str, ObjectiveEntry] = Field(description="Objective role -> what it is.")
    tolerance: float = Field(ge=0, description="Relative tolerance of the 'best X' picks.")
    trials: int = Field(
        ge=0,
        description="Trials that evaluated a new configuration: simulated in full, given up "
        "part-way, or ruled out without simulating (repeats are not counted).",
    )
    feasible_trials: int = Field(ge=0, description="Of those, the ones meeting SLO and budget.")
    notes: list[str] = Field(description="Objectives that are no trade-off, and advice.")
    pareto: list[TrialEntry] = Field(description="The feasible Pareto front (near twins merged).")
    recommendations: dict[str, PickEntry] = Field(description="Pick label -> the pick.")
    planning: dict[str, Any] | None = Field(
        description="Tier value, headroom and baseline comparison (null: not measured)."
    )
    context: dict[str, Any] = Field(description="SLO, workload profile, latency model, settings.")
