"""``kvplan optimize --out`` then ``kvplan report``: same files from storage alone, strict JSON
validated by the schema, dashboard-readable study attributes, a baseline of another model
refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from typer.testing import CliRunner

from optimizer.cli._output import console
from optimizer.cli.main import app
from optimizer.schema import ResultsFile

DATA = Path(__file__).parent / "data"
BASE = ["--space", str(DATA / "tiny_space.yaml"), "--slo", str(DATA / "tiny_slo.yaml")]
BASE += ["--max-requests", "30", "--trials", "4"]
runner = CliRunner()


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-JSON token {name}")


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp("study")
    url = f"sqlite:///{tmp / 'study.db'}"
    result = runner.invoke(app, ["optimize", *BASE, "--storage", url, "--out", str(tmp / "a")])
    assert result.exit_code == 0, result.output
    return url, tmp


def test_report_from_storage_equals_the_original(study: tuple[str, Path]) -> None:
    url, tmp = study
    again = runner.invoke(app, ["report", "--storage", url, "--out", str(tmp / "b")])
    assert again.exit_code == 0, again.output
    for name in ("report.md", "report.html", "results.json", "pareto.csv", "trials.csv"):
        assert (tmp / "a" / name).read_bytes() == (tmp / "b" / name).read_bytes(), name
    md = (tmp / "b" / "report.md").read_text()
    assert "## What each cache tier buys" in md  # planning results came from the study
    assert "## Headroom" in md


def test_results_json_is_strict_json_and_matches_the_schema(study: tuple[str, Path]) -> None:
    # Regression (issue 12): results.json held NaN tokens, which JSON does not allow.
    _, tmp = study
    text = (tmp / "a" / "results.json").read_text()
    data = json.loads(text, parse_constant=_reject_constant)
    parsed = ResultsFile.model_validate(data)
    assert parsed.tolerance == 0.02
    assert parsed.objectives["latency"].unit == "ms"


def test_csv_columns_carry_units(study: tuple[str, Path]) -> None:
    _, tmp = study
    header = (tmp / "a" / "trials.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["trial", "feasible", "infeasible_reason"]
    assert "objective.latency (ms)" in header
    assert "objective.cost (USD/h)" in header
    pareto = (tmp / "a" / "pareto.csv").read_text().splitlines()[0].split(",")
    assert pareto == header  # one column order for both files


def test_report_attribute_is_plain_json(study: tuple[str, Path]) -> None:
    url, _ = study
    loaded = optuna.load_study(study_name="kvplan", storage=url)
    stored = loaded.user_attrs["kvplan_report"]
    assert stored["tolerance"] == 0.02
    assert stored["context"]["slo"]["name"]
    json.dumps(stored, allow_nan=False)


def test_a_baseline_of_another_model_is_refused(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text("model: Qwen/Qwen3-32B\ngpu: h100_sxm\ninstances: 2\n")
    result = runner.invoke(app, ["optimize", *BASE, "--baseline", str(baseline)])
    assert result.exit_code != 0
    assert "is not the space's model 'Qwen/Qwen3-8B'" in str(result.exception)


def test_dashboard_reads_metric_names_and_scalar_attributes(study: tuple[str, Path]) -> None:
    url, _ = study
    loaded = optuna.load_study(study_name="kvplan", storage=url)
    assert loaded.metric_names == [
        "latency: ttft_ms.p90",
        "throughput: goodput_tokens_per_s",
        "cost: usd_per_hour",
    ]
    complete = [t for t in loaded.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert all(isinstance(t.user_attrs["usd_per_hour"], float) for t in complete)
    ran = [t for t in complete if not t.user_attrs["infeasible_reason"]]
    assert ran
    assert all(isinstance(t.user_attrs["ttft_ms.p90"], float) for t in ran)


def test_an_slo_naming_capacity_runs_the_capacity_search(tmp_path: Path) -> None:
    slo = tmp_path / "capacity.yaml"
    slo.write_text(
        (DATA / "tiny_slo.yaml").read_text()
        + "objectives:\n  latency: ttft_ms.p90\n  throughput: capacity_requests_per_s\n"
        "  cost: usd_per_hour\n"
    )
    args = ["optimize", "--space", str(DATA / "tiny_space.yaml"), "--slo", str(slo)]
    args += ["--max-requests", "30", "--trials", "2", "--no-plan", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["objectives"]["throughput"]["metric"] == "capacity_requests_per_s"
    assert data["objectives"]["throughput"]["unit"] == "req/s"
    for entry in data["pareto"]:
        assert entry["objectives"]["throughput"] == entry["metrics"]["capacity_requests_per_s"]
        assert entry["metrics"]["capacity_simulations"] >= 1


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        ("reject", "exceed the model's 40,960-token context (longest 87,571); --overlong drop"),
        ("foo", "--overlong foo: expected one of drop, count-as-miss, reject"),
    ],
)
def test_optimize_overlong_reject_and_a_bad_policy_are_one_line_exit_2(
    policy: str, said: str
) -> None:
    """The bundled trace holds prompts longer than Qwen3-8B's context: ``--overlong reject``
    refuses the run before any trial, naming the count and the way out."""
    args = ["optimize", "--space", str(DATA / "tiny_space.yaml"), "--slo"]
    args += [str(DATA / "tiny_slo.yaml"), "--max-requests", "40", "--overlong", policy]
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert said in lines[0]


def test_python_m_kvplan_writes_a_working_completion_script() -> None:
    """``python -m kvplan`` is ``kvplan``: its completion script is for the ``kvplan`` command,
    and completing through it names the commands."""
    kvplan = [sys.executable, "-m", "kvplan"]
    # Typer reads the shell from the process tree (shellingham) and then ignores the argument;
    # a test run whose ancestors hold no shell (a detached job: "Shell  not supported.", exit
    # 1) would fail. Its test hook makes --show-completion take the shell named here.
    no_detection = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run(
        [*kvplan, "--show-completion", "bash"],
        capture_output=True,
        text=True,
        check=False,
        env=no_detection,
    )
    assert shown.returncode == 0, shown.stderr
    assert "_KVPLAN_COMPLETE=complete_bash" in shown.stdout
    assert shown.stdout.rstrip().endswith("complete -o default -F _kvplan_completion kvplan")
    env = {**os.environ, "_KVPLAN_COMPLETE": "complete_bash", "COMP_WORDS": "kvplan opt"}
    completed = subprocess.run(
        kvplan, capture_output=True, text=True, check=True, env={**env, "COMP_CWORD": "1"}
    )
    assert completed.stdout.split() == ["optimize"]


def test_tables_fit_80_columns(study: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = study
    monkeypatch.setattr(console, "_width", 80)  # rich fixes a console's width when it is made
    result = runner.invoke(app, ["report", "--storage", url], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any("Pareto front" in line for line in lines)
    assert any("Recommendations" in line for line in lines)
    assert max(len(line) for line in lines) <= 80


def test_report_of_a_capacity_study_shows_the_sustainable_rate(tmp_path: Path) -> None:
    """``--capacity`` is stored with the study: ``kvplan report`` ranks by the rate too."""
    url = f"sqlite:///{tmp_path / 'capacity.db'}"
    args = ["optimize", *BASE[:-2], "--trials", "2", "--capacity", "--no-plan"]
    ran = runner.invoke(app, [*args, "--storage", url], env={"COLUMNS": "100"})
    assert ran.exit_code == 0, ran.output
    shown = runner.invoke(app, ["report", "--storage", url], env={"COLUMNS": "100"})
    assert shown.exit_code == 0, shown.output
    for output in (ran.output, shown.output):
        assert "capacity" in output  # the column title, its unit in the line below
        assert "(req/s)" in output
        assert "goodput" not in output


def test_an_over_budget_baseline_is_reported_by_its_reason_not_a_placeholder(
    tmp_path: Path,
) -> None:
    """Eight H100s break the 20 USD/h budget: the baseline is ruled out without simulating,
    so the report gives the reason and the saving, and no latency figure at all."""
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text("gpu: h100_sxm\ninstances: 8\nbackend: vllm\n")
    args = ["optimize", *BASE[:-2], "--trials", "2", "--baseline", str(baseline)]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "o"), "--json"])
    assert result.exit_code == 0, result.output
    base = json.loads(result.stdout)["planning"]["baseline"]
    assert base["feasible"] is False
    assert base["reason"].startswith("costs USD ")
    assert "> budget USD 20/h" in base["reason"]
    assert all("latency" not in text for text in base["comparison"].values())
    assert all("saves USD" in text for text in base["comparison"].values())
    md = (tmp_path / "o" / "report.md").read_text()
    assert "## Against your baseline" in md
    assert "It does not meet the SLO and budget: costs USD" in md
    assert "1,000,000,000" not in md
    assert "1e+09" not in md


def test_tolerance_option_reaches_the_picks_and_is_stored(tmp_path: Path) -> None:
    """``--tolerance 0.3``: the picks' reasons quote it, results.json and the study keep it,
    and ``kvplan report`` re-renders with it."""
    url = f"sqlite:///{tmp_path / 'tol.db'}"
    args = ["optimize", *BASE[:-2], "--trials", "3", "--no-plan", "--tolerance", "0.3"]
    ran = runner.invoke(app, [*args, "--storage", url, "--json"])
    assert ran.exit_code == 0, ran.output
    data = json.loads(ran.stdout)
    assert data["tolerance"] == 0.3
    assert data["recommendations"]
    whys = [pick["why"] for pick in data["recommendations"].values()]
    assert any("30%" in why for why in whys), whys
    again = runner.invoke(app, ["report", "--storage", url, "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["recommendations"] == data["recommendations"]
