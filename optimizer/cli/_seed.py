"""The ``--seed`` flag's range check, alone in a module so that commands which need nothing
else of ``_preflight`` (``replay``) do not import the catalog and search-space stack for it."""

from __future__ import annotations

from slo.inputfile import InputError

__all__ = ["SEED_MAX", "check_seed"]

#: Largest seed: numpy's and Optuna's generators take 0 … 2**32 − 1.
SEED_MAX = 2**32 - 1


def check_seed(seed: int, flag: str = "--seed") -> None:
    """``InputError`` unless ``seed`` is in 0 … 2**32 − 1."""
    if not 0 <= seed <= SEED_MAX:
        raise InputError(f"{flag} {seed}: expected an integer from 0 to {SEED_MAX} (2^32 - 1)")
