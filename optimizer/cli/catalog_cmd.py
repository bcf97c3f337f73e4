"""``kvplan hardware list|show`` and ``kvplan models list|show``: what the catalog holds.

Every ``show`` command works in two steps: build a plain dict of figures (``gpu_figures``,
``storage_figures``, ``model_figures``; JSON-ready, units in the key names), then render it as a
rich table or, with ``--json``, as JSON. To extend a command (say ``models show --gpu --tp
--precision`` printing memory fit and step times), add a section to the dict: a nested dict
becomes a titled block of rows in the table and a nested object in the JSON, with no change to
either renderer.

Every command takes ``--catalog FILE`` (a user catalog merged over the shipped one) and ``--json``.
Unknown names raise ``InputError``, which ``optimizer.cli.main.run`` prints as one line (exit 2).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from hardware import (
    Catalog,
    GpuSpec,
    InputError,
    ModelSpec,
    StorageTierSpec,
    closest_key,
    load_catalog,
)
from optimizer.cli._output import console, print_json
from optimizer.cli.profiles_cmd import user_profile_roots, user_tables_dir
from simulator.latency import (
    LATENCY_MODELS,
    Deployment,
    LatencyContext,
    make_latency_model,
    memory_fit,
)
from simulator.presets import BackendPreset, load_preset

__all__ = [
    "DSA_APPROXIMATIONS",
    "STANDARD_BATCHES",
    "deployment_figures",
    "gpu_figures",
    "model_figures",
    "register",
    "storage_figures",
]

#: Precisions ``models show`` reports weight sizes and KV sizes at.
WEIGHT_PRECISIONS = ("bf16", "fp8", "fp4")
KV_PRECISIONS = ("bf16", "fp8")

CatalogOpt = Annotated[
    Path | None,
    typer.Option(
        "--catalog",
        help="User catalog (YAML) merged over the shipped one: override prices, add GPUs/models.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

hardware_app = typer.Typer(
    help="GPUs and KV-cache storage tiers in the catalog.", no_args_is_help=True
)
models_app = typer.Typer(
    help="Models in the catalog and the sizes derived from their shape.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    """Add the ``hardware`` and ``models`` command groups to ``app``."""
    app.add_typer(hardware_app, name="hardware")
    app.add_typer(models_app, name="models")


_LINK_LABEL = {"nvlink": "NVLink", "infinity_fabric": "IF", "pcie": "PCIe"}

#: Compact look for the wide ``list`` tables, so they stay readable in 100 columns.
_LIST_STYLE: dict[str, Any] = {"box": box.SIMPLE_HEAD, "pad_edge": False}


# ----- figures (plain dicts; the JSON output is exactly these) ---------------------------------
def gpu_figures(gpu: GpuSpec) -> dict[str, Any]:
    """Every catalog field of ``gpu`` plus ``type: 'gpu'`` (for scripts reading ``show`` JSON)."""
    return {"type": "gpu", **gpu.model_dump()}


def storage_figures(tier: StorageTierSpec) -> dict[str, Any]:
    """Every catalog field of ``tier`` plus its cost per hour at the default capacity."""
    return {
        "type": "storage",
        **tier.model_dump(),
        "usd_per_hour_at_default_capacity": tier.usd_per_hour(tier.default_capacity_gib),
    }


def model_figures(model: ModelSpec) -> dict[str, Any]:
    """The shape of ``model`` and the sizes derived from it.

    ``shape`` leaves out MoE and MLA fields that are zero (i.e. do not apply). Weight sizes count
    the embedding and LM head at bf16 (see ``ModelSpec.weight_bytes``); KV sizes are for the whole
    model, all tensor-parallel ranks together.
    """
    shape = {
        key: value
        for key, value in model.model_dump().items()
        if key not in ("name", "checkpoint_recipe") and not (type(value) is int and value == 0)
    }
    return {
        "name": model.name,
        "shape": shape,
        "parameters": {"total": model.param_count(), "active": model.active_param_count()},
        "weight_gib": {p: model.weight_bytes(p) / 2**30 for p in WEIGHT_PRECISIONS},
        "kv_per_token": {
            "elements": model.kv_elements_per_token(),
            **{f"kib_{p}": model.kv_bytes_per_token(p) / 1024 for p in KV_PRECISIONS},
        },
        "layers": layer_figures(model),
    }


def layer_figures(model: ModelSpec) -> dict[str, Any]:
    """KV by layer family: what every cached token holds (full-attention layers) and what a
    running request holds besides (its sliding-window KV, its linear-attention state; bf16 KV)."""
    out: dict[str, Any] = {
        "full_attention": model.full_attention_layers,
        "full_kib_per_token_bf16": model.kv_bytes_per_token("bf16") / 1024,
    }
    if model.sliding_window_layers:
        out["sliding_window"] = f"{model.sliding_window_layers} x {model.sliding_window} tokens"
        out["window_mib_per_request_bf16"] = model.window_kv_bytes("bf16") / 2**20
    if model.linear_attention_layers:
        out["linear_attention"] = f"{model.linear_attention_layers} {model.linear_attention}"
        out["state_mib_per_request"] = model.linear_state_bytes() / 2**20
    if model.index_topk:
        out["sparse_attention"] = (
            f"{model.sparse_attention_layers} x top {model.index_topk} tokens (DSA; indexer "
            f"{model.index_n_heads} x {model.index_head_dim}, FP8 key "
            f"{model.index_key_bytes_per_layer_token()} B per token and layer)"
        )
        out["sparse_attention_approximations"] = DSA_APPROXIMATIONS
    return out


#: What DeepSeek Sparse Attention's pricing leaves out or approximates (``compose.py`` module
#: doc, "DeepSeek Sparse Attention"), said in one line by ``models show``.
DSA_APPROXIMATIONS = (
    "indexer priced on the roofline (no measured kernel; FP8 scores, top-k as one fp32 score "
    "write + read); sparse attention as dense MLA over min(context, top-k) tokens (gather, "
    "absorbed sparse prefill and 656-byte FP8 latent layout not modelled); every layer its own "
    "indexer"
)


_LINEAR_SHORT = {"gated_deltanet": "gdn", "mamba2": "mamba2"}


def attention_label(model: ModelSpec) -> str:
    """``gqa``, ``mla``, or the mix: ``mla+dsa`` (DeepSeek Sparse Attention), ``gqa+swa``
    (sliding-window layers), ``gqa+gdn`` (Gated DeltaNet layers), ``gqa+mamba2``; ``models
    show`` has the counts."""
    label: str = model.attention
    if model.index_topk:
        label += "+dsa"
    if model.sliding_window_layers:
        label += "+swa"
    if model.linear_attention_layers:
        label += "+" + _LINEAR_SHORT.get(model.linear_attention, model.linear_attention)
    return label


# ----- hardware ----------------------------------------------------------------------------------
@hardware_app.command("list")
def hardware_list(json_out: JsonOpt = False, catalog: CatalogOpt = None) -> None:
    """List every GPU and storage tier with its headline figures."""
    cat = load_catalog(catalog)
    if json_out:
        print_json(
            {
                "gpus": [gpu_figures(g) for g in cat.gpus.values()],
                "storage": [storage_figures(s) for s in cat.storage.values()],
            }
        )
        return
    console.print(_gpu_table(cat))
    console.print(_storage_table(cat))


@hardware_app.command("show")
def hardware_show(
    name: Annotated[str, typer.Argument(help="GPU or storage-tier name, e.g. h100_sxm or dram.")],
    json_out: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Show every figure of one GPU or storage tier."""
    cat = load_catalog(catalog)
    key = name.lower()
    if key in cat.gpus:
        figures = gpu_figures(cat.gpus[key])
    elif key in cat.storage:
        figures = storage_figures(cat.storage[key])
    else:
        raise InputError(_unknown_hardware(name, cat))
    _emit(figures, json_out)


