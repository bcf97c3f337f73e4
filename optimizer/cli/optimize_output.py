"""What ``kvplan optimize`` and ``kvplan report`` print and write: tables, JSON, CSV, report.

Both commands go through ``emit``, so a study re-rendered from storage prints and writes what
the live run did. The live run stores what the report needs beyond the trials (``ReportContext``,
``Planning``, the tolerance) in the study's user attribute ``REPORT_ATTR``.

Files under ``--out``: ``trials.csv`` and ``pareto.csv`` (one column order; numeric columns
carry their unit in the name), ``results.json`` (strict JSON, validated by
``optimizer.schema.ResultsFile`` before it is written), ``report.md`` and ``report.html``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from rich.table import Table

from optimizer.cli._output import clean_json, console
from optimizer.report import Planning, ReportContext, grouped_picks, write_report
from optimizer.results import StudyResult, TrialRecord
from optimizer.schema import ResultsFile
from slo.units import HOURS_PER_MONTH

__all__ = ["REPORT_ATTR", "Output", "emit", "load_report_attr", "result_json", "store_report"]

#: Study user attribute with the report's context, planning results and tolerance.
REPORT_ATTR = "kvplan_report"


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):  # noqa: PLR0124  (NaN)
        return "–"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _deployment(params: Mapping[str, Any]) -> str:
    """``4×h200_sxm TP2 fp8``: instances × GPU, tensor parallelism (`` DP4`` with attention
    data parallelism, `` PP2`` with pipeline stages), weight precision."""
    text = f"{params.get('instances', 1)}×{params.get('gpu', '?')} TP{params.get('tp', 1)}"
    if (params.get("attention_dp") or 1) > 1:
        text += f" DP{params['attention_dp']}"
    if int(params.get("pp") or 1) > 1:
        text += f" PP{params['pp']}"
    return f"{text} {params['precision']}" if params.get("precision") else text


def _cache(params: Mapping[str, Any]) -> str:
    """``L2 512 GiB, nvme_4tib, sieve``: the tiers beyond HBM and the eviction policy."""
    parts = []
    if float(params.get("l2_dram_gib") or 0) > 0:
        parts.append(f"L2 {_fmt(params['l2_dram_gib'])} GiB")
    if params.get("l3") not in (None, "none"):
        parts.append(str(params["l3"]))
    if params.get("eviction"):
        parts.append(str(params["eviction"]))
    return ", ".join(parts) or "HBM only"


def _objective_columns(table: Table, result: StudyResult) -> None:
    for info in result.objectives.values():
        header = info.label.replace(" (", "\n(")  # the unit on its own line: narrow columns
        table.add_column(header, justify="right", no_wrap=True)


def _table(title: str, first: str, result: StudyResult) -> Table:
    """Readable at 80 columns: the configuration in two wrapping columns, figures unwrapped."""
    table = Table(title=title, pad_edge=False)
    table.add_column(first, overflow="fold")
    table.add_column("deployment", ratio=1, overflow="fold")
    table.add_column("cache", ratio=1, overflow="fold")
    _objective_columns(table, result)
    return table


def _front_table(result: StudyResult) -> Table:
    n = len(result.front)
    table = _table(f"Feasible Pareto front ({n} configuration{'s' * (n != 1)})", "#", result)
    for r in result.front:
        table.add_row(
            str(r.number),
            _deployment(r.params),
            _cache(r.params),
            *(_fmt(r.objectives[role]) for role in result.objectives),
        )
    return table


def _picks_table(result: StudyResult, *, written: bool) -> Table:
    """The picks; the title says where their reasons are (report.md, once ``--out`` wrote
    it; ``--json`` prints them too)."""
    where = "why: see report.md" if written else "why: --out DIR writes report.md, or --json"
    table = _table(f"Recommendations ({where})", "pick", result)
    table.add_column("USD/\nmonth", justify="right", no_wrap=True)
    for label, r in grouped_picks(result):
        monthly = float(r.metrics.get("usd_per_hour") or float("nan")) * HOURS_PER_MONTH
        table.add_row(
            f"{label} (#{r.number})",
            _deployment(r.params),
            _cache(r.params),
            *(_fmt(r.objectives[role]) for role in result.objectives),
            _fmt(monthly),
        )
    return table


def result_json(result: StudyResult, context: ReportContext, planning: Planning | None) -> Any:
    """The ``--json`` / ``results.json`` object (strict JSON: no NaN, validated)."""

    def record(r: TrialRecord) -> dict[str, Any]:
        return {
            "trial": r.number,
            "params": dict(r.params),
            "objectives": dict(r.objectives),
            "metrics": dict(r.metrics),
        }

    data = {
        "directions": dict(result.directions),
        "objectives": {
            role: {"metric": i.metric, "unit": i.unit, "target": i.target}
            for role, i in result.objectives.items()
        },
        "tolerance": result.tolerance,
        "trials": result.n_trials,
        "feasible_trials": result.n_feasible,
        "notes": list(result.notes),
        "pareto": [record(r) for r in result.front],
        "recommendations": {p.label: {**record(p.trial), "why": p.why} for p in result.picks},
        "planning": planning.to_dict() if planning is not None else None,
        "context": context.to_dict(),
    }
    cleaned = clean_json(data)
    ResultsFile.model_validate(cleaned)
    return cleaned


def _csv_rows(
    items: Sequence[TrialRecord], result: StudyResult, every: Sequence[TrialRecord]
) -> tuple[list[str], list[dict[str, Any]]]:
    """Columns (from ``every`` record, so trials.csv and pareto.csv share one order) and rows."""
    params = sorted({k for r in every for k in r.params})
    metrics = sorted({k for r in every for k in r.metrics if not k.startswith("objective.")})
    objective_cols = {
        role: f"objective.{role} ({i.unit})" if i.unit else f"objective.{role}"
        for role, i in result.objectives.items()
    }
    columns = [
        "trial",
        "feasible",
        "infeasible_reason",
        *(f"param.{k}" for k in params),
        *objective_cols.values(),
        *(f"metric.{k}" for k in metrics),
    ]
    rows = []
    for r in items:
        row: dict[str, Any] = {
            "trial": r.number,
            "feasible": r.feasible,
            "infeasible_reason": r.infeasible_reason,
        }
        row |= {f"param.{k}": _param_cell(r.params.get(k)) for k in params}
        row |= {col: r.objectives.get(role) for role, col in objective_cols.items()}
        row |= {f"metric.{k}": r.metrics.get(k) for k in metrics}
        rows.append(row)
    return columns, rows


def _write_csv(
    path: Path, items: Sequence[TrialRecord], result: StudyResult, every: Sequence[TrialRecord]
) -> None:
    import pandas as pd  # noqa: PLC0415  (only needed when writing files)

    columns, rows = _csv_rows(items, result, every)
    frame = pd.DataFrame(rows, columns=columns)
    # Whole numbers stay whole where a column has gaps (a trial ruled out without simulating
    # has no request counts; a parameter may not apply): pandas' nullable integers, not floats.
    for name in columns:
        values = [row[name] for row in rows if not _missing(row[name])]
        counted = name in _COUNT_COLUMNS and all(float(v).is_integer() for v in values)
        whole = name.startswith("param.") and values and all(_is_int(v) for v in values)
        if counted or whole:
            frame[name] = frame[name].astype("Int64")
    frame.to_csv(path, index=False)


#: Metric columns that count things (whole numbers wherever they are known).
_COUNT_COLUMNS = frozenset(
    ("trial", "metric.n_requests", "metric.n_rejected", "metric.gpus", "metric.simulated_requests")
)


def _missing(value: object) -> bool:
    """No value: None, or NaN (a metric a trial ruled out without simulating does not have)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _param_cell(value: object) -> object:
    """A parameter as written: floats to 12 significant digits (a stepped float dimension
    samples 0.8500000000000001 for 0.85)."""
    return float(f"{value:.12g}") if isinstance(value, float) else value


