"""Make the kernel profiles that ship in ``hardware/data/profiles/`` from the full measured set.

    python bench/ship_profiles.py [--source ../shared/data/profiles] [--out hardware/data/profiles]

For every GPU directory of ``--source`` and every engine (``profile_files.ENGINES``), the files
that serve it (``profile_files.directory_files``: newest version per class; NCCL is shared) are
cut down to what the catalog's models need, in the same CSV format (columns unchanged):

- GEMM rows at the ``(n, k)`` grid points bracketing the catalog models' layers at TP 1, 2, 4, 8
  (``fit.catalog_shape_filter``) and at the smallest ``(n, k)`` (the launch credit of grouped
  GEMMs, ``compose.py``); every ``m`` and dtype;
- attention rows of the catalog models' per-GPU head configurations at those TPs, without
  sliding-window rows; of several kernels that measured one shape only the one the loader keeps
  (``profiles.source_rank``, bf16 attention math first);
- NCCL all-reduce rows in 16-bit dtypes;
- fused-MoE rows (``*_moe.csv.gz``) of the catalog's MoE shapes (hidden, expert width, top-k,
  expert count) with balanced routing, every dtype, split and token count, of the one kernel
  per shape the loader keeps (``moe_table.read_moe_profile``), and the Marlin MXFP4 layers of
  any shape (the references ``moe_table.MoeTable.marlin_layer`` carries to a model's shape);
- MLA attention-core rows (``*_context_mla`` / ``*_generation_mla``) at the per-GPU head counts
  of the catalog's MLA models of the measured latent shape (``mla_table.measured_mla_shape``)
  at TP 1 to 64, context rows without a cached prefix;
- latencies rounded to 4 significant digits (0.05% at most; kernel timings repeat to ~1-3%).

Files are written gzipped with ``mtime=0`` so the bytes are reproducible; the script prints rows
kept per file and the total size. Whole-module MLA files (``*_mla_*_module``) are not shipped
(the latency model composes the projections around the attention core).
"""

from __future__ import annotations

import argparse
import gzip
import io
from pathlib import Path

import numpy as np
import pandas as pd

from hardware.catalog import shipped_catalog
from hardware.schema import ModelSpec
from simulator.latency.fit import ShapeFilter, catalog_shape_filter
from simulator.latency.mla_table import measured_mla_shape
from simulator.latency.moe_table import MARLIN_DTYPES, MOE_SOURCE_PREFERENCE
from simulator.latency.profile_files import (
    ENGINES,
    LAYER_KINDS,
    MLA_KINDS,
    MOE_KIND,
    PROFILE_KINDS,
    directory_files,
)
from simulator.latency.profiles import load_profiles, normalise_dtype, source_rank

ROOT = Path(__file__).resolve().parents[1]
SHAPE = {
    "gemm": ["gemm_dtype", "m", "n", "k"],
    "context_attention": [
        "batch_size",
        "isl",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
    ],
    "generation_attention": [
        "batch_size",
        "step",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
    ],
}


def _round(values: pd.Series, digits: int = 4) -> pd.Series:
    x = values.to_numpy(dtype=float)
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(np.abs(x))))
    return pd.Series(np.round(x * scale) / scale, index=values.index)


