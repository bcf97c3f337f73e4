"""``kvplan slo check FILE``: validate an SLO file and show what the optimizer will enforce.

With ``--metrics FILE`` (a mapping of flat metric names to numbers, e.g. a simulation summary)
it also evaluates the SLO against those numbers: each constraint's measured value and relative
violation, feasibility, and the objective values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from optimizer.cli._output import console, print_json
from slo import (
    TARGET_METRIC_HELP,
    ConstraintResult,
    InputError,
    MissingMetricError,
    SloReport,
    SloSpec,
    evaluate,
    load_slo,
)
from slo.inputfile import load_mapping

__all__ = ["register"]

slo_app = typer.Typer(
    help="SLO files: check one, and evaluate it against numbers you give (slo check --metrics).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``slo`` command group to ``app``."""
    app.add_typer(slo_app, name="slo")


@slo_app.command("check")
def check(
    file: Annotated[Path, typer.Argument(help="SLO file (.yaml, .toml or .json).")],
    metrics_file: Annotated[
        Path | None,
        typer.Option(
            "--metrics",
            help="Also evaluate against this mapping of flat metric names to numbers "
            "(YAML/TOML/JSON; nested mappings are joined with '.', e.g. ttft_ms: {p90: 1200}).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Validate an SLO file and print its targets, attainment, budget and objectives."""
    spec = load_slo(file)
    report = None if metrics_file is None else _evaluate_file(metrics_file, spec)
    if as_json:
        print_json(_as_json(spec, report))
        return
    _print_spec(file, spec, report)
    if report is not None:
        _print_outcome(report)


def _load_metrics(path: Path) -> dict[str, float]:
    """A metrics file flattened to ``{"ttft_ms.p90": 1200.0, ...}``; bad values are InputError."""
    flat: dict[str, float] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[prefix] = float(value)
        else:
            raise InputError(f"{path}: {prefix}: expected a number, got {value!r}")

    walk("", load_mapping(path))
    return flat


def _evaluate_file(path: Path, spec: SloSpec) -> SloReport:
    metrics = _load_metrics(path)
    try:
        report = evaluate(metrics, spec)
        report.objective_values()  # a missing objective metric is the file's fault too
    except MissingMetricError as err:
        raise InputError(f"{path}: {err}") from None
    return report


def _limit(value: float) -> str:
    return f"{value:,.6g}"


def _print_spec(file: Path, spec: SloSpec, report: SloReport | None) -> None:
    console.print(f"[bold]SLO {escape(spec.name)}[/bold]  ({escape(str(file))})")
    if spec.description:
        console.print(escape(spec.description))
    if spec.targets:
        targets = Table(title="Latency targets (upper limits)", title_justify="left")
        for column in ("metric", "statistic", "limit (ms)", "meaning"):
            targets.add_column(column, justify="right" if column == "limit (ms)" else "left")
        shown: set[str] = set()
        for metric, stat, limit in spec.target_items():
            meaning = "" if metric in shown else TARGET_METRIC_HELP[metric]
            shown.add(metric)
            targets.add_row(metric, stat, _limit(limit), meaning)
        console.print(targets)
    else:
        console.print("No latency targets.")
    if spec.attainment is not None:
        bars = ", ".join(f"{m} ≤ {_limit(v)} ms" for m, v in spec.per_request_bars().items())
        console.print(
            f"Attainment: at least {spec.attainment * 100:g}% of requests meet every target "
            f"(per request: {bars})."
        )
    limits = spec.budget.limits()
    if limits:
        budget = Table(title="Budget (hard limits)", title_justify="left")
        budget.add_column("limit")
        budget.add_column("value", justify="right")
        for key, value in limits.items():
            budget.add_row(key, _limit(value))
        console.print(budget)
    else:
        console.print("No budget limits.")
    objectives = Table(title="Objectives", title_justify="left")
    for column in ("role", "metric", "direction"):
        objectives.add_column(column)
    values = report.objective_values() if report is not None else {}
    if values:
        objectives.add_column("value", justify="right")
    for role, objective in spec.objectives.by_role().items():
        cells = [role, objective.metric, objective.direction]
        objectives.add_row(*cells, *([_limit(values[role])] if values else []))
    console.print(objectives)
    count = len(spec.target_items()) + (spec.attainment is not None) + len(limits)
    console.print(f"{count} constraint{'s' if count != 1 else ''} (violation ≤ 0 is feasible).")


def _print_outcome(report: SloReport) -> None:
    table = Table(title="Evaluation", title_justify="left")
    for column in ("constraint", "measured", "limit", "violation", "met"):
        table.add_column(column, justify="left" if column == "constraint" else "right")
    for row in report.constraints:
        mark = "[green]yes[/green]" if row.met else "[red]no[/red]"
        table.add_row(row.name, _limit(row.measured), _limit(row.limit), _violation(row), mark)
    console.print(table)
    verdict = "[green]feasible[/green]" if report.feasible else "[red]infeasible[/red]"
    console.print(f"Verdict: {verdict}")


def _violation(row: ConstraintResult) -> str:
    return "inf" if math.isinf(row.violation) else f"{row.violation:+.4f}"


def _as_json(spec: SloSpec, report: SloReport | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "spec": spec.model_dump(mode="json"),
        "per_request_bars": spec.per_request_bars(),
        "required_metrics": list(spec.required_metrics()),
        "directions": spec.objectives.directions,
    }
    if report is not None:
        data["evaluation"] = {
            "feasible": report.feasible,
            "constraints": [
                {
                    "name": row.name,
                    "kind": row.kind,
                    "measured": row.measured,
                    "limit": row.limit,
                    "violation": row.violation,
                    "met": row.met,
                }
                for row in report.constraints
            ],
            "objectives": report.objective_values(),
        }
    return data
