"""End-to-end fidelity of the simulator against measured serving benchmarks, per latency model.

    python bench/validate_fidelity.py [--silicon CSV] [--latency roofline,table,calibrated]
        [--models Qwen3-32B,Llama-3.1-8B-Instruct,Llama-3.1-70B] [--rounds 5] [--jobs 1]
        [--limit N] [--start together|spread] [--deployment benchmark|defaults] [--ttft-offset]
        [--json OUT.json]

Runs ``kvplan validate``'s logic (``simulator/validation/validate.py``: closed loop of N users,
fixed lengths, no shared prefixes, all users starting together, 20 benchmark rounds extrapolated
from ``--rounds`` simulated ones, engine limits of the benchmark's generated deployment unless
``--deployment defaults``) on every aggregated row of the selected models, once per latency model,
and prints:

- MAPE of mean TTFT and mean TPOT per (model, backend) group and overall (the issue's target:
  TTFT ≤ 20%, TPOT ≤ 15% on the dense models with the shipped calibration);
- the same split by regime (concurrency, output length, prompt share of the work) with the mean
  *signed* error, which says whether the simulator is too slow (+) or too fast (−) there;
- the rows with the largest TTFT errors;
- the *prefill factor*: measured and simulated TTFT divided by the time the latency model gives
  one prefill of the row's prompt (same model, GPU, TP, precision and backend overheads),
  median per (model, backend, N) and prompt length. Measured, it depends on N only (bench
  README, "Third session"); simulated, it also depends on the prompt length.

Default input: ``../shared/data/silicon/silicon_h100_calibration.csv`` next to the repository.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _silicon import DEFAULT_SILICON
from rich.console import Console
from rich.table import Table

from hardware.catalog import load_catalog
from simulator.latency import Batch, Deployment, make_latency_model
from simulator.presets import load_preset
from simulator.validation.report import ErrorStats, parse_holdout
from simulator.validation.silicon.rows import SiliconRow
from simulator.validation.validate import (
    DEFAULT_ROUNDS,
    DEPLOYMENTS,
    START_MODES,
    FidelityReport,
    RowResult,
    read_silicon,
    row_config,
    run_validation,
    select_rows,
)

DENSE_MODELS = ("Qwen3-32B", "Llama-3.1-8B-Instruct", "Llama-3.1-70B")
console = Console(width=150)  # wide enough for the statistics tables when redirected


def _regimes() -> dict[str, Callable[[RowResult], str]]:
    """Ways to split the rows, each a label function."""

    def concurrency(r: RowResult) -> str:
        n = r.row.concurrency
        return "N <= 16" if n <= 16 else ("N 24-64" if n <= 64 else "N >= 128")

    def output(r: RowResult) -> str:
        osl = r.row.osl
        return "osl <= 256" if osl <= 256 else ("osl 512-1024" if osl <= 1024 else "osl > 1024")

    def prompt_share(r: RowResult) -> str:
        share = r.row.isl / (r.row.isl + r.row.osl)
        return "isl share >= 0.9" if share >= 0.9 else "isl share < 0.9"

    def backend(r: RowResult) -> str:
        return r.row.backend

    return {
        "concurrency": concurrency,
        "output": output,
        "prompt": prompt_share,
        "backend": backend,
    }


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def regime_table(report: FidelityReport) -> Table:
    """MAPE and mean signed error by regime."""
    table = Table(title="By regime (MAPE; mean signed error: + = simulator slower)")
    for header in ("split", "regime", "rows", "TTFT MAPE", "TTFT bias", "TPOT MAPE", "TPOT bias"):
        table.add_column(header, justify="left" if header in ("split", "regime") else "right")
    for split, label in _regimes().items():
        groups: dict[str, list[RowResult]] = {}
        for result in report.results:
            groups.setdefault(label(result), []).append(result)
        for name in sorted(groups):
            rs = groups[name]
            ttft = [r.ttft_error for r in rs]
            tpot = [r.tpot_error for r in rs]
            table.add_row(
                split,
                name,
                str(len(rs)),
                f"{100 * _mean([abs(e) for e in ttft]):.1f}%",
                f"{100 * _mean(ttft):+.1f}%",
                f"{100 * _mean([abs(e) for e in tpot]):.1f}%",
                f"{100 * _mean(tpot):+.1f}%",
            )
        table.add_section()
    return table


def group_table(report: FidelityReport, seconds: float) -> Table:
    """MAPE per (model, backend) and overall."""
    summary = report.summary()
    table = Table(
        title=f"{report.latency_model}: {summary['n']} rows, {summary['n_skipped']} skipped, "
        f"{report.rounds} rounds simulated, start {report.start}, "
        f"deployment {report.deployment}"
        f"{', fitted TTFT offset' if report.ttft_offset else ''}, {seconds:.0f} s"
    )
    for header in ("model", "backend", "rows", "TTFT MAPE", "TPOT MAPE"):
        table.add_column(header, justify="left" if header in ("model", "backend") else "right")
    for g in report.groups():
        table.add_row(g.model, g.backend, str(g.n), f"{100 * g.ttft_mape:.1f}%",
                      f"{100 * g.tpot_mape:.1f}%")  # fmt: skip
    table.add_section()
    table.add_row("all", "", str(summary["n"]), f"{100 * summary['ttft_mape']:.1f}%",
                  f"{100 * summary['tpot_mape']:.1f}%")  # fmt: skip
    return table


def stats_table(report: FidelityReport, by: str, title: str = "") -> Table:
    """MAPE, median APE, median bias and MAPE without the worst 1% per group of ``by``."""
    table = Table(title=title or f"{report.latency_model} by {by} (bias + = simulator slower)")
    table.add_column(by)
    table.add_column("rows", justify="right")
    for metric in ("TTFT", "TPOT"):
        for what in ("MAPE", "med APE", "bias", "-1%"):
            table.add_column(f"{metric} {what}", justify="right")
    summary = report.summary()
    overall = [("all", summary["n"], ErrorStats(**summary["ttft"]), ErrorStats(**summary["tpot"]))]
    groups = [(g.label, g.n, g.ttft, g.tpot) for g in report.groups(by)]  # type: ignore[arg-type]
    for i, (label, n, *stats) in enumerate([*groups, *overall]):
        if i == len(groups):
            table.add_section()
        cells = [
            f"{100 * s.mape:.1f}%" if j == 0 else
            f"{100 * s.median_ape:.1f}%" if j == 1 else
            f"{100 * s.median_bias:+.0f}%" if j == 2 else f"{100 * s.mape_trimmed:.1f}%"
            for s in stats for j in range(4)
        ]  # fmt: skip
        table.add_row(label, str(n), *cells)
    return table


def worst_table(report: FidelityReport, n: int = 12) -> Table:
    """The rows with the largest |TTFT error|."""
    table = Table(title=f"Largest TTFT errors ({report.latency_model})")
    for header in ("line", "model", "backend", "isl/osl", "N", "TP", "TTFT meas→pred",
                   "TPOT meas→pred"):  # fmt: skip
        table.add_column(header)
    ranked = sorted(report.results, key=lambda r: -abs(r.ttft_error))[:n]
    for r in ranked:
        row = r.row
        table.add_row(
            str(row.line), row.model.rsplit("/", 1)[-1], f"{row.backend} {row.precision}".strip(),
            f"{row.isl}/{row.osl}", str(row.concurrency), str(row.tp),
            f"{row.measured_ttft_ms:,.0f}→{r.predicted_ttft_ms:,.0f} ({100 * r.ttft_error:+.0f}%)",
            f"{row.measured_tpot_ms:.1f}→{r.predicted_tpot_ms:.1f} ({100 * r.tpot_error:+.0f}%)",
        )  # fmt: skip
    return table


def _prefill_ms(report: FidelityReport) -> Callable[[SiliconRow], float | None]:
    """One prefill of a row's prompt on its deployment, ms (None if it cannot be built)."""
    catalog = load_catalog()
    timers: dict[tuple[Any, ...], Any] = {}

    def prefill(row: SiliconRow) -> float | None:
        config = row_config(row, catalog, latency_model=report.latency_model)
        if isinstance(config, str):
            return None
        key = (config.model, config.gpu, config.tp, config.weight_precision,
               config.kv_precision, config.backend)  # fmt: skip
        if key not in timers:
            deployment = Deployment(
                catalog.model(config.model), catalog.gpu(config.gpu), tp=config.tp, ep=config.ep,
                weight_precision=config.weight_precision, kv_precision=config.kv_precision,
            )  # fmt: skip
            params = load_preset(config.backend).compose_params()
            timers[key] = make_latency_model(report.latency_model, deployment, params=params)
        return 1e3 * float(timers[key].step_seconds(Batch.of([(0, row.isl)])))

    return prefill


