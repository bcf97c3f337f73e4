"""``kvplan simulate``: run one serving configuration on one workload and summarise it.

    kvplan simulate --model Qwen3-32B --gpu h100_sxm --tp 2 --concurrency 16
    kvplan simulate --config deploy.yaml --workload trace.jsonl --time-scale 0.5 --json
    kvplan simulate --config deploy.yaml --l2-gib 256 --l3 nvme_4tib --out runs/a
    kvplan simulate --config deploy.yaml --prefill-instances 2 --decode-instances 6 --json
    kvplan simulate --config deploy.yaml --workload trace.jsonl --capacity --slo chat.yaml
    kvplan simulate --config deploy.yaml --compare-cache idle,device,host,disk
    kvplan simulate --config deploy.yaml --concurrency 64 --kv-margin 0.1

The configuration is a config file (``--config``; keys are ``ServingConfig`` fields) and/or
flags; a flag overrides the file (``optimizer/simconfig.py``). The workload is a trace or
workload file (``--workload``), a closed loop of N users with fixed lengths (``--concurrency``,
as serving benchmarks run), or the bundled default (a slice of the Mooncake trace).

Output: rich tables, or with ``--json`` one object (``simulation_summary``). ``--out DIR``
writes one row per finished request as ``requests.csv`` and, when pyarrow is importable,
``requests.parquet``; for an autoscaled run also ``fleet.csv`` and ``fleet.png`` (instances,
TTFT / TPOT p90 and SLO attainment over time, ``optimizer/cli/fleet_files.py``).

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

``--kv-margin F`` runs the configuration twice more with its KV pool F smaller and larger
(``simulator/kv_margin.py``) and prints one line (``kv_margin`` with ``--json``): how TTFT and
TPOT move, and whether the prediction sits on the KV-capacity edge.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from hardware.catalog import load_catalog
from optimizer.cli._output import console, err_console, print_json
from optimizer.cli._overlong import OverlongOpt, overlong_scan
from optimizer.cli._preflight import check_config_names, check_finite_flags, check_seed
from optimizer.cli.compare_cache import compare_cache, parse_setups, print_comparison
from optimizer.cli.compare_plot import check_plot_path, write_comparison_plot
from optimizer.cli.fleet_files import write_fleet_files
from optimizer.cli.profiles_cmd import user_profiles_dir, user_tables_dir
from optimizer.cli.simulate_output import (
    format_number,
    note_parquet,
    print_files,
    print_tables,
    simulation_summary,
    write_requests,
)
from optimizer.simconfig import merge_config
from optimizer.workloads import describe_workload, workload_from_arg
from simulator.api import SimResult, WorkloadBuilder, simulate
from simulator.capacity import MAX_TIME_SCALE, Capacity, capacity_search
from simulator.config import ServingConfig
from simulator.kv_margin import KvMargin, kv_margin
from simulator.metrics import SUMMARY_STATS
from simulator.pool_config import POOLS, fold_pool_keys
from simulator.workload.closed_loop import closed_loop_workload
from slo import SloSpec, attainment, evaluate, load_slo
from slo.inputfile import InputError, validate

__all__ = ["register", "simulation_summary", "write_requests"]  # the output re-exported

#: Closed-loop defaults of ``--concurrency`` (per request) and requests per user.
DEFAULT_INPUT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
DEFAULT_REQUESTS_PER_USER = 20  # aiperf's benchmark convention: 20·N requests


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""
    app.command("simulate")(simulate_command)


# ----- the JSON summary -------------------------------------------------------------------------
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
        Path | None,
        typer.Option(
            "--out", help="Directory for per-request CSV (and Parquet); autoscaled: fleet files."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    capacity: Annotated[
        bool, typer.Option("--capacity", help="Search the highest load that meets --slo.")
    ] = False,
    slo_file: Annotated[
        Path | None,
        typer.Option("--slo", help="SLO file for --capacity, or for attainment per window."),
    ] = None,
    overlong: OverlongOpt = "drop",
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare-cache",
            help="Run the workload once per cache setup, side by side: a subset of "
            "idle,device,host,disk (prefix caching off; HBM; + DRAM; + SSD).",
        ),
    ] = None,
    compare_plot: Annotated[
        Path | None,
        typer.Option("--compare-plot", help="With --compare-cache: also draw it into FILE.png."),
    ] = None,
    kv_margin_fraction: Annotated[
        float | None,
        typer.Option(
            "--kv-margin",
            help="Also run with the KV pool this fraction smaller and larger (e.g. 0.1) and "
            "say whether the prediction sits on the KV-capacity edge.",
        ),
    ] = None,
) -> None:
    """Simulate one serving configuration on one workload."""
    check_seed(seed)
    setups = _compare_setups(compare, compare_plot, alone=not capacity and out is None)
    _check_margin(kv_margin_fraction, alone=not capacity and not setups)
    check_finite_flags({"--l2-gib": l2_gib, "--time-scale": time_scale})
    flags = {
        "model": model, "gpu": gpu, "tp": tp, "instances": instances, "precision": precision,
        "kv_precision": kv_precision, "backend": backend, "scheduler": scheduler,
        "latency": latency, "l2_gib": l2_gib, "l3": l3, "eviction": eviction,
    }  # fmt: skip
    flags["l3"], l3_gib = _l3_spec(l3)
    cat = load_catalog(catalog)
    serving = _with_flags(
        merge_config(config, flags, cat, on_note=_note),
        {
            "router": router, "prefill_instances": prefill_instances,
            "decode_instances": decode_instances, "prefill_gpu": prefill_gpu,
            "decode_gpu": decode_gpu, "prefill_tp": prefill_tp, "decode_tp": decode_tp,
            "l3_capacity_gib": l3_gib,
        },
    )  # fmt: skip
    # The user's imported profiles (kvplan profiles) and built tables kept between runs.
    serving = _with_flags(
        serving,
        {
            "kernel_profiles_dir": serving.kernel_profiles_dir or user_profiles_dir(),
            "latency_cache_dir": serving.latency_cache_dir or user_tables_dir(),
        },
    )
    window_slo = _window_slo(slo_file, serving, capacity=capacity)
    builder = _workload(
        workload, time_scale, max_requests, concurrency, (input_tokens, output_tokens, requests)
    )
    check_config_names(serving, cat, str(config) if config is not None else "command line")
    tally = overlong_scan(builder, serving.model, cat, seed=seed, policy=overlong)
    drop = overlong == "drop"
    status = err_console.status("simulating…") if err_console.is_terminal else nullcontext()
    if setups:
        with status:
            rows = compare_cache(serving, builder, setups, catalog=cat, seed=seed, drop=drop)
        print_comparison(rows, describe_workload(builder), json_out=json_out)
        if compare_plot is not None:
            written = write_comparison_plot(rows, compare_plot)
            err_console.print(f"wrote {written}", markup=False, highlight=False)
        return
    with status:
        found, result, margin = _runs(
            serving, builder, cat, seed=seed, drop=drop,
            capacity=capacity, slo_file=slo_file, margin=kv_margin_fraction,
        )  # fmt: skip
    files = _write_files(result, out, window_slo)
    if json_out:
        data = simulation_summary(result, window_slo)
        data["workload"] = describe_workload(builder) | {"overlong": asdict(tally)}
        if margin is not None:
            data["kv_margin"] = margin.to_dict()
        if found is not None:
            data["capacity"] = _capacity_dict(found)
        if out is not None:
            data["files"] = [str(p) for p in files]
            note_parquet(files, err_console)
        print_json(data)
        return
    if not result.feasible:
        err_console.print(f"infeasible: {result.reason}", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    print_tables(result, describe_workload(builder), window_slo)
    if margin is not None:
        console.print(margin.sentence(), markup=False, highlight=False, soft_wrap=True)
    if found is not None:
        cap = _capacity_dict(found)
        console.print(
            f"capacity: time_scale {cap['time_scale']:.4g} (load x{1 / cap['time_scale']:.3g}), "
            f"{format_number(cap['requests_per_s'])} requests/s, {cap['simulations']} simulations",
            markup=False,
            highlight=False,
        )
    if out is not None:
        print_files(files)


def _write_files(result: SimResult, out: Path | None, spec: SloSpec | None) -> list[Path]:
    """``--out``: the per-request files, and an autoscaled run's fleet files."""
    if out is None or not result.feasible:
        return []
    return write_requests(result, out) + write_fleet_files(result, spec, out)


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


