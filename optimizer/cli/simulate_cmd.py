"""``kvplan simulate``: run one serving configuration on one workload and summarise it.

    kvplan simulate --model Qwen3-32B --gpu h100_sxm --tp 2 --concurrency 16
    kvplan simulate --config deploy.yaml --workload trace.jsonl --time-scale 0.5 --json
    kvplan simulate --config deploy.yaml --l2-gib 256 --l3 nvme_4tib --out runs/a
    kvplan simulate --config deploy.yaml --prefill-instances 2 --decode-instances 6 --json
    kvplan simulate --config deploy.yaml --workload trace.jsonl --capacity --slo chat.yaml

The configuration is a config file (``--config``; keys are ``ServingConfig`` fields) and/or
flags; a flag overrides the file (``optimizer/simconfig.py``). The workload is a trace or
workload file (``--workload``), a closed loop of N users with fixed lengths (``--concurrency``,
as serving benchmarks run), or the bundled default (a slice of the Mooncake trace).

Output: rich tables, or with ``--json`` one object (``simulation_summary``). ``--out DIR``
writes one row per finished request as ``requests.csv`` and, when pyarrow is importable,
``requests.parquet``.

Exit status (documented choice): a configuration that cannot run (it does not fit in memory,
the GPU lacks the precision) is a result, not an error, for scripts: ``--json`` prints it with
``"feasible": false`` and its ``reason`` and exits 0. The table mode is for people: it prints
the reason on stderr and exits 2. Bad input (unknown keys, names, negative lengths, a malformed
workload) is one line on stderr, exit 2, in both modes.

``--capacity --slo FILE`` searches the highest load that still meets the SLO (targets and
attainment): bisection on a factor on the workload's timestamps (``simulator/cluster/
capacity.py``), then reports the run at that load, plus ``capacity`` (``time_scale``,
``requests_per_s``, ``simulations``) with ``--json``. When even the lowest load misses the SLO
it prints "infeasible even at the lowest load" on stderr and exits 2, in both modes.
"""

from __future__ import annotations

import importlib.util
import math
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hardware.catalog import load_catalog
from optimizer.cli._output import console, err_console, print_json
from optimizer.cli._overlong import OverlongOpt, overlong_scan
from optimizer.cli._preflight import check_config_names, check_finite_flags, check_seed
from optimizer.cli.profiles_cmd import config_latency_notes, user_profiles_dir
from optimizer.simconfig import closed_loop_workload, merge_config
from optimizer.workloads import describe_workload, workload_from_arg
from simulator.api import SimResult, WorkloadBuilder, simulate
from simulator.capacity import MAX_TIME_SCALE, Capacity, capacity_search
from simulator.config import ServingConfig
from simulator.metrics import SUMMARY_STATS
from slo import SloSpec, attainment, evaluate, load_slo
from slo.inputfile import InputError, validate

__all__ = ["register", "simulation_summary", "write_requests"]

#: Latency metrics of the summary, in display order.
LATENCY_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")
#: Closed-loop defaults of ``--concurrency`` (per request) and requests per user.
DEFAULT_INPUT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
DEFAULT_REQUESTS_PER_USER = 20  # aiperf's benchmark convention: 20·N requests


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""
    app.command("simulate")(simulate_command)


