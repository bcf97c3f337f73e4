"""The contract every scheduler passes (``simulator/testing/scheduler.py``), over ``SCHEDULERS``."""

from __future__ import annotations

from typing import ClassVar

import pytest

from simulator.engine.scheduler import SCHEDULERS, ChunkedScheduler, SchedulerHost, StepPlan
from simulator.testing import scheduler as kit


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@pytest.mark.parametrize("check", sorted(kit.CHECKS))
def test_every_scheduler_passes_the_contract(check: str, name: str) -> None:
    kit.CHECKS[check](name)


def test_the_check_workload_makes_the_limits_bind() -> None:
    """Budget, cap and KV pressure all bind: the chunked scheduler preempts, and a scheduler
    that does not chunk prompts rejects the ones longer than the step budget."""
    records, _, _ = kit.serve_checked("chunked", 2)
    assert sum(r.preemptions for r in records) > 0
    _, recorder, _ = kit.serve_checked("decode_first", 2)
    assert recorder.n_rejected > 0


class _OverBudget(ChunkedScheduler):
    """A broken scheduler: one token over the step budget on the first decode it sees."""

    name: ClassVar[str] = "over_budget"

    def schedule(self, host: SchedulerHost) -> StepPlan:
        plan = super().schedule(host)
        if plan.tokens and sum(plan.tokens.values()) == host.max_batched_tokens:
            victim = next(iter(plan.tokens))
            plan.tokens[victim] += 1
        return plan


def test_the_contract_catches_a_scheduler_that_breaks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SCHEDULERS, _OverBudget.name, _OverBudget)
    with pytest.raises(AssertionError, match="tokens > budget 512"):
        kit.CHECKS["plans_respect_the_limits"]("over_budget")
