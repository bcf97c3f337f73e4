"""Loading user-written input files (YAML, TOML, JSON) into validated pydantic models.

Every kvplan package reads files that people write by hand: SLO files, catalogs, search spaces,
workload and simulate configs. They all fail the same way, with one line naming the file, the
field path and what was expected (``InputError``), never a traceback. This module is that one
mechanism. It lives in ``slo`` because ``slo`` is the bottom layer (it imports nothing of ours);
``hardware`` re-exports it for the simulator.

Not for traces: trace readers stream and report ``file:line`` themselves, raising ``InputError``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

__all__ = ["InputError", "format_validation_error", "load_input_file", "load_mapping", "validate"]

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)


class InputError(ValueError):
    """Bad user input. ``str(err)`` is one line meant to be shown as is; the CLI exits 2."""


def load_mapping(path: str | Path) -> dict[str, Any]:
    """Parse ``path`` as YAML, TOML or JSON (by suffix; YAML otherwise) into a dict.

    Raises ``InputError`` for a missing file, a syntax error (with the line where known) or a
    document whose top level is not a mapping.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: malformed TOML: {err}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{err.lineno}: malformed JSON: {err.msg}") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path}: malformed YAML: {_yaml_problem(err)}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: expected a mapping of keys to values at the top level")
    return dict(data)


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


def format_validation_error(err: pydantic.ValidationError, source: str) -> str:
    """One line for the first problem pydantic found: ``source: field.path: what was expected``."""
    first = err.errors()[0]
    # pydantic marks a failed dict *key* with a trailing "[key]" part; the key itself already
    # names the place, so "targets.ttft_ms.p120" reads better than "targets.ttft_ms.p120.[key]".
    parts = [str(part) for part in first["loc"] if part != "[key]"]
    loc = ".".join(parts) or "(top level)"
    kind = first["type"]
    if kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "missing":
        message = "required field is missing"
    else:
        message = first["msg"].removeprefix("Value error, ")
    more = len(err.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{source}: {loc}: {message}{suffix}"


def validate(model_cls: type[ModelT], data: Any, source: str) -> ModelT:
    """Validate ``data`` into ``model_cls``; any problem becomes a one-line ``InputError``."""
    try:
        return model_cls.model_validate(data)
    except pydantic.ValidationError as err:
        raise InputError(format_validation_error(err, source)) from None


def load_input_file(path: str | Path, model_cls: type[ModelT]) -> ModelT:
    """Read a YAML/TOML/JSON file and validate it into ``model_cls`` (one-line errors)."""
    return validate(model_cls, load_mapping(path), str(path))