def prefill_factor_table(report: FidelityReport) -> Table:
    """Median TTFT / one prefill, measured and simulated, per (model, backend, N) and prompt."""
    prefill = _prefill_ms(report)
    cells: dict[tuple[str, str, int], dict[int, list[tuple[float, float]]]] = {}
    for r in report.results:
        row = r.row
        if not isinstance(row, SiliconRow) or (p := prefill(row)) is None or p <= 0:
            continue
        key = (row.model.rsplit("/", 1)[-1], row.backend, row.concurrency)
        cells.setdefault(key, {}).setdefault(row.isl, []).append(
            (row.measured_ttft_ms / p, r.predicted_ttft_ms / p)
        )
    isls = sorted({isl for by_isl in cells.values() for isl in by_isl})
    table = Table(title=f"TTFT / one prefill, measured | simulated ({report.latency_model})")
    for header in ("model", "backend", "N", *(f"isl {isl}" for isl in isls)):
        table.add_column(header)
    for key in sorted(cells):
        by_isl = cells[key]
        out = []
        for isl in isls:
            pairs = np.array(by_isl.get(isl, []))
            out.append(
                f"{np.median(pairs[:, 0]):.1f} | {np.median(pairs[:, 1]):.1f}" if len(pairs) else ""
            )
        table.add_row(key[0], key[1], str(key[2]), *out)
    return table


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments, run every latency model, print (and optionally save) the reports."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--silicon", type=Path, default=DEFAULT_SILICON)
    parser.add_argument("--latency", default="roofline,table,calibrated")
    parser.add_argument("--models", default=",".join(DENSE_MODELS))
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", choices=START_MODES, default="together")
    parser.add_argument("--deployment", choices=DEPLOYMENTS, default="benchmark")
    parser.add_argument(
        "--ttft-offset",
        action="store_true",
        help=(
            "Add the fitted per-backend TTFT constant "
            "(simulator.validation.validate.FITTED_TTFT_OFFSET_MS)."
        ),
    )
    parser.add_argument("--json", type=Path, default=None, help="Write every report here.")
    parser.add_argument(
        "--by",
        default="group",
        help="Comma-separated groupings for the "
        "statistics tables: group, gpu, engine, model, concurrency, harness.",
    )
    parser.add_argument(
        "--holdouts",
        default="",
        help="Comma-separated KEY=VALUE hold-outs "
        "scored from the same run (with --ttft-offset, refitted without them).",
    )
    args = parser.parse_args(argv)
    rows, _ = read_silicon(args.silicon)
    picked = [r for m in args.models.split(",") for r in select_rows(rows, model=m.strip())]
    picked = select_rows(sorted(picked, key=lambda r: r.line), limit=args.limit)
    reports: dict[str, Any] = {}
    for latency in [s.strip() for s in args.latency.split(",") if s.strip()]:
        start = time.perf_counter()
        report = run_validation(
            picked,
            latency_model=latency,
            seed=args.seed,
            rounds=args.rounds,
            jobs=args.jobs,
            quiet=True,
            start=args.start,
            deployment=args.deployment,
            ttft_offset=args.ttft_offset,
        )
        seconds = time.perf_counter() - start
        console.print(group_table(report, seconds))
        for by in [b.strip() for b in args.by.split(",") if b.strip()]:
            console.print(stats_table(report, by))
        held: dict[str, Any] = {}
        for spec in [h.strip() for h in args.holdouts.split(",") if h.strip()]:
            # Scored as simulated, then with the TTFT offset refitted on the other rows (a run
            # with --ttft-offset would already carry the shipped offset, so none is refitted).
            for refit in (False, True) if not args.ttft_offset else (False,):
                part = dataclasses.replace(report, ttft_offset=refit).held_out(parse_holdout(spec))
                fitted = f", TTFT offset refitted without them: {part.fitted_offsets_ms}"
                title = f"held out {spec}{fitted if refit else ' (nothing fitted)'}"
                console.print(stats_table(part, "group", title))
                held[f"{spec}{' refit' if refit else ''}"] = part.summary()
        console.print(regime_table(report))
        console.print(worst_table(report))
        console.print(prefill_factor_table(report))
        reports[latency] = {**report.to_dict(), "seconds": seconds, "holdouts": held}
    if args.json is not None:
        args.json.write_text(json.dumps(reports, indent=1, default=float))


if __name__ == "__main__":
    main()