def _preferred(raw: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The rows of the one kernel per shape the loader keeps."""
    attn = raw["attn_dtype"].map(normalise_dtype) != "bf16" if "attn_dtype" in raw else False
    source = raw.get("kernel_source", pd.Series("", index=raw.index)).astype(str)
    rank = pd.DataFrame(
        {"attn": attn, "rank": source.map(source_rank), "name": source.str.lower()},
        index=raw.index,
    )
    choice = rank["attn"].astype(int).astype(str) + "|" + rank["name"]
    ordered = raw.assign(_a=rank["attn"], _r=rank["rank"], _n=rank["name"], _c=choice)
    ordered = ordered.sort_values(["_a", "_r", "_n"], kind="stable")
    best = ordered.groupby(keys, sort=False)["_c"].transform("first")
    kept = ordered[ordered["_c"] == best].drop(columns=["_a", "_r", "_n", "_c"])
    return kept.sort_index()


def _moe_rows(raw: pd.DataFrame, models: list[ModelSpec]) -> pd.DataFrame:
    """The balanced-routing rows of the catalog's MoE shapes, of each shape's preferred kernel,
    and of every shape the Marlin MoE kernel timed in a format it runs for a catalog precision
    (``moe_table.MARLIN_DTYPES``: the references ``MoeTable.marlin_layer`` carries)."""
    shapes = {
        (m.hidden_size, m.expert_ffn_size, m.experts_per_token, m.num_experts)
        for m in models
        if m.is_moe
    }
    key = zip(raw["hidden_size"], raw["inter_size"], raw["topk"], raw["num_experts"], strict=True)
    marlin = raw["kernel_source"].astype(str).str.lower().str.contains("marlin") & raw[
        "moe_dtype"
    ].astype(str).str.lower().str.endswith(tuple(MARLIN_DTYPES.values()))
    catalog = pd.Series([tuple(int(v) for v in k) in shapes for k in key], index=raw.index)
    raw = raw[catalog | marlin]
    raw = raw[raw["distribution"].astype(str) == "balanced"]
    source = raw["kernel_source"].astype(str).str.lower()
    rank = source.map(
        lambda name: next(
            (i for i, w in enumerate(MOE_SOURCE_PREFERENCE) if w in name),
            len(MOE_SOURCE_PREFERENCE),
        )
    )
    ordered = raw.assign(_r=rank, _n=source).sort_values(["_r", "_n"], kind="stable")
    cols = ["moe_dtype", "hidden_size", "inter_size", "topk", "num_experts"]
    cols += ["moe_tp_size", "moe_ep_size"]
    best = ordered.groupby(cols, sort=False)["_n"].transform("first")
    return ordered[ordered["_n"] == best].drop(columns=["_r", "_n"]).sort_index()


def _mla_rows(raw: pd.DataFrame, models: list[ModelSpec]) -> pd.DataFrame:
    """MLA rows at the catalog's MLA models' heads per GPU at TP 1-64 (module doc)."""
    heads = {
        m.num_attention_heads // tp
        for m in models
        if measured_mla_shape(m)
        for tp in (1, 2, 4, 8, 16, 32, 64)
        if m.num_attention_heads % tp == 0
    }
    keep = raw["num_heads"].astype(int).isin(heads)
    if "isl" in raw and "step" in raw and raw["op_name"].astype(str).str.contains("context").any():
        keep &= raw["step"].astype(float) == 0
    return raw[keep]


def _cut(
    kind: str, raw: pd.DataFrame, shapes: ShapeFilter, models: list[ModelSpec]
) -> pd.DataFrame:
    """The rows of one profile file that ship (module doc)."""
    if kind == "gemm":
        # and the smallest shape: the launch credit of grouped GEMMs (compose.py)
        smallest = (float(raw["n"].min()), float(raw["k"].min()))
        keep = shapes.gemm_nk | {smallest}
        nk = zip(raw["n"].astype(float), raw["k"].astype(float), strict=True)
        raw = raw[[pair in keep for pair in nk]]
    elif kind == MOE_KIND:
        raw = _moe_rows(raw, models)
    elif kind in MLA_KINDS:
        raw = _mla_rows(raw, models)
    elif kind == "nccl":
        half = raw["nccl_dtype"].map(normalise_dtype).isin(["fp16", "bf16"])
        raw = raw[(raw["op_name"] == "all_reduce") & half]
    else:
        if "window_size" in raw:
            raw = raw[raw["window_size"] == 0]
        if kind == "context_attention" and "step" in raw:
            raw = raw[raw["step"] == 0]
        heads = zip(
            raw["num_heads"].astype(float),
            raw["num_key_value_heads"].astype(float),
            raw["head_dim"].astype(float),
            strict=True,
        )
        raw = raw[[cfg in shapes.head_configs for cfg in heads]]
    return _preferred(raw, SHAPE[kind]) if kind in SHAPE else raw


def ship(source: Path, out: Path, kinds: set[str] | None = None) -> None:
    """Write the shipped files for every GPU of ``source`` under ``out`` (of the classes in
    ``kinds`` only, when given: a new class ships without re-cutting the others)."""
    models = list(shipped_catalog().models.values())
    total = 0
    for gpu_dir in sorted(p for p in source.iterdir() if p.is_dir()):
        target = out / gpu_dir.name
        target.mkdir(parents=True, exist_ok=True)
        for engine in ENGINES:
            files = directory_files(gpu_dir, engine, moe=True)
            if "gemm" not in files:
                continue
            shapes = catalog_shape_filter(models, load_profiles(gpu_dir, engine=engine))
            for kind, path in files.items():
                if kinds and kind not in kinds:
                    continue
                if kind not in (*PROFILE_KINDS, *LAYER_KINDS):  # another engine's, lent
                    continue
                raw = _cut(kind, pd.read_csv(path, keep_default_na=False), shapes, models)
                if not len(raw):  # a MoE file without the catalog's shapes
                    continue
                raw = raw.assign(latency=_round(raw["latency"]))
                buffer = io.BytesIO()
                with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as gz:
                    gz.write(raw.to_csv(index=False).encode())
                dest = target / (path.name if path.name.endswith(".gz") else f"{path.name}.gz")
                if not dest.exists() or dest.read_bytes() != buffer.getvalue():
                    dest.write_bytes(buffer.getvalue())
                size = len(buffer.getvalue())
                total += size if engine == ENGINES[0] or kind != "nccl" else 0
                print(f"{gpu_dir.name}/{dest.name}: {len(raw)} rows, {size / 1024:.0f} KiB")
    print(f"total {total / 1e6:.2f} MB")


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared/data/profiles")
    parser.add_argument("--out", type=Path, default=ROOT / "hardware/data/profiles")
    parser.add_argument(
        "--kinds",
        default="",
        help="Comma-separated classes to write (gemm, context_mla, moe, ...; default: all).",
    )
    args = parser.parse_args()
    ship(args.source, args.out, kinds={k.strip() for k in args.kinds.split(",") if k.strip()})


if __name__ == "__main__":
    main()
