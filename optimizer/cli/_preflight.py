"""Checks of command-line flags and the files they name, run before any simulation or trial.

A study can run for hours; an input that is wrong from the start must fail in the first second
with one line, never after the run (results lost) nor inside trial 0 (an Optuna traceback in
front of the real message). ``preflight_optimize`` is that pass for ``kvplan optimize``; the
helpers serve ``simulate`` as well.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hardware.catalog import load_catalog
from hardware.schema import Catalog
from optimizer.cli._seed import SEED_MAX, check_seed
from optimizer.configs import to_config
from optimizer.space import SearchSpace, default_space_path, load_space
from optimizer.space_check import (
    check_latency_spec,
    check_setting,
    check_settings,
    check_space_values,
)
from optimizer.study import make_storage
from simulator.config import ServingConfig
from slo.inputfile import InputError, load_mapping

__all__ = [
    "SEED_MAX",
    "check_config_names",
    "check_finite_flags",
    "check_out_dir",
    "check_seed",
    "load_baseline",
    "preflight_optimize",
]


def check_finite_flags(flags: Mapping[str, Any]) -> None:
    """``InputError`` for a flag given as ``inf``/``nan`` (``flags``: flag name -> value)."""
    for flag, value in flags.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{flag} {value}: expected a finite number")


def check_out_dir(out: Path, flag: str = "--out") -> None:
    """Create ``out`` (a directory) now and check it is writable, so no run ends unsaved."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{flag} {out}: cannot create the directory: {err.strerror}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {out}: directory is not writable")


def _check_journal(url: str | None) -> None:
    """A journal file given to ``--storage`` must be a journal Optuna can read."""
    if not url or "://" in url.removeprefix("journal://"):
        return
    path = Path(url.removeprefix("journal://"))
    if not path.is_file():
        return  # a new journal (a missing directory is make_storage's message)
    try:
        make_storage(url).get_all_studies()  # the journal is replayed on opening
    except InputError:
        raise
    except Exception as err:  # the journal backend raises JSON, key and type errors
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"--storage {url}: not a readable Optuna journal ({first})") from None


def check_config_names(config: ServingConfig, catalog: Catalog, source: str) -> None:
    """The catalog, preset and latency-model names of a ``simulate`` config, naming ``source``
    (the config file) — a simulation would otherwise fail with the bare name."""
    try:
        catalog.model(config.model)
    except InputError as err:
        raise InputError(f"{source}: model: {err}") from None
    settings = {
        "gpu": config.gpu,
        "prefill.gpu": config.pool("prefill").gpu,
        "decode.gpu": config.pool("decode").gpu,
        "l3_tier": config.l3_tier,
        "backend": config.backend,
        "latency_model": config.latency_model,
    }
    for field, value in settings.items():
        if value is not None:
            check_setting(field.replace(".", "_"), value, catalog, source)


def load_baseline(path: Path, space: SearchSpace, catalog: Catalog) -> dict[str, Any]:
    """The ``--baseline`` settings, checked like a space's fixed settings and built once.

    Raises ``InputError`` naming the file for an unknown key, a value no configuration can take,
    another model than the space's, or settings that do not form a configuration.
    """
    data = load_mapping(path)
    if not data:
        raise InputError(f"{path}: expected configuration settings (gpu, tp, instances, ...)")
    model = data.pop("model", None)
    if model is not None and str(model).lower() != space.model.lower():
        raise InputError(
            f"{path}: model: {model!r} is not the space's model {space.model!r}; a baseline "
            "must serve the same model"
        )
    check_settings(data, catalog, str(path))
    try:
        to_config(space.model, data)  # what planning evaluates
    except ValueError as err:
        raise InputError(f"{path}: {str(err).removeprefix('configuration: ')}") from None
    return data


def preflight_optimize(
    *,
    space_path: str | None,
    catalog_path: str | None,
    sampler: str,
    seed: int,
    storage: str | None,
    latency: str | None,
    time_scale: float | None,
    out: Path | None,
    baseline: Path | None,
) -> dict[str, Any] | None:
    """Every check of ``kvplan optimize``'s flags and files; returns the baseline settings."""
    check_seed(seed)
    check_finite_flags({"--time-scale": time_scale})
    if latency is not None:
        check_latency_spec(latency, "--latency")
    source = space_path or str(default_space_path())
    space = load_space(source)
    catalog = load_catalog(catalog_path)
    check_space_values(space, catalog, source)
    if sampler == "grid":
        try:
            space.grid()
        except ValueError as err:
            raise InputError(f"{source}: {err} (the grid sampler needs finite values)") from None
    _check_journal(storage)
    if out is not None:
        check_out_dir(out)
    return None if baseline is None else load_baseline(baseline, space, catalog)
