"""The search-space file: which deployment dimensions the optimizer explores, and how.

A space file (YAML) names the model, the dimensions and the fixed settings::

    model: Qwen/Qwen3-32B
    dimensions:                    # each: choices, or low/high (+ step, log)
      gpu: {choices: [h100_sxm, h200_sxm]}
      tp: {choices: [1, 2, 4, 8]}
      instances: {low: 1, high: 16}
      hbm_utilisation: {low: 0.70, high: 0.95}
      scheduler: {choices: [prefill_first, chunked]}
      chunk_tokens: {choices: [1024, 2048], when: {scheduler: chunked}}
    fixed: {backend: vllm}

A dimension with ``when`` is sampled only in trials where every named dimension took one of the
given values (``chunk_tokens`` only for ``chunked``); built-in conditions cover the usual cases
(``CONDITIONS`` below), so a user need not write them. What this module is not: it does not know
what a dimension *means* — ``optimizer.configs`` turns sampled parameters into a
``ServingConfig``, and ``optimizer.space_check`` checks every value against the catalog, the
plug-in registries and the config fields at load, before any trial.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from slo.inputfile import load_input_file

__all__ = [
    "CONDITIONS",
    "Dimension",
    "Scalar",
    "SearchSpace",
    "TrialLike",
    "default_space_path",
    "load_space",
]

#: A value a dimension can take.
Scalar = str | int | float | bool

#: Conditions applied when a space file does not give ``when`` for these dimensions.
CONDITIONS: dict[str, dict[str, list[Scalar]]] = {
    "chunk_tokens": {"scheduler": ["chunked"]},
    "prefill_share": {"pd_mode": ["disaggregated"]},
    "l2_eviction": {},
    "l3_eviction": {},
}


class TrialLike(Protocol):
    """The part of ``optuna.trial.Trial`` a space needs (kept structural: no optuna import)."""

    def suggest_categorical(self, name: str, choices: Any) -> Any: ...

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = 1, log: bool = False
    ) -> int: ...

    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = None, log: bool = False
    ) -> float: ...


class Dimension(BaseModel):
    """One searched dimension: a list of choices, or a numeric range."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    choices: list[Scalar] | None = Field(
        default=None, description="Categorical values to choose from (at least one)."
    )
    low: float | None = Field(default=None, description="Lower bound of a numeric range.")
    high: float | None = Field(default=None, description="Upper bound of a numeric range.")
    step: float | None = Field(default=None, gt=0, description="Grid step of a numeric range.")
    log: bool = Field(default=False, description="Sample the range on a log scale.")
    integer: bool | None = Field(
        default=None,
        description="Integer range (default: inferred — integer when low, high and step are).",
    )
    when: dict[str, list[Scalar]] | None = Field(
        default=None,
        description="Sample only when each named dimension took one of the listed values.",
    )

    @model_validator(mode="after")
    def _shape(self) -> Self:
        has_range = self.low is not None or self.high is not None
        if self.choices is not None:
            if has_range or self.step is not None:
                raise ValueError("give either choices or low/high, not both")
            if not self.choices:
                raise ValueError("choices must not be empty")
            if len(set(map(repr, self.choices))) != len(self.choices):
                raise ValueError("choices must be distinct")
            return self
        if self.low is None or self.high is None:
            raise ValueError("give choices, or both low and high")
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs low > 0")
        if self.log and self.step is not None:
            raise ValueError("a log range cannot have a step")
        return self

    @property
    def is_integer(self) -> bool:
        """Whether a numeric range yields integers."""
        if self.integer is not None:
            return self.integer
        values = [v for v in (self.low, self.high, self.step) if v is not None]
        return all(float(v).is_integer() for v in values)

    def values(self) -> list[Scalar]:
        """Every value of a finite dimension (choices, or a stepped/integer range), for grids."""
        if self.choices is not None:
            return list(self.choices)
        assert self.low is not None
        assert self.high is not None
        step = self.step if self.step is not None else (1.0 if self.is_integer else None)
        if step is None:
            raise ValueError("a continuous range has no finite grid; give it a step")
        n = math.floor((self.high - self.low) / step + 1e-9) + 1
        points = [self.low + i * step for i in range(n)]
        return [int(p) if self.is_integer else round(p, 12) for p in points]

    def suggest(self, trial: TrialLike, name: str) -> Scalar:
        """Draw this dimension's value for ``trial`` under parameter ``name``."""
        if self.choices is not None:
            value: Scalar = trial.suggest_categorical(name, self.choices)
            return value
        assert self.low is not None
        assert self.high is not None
        if self.is_integer:
            step = int(self.step) if self.step is not None else 1
            return trial.suggest_int(name, int(self.low), int(self.high), step=step, log=self.log)
        return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)


