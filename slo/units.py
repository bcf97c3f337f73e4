"""Unit conventions every layer shares, defined once (the ground floor: imports nothing).

``HOURS_PER_MONTH``: hours in an average month, 8760 / 12 = 730. The catalog's monthly storage
prices, the SLO file's ``usd_per_month`` budget, and the reports' monthly costs all convert
with it.
"""

from __future__ import annotations

__all__ = ["HOURS_PER_MONTH"]

#: Hours in an average month (8760 / 12).
HOURS_PER_MONTH = 730.0
