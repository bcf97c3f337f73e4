"""KV admission control: the future KV growth an engine sets aside before it admits a request.

Every engine admits a request only if L1 has room for what it computes in its first step. Some
also hold back room for what the running requests (and the new one) will still write, so that
decodes later run without preempting anyone. Policies (``KvAdmission``; the backend preset
chooses, ``ServingConfig.kv_admission`` overrides):

- ``on_demand`` (vLLM): nothing is set aside; blocks are allocated as tokens are computed and
  the tail of the running queue is preempted when L1 runs out.
- ``reserve_full`` (TensorRT-LLM's default capacity scheduler, ``GUARANTEED_NO_EVICT``): a
  request is admitted only if L1 can also hold every block that it and every running request
  will still need until they finish (prompt plus the whole output). Decodes then never
  preempt; concurrency is bounded by ``L1 / (prompt + output)`` rather than by what is in use.
- ``reserve_estimate`` (SGLang's ``PrefillAdder``): the new request counts its uncomputed
  prompt plus its whole output (clipped at ``CLIP_OUTPUT_TOKENS``); each running request counts
  its uncomputed prompt plus ``ratio`` × its remaining output (same clip). ``ratio`` starts at
  ``INIT_RATIO``, falls by ``(INIT_RATIO − MIN_RATIO) / DECAY_STEPS`` per decode step to
  ``MIN_RATIO``, returns to ``INIT_RATIO`` when the engine is idle, and after a preemption
  (SGLang's decode retraction) becomes ``(decoded + RETRACT_STEPS × n) / (output + 1)`` over
  the requests still running, at most 1. Constants: SGLang's defaults
  (``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7, ``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` 0.14,
  ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` 600, ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`` 4096,
  ``SGLANG_RETRACT_DECODE_STEPS`` 20; ``schedule_conservativeness`` 1).
- ``reserve_timeline`` (SGLang's ``PrefillAdder.add_one_req_ignore_eos``, the path it takes
  for a request that ignores end-of-sequence tokens while the radix cache is off, e.g.
  ``--disable-radix-cache`` under a benchmark client's ``--ignore-eos``): every request, the
  new one included, is set to produce its whole remaining output (ratio 1); sorted by what they
  have left, each one's finish frees its prompt and output so far, and the request is admitted
  only if at every finish the free memory still exceeds the growth of the requests not yet
  finished by then (plus ``TIMELINE_RESERVE_TOKENS`` each). In tokens, with ``F`` free now,
  ``U`` the prompt tokens every request has still to compute, requests sorted by remaining
  output ``left_0 ≤ left_1 ≤ …`` (``n`` of them with the new one), ``held_j`` = prompt plus
  output so far: admit iff for every ``i``,
  ``F − U + Σ_{j<i} held_j − left_i · (n − i) > TIMELINE_RESERVE_TOKENS · (n − i)``.
  Decodes then never run out of memory however long every request runs. SGLang first checks,
  as on the general path, that the new prompt fits beside the running requests' remaining
  outputs at the current ``ratio``; the ratio keeps the general path's clock. (SGLang skips the
  timeline for a sliding-window hybrid pool, ``SWATokenToKVPoolAllocator``, e.g. gpt-oss; the
  simulator applies it to every model that names the policy.)

Approximation: an engine knows a request's ``max_tokens``, the simulator its actual output
length; the two are equal for benchmarks that ignore end-of-sequence tokens, and the trace's
output length stands for ``max_tokens`` otherwise (a real client's limit is often larger, so
real reservations can be larger still). What this module is not: it does not allocate — the
instance checks ``extra_blocks`` against L1's available blocks next to the immediate need.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

from simulator.engine.request import EngineRequest

__all__ = [
    "CLIP_OUTPUT_TOKENS",
    "INIT_RATIO",
    "KV_ADMISSIONS",
    "MIN_RATIO",
    "RATIO_POLICIES",
    "TIMELINE_RESERVE_TOKENS",
    "AdmissionControl",
    "KvAdmission",
]

KvAdmission = Literal["on_demand", "reserve_full", "reserve_estimate", "reserve_timeline"]
KV_ADMISSIONS: tuple[str, ...] = get_args(KvAdmission)
#: Policies whose admission reads every running request's counters (``generated``,
#: ``processed``) and keeps the new-token ratio: a decode run must stop where the waiting head
#: would fit, and the instance keeps no lazy decode cohort.
RATIO_POLICIES: frozenset[str] = frozenset({"reserve_estimate", "reserve_timeline"})

INIT_RATIO = 0.7
MIN_RATIO = INIT_RATIO * 0.14
DECAY_STEPS = 600
CLIP_OUTPUT_TOKENS = 4096
RETRACT_STEPS = 20
#: SGLang's ``IGNORE_EOS_RESERVE_TOKENS``: tokens kept free per unfinished request at each
#: finish of the ``reserve_timeline`` check.
TIMELINE_RESERVE_TOKENS = 1
#: Most (request × step) cells ``first_fit_step`` evaluates at once; beyond it, it strides.
_GRID_CELLS = 200_000


def _blocks(tokens: int, block_tokens: int) -> int:
    return -(-tokens // block_tokens)


def _peak_tokens(req: EngineRequest) -> int:
    """KV tokens ``req`` holds when it finishes (its last token is never processed)."""
    return req.prompt_len + req.stop_at - 1


class AdmissionControl:
    """One instance's admission policy and, for ``reserve_estimate``, its ratio state."""

    __slots__ = ("block_tokens", "decay", "init_ratio", "min_ratio", "policy", "ratio")

    def __init__(
        self, policy: KvAdmission, block_tokens: int, conservativeness: float = 1.0
    ) -> None:
        if policy not in KV_ADMISSIONS:
            raise ValueError(f"unknown KV admission policy {policy!r}; known: {KV_ADMISSIONS}")
        if conservativeness <= 0:
            raise ValueError("conservativeness must be > 0")
        self.policy = policy
        self.block_tokens = block_tokens
        self.init_ratio = min(1.0, INIT_RATIO * conservativeness)
        self.min_ratio = self.init_ratio * MIN_RATIO / INIT_RATIO
        self.decay = (self.init_ratio - self.min_ratio) / DECAY_STEPS
        """How much the ratio falls per decode step."""
        self.ratio = self.init_ratio
        """``reserve_estimate``: the share of a running request's remaining output set aside."""

    def extra_blocks(
        self,
        running: Sequence[EngineRequest],
        req: EngineRequest,
        tokens_after: int,
        *,
        after_steps: int = 0,
    ) -> int:
        """L1 blocks to keep free besides the immediate need when admitting ``req``, which
        will hold ``tokens_after`` tokens after its first step (0 for ``on_demand``).

        ``after_steps`` > 0 asks the same ``after_steps`` decode steps from now, every running
        request decoding meanwhile (``reserve_estimate`` only: its ratio and the remaining
        outputs shrink; with ``reserve_full`` growth and reservation cancel out)."""
        if self.policy == "on_demand":
            return 0
        bt = self.block_tokens
        if self.policy == "reserve_full":
            # Running requests: what they still allocate beyond the blocks they hold (which
            # may already cover this step's growth).
            extra = _blocks(_peak_tokens(req), bt) - _blocks(tokens_after, bt)
            for r in running:
                extra += max(0, _blocks(_peak_tokens(r), bt) - r.n_pinned - r.n_private)
            return max(0, extra)
        if self.policy == "reserve_timeline":
            state = _TimelineState.of(running, req, tokens_after)
            steps = np.array([after_steps], dtype=np.int64)
            return _blocks(int(state.required(steps, self._ratio_after(after_steps))[0]), bt)
        # reserve_estimate: the new request in full, the running ones at the current ratio.
        new = max(0, req.prompt_len - tokens_after) + min(
            req.stop_at - req.generated, CLIP_OUTPUT_TOKENS
        )
        ratio, held, j = self._ratio_after(after_steps), 0.0, after_steps
        for r in running:
            held += max(0, r.prompt_len - r.processed - j) + ratio * min(
                max(0, r.stop_at - r.generated - j), CLIP_OUTPUT_TOKENS
            )
        return _blocks(new + int(held + 0.5), bt)

    def first_fit_step(
        self,
        running: Sequence[EngineRequest],
        head: EngineRequest,
        tokens_after: int,
        *,
        need: int,
        available: int,
        k: int,
    ) -> int:
        """``reserve_estimate`` / ``reserve_timeline`` during a decode run of ``k`` steps of
        every ``running`` request:
        the first step count j in 1 … k − 1 after which ``head`` (immediate need ``need``
        blocks) fits, or ``k`` if it never does. L1 has ``available`` blocks now; step j ≥ 1
        of a request that has processed c tokens takes a block when c + j is a multiple of the
        block size. Evaluated on a grid of steps (every step unless the run is long and the
        batch large; then a stride, refined step by step inside the first stride that fits).
        ``k`` as well when the head fits now: then memory is not what holds it back."""
        if self.policy not in RATIO_POLICIES or k <= 1 or not running:
            return k
        bt = self.block_tokens
        rem = np.array([r.stop_at - r.generated for r in running], dtype=np.int64)
        first = np.array([(-r.processed) % bt or bt for r in running], dtype=np.int64)
        new = max(0, head.prompt_len - tokens_after) + min(
            head.stop_at - head.generated, CLIP_OUTPUT_TOKENS
        )
        timeline = (
            _TimelineState.of(running, head, tokens_after)
            if self.policy == "reserve_timeline"
            else None
        )

        def fits(steps: np.ndarray) -> np.ndarray:
            j = steps[:, None]
            grown = (np.maximum(j - first[None, :] + bt - 1, 0) // bt).sum(axis=1)
            ratio = np.maximum(self.min_ratio, self.ratio - self.decay * steps)
            if timeline is not None:
                extra = -(-timeline.required(steps, ratio) // bt)
            else:
                out = np.minimum(np.maximum(rem[None, :] - j, 0), CLIP_OUTPUT_TOKENS).sum(axis=1)
                extra = -(-(new + np.floor(ratio * out + 0.5).astype(np.int64)) // bt)
            return np.asarray(need + extra <= available - grown)

        if fits(np.zeros(1, dtype=np.int64))[0]:
            return k  # memory does not hold it back now: something else does (budget, caps)
        stride = max(1, -(-len(running) * k // _GRID_CELLS))
        grid = np.arange(1, k, stride, dtype=np.int64)
        hit = np.flatnonzero(fits(grid))
        if not len(hit):
            return k
        hi = int(grid[hit[0]])
        if stride > 1:
            lo = max(1, hi - stride + 1)
            fine = np.arange(lo, hi + 1, dtype=np.int64)
            hi = int(fine[np.flatnonzero(fits(fine))[0]])
        return hi

    def _ratio_after(self, n_steps: int) -> float:
        return max(self.min_ratio, self.ratio - self.decay * n_steps)

    def on_decode_steps(self, n_steps: int) -> None:
        """``n_steps`` steps with decodes ran: the estimate ratio decays."""
        if self.policy in RATIO_POLICIES and n_steps > 0:
            self.ratio = self._ratio_after(n_steps)

    def on_idle(self) -> None:
        """Nothing runs: the estimate ratio starts over."""
        self.ratio = self.init_ratio

    def on_preempt(self, running: Sequence[EngineRequest]) -> None:
        """A request was preempted; ``running`` are the ones left: re-estimate the ratio."""
        if self.policy not in RATIO_POLICIES or not running:
            return
        decoded = sum(r.generated for r in running)
        outputs = sum(r.stop_at for r in running)
        self.ratio = min(1.0, (decoded + RETRACT_STEPS * len(running)) / (outputs + 1))


class _TimelineState:
    """``reserve_timeline``'s inputs for one candidate (module doc), as arrays.

    Running requests: remaining output ``left`` (``stop_at − generated``), what a finish frees
    ``held`` (prompt plus output so far) and prompt tokens still to compute; the candidate
    likewise, its first step's tokens excluded (the caller's immediate need holds them)."""

    __slots__ = ("held", "left", "new_held", "new_left", "pending", "ratio_out")

    def __init__(
        self,
        left: np.ndarray,
        held: np.ndarray,
        new_left: int,
        new_held: int,
        pending: int,
    ) -> None:
        self.left, self.held = left, held
        self.new_left, self.new_held = new_left, new_held
        self.pending = pending
        """Prompt tokens every request, the candidate included, has still to compute."""
        self.ratio_out = np.minimum(left, CLIP_OUTPUT_TOKENS)
        """Remaining outputs the general path's first check weighs at the current ratio."""

    @classmethod
    def of(
        cls, running: Sequence[EngineRequest], req: EngineRequest, tokens_after: int
    ) -> _TimelineState:
        """The state for admitting ``req`` (``tokens_after`` tokens after its first step)."""
        left = np.array([r.stop_at - r.generated for r in running], dtype=np.int64)
        held = np.array([r.prompt_len + r.generated for r in running], dtype=np.int64)
        pending = sum(max(0, r.prompt_len - r.processed) for r in running)
        pending += max(0, req.prompt_len + req.generated - tokens_after)
        return cls(left, held, req.stop_at - req.generated, req.prompt_len + req.generated, pending)

    def required(self, steps: np.ndarray, ratio: float | np.ndarray) -> np.ndarray:
        """Free tokens (beyond the candidate's first step) each of ``steps`` decode steps from
        now must show for the candidate to be admitted then, every running request decoding
        meanwhile (none finishes within them: a finish ends a decode run)."""
        j = steps.astype(np.int64)[:, None]
        m = len(steps)
        left = np.concatenate(
            [np.full((m, 1), self.new_left, dtype=np.int64), self.left[None, :] - j], axis=1
        )
        held = np.concatenate(
            [np.full((m, 1), self.new_held, dtype=np.int64), self.held[None, :] + j], axis=1
        )
        # Sorted by remaining output, the candidate first among equals (SGLang inserts it
        # before the first state with as much left).
        order = np.argsort(left, axis=1, kind="stable")
        left = np.take_along_axis(left, order, axis=1)
        held = np.take_along_axis(held, order, axis=1)
        freed_before = np.cumsum(held, axis=1) - held
        unfinished = left.shape[1] - np.arange(left.shape[1], dtype=np.int64)[None, :]
        worst = ((left + TIMELINE_RESERVE_TOKENS) * unfinished - freed_before).max(axis=1)
        timeline = self.pending + worst + 1
        out = np.minimum(np.maximum(self.ratio_out[None, :] - j, 0), CLIP_OUTPUT_TOKENS)
        weighed = np.floor(np.asarray(ratio) * out.sum(axis=1) + 0.5).astype(np.int64)
        estimate = self.pending + weighed
        return np.asarray(np.maximum(timeline, estimate), dtype=np.int64)
