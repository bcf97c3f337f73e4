"""Warnings as one ``note: ...`` line each on stderr, said once per subject.

The simulator says through Python warnings what it approximated (a kernel shape the profile
table lacks, a GPU without profiles). A user reads what was approximated, not where in kvplan it
was said, so a warning becomes one line without Python's file, line and source line. An
optimisation run prices dozens of layouts, and each of them asks the kernel table for shapes of
its own (heads per GPU change with TP and attention DP), which made 25 near-identical lines for
one model on two GPUs: a profile-table fallback is therefore said once per table, GPU and kind
of kernel (the first shape met stands for the rest); every other warning once per text.
"""

from __future__ import annotations

import re
from typing import Any

from optimizer.cli._output import err_console

__all__ = ["NotePrinter"]

#: "profile table (h200_sxm) timing h200_sxm: context attention (heads 64, ...) not profiled
#: ...": the subject is the table, the GPU and the kernel named before the first parenthesis
#: or number.
_TABLE_NOTE = re.compile(r"^(profile table \([^)]*\) timing [^:]*: [a-zA-Z\- ]+?)(?= \(| \d| not )")


class NotePrinter:
    """A ``warnings.showwarning`` replacement: one ``note:`` line per subject (module doc)."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def __call__(  # noqa: PLR0917  (warnings.showwarning's signature)
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        del category, filename, lineno, file, line
        text = str(message).replace("\r", " ").replace("\n", " ")
        match = _TABLE_NOTE.match(text)
        subject = match.group(1) if match else text
        if subject in self._said:
            return
        self._said.add(subject)
        if match:
            text = text.replace("(said once per model)", "(said once per GPU and kernel)")
        err_console.print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)