def _compare_setups(compare: str | None, plot: Path | None, *, alone: bool) -> tuple[str, ...]:
    """The ``--compare-cache`` setups (none without it), its flags checked before simulating:
    not with --capacity or --out (``alone``), and --compare-plot only with it."""
    setups = parse_setups(compare) if compare is not None else ()
    if setups and not alone:
        raise InputError("--compare-cache: not with --capacity or --out (one run per setup)")
    if plot is not None:
        if not setups:
            raise InputError("--compare-plot: only with --compare-cache")
        check_plot_path(plot)
    return setups


def _runs(
    serving: ServingConfig,
    builder: WorkloadBuilder,
    cat: Any,
    *,
    seed: int,
    drop: bool,
    capacity: bool,
    slo_file: Path | None,
    margin: float | None,
) -> tuple[Capacity | None, SimResult, KvMargin | None]:
    """The run the flags ask for: the capacity search (``--capacity``, ``slo_file`` its SLO)
    or one simulation, and the ``--kv-margin`` runs beside a feasible one."""
    found: Capacity | None = None
    if capacity:
        found = _capacity(serving, builder, cat, seed=seed, slo_file=slo_file, drop=drop)
        result = found.result
    else:
        result = simulate(serving, builder, seed=seed, catalog=cat, drop_overlong_requests=drop)
    if margin is None or not result.feasible or result.summary is None:
        return found, result, None
    runs = kv_margin(
        serving, builder, result, seed=seed, catalog=cat, fraction=margin,
        drop_overlong_requests=drop,
    )  # fmt: skip
    return found, result, runs


