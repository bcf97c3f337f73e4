"""Accuracy of the kernel sources against the measured profiles, per GPU, on held-out rows.

    python bench/latency_accuracy.py [--gpu h100_sxm ...] [--engine vllm] [--holdout 0.2]
        [--seed 0] [--shapes catalog|all] [--moe] [--json]

For every ``--gpu`` (default: every catalog GPU with shipped profiles) and ``--engine``, two
tables: kernel-time error per class (below), and **step-time error** — decode and prefill steps
of catalog models (``STEP_CASES``) composed by the latency model's operator planner from each
kernel source, against the same steps composed from the GPU's *full* measured profile (verbatim,
every row): what a step costs if every kernel took its measured time. The table source is built
from the fitting rows only, so the held-out shapes of a step come from interpolation.

Split: ``simulator.latency.fit.grid_holdout_split`` holds out a share of every axis's interior grid
values (GEMM m, n, k; attention batch and length; all-reduce size) with every row using one; the
same split, seed and shape filter as the shipped calibration by default. Then, on the held-out
rows only:

- ``roofline``: ``RooflineKernels`` with its documented default parameters (no fitting);
- ``table``: ``ProfileKernels`` built from the *fitting* rows only, verbatim (``monotone=False``),
  so a held-out row is answered by interpolation between its measured neighbours — this is the
  table's interpolation accuracy; ``table (monotone)`` is the grid the simulator uses;
- ``calibrated``: ``ScaledKernels`` with coefficients fitted on the fitting rows (identical to the
  shipped ``simulator/data/calibration/<gpu>_<engine>.yaml`` for the default arguments).

Shape filter (``--shapes catalog``, the default): GEMM ``(n, k)`` grid points that bracket a layer
of a catalog model at TP 1, 2, 4 or 8 (experts whole, as under EP), attention head configurations
(heads/TP, max(1, KV heads/TP), head dim) of the catalog's GQA models, every all-reduce size.
MLA attention (DeepSeek) has no matching profile rows and is not scored.

``--moe`` scores whole routed-expert layers instead (``moe_table.py``), per GPU with a shipped
fused-MoE profile of ``--engine``: a ``--holdout`` share of the interior token counts is held out
of every measured shape; ``table`` interpolates the fitting rows (verbatim) in tokens, and the
grouped-GEMM composition the latency model falls back to (``compose.routed_expert_calls``: two
GEMMs and the activation/permutation) is priced by the roofline and by the GPU's full GEMM table
(``composed: roofline`` / ``composed: table GEMMs``), all on the held-out rows.

MAPE = mean |predicted / measured - 1| in percent; p90 = 90th percentile of that error.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from hardware.catalog import shipped_catalog
from simulator.latency import Deployment
from simulator.latency.calibrated import ScaledKernels
from simulator.latency.compose import OperatorPlanner
from simulator.latency.fit import catalog_shape_filter, fit_calibration, grid_holdout_split
from simulator.latency.kernels import KERNEL_CLASSES, KernelClass, KernelTimer
from simulator.latency.model import ComposedLatencyModel
from simulator.latency.moe_table import MoeShape, MoeTable, read_moe_profile
from simulator.latency.profile_files import ENGINES, MOE_KIND, resolve_profile_files
from simulator.latency.profiles import ProfileSet, shipped_profiles
from simulator.latency.roofline import RooflineKernels
from simulator.latency.table import ProfileKernels, ProfileTable, TableFallbackWarning
from simulator.latency.table_source import table_kernels
from slo.inputfile import InputError

_Row = Any  # a pandas itertuples row

#: (model, TP) pairs of the step comparison: dense models at TP 1-8 and one MoE.
STEP_CASES: tuple[tuple[str, int], ...] = (
    ("Qwen/Qwen3-8B", 1),
    ("meta-llama/Llama-3.1-8B-Instruct", 2),
    ("Qwen/Qwen3-32B", 2),
    ("Qwen/Qwen3-32B", 4),
    ("meta-llama/Llama-3.1-70B", 4),
    ("meta-llama/Llama-3.1-70B", 8),
    ("Qwen/Qwen3-30B-A3B", 2),
)
#: Decode steps: (requests, KV length); prefill steps: (requests, prompt tokens).
DECODE_BATCHES: tuple[tuple[int, int], ...] = (
    (1, 1000), (8, 2000), (32, 1500), (64, 4000), (128, 3000), (256, 1200)
)  # fmt: skip
PREFILL_BATCHES: tuple[tuple[int, int], ...] = (
    (1, 300),
    (1, 1500),
    (1, 6000),
    (4, 2000),
    (2, 7000),
)


def _call(kind: KernelClass) -> Callable[[KernelTimer, _Row], float]:
    """How to time one profile row of ``kind`` through the ``KernelTimer`` protocol."""
    if kind == "gemm":
        return lambda t, r: t.gemm(int(r.m), int(r.n), int(r.k), str(r.dtype))
    if kind == "context_attention":
        return lambda t, r: t.context_attention(
            int(r.batch_size),
            int(r.new_tokens),
            0,
            int(r.num_heads),
            int(r.num_kv_heads),
            int(r.head_dim),
            str(r.kv_dtype),
        )
    if kind == "generation_attention":
        return lambda t, r: t.generation_attention(
            int(r.batch_size),
            int(r.kv_len),
            int(r.num_heads),
            int(r.num_kv_heads),
            int(r.head_dim),
            str(r.kv_dtype),
        )
    return lambda t, r: t.all_reduce(float(r.message_bytes), int(r.num_gpus))


def _errors(timer: KernelTimer, kind: KernelClass, rows: pd.DataFrame) -> np.ndarray:
    call = _call(kind)
    predicted = np.array([call(timer, r) for r in rows.itertuples()], dtype=float)
    measured = rows["seconds"].to_numpy(dtype=float)
    errors: np.ndarray = np.abs(predicted / measured - 1.0) * 100.0
    return errors


def step_errors(
    gpu_name: str, sources: dict[str, KernelTimer], reference: KernelTimer
) -> dict[str, dict[str, list[float]]]:
    """Signed step-time errors (%) per source and phase against ``reference``."""
    catalog = shipped_catalog()
    gpu = catalog.gpu(gpu_name)
    out: dict[str, dict[str, list[float]]] = {
        name: {"decode": [], "prefill": []} for name in sources
    }
    for model_name, tp in STEP_CASES:
        deployment = Deployment(catalog.model(model_name), gpu, tp=tp)
        truth = ComposedLatencyModel(deployment, reference, name="measured")
        models = {n: ComposedLatencyModel(deployment, t, name=n) for n, t in sources.items()}
        batches = {
            "decode": [[(kv, 1)] * b for b, kv in DECODE_BATCHES],
            "prefill": [[(0, n)] * b for b, n in PREFILL_BATCHES],
        }
        for phase, steps in batches.items():
            for batch in steps:
                measured = truth.step_seconds(batch)
                for name, model in models.items():
                    error = (model.step_seconds(batch) / measured - 1.0) * 100.0
                    out[name][phase].append(error)
    return out


def evaluate(
    holdout: float, seed: int, shapes: str, gpu_name: str = "h100_sxm", engine: str = "vllm"
) -> dict[str, Any]:
    """MAPE and p90 error per source and class on the held-out rows, and the step-time errors
    (a JSON-ready dict)."""
    catalog = shipped_catalog()
    gpu = catalog.gpu(gpu_name)
    full: ProfileSet = shipped_profiles(gpu_name, engine)
    profiles = full
    if shapes == "catalog":
        profiles = catalog_shape_filter(list(catalog.models.values()), profiles).apply(profiles)
    fitting, held = grid_holdout_split(profiles, holdout, seed)
    roofline = RooflineKernels(gpu)
    sources: dict[str, KernelTimer] = {
        "roofline": roofline,
        "table": ProfileKernels(ProfileTable(fitting, roofline, monotone=False), roofline),
        "table (monotone)": ProfileKernels(ProfileTable(fitting, roofline), roofline),
        "calibrated": ScaledKernels(gpu, fit_calibration(fitting, gpu, holdout=0.0, seed=seed)),
    }
    results: dict[str, Any] = {
        "gpu": gpu.name,
        "engine": engine,
        "holdout": holdout,
        "seed": seed,
        "shapes": shapes,
        "rows": {k: [len(fitting.frame(k)), len(held.frame(k))] for k in KERNEL_CLASSES},
        "mape_pct": {},
        "p90_pct": {},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableFallbackWarning)  # gaps of the thinned grids
        for name, timer in sources.items():
            for kind in KERNEL_CLASSES:
                err = _errors(timer, kind, held.frame(kind))
                results["mape_pct"].setdefault(name, {})[kind] = round(float(err.mean()), 2)
                results["p90_pct"].setdefault(name, {})[kind] = round(
                    float(np.percentile(err, 90)), 2
                )
        reference = ProfileKernels(ProfileTable(full, roofline, monotone=False), roofline)
        steps = {n: sources[n] for n in ("roofline", "table (monotone)", "calibrated")}
        errors = step_errors(gpu.name, steps, reference)
    results["step_mape_pct"] = {
        name: {phase: round(float(np.mean(np.abs(e))), 2) for phase, e in by_phase.items()}
        for name, by_phase in errors.items()
    }
    results["step_bias_pct"] = {
        name: {phase: round(float(np.median(e)), 2) for phase, e in by_phase.items()}
        for name, by_phase in errors.items()
    }
    return results


#: Catalog weight precision of a fused-MoE profile dtype (``fp8_block`` is FP8 weights).
_MOE_PRECISION = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4", "int4": "int4"}


def moe_evaluate(holdout: float, seed: int, gpu_name: str, engine: str) -> dict[str, Any] | None:
    """Routed-expert layer error per source on held-out token counts (module doc), or None
    where the GPU has no shipped fused-MoE profile for ``engine``."""
    located = resolve_profile_files(gpu_name, engine)
    if located is None or MOE_KIND not in located.files:
        return None
    catalog = shipped_catalog()
    gpu = catalog.gpu(gpu_name)
    frame = read_moe_profile(located.files[MOE_KIND])
    counts = sorted(frame["tokens"].unique())[1:-1]
    rng = np.random.default_rng(seed)
    held_counts = set(rng.choice(counts, size=round(holdout * len(counts)), replace=False))
    held_rows = frame["tokens"].isin(held_counts)
    table = MoeTable(frame[~held_rows], monotone=False)
    timers: dict[str, KernelTimer] = {
        "composed: roofline": RooflineKernels(gpu),
        "composed: table GEMMs": table_kernels(gpu, engine=engine, warn_range=False),
    }
    models = {
        (m.hidden_size, m.expert_ffn_size, m.experts_per_token, m.num_experts): m
        for m in catalog.models.values()
        if m.is_moe
    }
    errors: dict[str, list[float]] = {"table": [], **{name: [] for name in timers}}  # signed %
    skipped = 0
    for row in frame[held_rows].to_dict("records"):
        sizes = [int(row[c]) for c in ("experts", "top_k", "hidden", "inter", "moe_tp", "moe_ep")]
        shape = MoeShape(*sizes, dtype=str(row["dtype"]))
        model = models.get((shape.hidden, shape.inter, shape.top_k, shape.num_experts))
        if model is None:  # a shape no catalog model has (the shipped Marlin references)
            skipped += 1
            continue
        try:
            deployment = Deployment(
                model,
                gpu,
                tp=shape.moe_tp * shape.moe_ep,
                ep=shape.moe_ep,
                weight_precision=_MOE_PRECISION[shape.dtype],
                allow_multi_node=True,
            )
        except (InputError, KeyError):  # heads the split does not divide; a dtype not served
            skipped += 1
            continue
        measured = float(row["seconds"])
        grid = table.grid(shape)  # the balanced rows' own interpolation (even picks, as held out)
        hit = None if grid is None else table.read(grid, int(row["tokens"]))
        assert hit is not None
        errors["table"].append((hit[0] / measured - 1.0) * 100.0)
        calls = OperatorPlanner(deployment).routed_expert_calls(int(row["tokens"]))
        for name, timer in timers.items():
            composed = ComposedLatencyModel(deployment, timer, name=name)
            layer = sum(c.count * composed.call_seconds(c) for c in calls) / model.num_moe_layers
            errors[name].append((layer / measured - 1.0) * 100.0)
    return {
        "gpu": gpu.name,
        "engine": engine,
        "rows": len(errors["table"]),
        "skipped": skipped,
        "mape_pct": {n: round(float(np.mean(np.abs(e))), 2) for n, e in errors.items()},
        "p90_pct": {n: round(float(np.percentile(np.abs(e), 90)), 2) for n, e in errors.items()},
        "bias_pct": {n: round(float(np.median(e)), 2) for n, e in errors.items()},
    }


def _print_moe(all_results: list[dict[str, Any]]) -> None:
    names = list(all_results[0]["mape_pct"])
    table = Table(
        title="Routed-expert layer error on held-out token counts: MAPE % (p90 %) [median signed %]"
    )
    table.add_column("GPU / engine (rows)", no_wrap=True)
    for name in names:
        table.add_column(name, justify="right")
    for r in all_results:
        cells = [
            f"{r['mape_pct'][n]:.1f} ({r['p90_pct'][n]:.0f}) [{r['bias_pct'][n]:+.0f}]"
            for n in names
        ]
        table.add_row(f"{r['gpu']} / {r['engine']} ({r['rows']})", *cells)
    Console().print(table)


def _print(results: dict[str, Any]) -> None:
    table = Table(
        title=f"Kernel-time error on held-out {results['gpu']} {results['engine']} profile rows "
        f"(shapes: {results['shapes']}, holdout {results['holdout']}, seed {results['seed']}): "
        "MAPE % (p90 %)"
    )
    table.add_column("source", no_wrap=True)
    labels = {"context_attention": "context attn", "generation_attention": "decode attn"}
    for kind in KERNEL_CLASSES:
        held = results["rows"][kind][1]
        table.add_column(f"{labels.get(kind, kind)}\n{held} rows", justify="right")
    for name, by_class in results["mape_pct"].items():
        cells = [f"{by_class[k]:.1f} ({results['p90_pct'][name][k]:.0f})" for k in KERNEL_CLASSES]
        table.add_row(name, *cells)
    Console().print(table)


def _print_steps(all_results: list[dict[str, Any]]) -> None:
    """One row per GPU: step-time MAPE (median signed error) per source and phase."""
    names = list(all_results[0]["step_mape_pct"])
    table = Table(
        title="Step-time error against steps composed from every measured kernel: MAPE % "
        "(median signed %)"
    )
    table.add_column("GPU / engine", no_wrap=True)
    for name in names:
        for phase in ("decode", "prefill"):
            table.add_column(f"{name}\n{phase}", justify="right")
    for results in all_results:
        cells = [
            f"{results['step_mape_pct'][n][p]:.1f} ({results['step_bias_pct'][n][p]:+.1f})"
            for n in names
            for p in ("decode", "prefill")
        ]
        table.add_row(f"{results['gpu']} / {results['engine']}", *cells)
    Console().print(table)


def carry_evaluate(target: str, source: str, engine: str) -> dict[str, Any]:
    """How well ``source``'s measured tables, carried by the roofline ratio (the catalog's
    stand-in mechanism, ``GpuSpec.kernel_profiles_from``), time the steps of ``target``, a GPU
    whose own tables exist: signed step errors against ``target``'s full measured tables, next
    to ``target``'s roofline. ``target`` is renamed so that its own files are not found."""
    catalog = shipped_catalog()
    gpu = catalog.gpu(target)
    alias = gpu.model_copy(update={"name": f"{gpu.name}~{source}", "kernel_profiles_from": source})
    roofline = RooflineKernels(gpu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableFallbackWarning)
        reference = ProfileKernels(
            ProfileTable(shipped_profiles(target, engine), roofline, monotone=False), roofline
        )
        sources: dict[str, KernelTimer] = {
            "roofline": roofline,
            f"{source} carried": table_kernels(alias, engine=engine, warn_range=False),
        }
        errors = step_errors(target, sources, reference)
    return {
        "gpu": target,
        "stand_in": source,
        "engine": engine,
        "step_mape_pct": {
            name: {phase: round(float(np.mean(np.abs(e))), 2) for phase, e in by_phase.items()}
            for name, by_phase in errors.items()
        },
        "step_bias_pct": {
            name: {phase: round(float(np.median(e)), 2) for phase, e in by_phase.items()}
            for name, by_phase in errors.items()
        },
    }


