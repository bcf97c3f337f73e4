"""``kvplan optimize`` (search, recommend, report) and ``kvplan report`` (re-render a study)."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import optuna
import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from optimizer.cli._output import err_console
from optimizer.cli._overlong import OverlongOpt, overlong_policy, overlong_scan
from optimizer.cli._preflight import check_out_dir, preflight_optimize
from optimizer.cli.optimize_output import Output, emit, load_report_attr, store_report
from optimizer.cli.profiles_cmd import space_latency_notes, user_profiles_dir, user_tables_dir
from optimizer.objective import FINISHED_STATES, SHARE_ATTR
from optimizer.picks import DEFAULT_TOLERANCE, objective_infos, wants_capacity
from optimizer.report import ReportContext
from optimizer.results import TrialRecord, summarise
from optimizer.run import (
    Interrupted,
    OptimizeSetup,
    StudyWorkers,
    build_evaluator,
    count_complete,
    count_simulated,
    records_of,
    simulations_spent,
)
from optimizer.study import SAMPLERS, make_storage
from optimizer.workload_profile import profile_workload
from slo import SloSpec, load_slo
from slo.inputfile import InputError

__all__ = ["register"]


def _default_slo() -> str:
    return str(resources.files("optimizer") / "data" / "default_slo.yaml")


def _progress_callback(progress: Progress, task: Any, directions: Mapping[str, str]) -> Any:
    seen = [-1]  # finished trials at the last update: nothing to redo until one more ends

    def update(study: optuna.Study) -> None:
        # One read of the storage per tick (the parent polls while its workers run, on the
        # same CPUs), and the front recomputed only when a trial has finished.
        trials = study.get_trials(deepcopy=False, states=FINISHED_STATES)
        if len(trials) == seen[0]:
            return
        seen[0] = len(trials)
        records = records_of(study, trials)
        result = summarise(records, directions)
        progress.update(
            task,
            completed=simulations_spent(study, trials),
            description=(
                f"simulations · {len(records)} trials · {result.n_feasible} feasible · "
                f"front {len(result.front)}"
            ),
        )

    return update


SloOpt = Annotated[Path | None, typer.Option("--slo", help="SLO file; default: bundled.")]
SpaceOpt = Annotated[Path | None, typer.Option("--space", help="Search-space file.")]
WorkloadOpt = Annotated[
    str | None,
    typer.Option(help="Trace file or workload file; default: bundled Mooncake slice."),
]
TrialsOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="Simulation budget: whole-workload simulations the study may spend. A trial "
        "ruled out without simulating costs 0, one given up part-way the share it simulated, "
        "a repeat of a tried configuration nothing.",
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
ToleranceOpt = Annotated[
    float,
    typer.Option(
        min=0.0,
        max=0.5,
        help="Relative tolerance of the picks: the cheapest configuration within it of the "
        "best on each objective.",
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
    overlong: OverlongOpt = "drop",
    tolerance: ToleranceOpt = DEFAULT_TOLERANCE,
    as_json: JsonOpt = False,
) -> None:
    """Search deployments for the Pareto front of latency, throughput and cost under an SLO."""
    slo_path = str(slo or _default_slo())
    # An SLO whose throughput objective is capacity_requests_per_s asks for --capacity.
    capacity = capacity or wants_capacity(load_slo(slo_path))
    setup = OptimizeSetup(
        slo_path=slo_path,
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
        latency_cache_dir=user_tables_dir(),
        time_scale=time_scale,
        max_requests=max_requests,
        capacity=capacity,
        overlong=overlong_policy(overlong),
    )
    if sampler not in SAMPLERS:
        raise InputError(f"unknown sampler '{sampler}'; known: {', '.join(SAMPLERS)}")
    baseline_params = preflight_optimize(
        space_path=setup.space_path,
        catalog_path=setup.catalog_path,
        sampler=sampler,
        seed=seed,
        storage=storage,
        latency=latency,
        time_scale=time_scale,
        out=out,
        baseline=baseline,
    )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # TPE's ``group`` option is "experimental" in Optuna 5: a notice for library users, noise
    # for a person reading a plan.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    evaluator = build_evaluator(setup)
    model = evaluator.space.model
    overlong_scan(
        evaluator.workload, model, evaluator.catalog, seed=seed, policy=overlong, quiet=as_json
    )
    profile = profile_workload(
        evaluator.workload,
        seed=seed,
        max_context_tokens=evaluator.catalog.model(model).max_context_tokens,
        overlong_policy=overlong,
    )
    directions = dict(evaluator.spec.objectives.directions)
    infos = objective_infos(evaluator.spec, capacity=capacity)
    started = time.perf_counter()
    # The spawned workers stay from the trials through the planning (warm, ready at once).
    with StudyWorkers(setup, workers=workers) as crew:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:.1f}/{task.total:g}"),  # shares of simulations
            TimeRemainingColumn(),
            console=err_console,
            transient=as_json,
            disable=as_json,
        ) as progress:
            task = progress.add_task("simulations", total=trials)
            try:
                result_study = crew.run(on_progress=_progress_callback(progress, task, directions))
            except Interrupted as err:  # typer would turn it into a silent exit 130
                progress.stop()
                err_console.print(str(err), markup=False, highlight=False, soft_wrap=True)
                raise typer.Exit(130) from None
        records = records_of(result_study)
        result = summarise(records, directions, tolerance=tolerance, objectives=infos)
        planning = None
        if plan_picks and result.picks:
            status = err_console.status("planning: measuring tier value and headroom of the picks")
            with status if not as_json else contextlib.nullcontext():
                from optimizer.plan_runner import planning_runner  # noqa: PLC0415
                from optimizer.planning import plan  # noqa: PLC0415  (loads the planner on demand)

                def planned(done: int, total: int) -> None:
                    if not as_json:
                        status.update(
                            f"measuring tier value and headroom of the picks: {done}/{total}"
                        )

                # Reuses the trials' results; in the kept trial workers when --workers > 1.
                with planning_runner(
                    setup, evaluator, records, workers=workers, progress=planned, kept=crew.pool
                ) as runner:
                    planning = plan(
                        evaluator,
                        result,
                        baseline=baseline_params,
                        runner=runner,
                        on_step=None if as_json else status.update,
                    )
    elapsed = time.perf_counter() - started
    settings = {
        "model": model,
        "slo": evaluator.spec.name,
        "sampler": sampler,
        "seed": seed,
        "trials": result.n_trials,
        "simulations spent of the budget": f"{simulations_spent(result_study):.1f} of {trials}",
        "study": study,
        "storage": storage or "in memory",
        "throughput objective": "capacity search" if capacity else "goodput at the offered load",
        "wall_s": round(elapsed, 1),
    }
    context = ReportContext(
        slo=evaluator.spec,
        settings=settings,
        workload=profile,
        latency_model=latency or "auto",
    )
    store_report(result_study, context, planning, tolerance)
    if not as_json:
        for note in space_latency_notes(evaluator.space, latency):
            err_console.print(note, markup=False, highlight=False)
    summary = (
        f"{_spending(result_study, records, trials)}, {result.n_feasible} feasible, "
        f"{len(result.front)} on the front ({elapsed:.0f} s)"
    )
    emit(Output(result, records, context, planning), out=out, as_json=as_json, summary=summary)


def _spending(study: optuna.Study, records: list[TrialRecord], budget: int) -> str:
    """``72 trials for 58.4 of 60 simulations (41 in full, 12 given up part-way, 19 ruled out
    without simulating; +1 repeats ...)``: what the budget bought."""
    repeats = count_complete(study) - count_simulated(study)
    pruned = [r.metrics.get(SHARE_ATTR, 1.0) for r in records if not r.objectives]
    given_up = sum(1 for share in pruned if share > 0)
    parts = [f"{len(records) - len(pruned)} in full"]
    if given_up:
        parts.append(f"{given_up} given up part-way")
    if len(pruned) - given_up:
        parts.append(f"{len(pruned) - given_up} ruled out without simulating")
    if repeats:
        parts.append(f"+{repeats} repeats of tried configurations, free")
    spent = simulations_spent(study)
    return f"{len(records)} trials for {spent:.1f} of {budget} simulations ({', '.join(parts)})"


def report(
    storage: Annotated[str, typer.Option(help="Storage URL holding the study.")],
    study: StudyOpt = "kvplan",
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-render results and the planning report of a stored study (no simulation)."""
    if out is not None:
        check_out_dir(out)
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
    context, planning, tolerance = load_report_attr(loaded)
    if context is None:  # a study from before the report was stored: what the trials hold
        spec = SloSpec.model_validate(definition["slo"]) if "slo" in definition else None
        if spec is None:
            raise InputError(f"study '{study}' in {storage} was not written by kvplan optimize")
        model = definition.get("space", {}).get("model", "?")
        context = ReportContext(slo=spec, settings={"model": model, "study": study})
    infos = objective_infos(context.slo, capacity=bool(definition.get("capacity")))
    records = records_of(loaded)
    result = summarise(
        records, directions, tolerance=tolerance or DEFAULT_TOLERANCE, objectives=infos
    )
    summary = (
        f"{len(records)} trials, {result.n_feasible} feasible, {len(result.front)} on the front"
    )
    emit(Output(result, records, context, planning), out=out, as_json=as_json, summary=summary)


def register(app: typer.Typer) -> None:
    """Add ``optimize`` and ``report`` to ``app``."""
    app.command("optimize")(optimize)
    app.command("report")(report)
