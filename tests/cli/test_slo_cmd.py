"""``kvplan slo check``: tables, JSON, evaluation against a metrics file, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optimizer.cli import main
from optimizer.cli.main import app
from slo import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slo"
runner = CliRunner()

METRICS_YAML = """\
ttft_ms: {p90: 1500, p99: 5600}
tpot_ms: {p90: 42}
e2e_ms: {p99: 30000}
attainment: 0.97
usd_per_hour: 180
gpus: 48
output_tokens_per_s: 9000
"""


@pytest.mark.parametrize("name", ["chat.yaml", "batch.toml", "strict.json"])
def test_check_prints_tables_for_each_example(name: str) -> None:
    result = runner.invoke(app, ["slo", "check", str(EXAMPLES / name)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    for heading in ("Latency targets", "Objectives", "minimize", "maximize", "constraint"):
        assert heading in result.stdout


def test_check_chat_shows_targets_attainment_and_budget() -> None:
    result = runner.invoke(
        app, ["slo", "check", str(EXAMPLES / "chat.yaml")], env={"COLUMNS": "120"}
    )
    assert result.exit_code == 0
    out = result.stdout
    assert "SLO chat-production" in out
    for fragment in ("ttft_ms", "2,000", "5,000", "usd_per_hour", "max_gpus"):
        assert fragment in out
    assert "at least 95% of requests" in out
    assert "goodput_tokens_per_s" in out
    assert "7 constraints" in out


def test_check_json_is_machine_readable() -> None:
    result = runner.invoke(app, ["slo", "check", str(EXAMPLES / "chat.yaml"), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["spec"]["targets"]["ttft_ms"] == {"p90": 2000.0, "p99": 5000.0}
    assert data["directions"] == {
        "latency": "minimize",
        "throughput": "maximize",
        "cost": "minimize",
    }
    assert data["per_request_bars"]["ttft_ms"] == 2000.0
    assert "evaluation" not in data


def test_check_with_metrics_evaluates(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.yaml"
    metrics.write_text(METRICS_YAML)
    args = ["slo", "check", str(EXAMPLES / "chat.yaml"), "--metrics", str(metrics)]
    table = runner.invoke(app, args, env={"COLUMNS": "120"})
    assert table.exit_code == 0
    assert "infeasible" in table.stdout
    assert "+0.1200" in table.stdout  # ttft p99: (5600 - 5000) / 5000
    result = runner.invoke(app, [*args, "--json"])
    evaluation = json.loads(result.stdout)["evaluation"]
    assert evaluation["feasible"] is False
    by_name = {row["name"]: row for row in evaluation["constraints"]}
    assert by_name["ttft_ms.p99"]["violation"] == pytest.approx(0.12)
    assert by_name["budget.max_gpus"]["violation"] == pytest.approx(-0.25)
    assert evaluation["objectives"] == pytest.approx(
        {"latency": 1500.0, "throughput": 9000 * 0.97, "cost": 180.0}
    )


def test_metrics_file_missing_a_metric_is_input_error(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.json"
    metrics.write_text('{"ttft_ms.p90": 1}')
    args = ["slo", "check", str(EXAMPLES / "chat.yaml"), "--metrics", str(metrics)]
    result = runner.invoke(app, args)
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{metrics}: metric 'ttft_ms.p99'")


def test_metrics_file_with_non_number_is_input_error(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.yaml"
    metrics.write_text("ttft_ms: {p90: fast}\n")
    args = ["slo", "check", str(EXAMPLES / "chat.yaml"), "--metrics", str(metrics)]
    result = runner.invoke(app, args)
    assert isinstance(result.exception, InputError)
    assert "ttft_ms.p90: expected a number" in str(result.exception)


def test_bad_file_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "chat.yaml"
    bad.write_text("name: x\ntargets: {ttft_ms: {p120: 5}}\n")
    monkeypatch.setattr(sys, "argv", ["kvplan", "slo", "check", str(bad)])
    with pytest.raises(SystemExit) as info:
        main.run()
    assert info.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "chat.yaml: targets.ttft_ms.p120: percentile must be in (0, 100]" in lines[0]
