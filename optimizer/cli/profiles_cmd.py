"""``kvplan profiles``: bring your own kernel profiles (``import``) and see which tables time what
(``list``).

``kvplan profiles import DIR --gpu GPU`` reads a directory of kernel profiles in the shipped
format (``simulator/latency/profiles.py``; files ``<engine>_<version>_<class>.csv[.gz]`` or
engine-neutral ``<class>.csv``), validates every file for every engine it serves (missing
columns, unknown dtypes and non-positive sizes or latencies are one-line errors naming the file,
line and column; nothing is copied then), and copies the files into the user's profile cache,
``<cache>/<gpu>/``. From then on ``simulate``, ``validate`` and ``optimize`` pass the cache to the
simulator, whose ``table`` and ``auto`` latency models prefer these files over the shipped ones,
class by class.

The cache is ``$XDG_CACHE_HOME/kvplan/profiles`` (``~/.cache/kvplan/profiles`` when unset), or
``--cache DIR``. It is found here, in the CLI, and handed to the simulator explicitly
(``ServingConfig.kernel_profiles_dir``); the simulator reads no environment.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from hardware.catalog import load_catalog
from hardware.schema import GpuSpec
from optimizer.cli._output import console, print_json
from optimizer.space import SearchSpace
from simulator.config import ServingConfig
from simulator.latency import latency_note
from simulator.latency.mla_table import MLA_PHASES, read_mla_profile
from simulator.latency.moe_table import read_moe_profile
from simulator.latency.profile_files import (
    ENGINES,
    LAYER_KINDS,
    MOE_KIND,
    PROFILE_KINDS,
    directory_files,
    file_engine,
    resolve_profile_files,
)
from simulator.latency.profiles import load_profiles
from simulator.latency.table import decode_rows_beyond_hbm
from slo.inputfile import InputError

__all__ = [
    "config_latency_notes",
    "import_profiles",
    "register",
    "space_latency_notes",
    "user_profile_roots",
    "user_profiles_dir",
    "user_profiles_root",
]

profiles_app = typer.Typer(
    help="Kernel profiles for the table latency model: import your own, list what is used.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``profiles`` command group to ``app``."""
    app.add_typer(profiles_app, name="profiles")


def user_profiles_root() -> Path:
    """The user's profile cache: ``$XDG_CACHE_HOME/kvplan/profiles``, else
    ``~/.cache/kvplan/profiles`` (it may not exist)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvplan" / "profiles"


def user_tables_dir() -> str:
    """Where built kernel tables are kept between runs (``ServingConfig.latency_cache_dir``):
    ``$XDG_CACHE_HOME/kvplan/tables``, else ``~/.cache/kvplan/tables`` (made on first write)."""
    return str(user_profiles_root().parent / "tables")


def user_profiles_dir() -> str | None:
    """The cache as the simulator takes it (``ServingConfig.kernel_profiles_dir``): its path
    when it exists, else None."""
    root = user_profiles_root()
    return str(root) if root.is_dir() else None


def user_profile_roots() -> list[str]:
    """``user_profiles_dir`` as a list of profile roots (empty when the cache does not exist)."""
    return [root] if (root := user_profiles_dir()) else []


def config_latency_notes(config: ServingConfig) -> list[str]:
    """The one-line latency notes (``simulator.latency.latency_note``) for every GPU of
    ``config``'s pools, in order, without repeats."""
    roots = [config.kernel_profiles_dir] if config.kernel_profiles_dir else []
    gpus = [config.gpu, config.pool("prefill").gpu, config.pool("decode").gpu]
    notes: list[str] = []
    for gpu in dict.fromkeys(g for g in gpus if g):
        note = latency_note(config.latency_model, gpu, config.backend, roots)
        if note and note not in notes:
            notes.append(note)
    return notes


def space_latency_notes(space: SearchSpace, latency_model: str | None) -> list[str]:
    """The latency notes for every GPU and backend a search space can pick (``latency_model``
    None: the space's, else ``ServingConfig``'s default)."""
    defaults = ServingConfig.model_fields

    def choices(name: str) -> list[str]:
        if name in space.dimensions:
            return [str(v) for v in space.dimensions[name].values()]
        return [str(space.fixed.get(name, defaults[name].default))]

    spec = latency_model or str(space.fixed.get("latency", defaults["latency_model"].default))
    roots = user_profile_roots()
    notes: list[str] = []
    for gpu in choices("gpu"):
        for backend in choices("backend"):
            note = latency_note(spec, gpu, backend, roots)
            if note and note not in notes:
                notes.append(note)
    return notes


