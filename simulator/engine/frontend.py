"""The serving process's serial front end: request intake and token streaming on one CPU.

An engine's API server takes each request in (HTTP parsing, tokenisation, handing it to the
executor) and streams each generated token back (detokenisation, one server-sent event); where
both run in one Python process they share one CPU and are served one at a time. While the GPU
is the bottleneck this costs a few milliseconds of TTFT; once the front end is the slower stage
(a small model, many users) it sets the deployment's throughput: tokens reach the clients at
its pace, requests reach the engine at its pace, and in a closed loop the users wait for it
outside the engine — a throughput ceiling that does not grow with TP, which TensorRT-LLM's
server shows in the H100 benchmarks (``bench/README.md``).

``Frontend`` is that CPU as one server in simulated time. Streaming is first come first served:
the tokens of a step offered at time ``t`` at a cost ``c`` are done at ``max(t, free) + c``,
and the server is then free from that time. A request's intake does not queue behind that
backlog: the server is one asyncio loop, which runs a new request's handler between two of the
streams' per-token slices (one slice is ~0.1 ms), not after every token already waiting. An
intake is done at ``max(t, intake_free) + c`` (behind earlier intakes only) and takes its CPU
time from the streams (``free`` moves ``c`` later). Served first come first served as well
(the model before), a saturated front end hands finished users' next requests to the engine
only after the whole streaming backlog, which held some closed loops in prefill waves
(``bench/README.md``, "The closed loop's two attractors").

The instance offers a request's intake (a fixed cost plus one per prompt token, the tokeniser's
share) when it arrives (the request joins the engine's queue when its intake is done) and
the tokens of every step when the step ends (the step's tokens reach
their clients when that work is done: first token and finish are recorded, and a closed-loop
user told, at that time). Costs are the backend preset's (``frontend_request_us``,
``frontend_prompt_token_us``, ``frontend_token_us``); zero costs mean no front end at all
(the engine is unchanged). A PD prefill instance keeps only the per-prompt-token cost (its
server tokenises the prompts it receives; the decode side streams), a decode instance none
(``build._pool_frontend``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from itertools import islice
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from simulator.engine.request import EngineRequest

__all__ = ["Frontend"]


class Frontend:
    """One serial front-end CPU (module docstring); times in seconds."""

    __slots__ = ("free_s", "intake_free_s", "prompt_token_s", "request_s", "token_s")

    def __init__(self, request_s: float, token_s: float, prompt_token_s: float = 0.0) -> None:
        if request_s < 0 or token_s < 0 or prompt_token_s < 0:
            raise ValueError("front-end costs must be >= 0")
        self.request_s = request_s
        """CPU time to take one request in besides its prompt's tokens, s."""
        self.prompt_token_s = prompt_token_s
        """CPU time per prompt token taken in (tokenising), s."""
        self.token_s = token_s
        """CPU time to stream one generated token, s."""
        self.free_s = 0.0
        """When the CPU has done all the work offered so far."""
        self.intake_free_s = 0.0
        """When the CPU has done the intakes offered so far."""

    def _serve(self, now_s: float, cost_s: float) -> float:
        done = max(now_s, self.free_s) + cost_s
        self.free_s = done
        return done

    def intake(self, now_s: float, prompt_tokens: int = 0) -> float:
        """A request of ``prompt_tokens`` arrives at ``now_s``: when it reaches the engine's
        queue (behind earlier intakes, ahead of the streaming backlog, which its CPU time
        delays; module docstring)."""
        cost_s = self.request_s + prompt_tokens * self.prompt_token_s
        done = max(now_s, self.intake_free_s) + cost_s
        self.intake_free_s = done
        self.free_s = max(now_s, self.free_s) + cost_s
        return done

    def stream(self, end_s: float, tokens: int) -> float:
        """A step that ended at ``end_s`` emitted ``tokens`` tokens: when they reach their
        clients."""
        return self._serve(end_s, tokens * self.token_s)

    def deliver(self, batch: Iterable[EngineRequest], end_s: float, members: int = 0) -> float:
        """The step of ``batch`` that ended at ``end_s`` streams the tokens it emitted: when
        they reach their clients. A first token is recorded then (``first_token_s``). The
        first ``members`` requests (the decode cohort's, whose ``last_token_s`` may lag)
        each emitted a token that is not their first."""
        emitted = [req for req in islice(batch, members, None) if req.last_token_s == end_s]
        delivered = self.stream(end_s, members + len(emitted))
        for req in emitted:
            if req.first_token_s == end_s:
                req.first_token_s = delivered
        return delivered

    def stream_run(
        self, ends: NDArray[np.float64], streamed: int, now_s: float, batch: Sized
    ) -> int:
        """A decode run of ``batch`` with steps ending at ``ends``, of which the first
        ``streamed`` were offered: offer the tokens of those that ended by ``now_s``; returns
        how many are offered now."""
        n = len(batch)
        while streamed < len(ends) and ends[streamed] <= now_s:
            self.stream(float(ends[streamed]), n)
            streamed += 1
        return streamed