# ----- the JSON summary -------------------------------------------------------------------------
def simulation_summary(result: SimResult) -> dict[str, Any]:
    """The ``--json`` object: ``feasible``, ``reason``, latency stats (ms) per metric,
    ``throughput``, ``cache``, ``cost``, ``requests``, ``utilization``, ``load_imbalance``,
    ``config``, ``diagnostics``.

    An infeasible result has the same keys: latencies and hit ratios are None, throughput 0,
    cost per million tokens None (nothing was served).
    """
    summary = result.summary
    data: dict[str, Any] = {"feasible": result.feasible, "reason": result.reason}
    for key in LATENCY_KEYS:
        stats = getattr(summary, key) if summary else None
        data[key] = {s: (getattr(stats, s) if stats else None) for s in SUMMARY_STATS}
    data["throughput"] = {
        "requests_per_s": summary.requests_per_s if summary else 0.0,
        "output_tokens_per_s": summary.output_tokens_per_s if summary else 0.0,
        "input_tokens_per_s": summary.input_tokens_per_s if summary else 0.0,
    }
    hits = summary.hit_ratio if summary else {}
    data["cache"] = {
        "l1_hit_ratio": hits.get("l1"),
        "l2_hit_ratio": hits.get("l2"),
        "l3_hit_ratio": hits.get("l3"),
        "prefill_tokens_saved_ratio": summary.prefill_tokens_saved_ratio if summary else None,
    }
    cost = result.cost
    data["cost"] = {
        "usd_per_hour": cost.usd_per_hour,
        "usd_per_million_output_tokens": summary.usd_per_million_output_tokens if summary else None,
        "gpus": cost.gpus,
        "gpu_usd_per_hour": cost.gpu_usd_per_hour,
        "dram_usd_per_hour": cost.dram_usd_per_hour,
        "l3_usd_per_hour": cost.l3_usd_per_hour,
    }
    data["requests"] = {
        "finished": summary.n_requests if summary else 0,
        "rejected": summary.n_rejected if summary else 0,
        "rejections": dict(summary.rejections) if summary else {},
        "preemptions": summary.preemptions if summary else 0,
        "duration_s": summary.duration_s if summary else 0.0,
    }
    data["utilization"] = {
        "gpu_busy_fraction": summary.gpu_busy_fraction if summary else None,
        "kv_utilization": summary.kv_utilization if summary else None,
        "mean_queue_lengths": dict(summary.mean_queue_lengths) if summary else {},
    }
    data["load_imbalance"] = summary.load_imbalance if summary else None
    data["engine"] = result.engine
    data["seed"] = result.seed
    data["config"] = result.config.model_dump()
    data["diagnostics"] = dict(result.diagnostics)
    return data


# ----- per-request files ------------------------------------------------------------------------
def write_requests(result: SimResult, directory: Path) -> list[Path]:
    """Write one row per finished request to ``directory`` (created if missing).

    Columns: every ``RequestRecord`` field (seconds) plus ``ttft_ms``, ``tpot_ms``, ``e2e_ms``,
    ``queue_ms``. Always ``requests.csv``; ``requests.parquet`` too when pyarrow is importable.
    Returns the paths written.
    """
    import pandas as pd  # noqa: PLC0415  (~0.5 s to import; only --out needs it)

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {directory}: cannot create the directory: {err}") from None
    frame = pd.DataFrame([asdict(record) for record in result.records])
    for name, values in result.per_request_ms().items():
        if name != "itl_ms":  # per request that is the worst gap; max_itl_s already holds it
            # Rejected requests trail the arrays as inf rows; they have no record to join.
            frame[name] = values[: len(frame)]
    written = [directory / "requests.csv"]
    frame.to_csv(written[0], index=False)
    if importlib.util.find_spec("pyarrow") is not None:
        written.append(directory / "requests.parquet")
        frame.to_parquet(written[1], index=False)
    return written


# ----- the command ------------------------------------------------------------------------------
def _workload(
    workload: str | None,
    time_scale: float | None,
    max_requests: int | None,
    concurrency: int | None,
    lengths: tuple[int | None, int | None, int | None],
) -> WorkloadBuilder:
    input_tokens, output_tokens, requests = lengths
    if concurrency is None:
        given = [
            flag
            for flag, value in zip(
                ("--input-tokens", "--output-tokens", "--requests"), lengths, strict=True
            )
            if value is not None
        ]
        if given:
            raise InputError(f"{', '.join(given)}: only with --concurrency (a closed loop)")
        return workload_from_arg(workload, time_scale=time_scale, max_requests=max_requests)
    if workload is not None:
        raise InputError("--concurrency and --workload: give one workload, not both")
    if time_scale is not None or max_requests is not None:
        raise InputError("--time-scale/--max-requests apply to trace workloads, not --concurrency")
    return closed_loop_workload(
        users=concurrency,
        requests=requests if requests is not None else DEFAULT_REQUESTS_PER_USER * concurrency,
        input_tokens=input_tokens if input_tokens is not None else DEFAULT_INPUT_TOKENS,
        output_tokens=output_tokens if output_tokens is not None else DEFAULT_OUTPUT_TOKENS,
        source="command line",
    )


