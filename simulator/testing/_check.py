"""The kits' two primitives: a failed check, and "this call must raise"."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["fail_unless", "must_raise"]


def fail_unless(condition: bool, message: str) -> None:
    """``AssertionError(message)`` unless ``condition`` (an ``assert`` that ``-O`` keeps)."""
    if not condition:
        raise AssertionError(message)


def must_raise(
    error: type[BaseException], call: Callable[[], Any], *, match: str = "", what: str
) -> None:
    """``AssertionError`` naming ``what`` unless ``call()`` raises ``error`` whose message
    contains a match of the regular expression ``match``."""
    try:
        call()
    except error as err:
        fail_unless(
            re.search(match, str(err)) is not None,
            f"{what}: {type(err).__name__} {str(err)!r} does not match {match!r}",
        )
        return
    raise AssertionError(f"{what}: expected {error.__name__}, nothing was raised")
