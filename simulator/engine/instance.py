"""One serving instance: continuous batching over a tiered KV cache, in simulated time.

Queues (HiSim): ``prefetching`` (L3→L2 copy in flight, policies ``wait_complete`` and
``timeout``), ``waiting`` (FCFS), ``running`` (admitted, in admission order) and ``swapped``.

Life of a request:

1. **Arrival** — rejected if prompt + output exceed the model's context or L1 as a whole, or
   the prompt exceeds the step budget of a scheduler that does not chunk prompts. Its
   prefix is matched L1 → L2 → L3, stopping at the first miss; when the L3-only blocks of that
   prefix hold at least ``prefetch_threshold_tokens`` tokens, they are read L3→L2 on the
   instance's prefetch channel. ``best_effort``: the request waits as usual and, when admitted,
   uses the blocks that have arrived (the rest of the read is cancelled and recomputed);
   ``wait_complete``: it sits in the prefetch queue until the read is done; ``timeout``: as
   ``wait_complete`` but at most ``base + per_1k × tokens / 1024`` seconds, then as
   ``best_effort``.
2. **Admission** (by the scheduler, at a step boundary) — the prefix is matched again L1 → L2
   (stop at the first miss; if every prompt token hits, the last one is still computed, as in
   vLLM), the matched blocks are pinned in L1 and the L2 ones copied up over PCIe; L1 must
   hold its first step plus what the KV admission policy sets aside for future decodes
   (``admission.py``: nothing for vLLM, every running request's remaining output for
   TensorRT-LLM, a decaying share of it for SGLang). Exact load
   rule: the copy starts at the step boundary of admission, serialised on the instance's
   host-to-device link, and overlaps the step that starts then; the request gets no tokens in
   any step that starts before the copy is complete.
3. **Steps** — each step runs the batch the scheduler returns, lasting exactly what the latency
   model says for that batch. KV blocks are allocated as tokens are scheduled; when L1 has no
   free or unpinned block left the tail of the running queue is preempted (recompute: its
   blocks are released, it re-enters the waiting queue at the front; swap: its KV moves to L2).
4. **Finish** — its prompt blocks stay cached (unpinned) in L1 under the eviction policy.

PD disaggregation (``remote.py``): with a ``handoff`` this is a prefill instance — a request
leaves after its first token and holds its L1 blocks (``sending``) until ``release_sent``;
a decode instance takes handed-off requests through ``accept`` into its waiting queue.

Overlap scheduling (``EngineParams.overlap_scheduling``; TensorRT-LLM's overlap scheduler and
SGLang's overlap schedule, on by default there): the engine loop schedules step k+1 while step
k runs on the GPU, so a request queued after step k started is first admitted in step k+2 — at
the boundary after k it is not seen yet, unless nothing else could run (an idle loop admits at
once). A preempted request re-queued during scheduling waits the same extra step. With
``EngineParams.overlap_prefill_lag`` (TensorRT-LLM) the outputs of step k are handed out only
once step k+1 has been launched, and a step that runs a prefill returns from its launch with
its GPU work: the first tokens of step k are then recorded at the end of step k+1 when that
step runs a prefill (``_lag_first_tokens``), at the end of step k otherwise.

Decode runs (``inflight.py``): a quiescent pure-decode step is planned as ``K`` steps handled
in one event. The decode cohort (``cohort.py``): while prefills queue, the steady decoders at
the head of ``running`` hold their counters lazily, so a mixed step, or a decode run, costs
them O(1) each.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import islice

import numpy as np
from numpy.typing import NDArray

from simulator.core import Kernel
from simulator.engine.admission import RATIO_POLICIES, AdmissionControl
from simulator.engine.admit import Admitter, arrival_rejection
from simulator.engine.cohort import DecodeCohort
from simulator.engine.frontend import Frontend
from simulator.engine.inflight import InFlight
from simulator.engine.invariants import check_instance, check_split
from simulator.engine.kvmanager import KVManager
from simulator.engine.kvuse import KvUseIntegral
from simulator.engine.params import EngineParams
from simulator.engine.prefetch import Prefetcher
from simulator.engine.progress import Q_PREFETCH, Progress, apply_run, apply_step, record_of
from simulator.engine.receive import ReceiveInterval
from simulator.engine.remote import Handoff, admit_remote
from simulator.engine.request import FINISHED, SENDING, SWAPPED, WAITING, EngineRequest
from simulator.engine.scheduler import SCHEDULERS, Batch, StepPlan
from simulator.engine.stats import InstanceStats, StepTotals
from simulator.engine.steps import StepPricer, StepTimer, quiescent_decode_steps
from simulator.engine.transfer import Channel, LoadLink
from simulator.records import Recorder
from simulator.workload.request import TraceRequest

__all__ = ["EngineInstance"]

#: Longest decode run handled in one event (tests set 1 to compare with step-by-step).
MAX_RUN_STEPS = 1 << 30


class EngineInstance:
    """One engine (a TP group of GPUs) with its queues, KV tiers and scheduler."""

    announces_handed_off_first_tokens: bool = True
    """PD prefill side: whether ``on_first_token`` is told of the first token of a request
    handed off to a decode instance (False where the decode side emits it: the PD coordinator
    sets it). A one-token request's first token is always announced here."""
    _lagging: tuple[EngineRequest, ...] = ()
    """Requests whose first token came out of the last step, to be handed out when the next
    one has been launched (``overlap_prefill_lag``; set per instance)."""
    _lagged: tuple[EngineRequest, ...] = ()
    """Requests whose first token waits for the prefill step in progress to end."""

    def __init__(
        self,
        index: int,
        kernel: Kernel,
        params: EngineParams,
        *,
        timer: StepTimer,
        kv: KVManager,
        load_link: LoadLink,
        prefetch: Channel | None,
        recorder: Recorder,
        on_finish: Callable[[EngineRequest], None] | None = None,
        handoff: Handoff | None = None,
        check_invariants: bool = False,
    ) -> None:
        """``prefetch`` is the L3 → L2 channel (None without L3); ``on_finish`` is called with
        every finished request (the cluster driver sets it); ``handoff`` makes this a PD
        prefill instance."""
        self.index = index
        self.kernel = kernel
        self.params = params
        self.timer = timer
        self._pricer = StepPricer(timer, params.prefill_step_floor_s)
        self.kv = kv
        self.load_link = load_link
        self.prefetcher = (
            Prefetcher(kernel, prefetch, kv, params, self._leave_prefetch)
            if prefetch is not None
            else None
        )
        self.recorder = recorder
        self.on_finish = on_finish
        self.on_first_token: Callable[[TraceRequest, float], None] | None = None
        """Called with a request and its recorded ``first_token_s`` when its first token is
        out, at that step's end (the cluster driver sets it for a watcher that asks)."""
        self.handoff = handoff
        self.check_invariants_each_step = check_invariants
        self.scheduler = SCHEDULERS[params.scheduler]()
        self.admission = AdmissionControl(
            params.kv_admission, params.block_tokens, params.kv_conservativeness
        )
        """The KV admission policy (its ratio state moves with steps, idling, preemptions)."""
        self.max_batched_tokens = params.max_batched_tokens
        self.max_running = params.max_running
        self.chunk_tokens = params.chunk_tokens
        self.block_tokens = params.block_tokens
        self.waiting: deque[EngineRequest] = deque()
        self.running: list[EngineRequest] = []
        self.swapped: deque[EngineRequest] = deque()
        self.prefetching: dict[int, EngineRequest] = (
            self.prefetcher.queue if self.prefetcher is not None else {}
        )
        """Requests in the prefetch queue, by index (owned by the prefetcher)."""
        self.sending: dict[int, EngineRequest] = {}
        """PD prefill side: prefilled requests whose KV is held here until sent, by index."""
        costs = (params.frontend_request_s, params.frontend_token_s, params.frontend_prompt_token_s)
        self.frontend = Frontend(*costs) if any(costs) else None
        """The serial front end (``frontend.py``; None where the preset gives it no cost)."""
        self.intake: dict[int, EngineRequest] = {}
        """Requests the front end is still taking in, by index."""
        self._streamed = 0
        """Steps of the decode run in progress whose tokens the front end already has."""
        self.preempted: list[int] = []
        """Indices of the requests preempted since the last step boundary."""
        self.admit_cutoff_s: float | None = None
        """Overlap scheduling: waiting requests queued after this time are not yet visible to
        the admission of the step being scheduled (set at a busy step boundary only)."""
        # When new arrivals are looked at (``receive.py``; every boundary at interval 1).
        self.receive = ReceiveInterval(params.recv_interval)
        self.admitter = Admitter(self, self.admission, load_link, self.prefetcher)
        self._run: InFlight | None = None
        """The step or decode run in progress."""
        self._step_pending, self._wake_token = False, -1
        self.totals = StepTotals()
        self.kv_use = KvUseIntegral(kv.l1)
        # The ratio policies read the running requests' counters while scheduling.
        lazy = self.scheduler.uses_cohort and params.kv_admission not in RATIO_POLICIES
        self.cohort = DecodeCohort() if lazy and self._pricer.takes_buckets else None
        """The decode cohort (``cohort.py``; None where the scheduler, the step timer or the
        admission policy cannot work with one)."""

    # ----- views --------------------------------------------------------------------------------
    @property
    def n_outstanding(self) -> int:
        """Requests in any queue of this instance (routers' load measure)."""
        queues = (self.waiting, self.running, self.swapped, self.prefetching, self.sending)
        return sum(len(queue) for queue in queues) + len(self.intake)

    @property
    def outstanding_tokens(self) -> int:
        """Prompt tokens not yet prefilled plus output tokens not yet generated here, over
        every queue (routers' token load). A PD prefill instance generates one token per
        request; a handed-off request waiting on a decode instance has no prompt to prefill.
        As of the last committed step: a decode run in progress is counted when it ends.
        O(requests held); called once per routed arrival."""
        if self.cohort is not None:
            self.cohort.sync()
        queues = (self.waiting, self.running, self.swapped, self.prefetching.values())
        return sum(req.owed for queue in (*queues, self.intake.values()) for req in queue)

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        return self.kernel.now

    @property
    def l1_blocks(self) -> int:
        """L1 capacity in KV blocks."""
        return self.kv.l1.capacity

    def stats(self, until_s: float) -> InstanceStats:
        """This instance's totals so far, KV utilisation averaged from 0 to ``until_s``."""
        return self.totals.snapshot(
            kv_utilization=self.kv_use.average(until_s),
            l2_to_l1_blocks=self.load_link.n_blocks_moved,
            l3_to_l2_blocks=(
                self.prefetcher.channel.n_blocks_moved if self.prefetcher is not None else 0
            ),
        )

    # ----- arrival and prefetch -----------------------------------------------------------------
    def on_arrival(self, trace: TraceRequest) -> None:
        """A request routed here arrives now."""
        now = self.kernel.now
        req = EngineRequest(trace, self.block_tokens, self.index, now)
        if self.handoff is not None:
            req.stop_at = 1  # a PD prefill instance generates the first token only
        reason = arrival_rejection(
            req,
            self.params,
            chunks_prompts=self.scheduler.chunks_prompts,
            decode_max_blocks=self.handoff.max_blocks if self.handoff is not None else None,
            l1_blocks=self.l1_blocks,
        )
        if reason is not None:
            self.recorder.rejected(reason)
            return
        self.recorder.arrived(now)
        self.recorder.load(now, self.index, 1)
        enters = now + req.prompt_len * self.params.tokenize_s_per_prompt_token  # tokenised
        frontend = self.frontend
        if frontend is not None:
            self._stream_ended_steps(now)  # the tokens offered before this request
            enters = frontend.intake(enters, req.prompt_len)
        elif enters <= now:
            self._enter(req)
            return
        self.intake[req.index] = req
        self.kernel.at(enters, lambda: self._enter(req))

    def _enter(self, req: EngineRequest) -> None:
        """``req`` (arrived, taken in by the front end if any) joins the queues now."""
        if self.intake.pop(req.index, None) is not None:
            req.enqueue_s = self.kernel.now  # its queueing starts in the engine
        if self.prefetcher is not None and self.prefetcher.start(req):
            return
        self.waiting.append(req)
        self._poke()

    def accept(self, req: EngineRequest) -> None:
        """PD decode side: a handed-off request (``remote`` set) queues here now."""
        now = self.kernel.now
        req.enqueue_s = now
        self.waiting.append(req)
        self.recorder.load(now, self.index, 1)
        self._poke()

    def release_sent(self, req: EngineRequest) -> None:
        """PD prefill side: ``req``'s KV has reached its decode instance; free it here."""
        now = self.kernel.now
        del self.sending[req.index]
        req.state = FINISHED
        self.kv.release(req)
        self.kv_use.mark(now)
        self.recorder.load(now, self.index, -1)
        self._poke()

    def _leave_prefetch(self, req: EngineRequest) -> None:
        now = self.kernel.now
        req.queue_s[Q_PREFETCH] += now - req.enqueue_s
        req.enqueue_s = now
        req.state = WAITING
        self.waiting.append(req)
        self._poke()

    # ----- scheduler host API -------------------------------------------------------------------
    def grow(self, req: EngineRequest, n_tokens: int) -> bool:
        """See ``SchedulerHost.grow``."""
        target = req.processed + n_tokens
        if target <= req.kv_room:
            return True  # every prompt block pinned and room in the last block: most decodes
        kv, l1 = self.kv, self.kv.l1
        need = kv.grow_need(req, target)
        while need > l1.available():
            victim = self.running[-1]
            self._preempt(victim)
            if victim is req:
                return False
            need = kv.grow_need(req, target)
        kv.grow(req, target)
        return True

    def admit(self, req: EngineRequest, max_tokens: int, *, whole: bool) -> int:
        """See ``SchedulerHost.admit``."""
        if req.state == SWAPPED:
            return self.admitter.swap_in(req, max_tokens, whole=whole)
        if req.remote is not None:
            return admit_remote(self, req)
        return self.admitter.admit_waiting(req, max_tokens, whole=whole)

    def _preempt(self, victim: EngineRequest) -> None:
        if victim.cohort_base >= 0 and self.cohort is not None:
            self.cohort.leave(victim)
        now = self.kernel.now
        self.running.remove(victim)
        self.admission.on_preempt(self.running)
        victim.preemptions += 1
        self.totals.preemptions += 1
        self.preempted.append(victim.index)
        victim.enqueue_s = now
        kv = self.kv
        if self.params.preemption == "swap" and victim.ready_s <= now:
            need = kv.swap_out_need(victim)
            if need >= 0 and kv.l2 is not None and need <= kv.l2.available():
                kv.swap_out(victim)
                victim.state = SWAPPED
                self.swapped.append(victim)
                return
        kv.release(victim)
        victim.processed = 0
        victim.ready_s = 0.0
        victim.state = WAITING
        self.waiting.appendleft(victim)

    # ----- stepping -----------------------------------------------------------------------------
    def _poke(self) -> None:
        """Something changed: schedule a step now if idle, or cut a decode run short."""
        run = self._run
        if run is None:
            if not self._step_pending:
                self._step_pending = True
                self.kernel.at(self.kernel.now, self._step)
        elif run.k > 1:
            run.cut()

    def _wake(self) -> None:
        self._wake_token = -1
        self._poke()

    def _step(self) -> None:
        """At a step boundary with nothing in progress: schedule and start the next step."""
        self._step_pending = False
        if self._run is not None:
            return
        now = self.kernel.now
        self.preempted.clear()
        cutoff = self.admit_cutoff_s if self.running else None  # an idle engine takes all
        recv_cutoff = self.receive.look(now, bool(self.running))
        if recv_cutoff is not None:
            cutoff = recv_cutoff if cutoff is None else min(cutoff, recv_cutoff)
        self.admit_cutoff_s = cutoff
        plan = self.scheduler.schedule(self)
        self.admit_cutoff_s = None
        unseen = cutoff is not None and self._queued_after(cutoff)
        if unseen and not plan.tokens:
            # Nothing else could run: the engine loop is idle and admits them now.
            plan = self.scheduler.schedule(self)
            unseen = False
            recv_cutoff = self.receive.look(now, running=False)
        self.kv_use.mark(now)
        batch = plan.tokens
        if plan.split is None and self.cohort is not None:
            self.cohort.dissolve()  # the pricer splits this batch itself: current counters
        if not batch:
            if plan.preempted:
                self._poke()  # preemption freed L1 but blocked admissions for this step
            else:
                if not self.running:
                    self.admission.on_idle()
                self._sleep()
            return
        if self.check_invariants_each_step:
            check_split(plan, self.cohort)
        k = self._steps_of(plan, unseen=unseen, looking=recv_cutoff is None)
        self._run = InFlight(
            self.kernel,
            self._pricer,
            batch,
            k,
            self._end_run,
            split=plan.split,
            cache_lens=self._run_kv_lens(batch) if k > 1 else None,
        )
        self._streamed = 0
        if self._lagging:
            self._lag_first_tokens(self._run)

    def _steps_of(self, plan: StepPlan, *, unseen: bool, looking: bool) -> int:
        """Steps to run ``plan`` for: requests not yet seen (``unseen``) get their turn at the
        next boundary, not after a run — or at the next look at arrivals where this boundary
        is not one (``looking`` False, a receive interval)."""
        if not unseen:
            return self._run_length(plan)
        if looking:
            return 1
        return min(self._run_length(plan), self.receive.steps_to_look())

    def _sleep(self) -> None:
        """Idle: wake when the first pending L2→L1 load completes (arrivals poke anyway)."""
        loading = [req.ready_s for req in self.running if req.ready_s > self.kernel.now]
        if loading and self._wake_token < 0:
            self._wake_token = self.kernel.at(min(loading), self._wake)

    def _run_length(self, plan: StepPlan) -> int:
        """Steps the plan can repeat unchanged: 1 unless it is a quiescent pure decode."""
        batch = plan.tokens
        if plan.preempted or len(batch) != len(self.running) or (plan.split and plan.split.chunks):
            return 1
        cohort = self.cohort
        lazy = cohort if cohort is not None and cohort.members else None  # the batch's head
        budget = self.kv.l1.available()
        k = quiescent_decode_steps(batch, MAX_RUN_STEPS, self.block_tokens, budget, lazy)
        if k > 1 and self.admission.policy in RATIO_POLICIES:
            k = self.admitter.head_fit_step(k, min(self.chunk_tokens, self.max_batched_tokens))
        return k

    def _run_kv_lens(self, batch: Batch) -> list[int] | None:
        """The processed tokens of a decode run's requests where the decode cohort's members
        (its head) hold theirs lazily (any order: the pricer sorts them), else None."""
        cohort = self.cohort
        if cohort is None or not cohort.members:
            return None
        rest = islice(batch, len(cohort.members), None)
        return [*cohort.kv_lens(), *(req.processed for req in rest)]

    def _queued_after(self, time_s: float) -> bool:
        """Whether a waiting request was queued after ``time_s`` (FIFO: check both ends, a
        preempted request re-enters at the front)."""
        waiting = self.waiting
        return bool(waiting) and (waiting[-1].enqueue_s > time_s or waiting[0].enqueue_s > time_s)

    def _end_run(self) -> None:
        run = self._run
        assert run is not None
        self._run = None
        k = run.k
        self.receive.ran(run.batch, k)
        if k == 1:
            if self.params.overlap_scheduling:
                # The next step was scheduled when the last one started (module docstring).
                self.admit_cutoff_s = run.start_s
            self._commit_step(run.batch, run.start_s, run.end_s)
        else:
            ends = run.step_ends()
            if self.params.overlap_scheduling:
                self.admit_cutoff_s = float(ends[k - 2])
            self._commit_run(run.batch, run.start_s, ends, run.end_s)
        if self.check_invariants_each_step:
            self.check_invariants()
        self._step()

    # ----- the front end's streaming -------------------------------------------------------------
    def _stream_ended_steps(self, now: float) -> None:
        """Offer the front end the tokens of the decode run's steps that ended by ``now``."""
        run, frontend = self._run, self.frontend
        if run is not None and run.k > 1 and frontend is not None:
            self._streamed = frontend.stream_run(run.ends[: run.k], self._streamed, now, run.batch)

    # ----- commits ------------------------------------------------------------------------------
    def _account(self, progress: Progress, start_s: float, end_s: float) -> None:
        self.totals.add(progress, end_s - start_s)
        if progress.decode_tokens:
            self.admission.on_decode_steps(progress.steps)

    def _commit_step(self, batch: Batch, start_s: float, end_s: float) -> None:
        """Apply one step that ended at ``end_s`` (now)."""
        cohort = self.cohort
        lazy = cohort if cohort is not None and cohort.members else None  # a cohort step
        progress = apply_step(batch, end_s, self.kv, self.recorder, lazy)
        self._account(progress, start_s, end_s)
        self.kv_use.mark(end_s)
        frontend = self.frontend
        delivered = end_s if frontend is None else frontend.deliver(batch, end_s, progress.members)
        lagged, self._lagged = self._lagged, ()
        for req in lagged:  # streamed with this step's tokens (a cohort member's too)
            req.first_token_s = max(req.first_token_s, delivered)
        self._announce_first_tokens(list(lagged))
        first = progress.first
        if self.params.overlap_prefill_lag and self.params.overlap_scheduling:
            # Handed out once the next step is launched (``_lag_first_tokens``); one that
            # also finished here is recorded already (one-token outputs) and is not lagged.
            self._lagging = tuple(req for req in first if req not in progress.done)
            first = [req for req in first if req in progress.done]
        self._announce_first_tokens(first)
        for req in progress.done:
            self._finish(req, end_s, delivered)
        # Join only while prefills queue: the next steps are then mixed, not decode runs
        # (a run dissolves the cohort, and joining costs more than one eager step).
        if cohort is not None and progress.prefill_tokens and self.waiting:
            cohort.extend(self.running, end_s)

    def _commit_run(
        self, batch: Batch, start_s: float, ends: NDArray[np.float64], end_s: float
    ) -> None:
        """Apply ``len(ends)`` identical decode steps (a decode run) that ended at ``end_s``
        (``ends[-1]``, as a float)."""
        cohort = self.cohort
        lazy = cohort if cohort is not None and cohort.members else None  # the batch's head
        progress = apply_run(batch, ends, end_s, self.kv, self.recorder, cohort=lazy)
        self._account(progress, start_s, end_s)
        self.kv_use.run_ended(end_s)
        delivered = end_s
        if self.frontend is not None:
            for step_end in ends[self._streamed :]:
                delivered = self.frontend.stream(float(step_end), len(batch))
        for req in progress.done:
            self._finish(req, end_s, delivered)

    def _announce_first_tokens(self, reqs: list[EngineRequest]) -> None:
        """Tell ``on_first_token`` of the first tokens of ``reqs`` as recorded."""
        hook = self.on_first_token
        if hook is not None:
            announce_all = self.announces_handed_off_first_tokens
            for req in reqs:
                if announce_all or req.output_len == 1:
                    hook(req.trace, req.first_token_s)

    def _lag_first_tokens(self, run: InFlight) -> None:
        """``overlap_prefill_lag``: ``run`` has just been launched, and only now are the first
        tokens of the step before it handed out. If it runs a prefill (a request in it has no
        token yet) its launch lasted until its GPU work was done, so they reach their clients
        when its first step ends; a decode step replays a CUDA graph and returns at once.
        TensorRT-LLM's PyExecutor ``_executor_loop_overlap`` calls ``_forward_step`` and
        ``_sample_async`` for step k+1 before ``_process_previous_batch`` hands out step k's
        responses; its overlap-scheduler documentation says responses can reach clients up to
        one iteration late (the opt-in ``enable_client_io_during_gpu_wait`` and PR #14061's
        early first-token emission exist to shorten it)."""
        lagging, self._lagging = self._lagging, ()
        if any(req.first_token_s < 0 for req in run.batch):  # a prefill: k is 1
            for req in lagging:
                req.first_token_s = max(req.first_token_s, run.end_s)
            # Announced when that step is committed, after the front end has delivered it.
            self._lagged = lagging
        else:
            self._announce_first_tokens(list(lagging))

    def _finish(self, req: EngineRequest, now: float, delivered: float) -> None:
        """``req`` produced its last token in the step that ended ``now``; its client has it
        at ``delivered`` (later than ``now`` behind a busy front end)."""
        self.running.remove(req)
        if req.generated < req.output_len:  # a PD prefill: the KV stays until it is sent
            assert self.handoff is not None
            req.state = SENDING
            self.sending[req.index] = req
            self.handoff.send(self, req)
            return
        req.state = FINISHED
        req.finish_s = delivered
        self.kv.release(req)
        self.kv_use.mark(now)
        self.recorder.load(now, self.index, -1)
        self.recorder.finished(record_of(req, self.index))
        on_finish = self.on_finish
        if on_finish is None:
            return
        if delivered > now:
            self.kernel.at(delivered, lambda: on_finish(req))
        else:
            on_finish(req)

    # ----- invariants ---------------------------------------------------------------------------
    def cold_restart(self) -> None:
        """Stopped and started again (autoscaling): L1 and L2 start empty; L3 is kept."""
        if self.n_outstanding:
            raise RuntimeError(f"instance {self.index}: stopped with requests in flight")
        self.kv.l1.clear()
        if self.kv.l2 is not None:
            self.kv.l2.clear()

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` if queues, states or block accounting disagree
        (``invariants.check_instance``; meant for tests). The decode cohort's members are
        written back first (``DecodeCohort.sync``) and the cohort checked too."""
        if self.cohort is not None:
            self.cohort.sync()
            self.cohort.check(self.running)
        check_instance(self)
        self.kv_use.check()
