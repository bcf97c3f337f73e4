"""Reading a silicon benchmark CSV: aggregated rows (``rows``) and disaggregated ones
(``disagg``) in file order, with the rows set aside and why.

Its own module so that both row parsers sit below it: ``disagg`` builds on
``rows``' number parsing, and this reader uses both.
"""

from __future__ import annotations

import csv
from pathlib import Path

from simulator.validation.silicon.disagg import parse_disagg_row
from simulator.validation.silicon.rows import (
    KNOWN_COLUMNS,
    REQUIRED_COLUMNS,
    Row,
    Skipped,
    check_header,
    parse_agg_row,
    skipped_row,
)
from simulator.validation.silicon.versions import with_release_bounds
from slo.inputfile import InputError

__all__ = ["read_silicon"]


def read_silicon(path: str | Path) -> tuple[list[Row], list[Skipped]]:
    """The rows of ``path`` (aggregated and disaggregated) and the skipped ones, in file order.

    Skipped: rows of another mode, aggregated rows whose ``silicon_concurrency`` contradicts
    their batch size, and disaggregated rows without per-role columns or a concurrency. A row
    that does not name its engine release gets the bound its export implies
    (``versions.with_release_bounds``). Raises ``InputError`` for a missing file, a missing
    column, or a value that is not the number its column needs (naming file, line and column).
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            check_header(path, header, KNOWN_COLUMNS, REQUIRED_COLUMNS, "a silicon benchmark CSV")
            rows: list[Row] = []
            skipped: list[Skipped] = []
            for record in reader:
                line = reader.line_num
                mode = (record.get("mode") or "").strip().lower()
                if mode in ("agg", "disagg"):
                    row = (
                        parse_agg_row(path, line, record)
                        if mode == "agg"
                        else parse_disagg_row(path, line, record, header)
                    )
                    if isinstance(row, str):
                        skipped.append(skipped_row(record, line, row))
                    else:
                        rows.append(row)
                else:
                    reason = f"mode '{mode or '(empty)'}' is neither agg nor disagg"
                    skipped.append(skipped_row(record, line, reason))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"{path}: cannot read as CSV: {err}") from None
    return with_release_bounds(rows), skipped
