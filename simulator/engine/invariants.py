"""Consistency checks of one engine instance, for tests (``check_invariants=True``).

What is checked: each queue holds only requests in its state and no request is in two queues;
token progress is within bounds; ``kv_room`` is no more than the blocks held cover; no request
that has produced its last token here is still queued; the running queue respects
``max_running``; pins and private blocks of every tier equal what the requests hold and no tier
exceeds its capacity (``KVManager.check``). It walks every request, so it is far too slow for
normal runs. ``check_split`` checks that the shapes a scheduler gathered for the step pricer
(``StepPlan.split``) are the ones the pricer would take from the batch itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.engine.request import PREFETCHING, RUNNING, SENDING, SWAPPED, WAITING
from simulator.engine.steps import split_of
from simulator.latency.batch import split_groups

if TYPE_CHECKING:
    from simulator.engine.cohort import DecodeCohort
    from simulator.engine.host import Host
    from simulator.engine.request import EngineRequest
    from simulator.engine.scheduler import StepPlan

__all__ = ["check_instance", "check_split"]


def check_instance(inst: Host) -> None:
    """Raise ``AssertionError`` naming the first inconsistency of ``inst`` found."""
    expected = (
        (inst.prefetching.values(), PREFETCHING),
        (inst.waiting, WAITING),
        (inst.running, RUNNING),
        (inst.swapped, SWAPPED),
        (inst.sending.values(), SENDING),
    )
    seen: set[int] = set()
    held: list[EngineRequest] = []
    for queue, state in expected:
        for req in queue:
            held.append(req)
            if req.state != state:
                raise AssertionError(f"{req} in the wrong queue (expected state {state})")
            if id(req) in seen:
                raise AssertionError(f"{req} is in two queues")
            seen.add(id(req))
            if not 0 <= req.processed <= req.prompt_len + req.generated:
                raise AssertionError(f"{req}: processed out of range")
            # A PD prefill waiting to send has produced its one token here, by design.
            if state != SENDING and req.generated >= req.stop_at:
                raise AssertionError(f"{req}: finished but still queued")
            holds_l1 = state in (RUNNING, SENDING)
            if req.kv_room > (_room(req, inst.block_tokens) if holds_l1 else 0):
                raise AssertionError(f"{req}: kv_room {req.kv_room} beyond the blocks it holds")
    if len(inst.running) > inst.max_running:
        raise AssertionError("more running requests than max_running")
    inst.kv.check(held)


def _room(req: EngineRequest, block_tokens: int) -> int:
    """Tokens the L1 blocks a running ``req`` holds cover (``kv_room``'s exact value)."""
    n_prompt = len(req.blocks)
    return (n_prompt + req.n_private) * block_tokens if req.n_pinned == n_prompt else 0


def check_split(plan: StepPlan, cohort: DecodeCohort | None = None) -> None:
    """Raise ``AssertionError`` unless ``plan.split`` (when gathered) equals the split of
    ``plan.tokens`` (``steps.split_of``), lists in batch order; its first ``n_bucketed``
    requests must be ``cohort``'s members, one token each, bucketed by their eager KV
    lengths (``DecodeCohort.processed_of``)."""
    split = plan.split
    if split is None:
        return
    items = list(plan.tokens.items())
    n = split.n_bucketed
    if (split.kv_lens, split.chunks, split.chunk_tokens) != split_of(dict(items[n:])):
        raise AssertionError(f"the scheduler's step split disagrees with its batch: {plan}")
    if not n:
        return
    if cohort is None or [req for req, _ in items[:n]] != list(cohort.members):
        raise AssertionError("the bucketed head of the batch is not the decode cohort")
    if any(tokens != 1 for _, tokens in items[:n]):
        raise AssertionError("a decode cohort member is given more than one token")
    lens = [cohort.processed_of(req) + 1 for req, _ in items[:n]]
    if tuple(split.bucketed) != split_groups(lens, [])[1]:
        raise AssertionError("the decode cohort's buckets disagree with its members' KV")
