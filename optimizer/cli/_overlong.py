"""``--overlong``: what ``simulate`` and ``optimize`` do with requests longer than the context.

``drop`` (default) removes them before simulating and says how many there were;
``count-as-miss`` lets the engine reject each (an SLO miss, the old behaviour); ``reject``
refuses the run (exit 2). ``simulator.cluster.overlong`` explains why dropping is the default.
"""

from __future__ import annotations

from typing import Annotated

import typer

from hardware.schema import Catalog
from optimizer.cli._output import err_console
from optimizer.workloads import check_overlong, overlong_sentence
from simulator.api import WorkloadBuilder
from simulator.cluster.overlong import OVERLONG_POLICIES, OverlongPolicy, OverlongTally
from slo.inputfile import InputError

__all__ = ["OverlongOpt", "overlong_policy", "overlong_scan"]

OverlongOpt = Annotated[
    str,
    typer.Option(
        "--overlong",
        help="Requests longer than the model's context: drop (default; reported, not SLO "
        "misses), count-as-miss, or reject (exit 2).",
    ),
]

_DONE = {
    "drop": "dropped before simulating",
    "count-as-miss": "counted as SLO misses (--overlong count-as-miss)",
}


def overlong_policy(value: str) -> OverlongPolicy:
    """``value`` as a policy name; ``InputError`` naming the choices otherwise."""
    if value not in OVERLONG_POLICIES:
        raise InputError(f"--overlong {value}: expected one of {', '.join(OVERLONG_POLICIES)}")
    return value


def overlong_scan(
    builder: WorkloadBuilder,
    model: str,
    catalog: Catalog,
    *,
    seed: int,
    policy: str,
    quiet: bool = False,
) -> OverlongTally:
    """Validate ``policy``, pre-scan the workload, say on stderr what happens to overlong ones."""
    checked = overlong_policy(policy)
    limit = catalog.model(model).max_context_tokens
    tally = check_overlong(builder, seed=seed, max_context_tokens=limit, policy=checked)
    if tally.n_overlong and not quiet:
        err_console.print(
            f"note: {overlong_sentence(tally)}: {_DONE[checked]}", markup=False, soft_wrap=True
        )
    return tally
