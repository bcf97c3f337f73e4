"""``kvplan optimize`` (search, recommend, report) and ``kvplan report`` (re-render a study)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import optuna
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from optimizer.cli._output import console, err_console, print_json
from optimizer.cli.profiles_cmd import space_latency_notes, user_profiles_dir
from optimizer.report import Planning, grouped_picks, write_report
from optimizer.results import StudyResult, TrialRecord, summarise
from optimizer.run import (
    OptimizeSetup,
    build_evaluator,
    count_complete,
    count_simulated,
    records_of,
    run_workers,
)
from optimizer.study import SAMPLERS, make_storage
from slo.inputfile import InputError, load_mapping

__all__ = ["register"]

FRONT_COLUMNS = (
    ("prec", "precision"),
    ("L2 GiB", "l2_dram_gib"),
    ("L3", "l3"),
    ("evict", "eviction"),
    ("sched", "scheduler"),
    ("router", "router"),
)


def _default_slo() -> str:
    return str(resources.files("optimizer") / "data" / "default_slo.yaml")


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _gpus(params: Mapping[str, Any]) -> str:
    """``4×h200_sxm TP2``: instances × GPU and tensor parallelism."""
    return f"{params.get('instances', 1)}×{params.get('gpu', '?')} TP{params.get('tp', 1)}"


def _front_table(result: StudyResult) -> Table:
    table = Table(title=f"Feasible Pareto front ({len(result.front)} configurations)")
    table.add_column("trial", justify="right")
    table.add_column("GPUs")
    for header, _ in FRONT_COLUMNS:
        table.add_column(header)
    for header in ("TTFT p90 ms", "TPOT p90 ms", "goodput tok/s", "USD/h", "USD/1M tok"):
        table.add_column(header, justify="right")
    for r in result.front:
        m = r.metrics
        table.add_row(
            str(r.number),
            _gpus(r.params),
            *(_fmt(r.params.get(key)) for _, key in FRONT_COLUMNS),
            _fmt(m.get("ttft_ms.p90")),
            _fmt(m.get("tpot_ms.p90")),
            _fmt(m.get("goodput_tokens_per_s")),
            _fmt(m.get("usd_per_hour")),
            _fmt(m.get("usd_per_million_output_tokens")),
        )
    return table


def _picks_table(result: StudyResult) -> Table:
    table = Table(title="Recommendations (why: see report.md)")
    for column in (
        "pick",
        "trial",
        "GPUs",
        "prec",
        "L2 GiB",
        "sched",
        "TTFT p90 ms",
        "goodput tok/s",
        "USD/h",
        "USD/month",
    ):
        table.add_column(column, justify="left" if column in ("pick", "sched") else "right")
    for label, r in grouped_picks(result):
        p, m = r.params, r.metrics
        gpus = _gpus(p)
        monthly = float(m.get("usd_per_hour", float("nan"))) * 730.0
        table.add_row(
            label,
            str(r.number),
            gpus,
            _fmt(p.get("precision")),
            _fmt(p.get("l2_dram_gib")),
            _fmt(p.get("scheduler")),
            _fmt(m.get("ttft_ms.p90")),
            _fmt(m.get("goodput_tokens_per_s")),
            _fmt(m.get("usd_per_hour")),
            _fmt(monthly),
        )
    return table


def _result_json(result: StudyResult, planning: Planning | None) -> dict[str, Any]:
    def record(r: TrialRecord) -> dict[str, Any]:
        return {
            "trial": r.number,
            "params": dict(r.params),
            "objectives": dict(r.objectives),
            "metrics": dict(r.metrics),
        }

    data: dict[str, Any] = {
        "directions": dict(result.directions),
        "trials": result.n_trials,
        "feasible_trials": result.n_feasible,
        "pareto": [record(r) for r in result.front],
        "recommendations": {p.label: {**record(p.trial), "why": p.why} for p in result.picks},
    }
    if planning is not None:
        data["planning"] = {
            "tier_value": planning.tier_value,
            "headroom": planning.headroom,
            "baseline": planning.baseline,
        }
    return data


def _write_outputs(
    out: Path,
    result: StudyResult,
    records: list[TrialRecord],
    *,
    data: dict[str, Any],
    context: dict[str, Any],
    planning: Planning | None,
) -> None:
    import pandas as pd  # noqa: PLC0415  (only needed when writing files)

    out.mkdir(parents=True, exist_ok=True)

    def rows(items: list[TrialRecord] | tuple[TrialRecord, ...]) -> list[dict[str, Any]]:
        return [
            {
                "trial": r.number,
                "feasible": r.feasible,
                "infeasible_reason": r.infeasible_reason,
                **{f"param.{k}": v for k, v in r.params.items()},
                **{f"objective.{k}": v for k, v in r.objectives.items()},
                **{
                    f"metric.{k}": v for k, v in r.metrics.items() if not k.startswith("objective.")
                },
            }
            for r in items
        ]

    pd.DataFrame(rows(records)).to_csv(out / "trials.csv", index=False)
    pd.DataFrame(rows(result.front)).to_csv(out / "pareto.csv", index=False)
    (out / "results.json").write_text(
        json.dumps({**data, "context": context}, indent=2, default=str), encoding="utf-8"
    )
    write_report(
        out,
        title="kvplan planning report",
        result=result,
        records=records,
        context=context,
        planning=planning,
    )


def _progress_callback(progress: Progress, task: Any, directions: Mapping[str, str]) -> Any:
    def update(study: optuna.Study) -> None:
        records = records_of(study)
        result = summarise(records, directions)
        progress.update(
            task,
            completed=len(records),
            description=f"trials · {result.n_feasible} feasible · front {len(result.front)}",
        )

    return update


def _baseline_params(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    data = load_mapping(path)
    if not data:
        raise InputError(f"{path}: expected configuration settings (gpu, tp, instances, ...)")
    return data


SloOpt = Annotated[Path | None, typer.Option("--slo", help="SLO file; default: bundled.")]
SpaceOpt = Annotated[Path | None, typer.Option("--space", help="Search-space file.")]
WorkloadOpt = Annotated[
    str | None,
    typer.Option(help="Trace file or workload file; default: bundled Mooncake slice."),
]
TrialsOpt = Annotated[
    int,
    typer.Option(
        min=1, help="Configurations the study simulates (repeats of one are free and not counted)."
    ),
]
SamplerOpt = Annotated[str, typer.Option(help=f"One of: {', '.join(SAMPLERS)}.")]
SeedOpt = Annotated[int, typer.Option(help="Seed of the sampler and the simulations.")]
StorageOpt = Annotated[
    str | None,
    typer.Option(help="sqlite:///FILE, a journal file, or postgresql://... (resumable)."),
]
StudyOpt = Annotated[str, typer.Option(help="Study name inside the storage.")]
WorkersOpt = Annotated[int, typer.Option(min=1, help="Worker processes on this machine.")]
OutOpt = Annotated[Path | None, typer.Option(help="Write CSV/JSON results and the report here.")]
CatalogOpt = Annotated[Path | None, typer.Option(help="User catalog overriding the shipped one.")]
LatencyOpt = Annotated[str | None, typer.Option(help="Latency model spec for every trial.")]
BaselineOpt = Annotated[Path | None, typer.Option(help="Your current configuration (YAML).")]
PlanOpt = Annotated[
    bool, typer.Option("--plan/--no-plan", help="Measure tier value and headroom of the picks.")
]
MaxRequestsOpt = Annotated[int | None, typer.Option(min=1, help="Trace requests to replay.")]
TimeScaleOpt = Annotated[float | None, typer.Option(help="Trace time factor (0.5 = 2x load).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print results as JSON.")]
CapacityOpt = Annotated[
    bool,
    typer.Option(
        "--capacity",
        help="Throughput objective = sustainable request rate under the SLO (capacity search; "
        "about 8 extra simulations per feasible trial).",
    ),
]


def optimize(  # noqa: PLR0917  (one parameter per CLI option, as typer requires)
    slo: SloOpt = None,
    space: SpaceOpt = None,
    workload: WorkloadOpt = None,
    trials: TrialsOpt = 60,
    sampler: SamplerOpt = "tpe",
    seed: SeedOpt = 0,
    storage: StorageOpt = None,
    study: StudyOpt = "kvplan",
    workers: WorkersOpt = 1,
    out: OutOpt = None,
    catalog: CatalogOpt = None,
    latency: LatencyOpt = None,
    baseline: BaselineOpt = None,
    plan_picks: PlanOpt = True,
    max_requests: MaxRequestsOpt = None,
    time_scale: TimeScaleOpt = None,
    capacity: CapacityOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Search deployments for the Pareto front of latency, throughput and cost under an SLO."""
    setup = OptimizeSetup(
        slo_path=str(slo or _default_slo()),
        space_path=str(space) if space else None,
        workload=workload,
        catalog_path=str(catalog) if catalog else None,
        storage=storage,
        study_name=study,
        sampler=sampler,
        seed=seed,
        n_trials=trials,
        latency_model=latency,
        kernel_profiles_dir=user_profiles_dir(),
        time_scale=time_scale,
        max_requests=max_requests,
        capacity=capacity,
    )
    if sampler not in SAMPLERS:
        raise InputError(f"unknown sampler '{sampler}'; known: {', '.join(SAMPLERS)}")
    baseline_params = _baseline_params(baseline)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    evaluator = build_evaluator(setup)
    directions = dict(evaluator.spec.objectives.directions)
    started = time.perf_counter()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=as_json,
        disable=as_json,
    ) as progress:
        task = progress.add_task("trials", total=trials)
        result_study = run_workers(
            setup, workers=workers, on_progress=_progress_callback(progress, task, directions)
        )
    records = records_of(result_study)
    result = summarise(records, directions)
    planning = None
    if plan_picks and result.picks:
        status = err_console.status("measuring tier value and headroom of the picks")
        with status if not as_json else contextlib.nullcontext():
            from optimizer.planning import plan  # noqa: PLC0415  (loads the planner on demand)

            planning = plan(evaluator, result, baseline=baseline_params)
    elapsed = time.perf_counter() - started
    context = {
        "model": evaluator.space.model,
        "slo": evaluator.spec.name,
        "sampler": sampler,
        "seed": seed,
        "trials": result.n_trials,
        "study": study,
        "storage": storage or "in memory",
        "wall_s": round(elapsed, 1),
    }
    data = _result_json(result, planning)
    if out is not None:
        _write_outputs(out, result, records, data=data, context=context, planning=planning)
    if as_json:
        print_json(data)
        return
    for note in space_latency_notes(evaluator.space, latency):
        console.print(note, markup=False, highlight=False)
    simulated = count_simulated(result_study)
    repeats = count_complete(result_study) - simulated
    _print_summary(result, simulated, elapsed, out, repeats=repeats)


