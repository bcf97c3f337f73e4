"""Optuna studies: samplers by name, storages by URL, resume, and a guard against mixing spaces.

Storage URLs (``--storage``):

- none: in memory (one process; nothing survives the run);
- ``sqlite:///path.db``: a file, resumable, safe for several processes on one machine;
- ``journal:///path.log`` or a path ending in ``.log``/``.journal``: Optuna's journal file;
- ``postgresql://user:pass@host/db`` or ``mysql://...``: Optuna's RDB storage, the distributed
  engine — many workers on many machines join with the same ``--study`` name.

A study records a fingerprint of what defines its trials (space, SLO, workload, simulator
settings). Re-running the same command resumes it (only the missing trials run); a different
definition under an existing study name is refused, never mixed into it.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from optimizer.picks import metric_names
from slo.inputfile import InputError

__all__ = [
    "CONSTRAINTS_ATTR",
    "FINGERPRINT_ATTR",
    "SAMPLERS",
    "AskTellGridSampler",
    "fingerprint",
    "grid_exhausted",
    "make_sampler",
    "make_storage",
    "open_study",
]

#: User attribute holding a trial's constraint values (≤ 0 feasible, Optuna's convention); the
#: objective also sets them with ``Trial.set_constraint``, which is what the samplers read.
CONSTRAINTS_ATTR = "constraints"
#: TPE's random start (Optuna's default is 10): 5 gave a better worst case over 100 seeds.
TPE_STARTUP_TRIALS = 5
#: NSGA-II population size (see ``_nsga2``).
NSGA2_POPULATION = 16
#: Second looks at a new RDB database whose tables another process was creating meanwhile.
_SCHEMA_RACE_RETRIES = 3
#: What losing that race says (PostgreSQL, MySQL, SQLite).
_SCHEMA_RACE_MARKS = ("duplicate key", "already exists", "UNIQUE constraint")
#: Study user attribute holding the definition fingerprint.
FINGERPRINT_ATTR = "kvplan_fingerprint"


def _nsga2(seed: int, grid: dict[str, list[Any]]) -> optuna.samplers.BaseSampler:
    del grid
    # A population of 16 (Optuna's default is 50) lets a study of a few dozen trials evolve
    # for several generations instead of sampling at random throughout.
    # Mutation 0.5: on small categorical dimensions crossover mostly re-creates a parent
    # (bench/search_quality.py: +0.02 hypervolume fraction at 20% of the grid).
    return optuna.samplers.NSGAIISampler(
        seed=seed, population_size=NSGA2_POPULATION, mutation_prob=0.5
    )


def _tpe(seed: int, grid: dict[str, list[Any]]) -> optuna.samplers.BaseSampler:
    del grid
    with warnings.catch_warnings():  # ``group`` is "experimental" since Optuna 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=TPE_STARTUP_TRIALS,
            multivariate=True,
            group=True,
        )


def _gp(seed: int, grid: dict[str, list[Any]]) -> optuna.samplers.BaseSampler:
    del grid
    try:
        import scipy  # noqa: F401, PLC0415  (optional dependencies, checked on use)
        import torch  # noqa: F401, PLC0415
    except ImportError as err:
        raise InputError(
            f"the gp sampler needs PyTorch and SciPy ({err.name} is missing); install them "
            "with: pip install 'kvplan[gp]'"
        ) from None
    # ``deterministic_objective`` is "experimental": a notice for library users that each
    # worker process (which has no filter of the parent's) would print on stderr.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.GPSampler(
            seed=seed,
            deterministic_objective=True,
            warn_independent_sampling=False,
        )


def _random(seed: int, grid: dict[str, list[Any]]) -> optuna.samplers.BaseSampler:
    del grid
    return optuna.samplers.RandomSampler(seed=seed)


class AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler for an ask-and-tell loop: it does not stop the study itself.

    ``GridSampler.after_trial`` calls ``Study.stop()`` once the grid is walked, which Optuna
    allows only inside ``Study.optimize``; kvplan's worker loop asks and tells
    (``optimizer.run.run_trials``) and ends on ``grid_exhausted`` instead.
    """

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        del study, trial, state, values


def grid_exhausted(study: optuna.Study) -> bool:
    """True when ``study`` walks a grid and every point of it has a trial (running or done)."""
    sampler = study.sampler
    return isinstance(sampler, optuna.samplers.GridSampler) and sampler.is_exhausted(study)


