"""``kvplan validate``: how close are simulated TTFT and TPOT to measured benchmarks?

    kvplan validate --silicon silicon_h100_calibration.csv --model Qwen3-32B --limit 20
    kvplan validate --silicon bench.csv --latency calibrated --json --jobs 4
    kvplan validate --silicon bench.csv --by concurrency --holdout model=Llama-3.1-8B-Instruct
    kvplan validate --steps examples/steps_h100_from_silicon.csv --latency table

Every aggregated row of the CSV (aiconfigurator's silicon format) is simulated as the closed-loop
benchmark it was (``simulator/validation/validate.py`` documents the workload, warm-up and run
length) and compared with the measured mean TTFT and TPOT. Output per group (``--by``) and overall,
for TTFT and TPOT: MAPE, median APE, median signed bias and MAPE without the worst 1% of rows
(``simulator/validation/report.py``); the skipped rows with their reasons; with ``--rows`` every
row. ``--holdout KEY=VALUE`` scores only the matching rows, with what is fitted to rows refitted on
the others. ``--json`` prints ``{"rows", "summary", "groups", "skipped"}`` (fractions). ``--steps
FILE`` checks the latency model alone on measured fixed batches (``simulator/validation/steps.py``).

``--limit N`` simulates at most N rows spread evenly over the selection (every group keeps its
share), which is what a quick check wants; the full run is ``bench/validate_fidelity.py``.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hardware.catalog import load_catalog
from optimizer.cli._output import console, err_console, print_json
from optimizer.cli._preflight import check_seed
from optimizer.cli.profiles_cmd import user_profile_roots, user_profiles_dir, user_tables_dir
from simulator.config import ServingConfig
from simulator.latency import latency_note
from simulator.validation.report import GROUP_KEYS, ErrorStats, Holdout, parse_holdout
from simulator.validation.silicon.rows import Row, Skipped, model_matches
from simulator.validation.steps import read_steps, validate_steps
from simulator.validation.validate import (
    DEFAULT_ROUNDS,
    DEPLOYMENTS,
    FITTED_TTFT_OFFSET_MS,
    START_MODES,
    FidelityReport,
    UserFiles,
    read_silicon,
    run_validation,
    select_rows,
)
from slo.inputfile import InputError

__all__ = ["register"]

#: The latency model ``kvplan simulate`` uses by default is the one validated by default.
DEFAULT_LATENCY = str(ServingConfig.model_fields["latency_model"].default)


def register(app: typer.Typer) -> None:
    """Add the ``validate`` command to ``app``."""
    app.command("validate")(validate_command)


def validate_command(  # noqa: PLR0917  (one parameter per CLI option, as typer requires)
    silicon: Annotated[
        Path | None,
        typer.Option("--silicon", help="Measured benchmarks (aiconfigurator silicon CSV)."),
    ] = None,
    steps: Annotated[
        Path | None,
        typer.Option(
            "--steps",
            help="Measured fixed batches (CSV: gpu, engine, model, tp, precision, batch, "
            "measured_ms): step-time error of the latency model alone.",
        ),
    ] = None,
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help="Group rows by: group (model+backend), gpu, engine, model, concurrency, harness.",
        ),
    ] = "group",
    holdout: Annotated[
        str | None,
        typer.Option(
            "--holdout",
            help="KEY=VALUE (model, engine, gpu, concurrency N or LO-HI, harness): score only "
            "these rows, with anything fitted to rows (--ttft-offset) refitted on the others.",
        ),
    ] = None,
    latency: Annotated[
        str, typer.Option("--latency", help="Latency model spec: roofline, table, calibrated[:F].")
    ] = DEFAULT_LATENCY,
    model: Annotated[
        str | None, typer.Option("--model", help="Only this model (full id or short name).")
    ] = None,
    backend: Annotated[
        str | None, typer.Option("--backend", help="Only this backend (vllm, sglang, trtllm).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most N rows, spread evenly.")
    ] = None,
    rounds: Annotated[
        int,
        typer.Option(
            "--rounds", min=1, max=20, help="Requests per user simulated (benchmark: 20)."
        ),
    ] = DEFAULT_ROUNDS,
    start: Annotated[
        str,
        typer.Option(
            "--start",
            help="Users start 'together' (the benchmark's protocol) or 'spread' over one "
            "request's duration (fully desynchronised).",
        ),
    ] = "together",
    seed: Annotated[int, typer.Option(help="Seed of every simulation.")] = 0,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Worker processes.")] = 1,
    catalog: Annotated[
        Path | None, typer.Option("--catalog", help="User catalog merged over the shipped one.")
    ] = None,
    show_rows: Annotated[bool, typer.Option("--rows", help="Also print every row.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    deployment: Annotated[
        str,
        typer.Option(
            help="Engine limits: 'benchmark' (the harness's deployment rules), 'generator' "
            "(those rules taken literally where the rows contradict them) or 'defaults' (the "
            "backend preset's)."
        ),
    ] = "benchmark",
    ttft_offset: Annotated[
        bool,
        typer.Option(
            "--ttft-offset",
            help="Add the TTFT offset fitted to the shipped data ("
            + ", ".join(f"{k} {v:g} ms" for k, v in FITTED_TTFT_OFFSET_MS.items())
            + "; a fit, not an engine default).",
        ),
    ] = False,
) -> None:
    """Simulate measured serving benchmarks and report the error of mean TTFT and TPOT."""
    check_seed(seed)
    if (silicon is None) == (steps is None):
        raise InputError("validate: give one of --silicon FILE or --steps FILE")
    if steps is not None:
        _validate_steps(steps, latency, catalog, json_out)
        return
    assert silicon is not None  # checked above
    held = _checked_options(by, holdout, start, deployment)
    rows, skipped = read_silicon(silicon)
    picked = select_rows(rows, model=model, backend=backend, limit=limit)
    # Before any simulation: a selection that names nothing in the file is a typo, not a
    # result of zero rows.
    problem = _selection_problem(silicon, [*rows, *skipped], model, backend) or (
        _holdout_problem(held, picked) if held is not None else None
    )
    if problem is not None:
        raise InputError(problem)
    with _progress() as progress:
        task = progress.add_task("simulating benchmarks", total=len(picked))
        report = run_validation(
            picked,
            latency_model=latency,
            catalog_path=catalog,
            seed=seed,
            rounds=rounds,
            start=start,  # type: ignore[arg-type]  # checked above
            deployment=deployment,  # type: ignore[arg-type]  # checked above
            # A hold-out refits the offset on the other rows: simulate without it first.
            ttft_offset=ttft_offset and held is None,
            jobs=jobs,
            skipped=_filtered(skipped, model, backend),
            progress=lambda n: progress.advance(task, n),
            # As simulate and optimize: the user's imported profiles, tables kept between runs.
            files=UserFiles(user_profiles_dir(), user_tables_dir()),
            # Latency-model notes (a profile-grid gap, a borrowed calibration) would repeat for
            # every row; the report is the product here.
            quiet=True,
        )
    if held is not None:
        report = dataclasses.replace(report, ttft_offset=ttft_offset).held_out(held)
    if json_out:
        print_json(report.to_dict(by))  # type: ignore[arg-type]  # checked above
        return
    if show_rows:
        console.print(_rows_table(report))
    roots = user_profile_roots()
    for note in dict.fromkeys(
        n for row in picked if (n := latency_note(latency, row.system, row.backend, roots))
    ):
        console.print(note, markup=False, highlight=False)
    for table in _groups_tables(report, by):
        console.print(table)
    console.print("MAPE -1% = MAPE without the worst 1% of rows", markup=False)
    if held is not None:
        fitted = report.fitted_offsets_ms
        what = (
            f"TTFT offset refitted on the other rows: {fitted}"
            if fitted is not None
            else "nothing is fitted to rows without --ttft-offset: these are the rows' scores"
        )
        console.print(f"held out: {held.key}={held.value} ({what})", markup=False)
    _print_skipped(report)


def _validate_steps(path: Path, latency: str, catalog: Path | None, json_out: bool) -> None:
    report = validate_steps(
        read_steps(path),
        latency_model=latency,
        catalog=load_catalog(catalog),
        profile_roots=user_profile_roots(),
        table_cache=user_tables_dir(),
    )
    if json_out:
        print_json(report.to_dict())
        return
    table = Table(title=f"Step times of '{latency}' against measured batches", title_justify="left")
    table.add_column("line", justify="right", no_wrap=True)
    table.add_column("id", overflow="fold")  # long ids fold; the figures stay whole
    for header in ("requests", "measured\nms", "predicted\nms", "err"):
        table.add_column(header, justify="right", no_wrap=True)
    for row, predicted in report.rows:
        error = (predicted - row.measured_ms) / row.measured_ms
        table.add_row(str(row.line), row.id, str(len(row.batch)), f"{row.measured_ms:.2f}",
                      f"{predicted:.2f}", _signed(error))  # fmt: skip
    stats = report.stats()
    table.add_section()
    table.add_row("", "all", str(stats.n), "", "", "")
    console.print(table)
    console.print(
        f"step time: MAPE {_pct(stats.mape)}, median APE {_pct(stats.median_ape)}, median "
        f"bias {_signed(stats.median_bias)}, MAPE without the worst 1% {_pct(stats.mape_trimmed)}",
        markup=False,
    )
    for skip in report.skipped:
        console.print(f"skipped line {skip.line} ({skip.id}): {skip.reason}", markup=False)


def _checked_options(by: str, holdout: str | None, start: str, deployment: str) -> Holdout | None:
    """Check the spelled-out options (``InputError`` naming the option); the parsed hold-out."""
    if by not in GROUP_KEYS:
        raise InputError(f"--by {by!r}: expected one of {', '.join(GROUP_KEYS)}")
    held = parse_holdout(holdout) if holdout else None
    if start not in START_MODES:
        raise InputError(f"--start {start!r}: expected one of {', '.join(START_MODES)}")
    if deployment not in DEPLOYMENTS:
        raise InputError(f"--deployment {deployment!r}: expected one of {', '.join(DEPLOYMENTS)}")
    return held


def _selection_problem(
    path: Path, rows: Sequence[Row | Skipped], model: str | None, backend: str | None
) -> str | None:
    """Why ``--model``/``--backend`` select no row of the file at ``path`` (None if they
    select one). ``rows`` are all of the file's rows, the skipped ones included: a selection
    whose rows are all skipped still selects them (the report lists them with their reasons).
    The message lists what the file has, nearest match first."""
    models = Counter(r.model for r in rows)
    backends = Counter(r.backend.lower() for r in rows)
    if model and not any(model_matches(model, m) for m in models):
        return f"--model {model!r}: no row of {path} is of that model; {_has(models, model)}"
    wanted = backend.strip().lower() if backend else None
    if wanted and wanted not in backends:
        has = _has(backends, wanted)
        return f"--backend {backend!r}: no row of {path} is on that backend; {has}"
    if model and wanted:
        theirs = Counter(r.backend.lower() for r in rows if model_matches(model, r.model))
        if wanted not in theirs:
            return (
                f"--model {model!r} --backend {backend!r}: no row of {path} is of that model on "
                f"that backend; the model's rows are on {_has(theirs, wanted, lead='')}"
            )
    return None


def _has(counts: Counter[str], wanted: str, *, lead: str = "the file has ") -> str:
    """``counts`` as 'the file has a (2 rows), b (1 row)': numbers in order, names the closest
    to ``wanted`` first (those it begins are closest: ``Llama-3.1-8B`` → ``…-8B-Instruct``)."""

    def closeness(name: str) -> tuple[bool, float, str]:
        full, key = name.lower(), wanted.strip().lower()
        short, key_short = full.rsplit("/", 1)[-1], key.rsplit("/", 1)[-1]
        begins = full.startswith(key) or short.startswith(key_short)
        ratio = max(SequenceMatcher(None, key, full).ratio(),
                    SequenceMatcher(None, key_short, short).ratio())  # fmt: skip
        return not begins, -ratio, name

    numeric = all(name.isdigit() for name in counts)
    order = sorted(counts, key=int) if numeric else sorted(counts, key=closeness)
    listed = (f"{name} ({counts[name]} row{'s' if counts[name] != 1 else ''})" for name in order)
    return lead + ", ".join(listed)


def _holdout_problem(held: Holdout, picked: Sequence[Row]) -> str | None:
    """Why --holdout matches none of the selected rows, with the values they have (None if it
    matches one)."""
    if any(map(held.matches, picked)):
        return None
    values = Counter(GROUP_KEYS[held.key](r).removeprefix("N=") for r in picked)
    return (
        f"--holdout {held.key}={held.value}: none of the {len(picked)} selected rows matches; "
        + _has(values, held.value, lead=f"their {held.key} values: ")
    )


def _filtered(skipped: list[Any], model: str | None, backend: str | None) -> list[Any]:
    """The skipped rows that the --model/--backend selection would have picked."""
    out = skipped
    if model:
        out = [s for s in out if model_matches(model, s.model)]
    if backend:
        out = [s for s in out if s.backend.lower() == backend.strip().lower()]
    return out


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )


# ----- tables -----------------------------------------------------------------------------------
def _pct(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{100 * value:.1f}%"


def _signed(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{100 * value:+.0f}%"


def _groups_tables(report: FidelityReport, by: str = "group") -> list[Table]:
    """One table per metric (TTFT, TPOT), one row per group and the overall row."""
    summary = report.summary()
    groups = report.groups(by)  # type: ignore[arg-type]  # checked by the caller
    tables = []
    for metric in ("ttft", "tpot"):
        name = metric.upper()
        table = Table(
            title=f"{name} of '{report.latency_model}': error of the mean ({report.rounds} of "
            "20 rounds simulated; bias + = predicted slower)",
            title_justify="left",
        )
        table.add_column(by, overflow="fold")
        for header in ("rows", f"{name} MAPE", "median APE", "bias", "MAPE -1%"):
            table.add_column(header, justify="right")
        for group in groups:
            table.add_row(group.label, str(group.n), *_stats(getattr(group, metric)))
        table.add_section()
        table.add_row("all", str(summary["n"]), *_stats(ErrorStats(**summary[metric])))
        tables.append(table)
    return tables


def _stats(stats: ErrorStats) -> tuple[str, str, str, str]:
    return (
        _pct(stats.mape),
        _pct(stats.median_ape),
        _signed(stats.median_bias),
        _pct(stats.mape_trimmed),
    )


def _rows_table(report: FidelityReport) -> Table:
    table = Table(title="Rows (measured → predicted, signed error)", title_justify="left")
    table.add_column("line", justify="right")
    table.add_column("model / backend")
    for header in ("isl/osl", "N", "TP", "TTFT ms", "err", "TPOT ms", "err"):
        table.add_column(header, justify="right")
    for result in report.results:
        row = result.row
        table.add_row(
            str(row.line),
            f"{row.model.rsplit('/', 1)[-1]} {row.backend} {row.precision}".rstrip(),
            f"{row.isl}/{row.osl}",
            str(row.concurrency),
            str(row.tp),
            f"{row.measured_ttft_ms:,.0f} → {result.predicted_ttft_ms:,.0f}",
            _signed(result.ttft_error),
            f"{row.measured_tpot_ms:.1f} → {result.predicted_tpot_ms:.1f}",
            _signed(result.tpot_error),
        )
    return table


def _print_skipped(report: FidelityReport) -> None:
    if not report.skipped:
        return
    reasons = Counter(s.reason for s in report.skipped)
    table = Table(title=f"Skipped rows ({len(report.skipped)})", title_justify="left")
    table.add_column("rows", justify="right")
    table.add_column("reason", overflow="fold")
    for reason, count in reasons.most_common():
        table.add_row(str(count), reason)
    console.print(table)
