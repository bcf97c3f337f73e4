"""What a finished trial of ``optimizer.objective`` holds, read back from the study's storage.

The objective stores its result on each trial as user attributes (``objective.py``'s module
docstring); these readers tell, from a ``FrozenTrial`` alone, whether a trial holds that
result (``is_evaluated``), whether it was a free repeat of an earlier configuration
(``is_repeat``, the ``REPEAT_ATTR`` attribute) and what share of one whole-workload simulation
it cost (``simulation_share``, the ``SHARE_ATTR`` attribute): 1 for a full simulation, 0 for a
point ruled out without simulating, the share of the requests that had arrived for one given up
part-way. The claims, the worker loop and the CLI count budgets and progress by them.

What this is not: the objective (``optimizer.objective``) or the record snapshots
(``optimizer.run.records_of``).
"""

from __future__ import annotations

from optuna.trial import FrozenTrial, TrialState

from optimizer.study import CONSTRAINTS_ATTR

__all__ = [
    "FINISHED_STATES",
    "REPEAT_ATTR",
    "SHARE_ATTR",
    "is_evaluated",
    "is_repeat",
    "simulation_share",
]

#: User attribute of a trial that repeated an earlier trial's configuration: that trial's number.
REPEAT_ATTR = "repeat_of"

#: User attribute (and metric) of a trial: the share of one whole-workload simulation it ran.
SHARE_ATTR = "simulation_share"


def is_repeat(trial: FrozenTrial) -> bool:
    """Whether ``trial`` repeated an earlier trial's configuration (it cost no simulation)."""
    return REPEAT_ATTR in trial.user_attrs


#: States of a trial this objective finished: COMPLETE (objective values) or PRUNED
#: (infeasible without a full simulation: constraints and reason, no values).
FINISHED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


def simulation_share(trial: FrozenTrial) -> float:
    """The share of one whole-workload simulation ``trial`` ran (module docstring), read from
    its attributes; a trial stored before the share was (a resumed older study): 0 when it
    simulated no request, else 1."""
    share = trial.user_attrs.get(SHARE_ATTR)
    if isinstance(share, int | float):
        return min(1.0, max(0.0, float(share)))
    simulated = trial.user_attrs.get("metrics", {}).get("simulated_requests")
    return 0.0 if simulated == 0 else 1.0


def is_evaluated(trial: FrozenTrial) -> bool:
    """Whether ``trial`` holds this objective's result (a finished trial that stored it:
    objective values when COMPLETE, the constraints it was stopped on when PRUNED)."""
    if trial.state == TrialState.COMPLETE:
        return trial.values is not None
    return trial.state == TrialState.PRUNED and CONSTRAINTS_ATTR in trial.user_attrs