def _grid(seed: int, grid: dict[str, list[Any]]) -> optuna.samplers.BaseSampler:
    try:
        return AskTellGridSampler(grid, seed=seed)
    except (ValueError, TypeError) as err:
        raise InputError(f"grid sampler: {err}") from None


#: Sampler factories by CLI name: ``factory(seed, grid) -> sampler``.
SAMPLERS: dict[str, Callable[[int, dict[str, list[Any]]], optuna.samplers.BaseSampler]] = {
    "nsga2": _nsga2,
    "tpe": _tpe,
    "gp": _gp,
    "random": _random,
    "grid": _grid,
}


def make_sampler(
    name: str, seed: int, grid: dict[str, list[Any]] | None = None
) -> optuna.samplers.BaseSampler:
    """The sampler called ``name``; ``grid`` (values per dimension) is needed by ``grid`` only."""
    try:
        factory = SAMPLERS[name]
    except KeyError:
        raise InputError(f"unknown sampler '{name}'; known: {', '.join(SAMPLERS)}") from None
    return factory(seed, grid or {})


def make_storage(url: str | None) -> BaseStorage:
    """A storage for ``url`` (see the module docstring); one-line ``InputError`` if unusable."""
    if not url:
        return InMemoryStorage()
    if url.startswith("journal:///") or url.endswith((".log", ".journal")):
        path = Path(url.removeprefix("journal://"))
        if not path.parent.exists():
            raise InputError(f"--storage {url}: directory {path.parent} does not exist")
        return JournalStorage(JournalFileBackend(str(path)))
    if "://" not in url:
        raise InputError(
            f"--storage {url}: expected sqlite:///FILE, journal:///FILE, postgresql://... "
            "or mysql://..."
        )
    shown = _without_password(url)
    engine_url = url
    # SQLAlchemy's default PostgreSQL driver is psycopg2; kvplan ships psycopg 3.
    if url.startswith("postgresql://"):
        engine_url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    for attempt in range(_SCHEMA_RACE_RETRIES + 1):
        try:
            # No Optuna heartbeat: kvplan's own (``optimizer.claims``) covers every storage,
            # and it is what fails the trials of a killed worker.
            return RDBStorage(engine_url)
        except Exception as err:  # SQLAlchemy raises many driver-specific types
            text = str(err).strip()
            # Processes opening a new database at once race to create Optuna's tables; the
            # loser sees a unique-key violation and finds the tables on a second look.
            racing = any(mark in text for mark in _SCHEMA_RACE_MARKS)
            if racing and attempt < _SCHEMA_RACE_RETRIES:
                time.sleep(0.2 + 0.3 * attempt)
                continue
            first = text.splitlines()[0] if text else type(err).__name__
            raise InputError(f"--storage {shown}: cannot open: {first}") from None
    raise AssertionError("unreachable")


def _without_password(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages."""
    try:
        from sqlalchemy.engine import make_url  # noqa: PLC0415  (only for RDB URLs)

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL has no password we could recognise
        return url


def fingerprint(definition: dict[str, Any]) -> str:
    """A stable hash of whatever defines a study's trials (canonical JSON, SHA-256)."""
    text = json.dumps(definition, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def open_study(
    *,
    name: str,
    storage: BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    directions: Sequence[str],
    definition: dict[str, Any],
) -> optuna.Study:
    """Create the study, or load it when ``name`` exists with the same definition.

    Raises ``InputError`` when the name exists with another definition or other directions.
    """
    digest = fingerprint(definition)
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        sampler=sampler,
        directions=[optuna.study.StudyDirection[d.upper()] for d in directions],
        load_if_exists=True,
    )
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if stored is None:
        study.set_user_attr(FINGERPRINT_ATTR, digest)
        study.set_user_attr("kvplan_definition", json.loads(json.dumps(definition, default=str)))
        with warnings.catch_warnings():  # experimental in Optuna 5; what the dashboard shows
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(metric_names(definition, directions))
    elif stored != digest:
        raise InputError(
            f"study '{name}' already exists in this storage with a different space, SLO, "
            "workload or settings; use another --study name (or the original files)"
        )
    if [d.name.lower() for d in study.directions] != [d.lower() for d in directions]:
        raise InputError(f"study '{name}' exists with other objective directions")
    return study
