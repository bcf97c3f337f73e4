"""Issue 15: tables readable at 80 columns. Each command of the README's tour that prints a
table, run at ``COLUMNS=80``: no line wider than 80, and no figure or name cut to an ellipsis
(rich's way of fitting a column it may not wrap)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from optimizer.cli._output import console
from optimizer.cli.main import app

runner = CliRunner()

COMMANDS = {
    "hardware list": ["hardware", "list"],
    "models list": ["models", "list"],
    "validate --steps": ["validate", "--steps", "examples/steps_h100_from_silicon.csv",
                         "--latency", "table"],
    "simulate --compare-cache": ["simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "h100_sxm",
                                 "--instances", "2", "--max-requests", "40",
                                 "--compare-cache", "idle,device,host,disk"],
}  # fmt: skip


@pytest.mark.parametrize("name", list(COMMANDS))
def test_tables_fit_80_columns_without_ellipses(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The console's own width (rich fixes it from COLUMNS when the console is made, so an
    # environment variable set per invocation may not reach it).
    monkeypatch.setattr(console, "_width", 80)
    result = runner.invoke(app, COMMANDS[name], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) > 5
    assert max(len(line) for line in lines) <= 80
    cut = [line for line in lines if "…" in line]
    assert cut == [], "\n".join(cut)