def _print_summary(
    result: StudyResult, n_complete: int, elapsed: float, out: Path | None, *, repeats: int = 0
) -> None:
    repeated = f" (+{repeats} repeats of tried configurations, not simulated)" if repeats else ""
    console.print(
        f"{n_complete} trials{repeated}, {result.n_feasible} feasible, {len(result.front)} on "
        f"the front ({elapsed:.0f} s)"
    )
    if not result.front:
        console.print(
            "[bold red]No feasible configuration:[/] widen the space, relax the SLO, "
            "or run more trials."
        )
        return
    console.print(_front_table(result))
    console.print(_picks_table(result))
    if out is not None:
        console.print(
            f"results and report in {out}/ (report.md, report.html, pareto.csv, "
            "trials.csv, results.json)"
        )


def report(
    storage: Annotated[str, typer.Option(help="Storage URL holding the study.")],
    study: StudyOpt = "kvplan",
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-render results and the planning report of a stored study (no simulation)."""
    backend = make_storage(storage)
    try:
        loaded = optuna.load_study(study_name=study, storage=backend)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(backend)]
        raise InputError(
            f"no study '{study}' in {storage}; studies there: {', '.join(names) or '(none)'}"
        ) from None
    definition = loaded.user_attrs.get("kvplan_definition", {})
    roles = list(
        definition.get("slo", {}).get("objectives", {}) or ("latency", "throughput", "cost")
    )
    directions = {role: d.name.lower() for role, d in zip(roles, loaded.directions, strict=False)}
    records = records_of(loaded)
    result = summarise(records, directions)
    context = {
        "study": study,
        "storage": storage,
        "trials": result.n_trials,
        "model": definition.get("space", {}).get("model", "?"),
    }
    data = _result_json(result, None)
    if out is not None:
        _write_outputs(out, result, records, data=data, context=context, planning=None)
    if as_json:
        print_json(data)
        return
    _print_summary(result, len(records), 0.0, out)


def register(app: typer.Typer) -> None:
    """Add ``optimize`` and ``report`` to ``app``."""
    app.command("optimize")(optimize)
    app.command("report")(report)