def _unknown_hardware(name: str, cat: Catalog) -> str:
    close = closest_key(name, [*cat.gpus, *cat.storage])
    hint = f" (did you mean '{close}'?)" if close else ""
    return (
        f"unknown GPU or storage tier '{name}'{hint}; known GPUs: {', '.join(sorted(cat.gpus))}; "
        f"known storage tiers: {', '.join(sorted(cat.storage))}"
    )


def _gpu_table(cat: Catalog) -> Table:
    table = Table(
        title="GPUs (dense TFLOPS; link bandwidths per direction)",
        title_justify="left",
        **_LIST_STYLE,
    )
    table.add_column("name", overflow="fold")
    for header in ("HBM\nGiB", "HBM\nTB/s", "bf16", "fp8", "fp4"):
        table.add_column(header, justify="right", no_wrap=True)
    for header in ("link\nGB/s", "per\nnode", "$/GPU-h"):
        table.add_column(header, justify="right", no_wrap=True)
    for gpu in cat.gpus.values():
        tflops = gpu.dense_tflops
        table.add_row(
            _fmt(gpu.name),
            _fmt(gpu.hbm_gib),
            _fmt(gpu.hbm_tb_per_s),
            *(_tflops(tflops[p]) if p in tflops else "-" for p in ("bf16", "fp8", "fp4")),
            f"{_fmt(gpu.gpu_link_gb_per_s)}\n{_LINK_LABEL[gpu.gpu_link]}",  # kind below
            str(gpu.gpus_per_node),
            _fmt(gpu.usd_per_gpu_hour),
        )
    return table


