"""Shared fixtures of the validation tests."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.validation import validate


@pytest.fixture
def no_frontend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows simulated without the backend's serial front end (``simulator/engine/
    frontend.py``) or its tokenising latency, for tests whose hand-derived times isolate a
    scheduling rule."""
    made = validate.row_config

    def without(*args: Any, **kwargs: Any) -> Any:
        config = made(*args, **kwargs)
        if isinstance(config, str):
            return config
        return config.model_copy(
            update={"frontend_us": (0.0, 0.0, 0.0), "tokenize_us_per_prompt_token": 0.0}
        )

    monkeypatch.setattr(validate, "row_config", without)
