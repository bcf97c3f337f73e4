"""The resolved, plain-number parameters of one engine instance (no catalog, no presets).

``simulator/api.py`` builds them from a ``ServingConfig``, the catalog, the backend preset and
the memory fit; tests build them directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from simulator.engine.admission import KvAdmission

__all__ = ["EngineParams"]


@dataclass(frozen=True, slots=True)
class EngineParams:
    """Everything an ``EngineInstance`` needs besides its tiers, links and timer."""

    block_tokens: int
    """Tokens per trace block: the unit of prefix reuse and of cache capacity."""
    scheduler: str
    """A key of ``SCHEDULERS``."""
    max_batched_tokens: int
    """Token budget of one step."""
    max_running: int
    """Most requests admitted at once (running queue length, loading ones included)."""
    chunk_tokens: int
    """Per-request token cap per step of the ``chunked`` scheduler."""
    preemption: Literal["recompute", "swap"] = "recompute"
    """What happens to a preempted request (swap falls back to recompute when L2 is full)."""
    prefetch_policy: Literal["best_effort", "wait_complete", "timeout"] = "best_effort"
    """When a request with an L3 prefetch may start (see ``instance.py``)."""
    prefetch_timeout_base_s: float = 1.0
    """``timeout`` policy: fixed allowance in seconds."""
    prefetch_timeout_per_1k_tokens_s: float = 0.25
    """``timeout`` policy: extra seconds per 1024 prefetched tokens."""
    prefetch_threshold_tokens: int = 256
    """Smallest L3 hit (tokens) worth prefetching; smaller hits are recomputed."""
    max_context_tokens: int = 2**31
    """Longest prompt + output the model accepts; longer requests are rejected."""
    overlap_scheduling: bool = False
    """The engine schedules step k+1 while step k runs (TensorRT-LLM's overlap scheduler,
    SGLang's overlap schedule): a request that reaches a busy instance after step k started is
    first admitted in step k+2 (``instance.py``)."""
    overlap_prefill_lag: bool = False
    """With ``overlap_scheduling``: the first tokens of step k reach their clients when step
    k+1 ends if step k+1 runs a prefill, when step k ends otherwise. TensorRT-LLM's overlap
    loop hands out step k's responses only after it has launched step k+1 (``_forward_step``,
    ``_sample_async``, then ``_process_previous_batch``), and a context step, run without a
    CUDA graph, returns from its launch when its GPU work is done (``instance.py``)."""
    prefill_step_floor_s: float = 0.0
    """Least seconds of a step that runs a prefill chunk: an engine that replays CUDA graphs
    for decode-only steps only runs such a step eagerly, and it cannot end before the host has
    launched every kernel of the forward pass (``steps.StepPricer``). 0: no floor."""
    recv_interval: int = 1
    """Decode-only steps between two looks at newly arrived requests while the engine runs
    (SGLang ``--scheduler-recv-interval``; its ``SchedulerRecvSkipper`` takes new requests in
    after any step with a prefill and when idle, else once every that many decode steps):
    a request that arrives in between waits for the next look (``instance.py``). 1: every
    step boundary."""
    kv_admission: KvAdmission = "on_demand"
    """Future KV growth set aside before admitting a request (``admission.py``)."""
    kv_conservativeness: float = 1.0
    """``reserve_estimate``: SGLang's ``--schedule-conservativeness`` (scales the ratios)."""
    frontend_request_s: float = 0.0
    """The serial front end's CPU time per request taken in, s (``frontend.py``; 0 and
    ``frontend_token_s`` 0: no front end)."""
    frontend_token_s: float = 0.0
    """The serial front end's CPU time per streamed token, s."""
    frontend_prompt_token_s: float = 0.0
    """The serial front end's CPU time per prompt token taken in (tokenising), s."""
    tokenize_s_per_prompt_token: float = 0.0
    """Seconds per prompt token between a request's arrival and its reaching the engine (or
    the serial front end): the API server tokenising the prompt text, in a worker beside the
    engine's loop, concurrent prompts in parallel (``instance.py``). 0: none."""
    limits_note: str = ""
    """Why the step budget or running cap is not the preset's number (an engine default that
    depends on the GPU, ``BackendPreset.limits_for``); empty otherwise."""

    def describe(self) -> str:
        """The engine knobs that shape scheduling, in one line for reports."""
        return (
            f"{self.scheduler} scheduler, {self.max_batched_tokens:,}-token steps, at most "
            f"{self.max_running:,} running"
            + (f" ({self.limits_note})" if self.limits_note else "")
            + (
                f", prefill steps at least {self.prefill_step_floor_s * 1e3:.3g} ms (eager launch)"
                if self.prefill_step_floor_s
                else ""
            )
            + ", overlap scheduling "
            + f"{'on' if self.overlap_scheduling else 'off'}, KV admission {self.kv_admission}"
            + (
                f", tokenising {self.tokenize_s_per_prompt_token * 1e6:g} µs per prompt token"
                if self.tokenize_s_per_prompt_token
                else ""
            )
            + (
                f", serial front end {self.frontend_request_s * 1e3:g} ms + "
                f"{self.frontend_prompt_token_s * 1e6:g} µs per prompt token per request, "
                f"{self.frontend_token_s * 1e6:g} µs per streamed token"
                if self.frontend_request_s or self.frontend_token_s or self.frontend_prompt_token_s
                else ""
            )
        )

    def __post_init__(self) -> None:
        if self.block_tokens < 1 or self.max_batched_tokens < 1 or self.chunk_tokens < 1:
            raise ValueError("block_tokens, max_batched_tokens and chunk_tokens must be ≥ 1")
        if self.max_running < 1:
            raise ValueError("max_running must be ≥ 1")
