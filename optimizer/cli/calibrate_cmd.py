"""``kvplan calibrate``: fit the calibrated latency model's coefficients to kernel profiles.

Reads a profile directory (default: the profiles shipped for ``--gpu``), keeps the rows that
matter for the catalog's models (``--shapes catalog``, the default; ``--model`` narrows it to
some models), holds out ``--holdout`` of them by grid value, fits the coefficients
(``simulator.latency.fit``) and writes the calibration YAML. It prints the fit quality per kernel
class and variant: MAPE on the fitting rows and on the held-out rows.

Use the file with the ``calibrated:FILE`` latency model. The calibrations that ship, one per GPU
and engine with shipped profiles (``simulator/data/calibration/<gpu>_<engine>.yaml``), were made
with ``kvplan calibrate --gpu GPU --engine ENGINE --out
simulator/data/calibration/GPU_ENGINE.yaml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from hardware.catalog import load_catalog
from optimizer.cli._output import console, print_json
from optimizer.cli._preflight import check_seed
from simulator.latency.calibrated import Calibration
from simulator.latency.fit import catalog_shape_filter, fit_calibration
from simulator.latency.kernels import KERNEL_CLASSES
from simulator.latency.profile_files import DEFAULT_ENGINE, ENGINES
from simulator.latency.profiles import load_profiles, shipped_profiles_dir
from slo.inputfile import InputError

__all__ = ["calibration_report", "register", "run_calibration"]


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command to ``app``."""
    app.command("calibrate")(calibrate)


def run_calibration(
    *,
    gpu_name: str,
    engine: str = DEFAULT_ENGINE,
    profiles_dir: Path | None,
    holdout: float,
    seed: int,
    shapes: str,
    models: list[str],
    catalog_file: Path | None,
) -> Calibration:
    """Load, filter and fit (the command without its output); ``InputError`` for bad input."""
    catalog = load_catalog(catalog_file)
    gpu = catalog.gpu(gpu_name)
    if engine not in ENGINES:
        raise InputError(f"--engine: expected one of {', '.join(ENGINES)}, got '{engine}'")
    if profiles_dir is None:
        directory = shipped_profiles_dir(gpu.name)
        source = f"kvplan's shipped {engine} profiles hardware/data/profiles/{directory.name}"
    else:
        directory, source = profiles_dir, f"{engine} kernel profiles in {profiles_dir}"
    profiles = load_profiles(directory, gpu=gpu.name, engine=engine)
    if shapes not in ("catalog", "all"):
        raise InputError(f"--shapes: expected 'catalog' or 'all', got '{shapes}'")
    if models and shapes == "all":
        raise InputError(
            "--model restricts the catalog shapes; it cannot be used with --shapes all"
        )
    scope, described = "any", "all profile rows"
    if shapes == "catalog":
        chosen = [catalog.model(name) for name in models] or list(catalog.models.values())
        shape_filter = catalog_shape_filter(chosen, profiles)
        profiles = shape_filter.apply(profiles)
        described = shape_filter.description
        if models:
            scope = ", ".join(m.name for m in chosen)
    calibration = fit_calibration(
        profiles, gpu, holdout=holdout, seed=seed, model_scope=scope, shapes=described
    )
    return calibration.model_copy(update={"source": source})


def calibration_report(calibration: Calibration) -> list[dict[str, Any]]:
    """One row per kernel class and variant, then one per class ('all'), for tables and JSON."""
    rows: list[dict[str, Any]] = []
    for kind in KERNEL_CLASSES:
        for variant, fit in calibration.classes.get(kind, {}).items():
            rows.append(
                {
                    "class": kind,
                    "variant": variant,
                    "fit_mape_pct": fit.fit_mape_pct,
                    "holdout_mape_pct": fit.holdout_mape_pct,
                    "n_fit": fit.n_fit,
                    "n_holdout": fit.n_holdout,
                }
            )
        summary = calibration.summary.get(kind)
        if summary is not None:
            rows.append({"class": kind, "variant": "all", **summary.model_dump()})
    return rows


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}%"


def _print_table(calibration: Calibration, out: Path) -> None:
    table = Table(title=f"Calibration fit for {calibration.gpu}: MAPE per kernel class")
    table.add_column("class", no_wrap=True)
    table.add_column("variant", no_wrap=True)
    table.add_column("fit", justify="right")
    table.add_column("held-out", justify="right")
    table.add_column("rows fit/held-out", justify="right")
    for row in calibration_report(calibration):
        table.add_row(
            row["class"],
            row["variant"],
            _pct(row["fit_mape_pct"]),
            _pct(row["holdout_mape_pct"]),
            f"{row['n_fit']}/{row['n_holdout']}",
            style="bold" if row["variant"] == "all" else None,
        )
    console.print(table)
    console.print(f"wrote {out}", highlight=False, markup=False)


def calibrate(
    *,
    out: Annotated[Path, typer.Option("--out", help="Calibration YAML to write.")],
    profiles: Annotated[
        Path | None,
        typer.Option(
            "--profiles",
            help="Profile directory (gemm/context_attention/generation_attention/nccl CSVs, "
            "'<engine>_' prefixed or not); default: the profiles shipped for --gpu.",
            show_default=False,
        ),
    ] = None,
    gpu: Annotated[
        str, typer.Option("--gpu", help="Catalog key of the GPU the profiles were measured on.")
    ] = "h100_sxm",
    engine: Annotated[
        str,
        typer.Option("--engine", help="Whose kernels to fit: vllm, sglang or trtllm."),
    ] = DEFAULT_ENGINE,
    holdout: Annotated[
        float,
        typer.Option("--holdout", min=0.0, max=0.9, help="Share of rows held out (by grid value)."),
    ] = 0.2,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the held-out split.")] = 0,
    shapes: Annotated[
        str,
        typer.Option(
            "--shapes",
            help="'catalog': only rows that matter for the catalog's models; 'all': every row.",
        ),
    ] = "catalog",
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Restrict the catalog shapes to this model (repeatable)."),
    ] = None,
    catalog: Annotated[
        Path | None,
        typer.Option("--catalog", help="User catalog merged over the shipped one."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of a table.")
    ] = False,
) -> None:
    """Fit the calibrated latency model to kernel profiles and write the calibration YAML."""
    check_seed(seed)
    calibration = run_calibration(
        gpu_name=gpu,
        engine=engine,
        profiles_dir=profiles,
        holdout=holdout,
        seed=seed,
        shapes=shapes,
        models=model or [],
        catalog_file=catalog,
    )
    document = calibration.model_dump(mode="json")
    header = (
        "# kvplan calibration: coefficients of simulator/latency/calibrated.py's terms, fitted by\n"
        "# `kvplan calibrate`; MAPE values are percent. Use with the latency model\n"
        f"# 'calibrated:{out.name}'.\n"
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(header + yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    except OSError as err:
        raise InputError(f"{out}: cannot write: {err.strerror or err}") from None
    if json_out:
        print_json({"out": str(out), "fit": calibration_report(calibration)})
    else:
        _print_table(calibration, out)