class Output:
    """Everything one run or one re-render shows."""

    def __init__(
        self,
        result: StudyResult,
        records: list[TrialRecord],
        context: ReportContext,
        planning: Planning | None,
    ) -> None:
        self.result = result
        self.records = records
        self.context = context
        self.planning = planning

    def write(self, out: Path) -> None:
        """CSV, JSON and the report into ``out``."""
        out.mkdir(parents=True, exist_ok=True)
        _write_csv(out / "trials.csv", self.records, self.result, self.records)
        _write_csv(out / "pareto.csv", self.result.front, self.result, self.records)
        data = result_json(self.result, self.context, self.planning)
        text = json.dumps(data, indent=2, allow_nan=False)
        (out / "results.json").write_text(text + "\n", encoding="utf-8")
        write_report(
            out,
            title="kvplan planning report",
            result=self.result,
            records=self.records,
            context=self.context,
            planning=self.planning,
        )


def emit(output: Output, *, out: Path | None, as_json: bool, summary: str) -> None:
    """Write files (``out``) and print JSON or the tables."""
    if out is not None:
        output.write(out)
    if as_json:
        print(json.dumps(result_json(output.result, output.context, output.planning), indent=2))
        return
    result = output.result
    console.print(summary)
    if not result.front:
        console.print(
            "[bold red]No feasible configuration:[/] widen the space, relax the SLO, "
            "or run more trials."
        )
        return
    console.print(_front_table(result))
    console.print(_picks_table(result, written=out is not None))
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if out is not None:
        console.print(
            f"results and report in {out}/ (report.md, report.html, pareto.csv, "
            "trials.csv, results.json)"
        )


def store_report(
    study: optuna.Study, context: ReportContext, planning: Planning | None, tolerance: float
) -> None:
    """Keep what ``kvplan report`` needs beyond the trials in the study."""
    data = {
        "context": context.to_dict(),
        "planning": planning.to_dict() if planning is not None else None,
        "tolerance": tolerance,
    }
    study.set_user_attr(REPORT_ATTR, clean_json(data))


def load_report_attr(
    study: optuna.Study,
) -> tuple[ReportContext | None, Planning | None, float | None]:
    """What ``store_report`` kept, or Nones for a study written before it existed."""
    data = study.user_attrs.get(REPORT_ATTR)
    if not data:
        return None, None, None
    planning = Planning.from_dict(data["planning"]) if data.get("planning") else None
    return ReportContext.from_dict(data["context"]), planning, float(data["tolerance"])