def main() -> None:
    """Parse the arguments, evaluate, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holdout", type=float, default=0.2, help="held-out share of rows")
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out split")
    parser.add_argument("--shapes", choices=("catalog", "all"), default="catalog")
    parser.add_argument("--gpu", action="append", help="GPU (repeatable; default: all shipped)")
    parser.add_argument("--engine", choices=ENGINES, default="vllm")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--moe", action="store_true", help="score fused-MoE layers instead")
    parser.add_argument(
        "--carry",
        action="append",
        metavar="TARGET=SOURCE",
        help="score SOURCE's tables carried to TARGET by the roofline ratio (repeatable)",
    )
    args = parser.parse_args()
    if args.carry:
        pairs = [pair.split("=", 1) for pair in args.carry]
        if any(len(pair) != 2 or not all(pair) for pair in pairs):
            parser.error("--carry expects TARGET=SOURCE, e.g. h200_sxm=h100_sxm")
        carried = [carry_evaluate(t, s, args.engine) for t, s in pairs]
        if args.json:
            print(json.dumps(carried, indent=2))
            return
        for one in carried:
            print(one["gpu"], "<-", one["stand_in"], one["engine"])
            for name, by_phase in one["step_mape_pct"].items():
                bias = one["step_bias_pct"][name]
                print(
                    f"  {name:22s}",
                    "  ".join(f"{p} {m:.1f}% ({bias[p]:+.1f})" for p, m in by_phase.items()),
                )
        return
    shipped = [g for g in shipped_catalog().gpus if resolve_profile_files(g, args.engine)]
    if args.moe:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TableFallbackWarning)  # GEMMs outside the grid
            scored = [
                moe_evaluate(args.holdout, args.seed, g, args.engine) for g in args.gpu or shipped
            ]
        moe = [r for r in scored if r is not None]
        print(json.dumps(moe, indent=2)) if args.json else _print_moe(moe)
        return
    results = [
        evaluate(args.holdout, args.seed, args.shapes, gpu, args.engine)
        for gpu in args.gpu or shipped
    ]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for one in results:
        _print(one)
    _print_steps(results)


if __name__ == "__main__":
    main()
