"""Fixtures for the latency tests (the specs themselves live in ``specs.py``)."""

from __future__ import annotations

import pytest

from simulator.latency import Deployment

from .specs import H100, LLAMA_8B


@pytest.fixture
def llama8b_h100() -> Deployment:
    """Llama-3.1-8B bf16 on one H100."""
    return Deployment(LLAMA_8B, H100)
