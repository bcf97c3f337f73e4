"""Every catalog model is documented, frozen and strict (DESIGN.md: config as validated models)."""

from __future__ import annotations

import inspect

import pydantic
import pytest

from hardware import model_spec, schema

MODELS = [
    cls
    for _, cls in inspect.getmembers(schema, inspect.isclass)
    if issubclass(cls, pydantic.BaseModel)
    and cls.__module__ in (schema.__name__, model_spec.__name__)
    and not cls.__name__.startswith("_")
]


def test_the_public_models_are_all_found() -> None:
    names = {cls.__name__ for cls in MODELS}
    assert {"GpuSpec", "StorageTierSpec", "ModelSpec", "Catalog"} <= names


@pytest.mark.parametrize("model", MODELS, ids=lambda cls: cls.__name__)
def test_every_field_has_a_description(model: type[pydantic.BaseModel]) -> None:
    undocumented = [
        name for name, field in model.model_fields.items() if not (field.description or "").strip()
    ]
    assert undocumented == []


@pytest.mark.parametrize("model", MODELS, ids=lambda cls: cls.__name__)
def test_models_are_frozen_and_forbid_unknown_keys(model: type[pydantic.BaseModel]) -> None:
    assert model.model_config.get("frozen") is True
    assert model.model_config.get("extra") == "forbid"