class SearchSpace(BaseModel):
    """A validated space file (see the module docstring for the format)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str = Field(description="Model served by every candidate (catalog name).")
    dimensions: dict[str, Dimension] = Field(
        min_length=1, description="Searched dimensions by name, in sampling order."
    )
    fixed: dict[str, Scalar] = Field(
        default_factory=dict, description="Settings shared by every candidate."
    )

    @model_validator(mode="after")
    def _conditions_refer_to_dimensions(self) -> Self:
        overlap = sorted(set(self.dimensions) & set(self.fixed))
        if overlap:
            raise ValueError(f"'{overlap[0]}' is both a dimension and fixed")
        names = list(self.dimensions)
        for name, dim in self.dimensions.items():
            for parent, allowed in (dim.when or {}).items():
                if parent not in self.dimensions:
                    raise ValueError(f"{name}.when names '{parent}', which is not a dimension")
                if names.index(parent) > names.index(name):
                    raise ValueError(f"{name}.when: '{parent}' must be listed before '{name}'")
                if not allowed:
                    raise ValueError(f"{name}.when.{parent} must list at least one value")
                choices = self.dimensions[parent].choices
                never = [v for v in allowed if choices is not None and v not in choices]
                if never:
                    raise ValueError(
                        f"{name}.when.{parent}: {never[0]!r} is not one of {parent}'s choices, "
                        f"so {name} would never be sampled for it"
                    )
        return self

    def condition(self, name: str) -> dict[str, list[Scalar]]:
        """The effective condition of a dimension: its ``when``, or the built-in one."""
        dim = self.dimensions[name]
        if dim.when is not None:
            return dim.when
        built_in = CONDITIONS.get(name, {})
        return {k: v for k, v in built_in.items() if k in self.dimensions}

    def suggest(self, trial: TrialLike) -> dict[str, Scalar]:
        """Sample every active dimension for ``trial``; returns the parameters (fixed merged)."""
        params: dict[str, Scalar] = {}
        for name, dim in self.dimensions.items():
            if all(params.get(k) in v for k, v in self.condition(name).items()):
                params[name] = dim.suggest(trial, name)
        return {**self.fixed, **params}

    def grid(self) -> dict[str, list[Scalar]]:
        """Finite values per dimension, for Optuna's grid sampler (conditional ones included).

        Raises ``ValueError`` naming the dimension when one is a continuous range.
        """
        grid: dict[str, list[Scalar]] = {}
        for name, dim in self.dimensions.items():
            try:
                grid[name] = dim.values()
            except ValueError as err:
                raise ValueError(f"dimensions.{name}: {err}") from None
        return grid


def default_space_path() -> Path:
    """The space file that ships with kvplan (used when ``--space`` is not given)."""
    return Path(str(resources.files("optimizer") / "data" / "default_space.yaml"))


def load_space(path: str | Path | None = None) -> SearchSpace:
    """Load and validate a space file (one-line ``InputError`` on any problem)."""
    return load_input_file(path or default_space_path(), SearchSpace)