def _check_margin(fraction: float | None, *, alone: bool) -> None:
    """``--kv-margin``: a fraction in (0, 1), not with --capacity or --compare-cache (checked
    before simulating)."""
    if fraction is None:
        return
    if not 0 < fraction < 1 or not math.isfinite(fraction):
        raise InputError(f"--kv-margin: expected a fraction between 0 and 1, got {fraction:g}")
    if not alone:
        raise InputError("--kv-margin: not with --capacity or --compare-cache")


def _window_slo(slo_file: Path | None, serving: ServingConfig, *, capacity: bool) -> SloSpec | None:
    """The SLO whose attainment the fleet table shows per window (``--slo`` on an autoscaled
    config); ``--slo`` otherwise belongs to ``--capacity``."""
    if slo_file is None or capacity:
        return None
    pools = [serving.pool(name).autoscale for name in ("prefill", "decode")]
    if serving.autoscale is None and all(policy is None for policy in pools):
        raise InputError(
            "--slo: only with --capacity or an autoscaled config (attainment per window); "
            "kvplan slo check evaluates one run"
        )
    return load_slo(slo_file)


def _note(message: str) -> None:
    """Print a one-line note (a deprecated key, say) on stderr."""
    err_console.print(f"note: {message}", markup=False, highlight=False, soft_wrap=True)


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
    data = serving.model_dump()
    if given.keys() & PD_FLAGS:
        given["pd_mode"] = "disaggregated"
        given, _ = fold_pool_keys(given)
        for pool in POOLS:  # a flag overrides the file's value of the same pool field
            data[pool] = {**(data[pool] or {}), **given.pop(pool, {})}
    return validate(ServingConfig, {**data, **given}, "command line")


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