def _tflops(value: float) -> str:
    """A peak in the list: whole TFLOPS from 1,000 up (``1,307``; ``hardware show`` has every
    digit), so the table's nine columns fit 80 characters."""
    return f"{value:,.0f}" if value >= 1000 else _fmt(value)


def _storage_table(cat: Catalog) -> Table:
    table = Table(title="KV-cache storage tiers", title_justify="left", **_LIST_STYLE)
    table.add_column("name", overflow="fold")
    table.add_column("kind", overflow="fold")
    for header in ("read\nGB/s", "write\nGB/s", "latency\nµs", "capacity\nGiB", "$/GiB\n-month"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("shared", no_wrap=True)
    for tier in cat.storage.values():
        table.add_row(
            _fmt(tier.name),
            tier.kind,
            _fmt(tier.read_gb_per_s),
            _fmt(tier.write_gb_per_s),
            _fmt(tier.latency_us),
            f"{_fmt(tier.capacity_gib_min)}-{_fmt(tier.capacity_gib_max)}",
            _fmt(tier.usd_per_gib_month),
            _fmt(tier.shared),
        )
    return table


# ----- models ----------------------------------------------------------------------------------
@models_app.command("list")
def models_list(json_out: JsonOpt = False, catalog: CatalogOpt = None) -> None:
    """List every model with its size and KV bytes per token."""
    cat = load_catalog(catalog)
    if json_out:
        print_json([model_figures(m) for m in cat.models.values()])
        return
    table = Table(
        title="Models (parameters in billions; KV bytes in bf16, all ranks)",
        title_justify="left",
        **_LIST_STYLE,
    )
    table.add_column("name", overflow="fold")  # long names fold; figures stay whole
    headers = ("layers", "attn", "experts\nk/n", "params", "active", "KV KiB\n/tok", "context")
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for model in cat.models.values():
        experts = "-"
        if model.is_moe:
            shared = f"+{model.num_shared_experts}" if model.num_shared_experts else ""
            experts = f"{model.experts_per_token}/{model.num_experts}{shared}"
        table.add_row(
            _fmt(model.name),
            str(model.num_layers),
            attention_label(model),
            experts,
            f"{model.param_count() / 1e9:.2f}",
            f"{model.active_param_count() / 1e9:.2f}",
            _fmt(model.kv_bytes_per_token("bf16") / 1024),
            f"{model.max_context_tokens:,}",
        )
    console.print(table)


@models_app.command("show")
def models_show(  # noqa: PLR0917  (one parameter per CLI option, as typer requires)
    name: Annotated[str, typer.Argument(help="Model id, e.g. Qwen/Qwen3-32B or just Qwen3-32B.")],
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu", help="Also show the memory fit and step times on this GPU.", show_default=False
        ),
    ] = None,
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor parallelism (with --gpu).")] = 1,
    pp: Annotated[int, typer.Option("--pp", min=1, help="Pipeline stages (with --gpu).")] = 1,
    precision: Annotated[
        str, typer.Option("--precision", help="Weight precision (with --gpu).")
    ] = "bf16",
    kv_precision: Annotated[
        str, typer.Option("--kv-precision", help="KV-cache precision (with --gpu).")
    ] = "bf16",
    backend: Annotated[
        str,
        typer.Option("--backend", help="Backend preset or preset file for the fit (with --gpu)."),
    ] = "vllm",
    json_out: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Show a model's shape and derived figures: parameters, weight GiB, KV KiB per token.

    With --gpu: also the memory fit of one instance (weights, reserve, KV tokens) under the
    backend preset, and the step time of standard batches for every latency model.
    """
    cat = load_catalog(catalog)
    model = cat.model(name)
    figures = model_figures(model)
    # A quantised checkpoint's name (nvidia/...-FP8) fixes the defaults of both precisions.
    recipe = cat.checkpoint(name).recipe
    figures["checkpoint"] = {"recipe": recipe.name, "weights": recipe.weights,
                             "kv_cache": recipe.kv_cache}  # fmt: skip
    if gpu is None:
        defaults = (
            ("--tp", tp, 1),
            ("--pp", pp, 1),
            ("--precision", precision, "bf16"),
            ("--kv-precision", kv_precision, "bf16"),
            ("--backend", backend, "vllm"),
        )
        given = [flag for flag, value, default in defaults if value != default]
        if given:
            raise InputError(f"models show: {', '.join(given)} needs --gpu")
    else:
        preset = load_preset(backend)
        deployment = Deployment(
            model,
            cat.gpu(gpu),
            tp=tp,
            pp=pp,
            weight_precision=recipe.weights if precision == "bf16" else precision,
            kv_precision=recipe.kv_cache if kv_precision == "bf16" else kv_precision,
            fp8_weight_only=preset.fp8_weight_only,
            linear_state_precision=preset.linear_state_precision,
            mxfp4_expert_alignment=preset.mxfp4_expert_alignment(cat.gpu(gpu), None),
        )
        context = LatencyContext.of(preset.name, user_profile_roots(), user_tables_dir())
        figures.update(deployment_figures(deployment, preset, context))
    _emit(figures, json_out)


#: Standard batches ``models show --gpu`` prices: name → ``(cache_len, new_tokens)`` pairs.
STANDARD_BATCHES: dict[str, list[tuple[int, int]]] = {
    "prefill_1x4096": [(0, 4096)],  # one 4096-token prompt, nothing cached
    "decode_64x4096": [(4096, 1)] * 64,  # 64 requests, 4096 cached tokens each, one new token
}


def deployment_figures(
    deployment: Deployment, preset: BackendPreset, context: LatencyContext | None = None
) -> dict[str, Any]:
    """``deployment``, its memory ``fit`` under ``preset``, and ``step_ms`` per latency model.

    The step times are priced as the simulator prices them under ``preset``: on its engine's
    kernel tables and calibration (``context``; by default the preset's engine, shipped
    profiles only). ``step_ms[name]`` holds the milliseconds of each ``STANDARD_BATCHES``
    entry; a latency model that cannot price this deployment gets ``None`` times and its
    reason under ``error``.
    Warnings a model raises (e.g. a calibration borrowed from another GPU) are collected under
    ``step_notes[name]`` instead of being printed.
    """
    fit = memory_fit(deployment, preset.memory_params(deployment.tp, gpu=deployment.gpu))
    step_ms: dict[str, dict[str, Any]] = {}
    notes: dict[str, list[str]] = {}
    for name in LATENCY_MODELS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                latency = make_latency_model(
                    name,
                    deployment,
                    params=preset.compose_params(),
                    context=context or LatencyContext.of(preset.name),
                )
                step_ms[name] = {
                    batch: latency.step_seconds(pairs) * 1e3
                    for batch, pairs in STANDARD_BATCHES.items()
                }
            except InputError as err:
                step_ms[name] = dict.fromkeys(STANDARD_BATCHES) | {"error": str(err)}
        messages = list(dict.fromkeys(str(w.message) for w in caught))
        if messages:
            notes[name] = messages
    figures: dict[str, Any] = {
        "deployment": {
            "gpu": deployment.gpu.name,
            "tp": deployment.tp,
            **(
                {"pp": deployment.pp, "stage_layers": list(deployment.stage_layers())}
                if deployment.pp > 1
                else {}
            ),
            "weight_precision": deployment.weight_precision,
            "weight_only": deployment.weight_only,
            "kv_precision": deployment.kv_precision,
            "backend": preset.name,
        },
        "fit": {
            "fits": fit.fits,
            "reason": fit.reason,
            "kv_tokens": fit.kv_tokens,
            "kv_blocks": fit.kv_blocks,
            "block_tokens": preset.kv_block_tokens,
            "weights_gib_per_gpu": fit.weights_gib_per_gpu,
            "reserve_gib_per_gpu": fit.reserve_gib_per_gpu,
            "usable_gib_per_gpu": fit.usable_gib_per_gpu,
            "kv_gib_per_gpu": fit.kv_gib_per_gpu,
            "kv_bytes_per_token_per_gpu": fit.kv_bytes_per_token_per_gpu,
        },
        "step_ms": step_ms,
    }
    if notes:
        figures["step_notes"] = notes
    return figures


# ----- rendering ---------------------------------------------------------------------------------
def _emit(figures: dict[str, Any], json_out: bool) -> None:
    """Print ``figures`` as JSON, or as a two-column table with one block per nested dict."""
    if json_out:
        print_json(figures)
        return
    title = str(figures.get("name", ""))
    table = Table(title=escape(title), title_justify="left", show_header=False)
    table.add_column("figure", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    scalars = {k: v for k, v in figures.items() if not isinstance(v, dict) and k != "name"}
    for key, value in scalars.items():
        table.add_row(key, _fmt(value))
    for section, values in figures.items():
        if isinstance(values, dict):
            table.add_section()
            table.add_row(f"[underline]{escape(section)}[/underline]", "")
            _add_rows(table, values, indent="  ")
    console.print(table)


def _add_rows(table: Table, values: dict[str, Any], indent: str) -> None:
    """One row per entry; a nested dict (``step_ms`` per latency model) becomes an indented
    block under its key, a list one value per line."""
    for key, value in values.items():
        if isinstance(value, dict):
            table.add_row(f"{indent}{escape(str(key))}", "")
            _add_rows(table, value, indent + "  ")
        elif isinstance(value, list):
            table.add_row(f"{indent}{escape(str(key))}", "\n".join(_fmt(v) for v in value))
        else:
            table.add_row(f"{indent}{escape(str(key))}", _fmt(value))


def _fmt(value: Any) -> str:
    """Table text: thousands separators, at most 3 decimals, yes/no, markup escaped."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        text = f"{value:,.3f}".rstrip("0").rstrip(".")
        return text if text not in ("", "-0") else "0"
    return escape(str(value))
