"""Where the bench scripts find the measured H100 benchmarks: ``../shared/data/silicon`` beside
the repository (the project's workspace layout; every script takes ``--silicon`` to point
elsewhere)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_SILICON = (
    Path(__file__).resolve().parents[2] / "shared/data/silicon/silicon_h100_calibration.csv"
)
