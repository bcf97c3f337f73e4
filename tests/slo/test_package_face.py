"""``slo``'s exports: every name in ``__all__`` resolves on first use (PEP 562), and reading an
input file does not build the SLO schema (what keeps ``replay``'s start-up short)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import slo


@pytest.mark.parametrize("name", slo.__all__)
def test_every_public_name_resolves_to_its_defining_module(name: str) -> None:
    value = getattr(slo, name)
    module = getattr(value, "__module__", None)
    assert module is None or module.startswith("slo")
    assert name in dir(slo)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        slo.no_such_thing  # noqa: B018


def test_input_errors_come_without_the_slo_schema() -> None:
    probe = (
        "import sys\n"
        "from slo.inputfile import InputError, load_mapping\n"
        "print(sorted(m for m in ('slo._spec', 'slo._attainment', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
