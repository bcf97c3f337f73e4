"""The shipped catalog (``hardware/data/*.yaml``) merged with an optional user file.

A user catalog has the same three top-level keys as the shipped files put together::

    gpus:    {my_gpu: {...all GpuSpec fields...}, h100_sxm: {usd_per_gpu_hour: 2.10}}
    storage: {...}
    models:  {...}

A new key adds an entry (every required field must be given); an existing key (case-insensitive)
is overridden field by field, so a user can change one price without restating the GPU. A mapping
field (``dense_tflops``) is merged key by key as well: ``dense_tflops: {bf16: 900}`` derates bf16
and keeps the other precisions.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from hardware.schema import Catalog
from slo.inputfile import InputError, load_mapping, validate

__all__ = ["load_catalog", "shipped_catalog"]

_SECTIONS = ("gpus", "storage", "models")


def _shipped_raw() -> dict[str, dict[str, dict[str, Any]]]:
    data_dir = resources.files("hardware") / "data"
    raw: dict[str, dict[str, dict[str, Any]]] = {}
    for section in _SECTIONS:
        with resources.as_file(data_dir / f"{section}.yaml") as path:
            entries = load_mapping(path)
        raw[section] = {str(k).lower(): {"name": str(k), **v} for k, v in entries.items()}
    return raw


@cache
def shipped_catalog() -> Catalog:
    """The catalog that ships with kvplan (validated once per process, then cached)."""
    return validate(Catalog, _shipped_raw(), "hardware/data")


def load_catalog(user_file: str | Path | None = None) -> Catalog:
    """The shipped catalog, extended or overridden by ``user_file`` when given."""
    if user_file is None:
        return shipped_catalog()
    raw = _shipped_raw()
    user = load_mapping(user_file)
    unknown = set(user) - set(_SECTIONS)
    if unknown:
        expected = ", ".join(_SECTIONS)
        raise InputError(f"{user_file}: {sorted(unknown)[0]}: unknown key; expected {expected}")
    for section, entries in user.items():
        if entries is None:  # a section whose entries are all commented out
            continue
        if not isinstance(entries, dict):
            raise InputError(f"{user_file}: {section}: expected a mapping of names to entries")
        for name, fields in entries.items():
            if not isinstance(fields, dict):
                raise InputError(f"{user_file}: {section}.{name}: expected a mapping of fields")
            key = str(name).lower()
            base = raw[section].get(key, {"name": str(name)})
            raw[section][key] = _merged(base, fields)
    return validate(Catalog, raw, str(user_file))


def _merged(base: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` over ``base`` (new dicts; neither input is modified), mappings merged by key."""
    merged = dict(base)
    for field, value in fields.items():
        old = merged.get(field)
        merged[field] = (
            {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
        )
    return merged