def simulate_command(  # noqa: PLR0917  (one parameter per CLI option, as typer requires)
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Config file (YAML/TOML/JSON): ServingConfig fields."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Catalog model, e.g. Qwen3-32B.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU, e.g. h100_sxm.")] = None,
    tp: Annotated[int | None, typer.Option(min=1, help="Tensor parallelism.")] = None,
    instances: Annotated[int | None, typer.Option(min=1, help="Engine instances.")] = None,
    precision: Annotated[
        str | None, typer.Option(help="Weight precision (bf16, fp8, ...).")
    ] = None,
    kv_precision: Annotated[str | None, typer.Option(help="KV-cache precision.")] = None,
    backend: Annotated[
        str | None, typer.Option(help="Backend preset (vllm, sglang, trtllm) or preset file.")
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Batch scheduler (default: preset).")
    ] = None,
    latency: Annotated[
        str | None,
        typer.Option(help="Latency model: roofline, table, calibrated[:FILE], constant:S, ..."),
    ] = None,
    l2_gib: Annotated[
        float | None, typer.Option(min=0, help="Host-DRAM KV tier per instance, GiB (0 = none).")
    ] = None,
    l3: Annotated[
        str | None, typer.Option(help="L3 storage tier from the catalog, or 'none'.")
    ] = None,
    eviction: Annotated[str | None, typer.Option(help="Eviction policy of every tier.")] = None,
    router: Annotated[
        str | None, typer.Option(help="Router spec: round_robin, least_load, cache_aware[:k=v].")
    ] = None,
    prefill_instances: Annotated[
        int | None, typer.Option(min=1, help="PD disaggregation: prefill instances.")
    ] = None,
    decode_instances: Annotated[
        int | None, typer.Option(min=0, help="PD disaggregation: decode instances.")
    ] = None,
    prefill_gpu: Annotated[str | None, typer.Option(help="PD: prefill GPU [--gpu].")] = None,
    decode_gpu: Annotated[str | None, typer.Option(help="PD: decode GPU [--gpu].")] = None,
    prefill_tp: Annotated[int | None, typer.Option(min=1, help="PD: prefill TP [--tp].")] = None,
    decode_tp: Annotated[int | None, typer.Option(min=1, help="PD: decode TP [--tp].")] = None,
    workload: Annotated[
        str | None,
        typer.Option(help="Trace (.jsonl/.lcp) or workload file; default: bundled Mooncake slice."),
    ] = None,
    time_scale: Annotated[
        float | None, typer.Option(help="Trace time factor (0.5 = 2x rate).")
    ] = None,
    max_requests: Annotated[
        int | None, typer.Option(min=1, help="Replay at most this many trace requests.")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Closed loop of N users instead of a trace.")
    ] = None,
    input_tokens: Annotated[
        int | None,
        typer.Option(min=1, help=f"Closed loop: prompt tokens [{DEFAULT_INPUT_TOKENS}]."),
    ] = None,
    output_tokens: Annotated[
        int | None,
        typer.Option(min=1, help=f"Closed loop: output tokens [{DEFAULT_OUTPUT_TOKENS}]."),
    ] = None,
    requests: Annotated[
        int | None, typer.Option(min=1, help="Closed loop: requests in all [20 x concurrency].")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 0,
    catalog: Annotated[
        Path | None, typer.Option("--catalog", help="User catalog merged over the shipped one.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory for per-request CSV (and Parquet).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    capacity: Annotated[
        bool, typer.Option("--capacity", help="Search the highest load that meets --slo.")
    ] = False,
    slo_file: Annotated[Path | None, typer.Option("--slo", help="SLO file for --capacity.")] = None,
    overlong: OverlongOpt = "drop",
) -> None:
    """Simulate one serving configuration on one workload."""
    check_seed(seed)
    check_finite_flags({"--l2-gib": l2_gib, "--time-scale": time_scale})
    flags = {
        "model": model, "gpu": gpu, "tp": tp, "instances": instances, "precision": precision,
        "kv_precision": kv_precision, "backend": backend, "scheduler": scheduler,
        "latency": latency, "l2_gib": l2_gib, "l3": l3, "eviction": eviction,
    }  # fmt: skip
    flags["l3"], l3_gib = _l3_spec(l3)
    serving = _with_flags(
        merge_config(config, flags),
        {
            "router": router, "prefill_instances": prefill_instances,
            "decode_instances": decode_instances, "prefill_gpu": prefill_gpu,
            "decode_gpu": decode_gpu, "prefill_tp": prefill_tp, "decode_tp": decode_tp,
            "l3_capacity_gib": l3_gib,
        },
    )  # fmt: skip
    if serving.kernel_profiles_dir is None:  # the user's imported profiles (kvplan profiles)
        serving = _with_flags(serving, {"kernel_profiles_dir": user_profiles_dir()})
    if slo_file is not None and not capacity:
        raise InputError("--slo: only with --capacity (kvplan slo check evaluates one run)")
    builder = _workload(
        workload, time_scale, max_requests, concurrency, (input_tokens, output_tokens, requests)
    )
    cat = load_catalog(catalog)
    check_config_names(serving, cat, str(config) if config is not None else "command line")
    tally = overlong_scan(builder, serving.model, cat, seed=seed, policy=overlong)
    drop = overlong == "drop"
    status = err_console.status("simulating…") if err_console.is_terminal else nullcontext()
    found: Capacity | None = None
    with status:
        if capacity:
            found = _capacity(serving, builder, cat, seed=seed, slo_file=slo_file, drop=drop)
            result = found.result
        else:
            result = simulate(serving, builder, seed=seed, catalog=cat, drop_overlong_requests=drop)
    files = write_requests(result, out) if out is not None and result.feasible else []
    if json_out:
        data = simulation_summary(result)
        data["workload"] = describe_workload(builder) | {"overlong": asdict(tally)}
        if found is not None:
            data["capacity"] = _capacity_dict(found)
        if out is not None:
            data["files"] = [str(p) for p in files]
            _note_parquet(files, err_console)
        print_json(data)
        return
    if not result.feasible:
        err_console.print(f"infeasible: {result.reason}", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    _print_tables(result, describe_workload(builder))
    if found is not None:
        cap = _capacity_dict(found)
        console.print(
            f"capacity: time_scale {cap['time_scale']:.4g} (load x{1 / cap['time_scale']:.3g}), "
            f"{_num(cap['requests_per_s'])} requests/s, {cap['simulations']} simulations",
            markup=False,
            highlight=False,
        )
    if out is not None:
        _print_files(files)


# ----- PD, router and capacity flags -------------------------------------------------------------
#: Flags that select PD disaggregation (they are ``ServingConfig`` fields of the same name).
PD_FLAGS = frozenset(
    (
        "prefill_instances",
        "decode_instances",
        "prefill_gpu",
        "decode_gpu",
        "prefill_tp",
        "decode_tp",
    )
)


def _l3_spec(spec: str | None) -> tuple[str | None, float | None]:
    """``--l3 TIER[:GIB]`` as (tier, capacity in GiB or None)."""
    if spec is None or ":" not in spec:
        return spec, None
    tier, _, size = spec.partition(":")
    try:
        return tier, float(size)
    except ValueError:
        raise InputError(f"--l3 {spec!r} is not TIER[:GIB] (e.g. pool_16tib:2048)") from None


def _with_flags(serving: ServingConfig, updates: dict[str, Any]) -> ServingConfig:
    """``serving`` with the given router / PD / L3-capacity flags; a PD flag selects
    ``pd_mode: disaggregated``. One-line ``InputError`` for a bad combination."""
    given = {key: value for key, value in updates.items() if value is not None}
    if not given:
        return serving
    if given.keys() & PD_FLAGS:
        given["pd_mode"] = "disaggregated"
    return validate(ServingConfig, {**serving.model_dump(), **given}, "command line")


def _meets_slo(spec: SloSpec) -> Any:
    """``result -> bool``: every SLO target, attainment floor and budget is met."""
    stats = sorted({stat for _, stat, _ in spec.target_items()} - set(SUMMARY_STATS))

    def meets(result: SimResult) -> bool:
        metrics = result.metrics_for_slo(stats)
        if spec.targets:
            metrics["attainment"] = attainment(result.per_request_ms(), spec)
        return evaluate(metrics, spec).feasible

    return meets


def _capacity(
    serving: ServingConfig,
    builder: WorkloadBuilder,
    cat: Any,
    *,
    seed: int,
    slo_file: Path | None,
    drop: bool = True,
) -> Capacity:
    """The capacity search of ``--capacity``; exit 2 when even the lowest load fails."""
    if slo_file is None:
        raise InputError("--capacity needs --slo FILE: the SLO the highest load must still meet")
    spec = load_slo(slo_file)
    meets = _meets_slo(spec)
    found = capacity_search(
        serving, builder, meets, seed=seed, catalog=cat, drop_overlong_requests=drop
    )
    if not found.feasible:
        why = found.result.reason if not found.result.feasible else f"SLO {spec.name!r} missed"
        err_console.print(
            f"infeasible even at the lowest load (time_scale {MAX_TIME_SCALE:g}): {why}",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    return found


def _capacity_dict(found: Capacity) -> dict[str, Any]:
    return {
        "time_scale": found.time_scale,
        "requests_per_s": found.requests_per_s,
        "simulations": found.simulations,
    }


# ----- tables -----------------------------------------------------------------------------------
def _print_tables(result: SimResult, workload: dict[str, Any]) -> None:
    data = simulation_summary(result)
    cfg = result.config
    if cfg.pd_mode == "disaggregated":
        pools = [cfg.pool_shape("prefill"), cfg.pool_shape("decode")]
        shape = " + ".join(
            f"{count}× {gpu} TP{tp} {role}"
            for role, (gpu, tp, count) in zip(("prefill", "decode"), pools, strict=True)
        )
    else:
        shape = f"{cfg.instances}× {cfg.gpu} TP{cfg.tp}"
    where = f"{cfg.model} on {shape} ({cfg.weight_precision})"
    console.print(
        f"[bold]{where}[/bold], backend {cfg.backend}, latency {cfg.latency_model}", highlight=False
    )
    for note in config_latency_notes(cfg):
        console.print(note, markup=False, highlight=False)
    console.print(f"workload: {_describe(workload)}", markup=False, highlight=False)
    console.print(f"memory: {result.reason}", markup=False, highlight=False)
    console.print(f"engine: {result.engine}", markup=False, highlight=False)
    if result.summary is not None and result.summary.rejections:
        reasons = "; ".join(f"{n} {why}" for why, n in result.summary.rejections.items())
        console.print(
            f"rejected {result.summary.n_rejected} requests: {reasons}",
            markup=False,
            highlight=False,
        )
    latency = Table(title="Latency (ms)", title_justify="left")
    latency.add_column("metric")
    for stat in SUMMARY_STATS:
        latency.add_column(stat, justify="right")
    for key in LATENCY_KEYS:
        latency.add_row(key.removesuffix("_ms"), *(_num(data[key][s]) for s in SUMMARY_STATS))
    console.print(latency)
    figures = Table(title="Throughput, cache and cost", title_justify="left", show_header=False)
    figures.add_column("figure")
    figures.add_column("value", justify="right")
    rows = [
        *((k, v) for k, v in data["requests"].items()),
        *((k, v) for k, v in data["throughput"].items()),
        *((k, v) for k, v in data["cache"].items()),
        *((k, v) for k, v in data["utilization"].items() if not isinstance(v, dict)),
        *((k, v) for k, v in data["cost"].items()),
    ]
    for key, value in rows:
        figures.add_row(key, _num(value))
    console.print(figures)


def _describe(workload: dict[str, Any]) -> str:
    """``kind`` first, then ``key=value``; a fixed distribution is its value."""
    parts = [str(workload.get("kind", "?"))]
    for key, value in workload.items():
        if key != "kind" and value is not None:
            parts.append(f"{key}={_compact(value)}")
    return " ".join(parts)


def _compact(value: Any) -> str:
    if isinstance(value, dict) and "dist" in value:
        args = {k: v for k, v in value.items() if k != "dist"}
        if value["dist"] == "fixed":
            return _compact(args["value"])
        return f"{value['dist']}({', '.join(f'{k}={_compact(v)}' for k, v in args.items())})"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _print_files(files: list[Path]) -> None:
    for path in files:
        console.print(f"wrote {path}", markup=False, highlight=False)
    _note_parquet(files, console)


def _note_parquet(files: list[Path], where: Console) -> None:
    if files and not any(p.suffix == ".parquet" for p in files):
        where.print("no Parquet written: pyarrow is not installed", markup=False, highlight=False)


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4f}" if abs(value) < 1 else f"{value:,.1f}"
    return str(value)
