"""``ComposedLatencyModel``: operator composition (``compose.py``) priced by any ``KernelTimer``.

``RooflineModel`` is this with ``RooflineKernels``; part 2's ``table`` and ``calibrated`` models
are this with their kernel sources. The hot path, ``step_seconds``, splits a step into parts that
depend on few integers and caches each part by them:

- everything that depends only on the step's total new tokens ``T`` (projections, MLP/MoE,
  all-reduces, norms): one float per distinct ``T`` (on the roofline, for a model without MoE
  or DSA layers, priced for a block of 256 counts at once with numpy, bit for bit:
  ``_token_block``);

  the routed experts of an MoE layer (``compose.ROUTED_EXPERT_OPS``): where the engine runs
  vLLM's Marlin MoE (``ComposeParams.marlin_moe``: MXFP4 on Hopper under
  ``VLLM_MXFP4_USE_MARLIN=1``) composed from GEMMs but never below the measured Marlin layer
  carried to the model's shape (``moe_table.MarlinMoeTimer``); otherwise the kernel source's
  measured fused-MoE layer where it has one (``moe_table.FusedMoeTimer``: the table model,
  exact shape; on a stand-in GPU carried there by the roofline ratio of the layer's gate-up
  GEMM), outside the measured token range scaled by the composition
  (``measured(edge) × composed(T) / composed(edge)``), else composed from GEMMs;
- the LM head, per distinct ``logit_tokens``; MLA's absorption GEMMs, per decode count;
- MLA attention cores from the kernel source's measured MLA tables where it has them
  (``mla_measured.MeasuredMla``: the table model, carried to a stand-in GPU; DeepSeek's
  latent shape), else the generic attention calls the planner writes for MLA;
- prefill attention per distinct ``(count, new_tokens, cache_len)`` group;
- a DSA model's indexer (``compose.py``, "DeepSeek Sparse Attention"): per prefill group with
  its attention; for the decodes one call per step over their summed KV lengths (one kernel
  for the batch), priced by the kernel source where it times the indexer, else by the
  deployment GPU's roofline;
- decode attention per *octave bucket* of KV length ``[2^(e-1), 2^e)``: the bucket's requests are
  one group of ``b`` requests at their mean KV length, priced by linear interpolation between the
  bucket's edges (cached per ``(b, e)``). Exact whenever the kernel time is linear in KV length
  within a bucket — the roofline's memory-bound decode is, and the H100 profile's grid is
  powers of two, so a table interpolates the same way. Requests in different buckets are
  different groups, never averaged together. A DSA layer reads ``min(kv_len, index_topk)``
  latents: linear within every bucket when ``index_topk`` is a power of two (2048 in every
  catalog model), else interpolated across the one bucket that holds it.

A warm decode step of 256 requests costs ~8 µs from a prebuilt ``Batch`` and ~35 µs from a list
of pairs (building the batch included), measured on the shared development machine; see
``tests/latency/test_speed.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simulator.latency.base import StepBreakdown
from simulator.latency.batch import BatchLike, DecodeRun, as_batch, merge_buckets, split_groups
from simulator.latency.compose import (
    ROUTED_EXPERT_OPS,
    ComposeParams,
    KernelCall,
    OperatorPlanner,
)
from simulator.latency.deployment import Deployment
from simulator.latency.kernels import IndexerTimer, KernelTimer
from simulator.latency.mla_measured import MeasuredMla
from simulator.latency.mla_table import MlaTimer, measured_mla_shape
from simulator.latency.moe_table import MARLIN_DTYPES, FusedMoeTimer, MarlinMoeTimer
from simulator.latency.roofline import RooflineKernels, RooflineParams
from simulator.latency.transfer import Link, transfer_seconds

__all__ = ["ComposedLatencyModel", "RooflineModel"]

#: Most GPUs vLLM's and SGLang's custom all-reduce runs on (they fall back to NCCL beyond).
_CUSTOM_AR_MAX_GPUS = 8
#: Entries per cache before it is cleared (bounds memory on adversarial workloads; normal runs
#: have far fewer distinct shapes).
_CACHE_LIMIT = 1 << 17
#: Token counts priced together when one misses the cache, where they can be
#: (``_token_block``): a step's count takes thousands of values up to the engine's budget
#: (4,769 of 8,192 in ``bench/sim_speed.py``), ~25 µs each one at a time.
_TOKEN_BLOCK = 256


class ComposedLatencyModel:
    """A ``LatencyModel`` from operator composition and a kernel source.

    Args:
        deployment: what is served, on what, how split.
        timer: prices each kernel primitive (per GPU, seconds).
        name: the registry spec, reported as ``name``.
        params: framework overheads and elementwise costs (``ComposeParams``).
    """

    def __init__(
        self,
        deployment: Deployment,
        timer: KernelTimer,
        *,
        name: str,
        params: ComposeParams | None = None,
    ) -> None:
        self._deployment = deployment
        self._timer = timer
        self._name = name
        self._params = params or ComposeParams()
        self._planner = OperatorPlanner(deployment)
        shape = self._planner.moe_shape()
        if shape is not None:  # the kernel and MXFP4 activation precision the engine runs
            p = self._params
            shape = replace(shape, activation=p.mxfp4_moe_activation, kernel=p.moe_kernel)
        self._moe_shape = shape
        self._fused_moe = timer if isinstance(timer, FusedMoeTimer) else None
        # vLLM's Marlin MoE where the engine runs it (``ComposeParams.marlin_moe``): a weight
        # precision with no tensor cores on this GPU (MXFP4 on Hopper), priced at least at the
        # measured Marlin layer carried to this shape (``moe_table.py``).
        shape = self._moe_shape
        marlin = (
            self._params.marlin_moe
            and shape is not None
            and shape.dtype in MARLIN_DTYPES
            and not deployment.gpu.supports(shape.dtype)
            and isinstance(timer, MarlinMoeTimer)
        )
        self._marlin_moe = timer if marlin and isinstance(timer, MarlinMoeTimer) else None
        self._elementwise_bw = (
            deployment.gpu.hbm_tb_per_s * 1e12 * self._params.elementwise_memory_efficiency
        )
        self._price: dict[str, Callable[..., float]] = {
            "gemm": timer.gemm,
            "context_attention": timer.context_attention,
            "generation_attention": timer.generation_attention,
            "nccl": self._all_reduce,
            "elementwise": self._elementwise,
        }
        if self._planner.sparse_layers:
            # No measured indexer table exists: the deployment GPU's roofline where the kernel
            # source does not time it (``kernels.IndexerTimer``).
            indexer = timer if isinstance(timer, IndexerTimer) else RooflineKernels(deployment.gpu)
            self._price["dsa_indexer"] = indexer.dsa_indexer
        if isinstance(timer, MlaTimer) and measured_mla_shape(deployment.model):
            # Measured MLA attention cores where the kernel source has them (module doc).
            mla = MeasuredMla(timer, timer, deployment.kv_precision)
            self._price["context_attention"] = mla.context_attention
            self._price["generation_attention"] = mla.generation_attention
        gpu, p = deployment.gpu, self._params
        # The engines' one-shot custom all-reduce needs peer-to-peer NVLink within a node.
        self._custom_ar = p.custom_all_reduce and gpu.gpu_link == "nvlink"
        self._custom_ar_bw = gpu.gpu_link_gb_per_s * 1e9 * p.custom_all_reduce_link_efficiency
        self._custom_ar_gpus = min(gpu.gpus_per_node, _CUSTOM_AR_MAX_GPUS)
        layers = self._planner.attention_layers
        self._prefill_floor = layers * self._launch_cost(self._planner.prefill_floor())
        self._decode_floor = layers * self._launch_cost(self._planner.decode_floor())
        self._token_cache: dict[int, float] = {}
        self._logit_cache: dict[int, float] = {}
        self._absorb_cache: dict[int, float] = {}
        self._prefill_cache: dict[tuple[int, int, int], float] = {}
        self._bucket_cache: dict[tuple[int, int], tuple[float, float]] = {}
        # ``decode_step_pricer``'s size-only parts (head, absorption) by batch size.
        self._run_parts: dict[int, tuple[float, float]] = {}
        # A plain prefill group (full attention only, no MLA decompression) is one call on
        # every full layer: a cache miss prices it without building the planner's call list.
        self._plain_prefill = not (self._planner.window_layers or self._planner.mla)
        # Token counts priced by the block (``_token_block``) where every kernel of
        # ``token_calls`` has an exact array form: the roofline's, for a model without MoE
        # layers (their routing and measured layers are per count) or DSA indexers (whose
        # token work ``tests/latency/test_compose.py`` does not hold equal: no such model).
        self._price_many: dict[str, Callable[..., Any]] | None = None
        planner = self._planner
        if type(timer) is RooflineKernels and not (planner.moe_layers or planner.sparse_layers):
            self._price_many = {
                "gemm": timer.gemm_many,
                "nccl": self._all_reduce_many,
                "elementwise": self._elementwise,
            }

    # ----- LatencyModel -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The registry spec that built this model."""
        return self._name

    @property
    def deployment(self) -> Deployment:
        """What this model prices."""
        return self._deployment

    @property
    def timer(self) -> KernelTimer:
        """The kernel source."""
        return self._timer

    @property
    def params(self) -> ComposeParams:
        """Overheads and elementwise costs."""
        return self._params

    def step_seconds(self, batch: BatchLike) -> float:
        """Seconds of one step (0.0 for an empty batch; see ``base.LatencyModel``)."""
        b = as_batch(batch)
        if b.size == 0:
            return 0.0
        p = self._params
        seconds = p.step_overhead_s + p.request_overhead_s * b.size
        seconds += self._token_seconds(b.num_tokens) + self._logit_seconds(b.logit_tokens)
        if b.prefill_groups:
            seconds += self._prefill_seconds(b.prefill_groups)
        if b.decode_buckets:
            seconds += self._decode_seconds(b.decode_buckets)
            seconds += self._absorb_seconds(int(b.decode_kv_lens.shape[0]))
            if self._planner.sparse_layers:
                seconds += self._indexer_decode_seconds(b.decode_buckets)
        return seconds

    def split_step_seconds(
        self,
        kv_lens: list[int],
        chunks: list[tuple[int, int]],
        num_tokens: int,
        bucketed: Sequence[tuple[int, int, int]] = (),
        n_bucketed: int = 0,
    ) -> float:
        """``step_seconds(Batch.of_split(kv_lens, chunks, num_tokens))``, bit for bit, without
        building the batch (the engine's mixed steps: the object and its KV-length array cost
        about as much as pricing a small step). ``n_bucketed`` further decodes may come as
        their octave buckets ``bucketed`` (``Batch.decode_buckets`` form; the engine's decode
        cohort): the same seconds as with their KV lengths in ``kv_lens`` (``num_tokens``
        counts them)."""
        size = len(kv_lens) + n_bucketed + len(chunks)
        if size == 0:
            return 0.0
        groups, buckets = split_groups(kv_lens, chunks)
        if n_bucketed:
            buckets = merge_buckets(buckets, bucketed)
        p = self._params
        # The same additions in the same order as ``step_seconds`` (floats: order matters).
        seconds = p.step_overhead_s + p.request_overhead_s * size
        seconds += self._token_seconds(num_tokens) + self._logit_seconds(size)
        if groups:
            seconds += self._prefill_seconds(groups)
        if buckets:
            seconds += self._decode_seconds(buckets)
            seconds += self._absorb_seconds(len(kv_lens) + n_bucketed)
            if self._planner.sparse_layers:
                seconds += self._indexer_decode_seconds(buckets)
        return seconds

    def decode_step_pricer(self, cache_lens: Sequence[int]) -> Callable[[int], float]:
        """``k -> step_seconds([(c + k, 1) for c in cache_lens])``, the same seconds for less
        work per call: what the engine's decode runs evaluate (a few calls per run).

        Every part but decode attention depends only on the batch size, constant over the
        run, so it is priced once; a call prices the step's octave buckets
        (``batch.DecodeRun.buckets``) and adds them in ``step_seconds``'s order, so the floats
        are the same bit for bit. Up to the last step where no request has left its octave
        (``DecodeRun.steady``: most runs, whole) the buckets' exponents, counts and prices
        are those of step 0 and only their KV sums grow, so a call is the bucket terms'
        arithmetic alone (``_decode_seconds``'s, term for term); a DSA model's indexer reads
        each step's buckets, so its calls bucket the batch.
        """
        run = DecodeRun(cache_lens)
        n = run.size
        parts = self._run_parts.get(n)
        if parts is None:
            p = self._params
            head = p.step_overhead_s + p.request_overhead_s * n
            head += self._token_seconds(n) + self._logit_seconds(n)
            parts = self._store(self._run_parts, n, (head, self._absorb_seconds(n)))
        head, absorb = parts
        decode, buckets = self._decode_seconds, run.buckets
        if self._planner.sparse_layers:
            # The DSA indexer reads the step's buckets too: every call buckets the batch.
            indexer = self._indexer_decode_seconds

            def sparse(k: int) -> float:
                at = buckets(k)
                return head + decode(at) + absorb + indexer(at)

            return sparse
        first, steady = run.steady()
        floor = -(len(first) - 1) * self._decode_floor
        cache, price = self._bucket_cache, self._bucket_price
        terms = []
        for e, b, s in first:
            edge_s, per_token_s = cache.get((b, e)) or price(b, e)
            terms.append((edge_s, per_token_s, b, s, 1 << (e - 1)))

        def at(k: int) -> float:
            if k > steady:
                return head + decode(buckets(k)) + absorb
            seconds = floor
            for at_edge, per_token, b, s, edge in terms:
                seconds += at_edge + per_token * ((s + b * k) / b - edge)
            return head + seconds + absorb

        return at

    def breakdown(self, batch: BatchLike) -> StepBreakdown:
        """Seconds per operator; the values sum to ``step_seconds(batch)``."""
        b = as_batch(batch)
        out: dict[str, float] = {}
        if b.size == 0:
            return StepBreakdown.of(out)
        calls = self._planner.token_calls(b.num_tokens) + self._planner.logit_calls(b.logit_tokens)
        calls += self._planner.prefill_calls(b.prefill_groups)
        calls += self._planner.decode_token_calls(b.num_decode)
        routed = self._measured_routed(b.num_tokens)
        if routed is not None:
            calls = [c for c in calls if c.op not in ROUTED_EXPERT_OPS]
            out["moe_experts"] = routed
        for call in calls:
            # An attention launch credit (negative count) refunds the fixed part only (see
            # ``_launch_cost``), exactly as ``step_seconds`` does.
            credit = call.count < 0 and call.kind in _ATTENTION_KINDS
            each = self._launch_cost(call) if credit else self.call_seconds(call)
            out[call.op] = out.get(call.op, 0.0) + call.count * each
        if b.num_decode:
            out["attn_decode"] = self._decode_seconds(b.decode_buckets)
            if self._planner.sparse_layers:
                indexer = self._indexer_decode_seconds(b.decode_buckets)
                out["dsa_indexer"] = out.get("dsa_indexer", 0.0) + indexer
        out["step_overhead"] = self._params.step_overhead_s
        out["request_overhead"] = self._params.request_overhead_s * b.size
        return StepBreakdown.of(out)

    def transfer_seconds(self, nbytes: float, link: Link) -> float:
        """Seconds to move ``nbytes`` over ``link`` (``transfer.transfer_seconds``)."""
        return transfer_seconds(nbytes, link)

    # ----- inspection -------------------------------------------------------------------------
    def plan(self, batch: BatchLike) -> list[KernelCall]:
        """Every kernel call of a step, decode requests grouped by exact KV length (no
        buckets): for FLOP/byte accounting and tests, not the hot path."""
        b = as_batch(batch)
        if b.size == 0:
            return []
        planner = self._planner
        calls = planner.token_calls(b.num_tokens) + planner.logit_calls(b.logit_tokens)
        calls += planner.prefill_calls(b.prefill_groups)
        if b.num_decode:
            lens, counts = np.unique(b.decode_kv_lens, return_counts=True)
            groups = list(zip(lens.tolist(), counts.tolist(), strict=True))
            calls += planner.decode_calls(groups)
            calls += planner.decode_token_calls(b.num_decode)
        return calls

    def routed_expert_seconds(self, tokens: int) -> float:
        """Seconds of every MoE layer's routed experts for ``tokens`` tokens (measured fused
        MoE where the kernel source has it, else composed; 0 for a dense model): the part an
        attention-DP instance prices on all its ranks' tokens (``data_parallel.py``)."""
        if tokens <= 0 or not self._planner.moe_layers:
            return 0.0
        routed = self._measured_routed(tokens)
        if routed is None:
            routed = self._sum(self._planner.routed_expert_calls(tokens))
        return routed

    def call_seconds(self, call: KernelCall) -> float:
        """Seconds of one call of ``call`` (ignoring ``count``)."""
        return self._price[call.kind](*call.args)

    # ----- cached parts -----------------------------------------------------------------------
    def _sum(self, calls: list[KernelCall]) -> float:
        return sum(call.count * self._price[call.kind](*call.args) for call in calls)

    def _all_reduce(self, message_bytes: float, num_gpus: int) -> float:
        """The kernel source's (NCCL) all-reduce, or the engine's custom all-reduce where it
        applies and is faster (``ComposeParams.custom_all_reduce``)."""
        nccl = self._timer.all_reduce(message_bytes, num_gpus)
        if (
            not self._custom_ar_on(num_gpus)
            or message_bytes > self._params.custom_all_reduce_max_bytes
        ):
            return nccl
        custom: float = self._custom_ar_seconds(message_bytes, num_gpus)
        return min(nccl, custom)

    def _all_reduce_many(
        self, message_bytes: NDArray[np.float64], num_gpus: int
    ) -> NDArray[np.float64]:
        """``_all_reduce`` of each message size, bit for bit (the same operations
        elementwise; ``np.minimum`` picks the value ``min`` does)."""
        # The roofline's ring formula has no branch on the size: it takes the array as is.
        timer: Any = self._timer  # typed for floats; the roofline's takes arrays as well
        nccl: NDArray[np.float64] = timer.all_reduce(message_bytes, num_gpus)
        if not self._custom_ar_on(num_gpus):
            return nccl
        custom = np.minimum(nccl, self._custom_ar_seconds(message_bytes, num_gpus))
        return np.where(message_bytes > self._params.custom_all_reduce_max_bytes, nccl, custom)

    def _custom_ar_on(self, num_gpus: int) -> bool:
        """Whether the engine's custom all-reduce may run over ``num_gpus`` GPUs (NVLink
        within a node, at most 8; messages up to its buffer)."""
        return self._custom_ar and 1 < num_gpus <= self._custom_ar_gpus

    def _custom_ar_seconds(self, message_bytes: Any, num_gpus: int) -> Any:
        """Seconds of the engine's custom all-reduce of ``message_bytes`` (a float, or an
        array of them) over ``num_gpus`` GPUs: its floor plus the ring's traffic."""
        p = self._params
        wire = 2.0 * (num_gpus - 1) / num_gpus * message_bytes / self._custom_ar_bw
        floor = p.custom_all_reduce_base_s + p.custom_all_reduce_per_gpu_s * (num_gpus - 1)
        return floor + wire

    def _elementwise(self, moved_bytes: float, kernels: int) -> float:
        return moved_bytes / self._elementwise_bw + kernels * self._params.elementwise_launch_s

    def _token_seconds(self, tokens: int) -> float:
        hit = self._token_cache.get(tokens)
        if hit is None:
            if self._price_many is not None:
                return self._token_block(tokens, self._price_many)
            calls = self._planner.token_calls(tokens)
            routed = self._measured_routed(tokens)
            if routed is None:
                value = self._sum(calls)
            else:
                value = routed + self._sum([c for c in calls if c.op not in ROUTED_EXPERT_OPS])
            hit = self._store(self._token_cache, tokens, value)
        return hit

    def _token_block(self, tokens: int, price_many: dict[str, Callable[..., Any]]) -> float:
        """``_token_seconds(tokens)``, pricing (and caching) the ``_TOKEN_BLOCK`` counts of
        its block in one numpy pass, bit for bit the same seconds as one at a time: the
        planner's arithmetic on an int64 array of counts is the same integer and IEEE
        operations elementwise, every kernel is priced by its array form (``price_many``:
        ``RooflineKernels.gemm_many``, ``_all_reduce_many``, the elementwise formula as is),
        and the calls are added in the same order. (``tests/latency/test_compose.py`` holds
        the two equal.)"""
        first = max(1, tokens - tokens % _TOKEN_BLOCK)
        counts = np.arange(first, first + _TOKEN_BLOCK, dtype=np.int64)
        # The planner's formulas take the array as they take an int (no branch on the count).
        calls = self._planner.token_calls(counts)  # type: ignore[arg-type]
        seconds: NDArray[np.float64] = sum(
            call.count * price_many[call.kind](*call.args) for call in calls
        )
        cache = self._token_cache
        if len(cache) + _TOKEN_BLOCK > _CACHE_LIMIT:
            cache.clear()
        cache.update(zip(counts.tolist(), seconds.tolist(), strict=True))
        return cache[tokens]

    def _measured_routed(self, tokens: int) -> float | None:
        """Seconds of every MoE layer's routed experts for ``tokens``: vLLM's Marlin layer where
        the engine runs it (``_marlin_routed``, whatever else the table measured), else the
        kernel source's measured fused-MoE layer (module doc); None where it has neither."""
        if self._moe_shape is None or tokens <= 0:
            return None
        marlin = self._marlin_routed(tokens)
        if marlin is not None:  # the engine runs Marlin, whatever else the table measured
            return marlin
        fused = self._fused_moe
        hit = None if fused is None else fused.fused_moe(tokens, self._moe_shape)
        if hit is None:
            return None
        seconds, anchor = hit
        planner = self._planner
        if anchor != tokens:  # beyond the measured tokens: the composition's growth from there
            edge = self._sum(planner.routed_expert_calls(anchor))
            if edge > 0:
                seconds *= self._sum(planner.routed_expert_calls(tokens)) / edge
        return seconds * planner.moe_layers

    def _marlin_routed(self, tokens: int) -> float | None:
        """Every MoE layer's routed experts in vLLM's Marlin kernel (module doc), or None where
        the engine does not run it or nothing measured it: the composition, but never below the
        measured Marlin layer carried to this shape. That carried time scales the reference's
        fixed launch costs with the weights, so it is a floor, not the price: it decides at
        prefill sizes (Marlin's ``mma.sync`` tiles reach 150-270 of Hopper's ~990 bf16
        TFLOPS), the composition at decode sizes (a few hundred tokens and below)."""
        if self._marlin_moe is None or self._moe_shape is None:
            return None
        floor = self._marlin_moe.marlin_moe(tokens, self._moe_shape)
        if floor is None:
            return None
        composed = self._sum(self._planner.routed_expert_calls(tokens))
        return max(composed, floor * self._planner.moe_layers)

    def _logit_seconds(self, logit_tokens: int) -> float:
        hit = self._logit_cache.get(logit_tokens)
        if hit is None:
            value = self._sum(self._planner.logit_calls(logit_tokens))
            hit = self._store(self._logit_cache, logit_tokens, value)
        return hit

    def _absorb_seconds(self, num_decode: int) -> float:
        hit = self._absorb_cache.get(num_decode)
        if hit is None:
            value = self._sum(self._planner.decode_token_calls(num_decode))
            hit = self._store(self._absorb_cache, num_decode, value)
        return hit

    def _prefill_seconds(self, groups: tuple[tuple[int, int, int], ...]) -> float:
        seconds = -(len(groups) - 1) * self._prefill_floor
        cache, planner = self._prefill_cache, self._planner
        for group in groups:
            hit = cache.get(group)
            if hit is None:
                c, n, k = group
                if self._plain_prefill:
                    # ``_sum(prefill_calls(...))`` of its one call: 0 + count x seconds.
                    attention = self._price["context_attention"]
                    value = planner.full_layers * attention(*planner.prefill_args(k, n, c))
                else:
                    value = self._sum(planner.prefill_calls(((c, n, k),)))
                hit = self._store(cache, group, value)
            seconds += hit
        return seconds

    def _launch_cost(self, smallest: KernelCall) -> float:
        """The fixed part of one call of ``smallest``'s kernel: ``2·t(1) − t(2)``, its time for
        one request extrapolated to none (≥ 0).

        Merged groups pay it once (the credit above). The whole one-request time would also
        credit away that request's own work, so a batch whose requests fall into two groups
        would cost less than the same requests in one group (a fitted model with per-request
        terms showed it: two decodes at KV 1 and 2 priced below two at KV 1).
        """
        one = self.call_seconds(smallest)
        pair = KernelCall(smallest.op, smallest.kind, (2, *smallest.args[1:]), 1)  # batch = 2
        return max(0.0, 2.0 * one - self.call_seconds(pair))

    def _decode_seconds(self, buckets: Sequence[tuple[int, int, int]]) -> float:
        """Decode attention over all layers, KV lengths bucketed by octave (module doc);
        ``buckets`` is ``Batch.decode_buckets``."""
        if not buckets:
            return 0.0
        seconds = -(len(buckets) - 1) * self._decode_floor
        cache = self._bucket_cache
        for e, b, s in buckets:
            hit = cache.get((b, e))
            if hit is None:
                hit = self._bucket_price(b, e)
            seconds += hit[0] + hit[1] * (s / b - (1 << (e - 1)))
        return seconds

    def _indexer_decode_seconds(self, buckets: Sequence[tuple[int, int, int]]) -> float:
        """A DSA model's indexer over every decode of the step, one call for the batch: the
        decodes and their summed KV lengths from ``Batch.decode_buckets``."""
        count = sum(b for _, b, _ in buckets)
        total = sum(s for _, _, s in buckets)
        call = self._planner.indexer_decode_call(count, total)
        return call.count * self._price["dsa_indexer"](*call.args)

    def _bucket_price(self, count: int, exponent: int) -> tuple[float, float]:
        """``_bucket(count, exponent)``, cached."""
        cache = self._bucket_cache
        hit = cache.get((count, exponent))
        if hit is None:
            hit = self._store(cache, (count, exponent), self._bucket(count, exponent))
        return hit

    def _bucket(self, count: int, exponent: int) -> tuple[float, float]:
        """(seconds at the bucket's lower edge, seconds per token of KV) for ``count`` decodes."""
        lo, hi = 1 << (exponent - 1), 1 << exponent
        t_lo, t_hi = self._decode_layers(count, lo), self._decode_layers(count, hi)
        return t_lo, (t_hi - t_lo) / (hi - lo)

    def _decode_layers(self, count: int, kv_len: int) -> float:
        """Decode attention of ``count`` requests at ``kv_len`` over every attention layer; a
        sliding-window layer reads at most its window (linear between the bucket's edges)."""
        planner, attention = self._planner, self._price["generation_attention"]
        seconds = planner.full_layers * attention(
            *planner.decode_args(count, planner.sparse_kv(kv_len))
        )
        if planner.window_layers:
            window = min(kv_len, planner.window)
            seconds += planner.window_layers * attention(*planner.decode_args(count, window))
        return seconds

    @staticmethod
    def _store(cache: dict[Any, Any], key: Any, value: Any) -> Any:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[key] = value
        return value


#: Kernel kinds whose launch credits refund only the fixed cost (``_launch_cost``).
_ATTENTION_KINDS = frozenset({"context_attention", "generation_attention"})


class RooflineModel(ComposedLatencyModel):
    """Operator composition priced by ``RooflineKernels`` on the deployment's GPU."""

    def __init__(
        self,
        deployment: Deployment,
        roofline: RooflineParams | None = None,
        *,
        params: ComposeParams | None = None,
        name: str = "roofline",
    ) -> None:
        super().__init__(
            deployment, RooflineKernels(deployment.gpu, roofline), name=name, params=params
        )