def import_profiles(directory: Path, gpu: GpuSpec, cache: Path) -> list[dict[str, Any]]:
    """Validate ``directory``'s profiles and copy them to ``cache/<gpu>``; one summary row per
    engine and class, a generation-attention row with ``beyond_hbm``: its rows that read KV
    faster than ``gpu``'s HBM peak (``table.decode_rows_beyond_hbm``; the table model floors
    them). ``InputError`` (nothing copied) for a bad file or no profile at all."""
    engines = {file_engine(p.name) for p in directory.iterdir()} if directory.is_dir() else set()
    served = [e for e in ENGINES if e in engines] or [ENGINES[0]]
    rows: list[dict[str, Any]] = []
    copy: dict[str, Path] = {}
    for engine in served:
        # Not the MoE files other engines lend this one: each is validated and copied as its
        # own engine's (``lent=False``; they made the loop read a class it does not know).
        files = directory_files(directory, engine, moe=True, lent=False)
        if not files:
            continue
        # Validates every file: the kernel tables through the loader, a fused-MoE table (the
        # table model prices routed experts from it, ``moe_table.py``) and the MLA tables
        # (``mla_table.py``) through their readers.
        kernels = files.keys() - set(LAYER_KINDS)
        profiles = load_profiles(directory, gpu=gpu.name, engine=engine) if kernels else None
        for kind, path in files.items():
            if kind == MOE_KIND:
                n_rows = len(read_moe_profile(path))
            elif kind in MLA_PHASES:
                n_rows = len(read_mla_profile(path, MLA_PHASES[kind]))
            else:
                assert profiles is not None
                n_rows = len(profiles.frame(kind))
            copy[path.name] = path
            row: dict[str, Any] = {"engine": engine, "class": kind, "file": path.name,
                                   "rows": n_rows}  # fmt: skip
            if kind == "generation_attention" and profiles is not None:
                hbm = gpu.hbm_tb_per_s * 1e12
                beyond, worst = decode_rows_beyond_hbm(profiles.frame(kind), hbm)
                row["beyond_hbm"] = {"rows": beyond, "worst": worst}
            rows.append(row)
    if not rows:
        load_profiles(directory, gpu=gpu.name)  # raises the loader's one-line error
    target = cache / gpu.name
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, path in copy.items():
            shutil.copyfile(path, target / name)
    except OSError as err:
        raise InputError(f"{target}: cannot write: {err.strerror or err}") from None
    return rows


_CacheOpt = Annotated[
    Path | None,
    typer.Option("--cache", help="Profile cache (default: the user's cache).", show_default=False),
]
_CatalogOpt = Annotated[
    Path | None, typer.Option("--catalog", help="User catalog merged over the shipped one.")
]
_JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@profiles_app.command("import")
def import_command(
    directory: Annotated[
        Path, typer.Argument(help="Directory of kernel profile CSVs (the shipped format).")
    ],
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu", help="Catalog key of the GPU they were measured on.", show_default=False
        ),
    ] = None,
    cache: _CacheOpt = None,
    catalog: _CatalogOpt = None,
    json_out: _JsonOpt = False,
) -> None:
    """Validate a directory of kernel profiles and copy it into the user's profile cache."""
    if not directory.is_dir():
        raise InputError(f"{directory}: no such profile directory")
    spec = load_catalog(catalog).gpu(gpu or directory.resolve().name)
    name = spec.name
    root = cache or user_profiles_root()
    rows = import_profiles(directory, spec, root)
    if json_out:
        print_json({"gpu": name, "cache": str(root / name), "files": rows})
        return
    table = Table(title=f"Imported kernel profiles for {name} into {root / name}")
    for column in ("engine", "class", "file", "rows"):
        table.add_column(column, justify="right" if column == "rows" else "left")
    for row in rows:
        table.add_row(row["engine"], row["class"], row["file"], str(row["rows"]))
    console.print(table)
    for row in rows:
        beyond = row.get("beyond_hbm", {})
        if beyond.get("rows"):
            console.print(
                f"note: {row['file']}: {beyond['rows']} rows read KV faster than {name}'s HBM "
                f"peak (up to {beyond['worst']:.2f}x on reads over 512 MB), which no serving "
                "step can do (the collector's sequences may share KV pages); the table model "
                "takes the HBM rate for them",
                markup=False, highlight=False,
            )  # fmt: skip


@profiles_app.command("list")
def list_command(
    cache: _CacheOpt = None,
    catalog: _CatalogOpt = None,
    json_out: _JsonOpt = False,
) -> None:
    """Which profile files time each catalog GPU and engine (imported before shipped)."""
    root = cache or user_profiles_root()
    rows: list[dict[str, Any]] = []
    for gpu in load_catalog(catalog).gpus:
        for engine in ENGINES:
            located = resolve_profile_files(gpu, engine, [root])
            files = located.files if located else {}
            rows.append(
                {
                    "gpu": gpu,
                    "engine": engine,
                    "model": "table" if "gemm" in files else "roofline",
                    **{kind: str(files[kind]) if kind in files else None for kind in PROFILE_KINDS},
                }
            )
    if json_out:
        print_json({"cache": str(root), "tables": rows})
        return
    table = Table(title=f"Kernel tables ('auto' latency model); user cache {root}")
    for column in ("gpu", "engine", "model", "GEMM profile", "from"):
        table.add_column(column)
    for row in rows:
        paths = [Path(row[k]) for k in PROFILE_KINDS if row[k]]
        origin = {"imported" if p.is_relative_to(root) else "shipped" for p in paths}
        gemm = Path(row["gemm"]).name if row["gemm"] else "—"
        table.add_row(
            row["gpu"], row["engine"], row["model"], gemm, " + ".join(sorted(origin)) or "—"
        )
    console.print(table)
