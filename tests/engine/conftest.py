"""Fixtures of the engine tests (helpers live in ``engine_helpers.py``)."""

from __future__ import annotations

import pytest
from engine_helpers import tiny_catalog

from hardware.schema import Catalog


@pytest.fixture
def catalog() -> Catalog:
    """The tiny made-up catalog of ``engine_helpers``."""
    return tiny_catalog()
