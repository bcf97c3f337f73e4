"""Loading user-written input files (YAML, TOML, JSON) into validated pydantic models.

Every kvplan package reads files that people write by hand: SLO files, catalogs, search spaces,
workload and simulate configs. They all fail the same way, with one line naming the file, the
field path and what was expected (``InputError``), never a traceback. This module is that one
mechanism. It lives in ``slo`` because ``slo`` is the bottom layer (it imports nothing of ours);
``hardware`` re-exports it for the simulator.

Not for traces: trace readers stream and report ``file:line`` themselves, raising ``InputError``.

What every file gets, before any model sees it: it must be a regular file (``/dev/urandom`` or a
FIFO would never end) of at most ``MAX_INPUT_BYTES``; YAML is parsed by libyaml where PyYAML has
it (about 20x faster than the pure-Python parser, with a nesting limit of its own); a key given
twice in one mapping — or two keys that differ only in case, which the case-insensitive catalog
would silently merge — is refused with its line; and every number must be finite (``.inf`` and
``.nan`` are nonsense in every file kvplan reads).
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

if TYPE_CHECKING:  # imported where a model is validated: the other commands start faster
    import pydantic

__all__ = [
    "MAX_INPUT_BYTES",
    "InputError",
    "check_finite",
    "format_validation_error",
    "load_input_file",
    "load_mapping",
    "validate",
]

ModelT = TypeVar("ModelT", bound="pydantic.BaseModel")

#: Largest input file read (bytes). Hand-written files are kilobytes; the cap turns a runaway
#: (a generated 50 MB SLO file took > 120 s in the pure-Python YAML parser) into one line.
MAX_INPUT_BYTES = 16 * 2**20

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(ValueError):
    """Bad user input. ``str(err)`` is one line meant to be shown as is; the CLI exits 2."""


def load_mapping(path: str | Path) -> dict[str, Any]:
    """Parse ``path`` as YAML, TOML or JSON (by suffix; YAML otherwise) into a dict.

    Raises ``InputError`` for a missing file, a syntax error (with the line where known) or a
    document whose top level is not a mapping.
    """
    path = Path(path)
    text = _read_text(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text, object_pairs_hook=_json_object)
        else:
            data = yaml.load(text, Loader=_StrictLoader)  # a safe loader (SafeLoader's subclass)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: malformed TOML: {err}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{err.lineno}: malformed JSON: {err.msg}") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path}: malformed YAML: {_yaml_problem(err)}") from None
    except _DuplicateKeyError as err:
        raise InputError(f"{path}: {err}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be an input file") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: expected a mapping of keys to values at the top level")
    check_finite(data, str(path))
    return dict(data)


def _read_text(path: Path) -> str:
    """The file's text: a regular file of at most ``MAX_INPUT_BYTES``, UTF-8."""
    try:
        if not path.is_file():
            if not path.exists():
                raise InputError(f"{path}: no such file")
            raise InputError(f"{path}: not a regular file")
        with path.open("rb") as handle:
            raw = handle.read(MAX_INPUT_BYTES + 1)
        if len(raw) > MAX_INPUT_BYTES:
            raise InputError(
                f"{path}: larger than {MAX_INPUT_BYTES // 2**20} MiB; input files are written by "
                "hand (traces are read by the trace readers, not here)"
            )
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None


def check_finite(data: Any, source: str, where: str = "") -> None:
    """``InputError`` naming the field if ``data`` holds a NaN or infinite number anywhere."""
    if isinstance(data, float) and not math.isfinite(data):
        field = where or "(top level)"
        raise InputError(f"{source}: {field}: expected a finite number, got {data}")
    if isinstance(data, Mapping):
        for key, value in data.items():
            name = _printable(key)
            check_finite(value, source, f"{where}.{name}" if where else name)
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            check_finite(value, source, f"{where}[{i}]")


def _printable(key: object) -> str:
    """A key as a message shows it: as written, or quoted when it holds a line break or the
    like (an error message must stay one line)."""
    text = str(key)
    return text if text.isprintable() else repr(text)


class _DuplicateKeyError(ValueError):
    """A key repeated in one mapping (exactly, or up to case)."""


def _folded(key: object) -> object:
    return key.casefold() if isinstance(key, str) else key


def _check_unique(keys: list[tuple[object, str]]) -> None:
    """Refuse repeated keys; ``keys`` pairs each key with where it is (for the message)."""
    seen: dict[object, object] = {}
    for key, where in keys:
        if not isinstance(key, Hashable):
            continue  # the constructor reports an unhashable key itself
        folded = _folded(key)
        if folded in seen:
            first = seen[folded]
            what = "twice" if first == key else f"as {first!r} and {key!r} (differ only in case)"
            raise _DuplicateKeyError(f"{where}key {key!r} given {what}")
        seen[folded] = key


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    _check_unique([(key, "") for key, _ in pairs])
    return dict(pairs)


class _StrictLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader (libyaml where available) that refuses repeated keys."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    # Only the keys written here: a merge (``<<: *anchor``) brings keys that may be overridden.
    keys = [
        (loader.construct_object(key_node), f"line {key_node.start_mark.line + 1}: ")
        for key_node, _ in node.value
        if key_node.tag != "tag:yaml.org,2002:merge"
    ]
    _check_unique(keys)
    loader.flatten_mapping(node)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


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
    parts = [_printable(part) for part in first["loc"] if part != "[key]"]
    loc = ".".join(parts)
    kind = first["type"]
    if kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "missing":
        message = "required field is missing"
    else:
        message = first["msg"].removeprefix("Value error, ")
    more = len(err.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    # A whole-model check names its fields in its own message; "(top level)" would add nothing.
    where = f"{loc}: " if loc else ""
    return f"{source}: {where}{message}{suffix}"


def validate(model_cls: type[ModelT], data: Any, source: str) -> ModelT:
    """Validate ``data`` into ``model_cls``; any problem becomes a one-line ``InputError``."""
    import pydantic  # noqa: PLC0415  (lazy: see the module's imports)

    try:
        return model_cls.model_validate(data)
    except pydantic.ValidationError as err:
        raise InputError(format_validation_error(err, source)) from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply to be an input file") from None


def load_input_file(path: str | Path, model_cls: type[ModelT]) -> ModelT:
    """Read a YAML/TOML/JSON file and validate it into ``model_cls`` (one-line errors)."""
    return validate(model_cls, load_mapping(path), str(path))
