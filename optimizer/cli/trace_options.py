"""Options that ``kvplan replay`` and ``kvplan analyze`` share: the trace-reading flags and the
checks of their values (one-line ``InputError`` naming the flag)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated

import typer

from simulator.kvcache.cost import COST_MODEL_NAMES
from slo.inputfile import InputError

__all__ = ["BlockIdOpt", "CostModelOpt", "choice_of", "parse_block_count", "split_list"]

_MULTIPLIERS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_SIZE = re.compile(r"(\d+)([kmg]?)", re.IGNORECASE)

#: The trace-reading options ``replay`` and ``analyze`` share.
CostModelOpt = Annotated[
    str,
    typer.Option("--cost-model", help=f"Block cost by position: {', '.join(COST_MODEL_NAMES)}."),
]
BlockIdOpt = Annotated[
    str, typer.Option("--block-id", help="prefix: intern (parent, id) paths; raw: verbatim.")
]


def parse_block_count(text: str) -> int:
    """``"8k"`` -> 8192: a positive integer with an optional k/m/g suffix (×1024 each)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise InputError(
            f"--cache-size {text.strip()!r}: expected a positive number of blocks with an"
            " optional k/m/g suffix (×1024), e.g. 8k"
        )
    return int(match.group(1)) * _MULTIPLIERS[match.group(2).lower()]


def split_list(text: str) -> list[str]:
    """Comma-separated items, stripped, empty ones dropped, duplicates removed (order kept)."""
    return list(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))


def choice_of(option: str, value: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else ``InputError`` naming ``option``."""
    if value not in choices:
        raise InputError(f"{option} {value!r}: expected one of {', '.join(choices)}")
    return value
