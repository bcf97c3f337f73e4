"""``ServingConfig``: one serving deployment the simulator can run, as a validated model.

Flat on purpose (but for the two PD pools): each field is one knob of the search space
(``optimizer/space.py`` maps trial parameters onto these names 1:1) and one key of a ``simulate``
config file. ``None`` means "the backend preset's default" (``simulator/data/presets``). Names
(model, GPU, storage tier) are checked against the catalog when the configuration is simulated,
because users may bring their own catalog; everything else is checked here, with one-line messages.

Units: GiB for memory sizes (2**30 bytes), tokens, seconds.

PD disaggregation (``pd_mode: disaggregated``): a prefill pool and a decode pool, each with its own
GPU type, TP, instance count and engine limits (``prefill`` / ``decode``, a ``PoolConfig``; a
``None`` field means the top-level one), serving the one ``model``; ``instances`` is then unused.
Today's flat twin keys (``prefill_tp``, ...) are still read (``pool_config.py``). Engine knobs and
KV tiers apply to every instance of both pools; the L3 store is shared by both. Semantics (TTFT,
TPOT, the KV transfer) are in ``simulator/cluster/pd.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hardware.schema import MAX_STORAGE_GIB
from simulator.cluster.autoscale import AutoscaleConfig, fold_autoscale_keys
from simulator.cluster.router import ROUTERS, parse_router_spec
from simulator.engine.admission import KvAdmission
from simulator.engine.remote import PdFirstToken
from simulator.engine.scheduler import SCHEDULERS
from simulator.kvcache.policies import POLICIES
from simulator.latency.deployment import LinearStatePrecision
from simulator.latency.moe_table import Mxfp4Activation
from simulator.pool_config import POOLS, PoolConfig, PoolName, fold_pool_keys
from simulator.presets import MAX_CPU_US
from slo.inputfile import load_input_file

__all__ = ["ServingConfig"]

_CpuUs = Annotated[float, Field(ge=0, le=MAX_CPU_US)]


class ServingConfig(BaseModel):
    """A model served on a pool of identical instances with a 1–3 tier KV cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # ----- model and hardware -------------------------------------------------------------------
    model: str = Field(description="Catalog model name, e.g. 'meta-llama/Llama-3.1-70B'.")
    gpu: str = Field(description="Catalog GPU name, e.g. 'h100_sxm'.")
    tp: int = Field(default=1, ge=1, description="Tensor parallelism: GPUs per instance.")
    ep: int | None = Field(
        default=None, ge=1, description="Expert parallelism of an MoE model (None = tp)."
    )
    attention_dp: int = Field(
        default=1,
        ge=1,
        description="Attention data parallelism of an MoE model: the tp GPUs run this many "
        "ranks of tp/attention_dp GPUs, each with its own KV cache and batch, sharing the "
        "routed experts (SGLang --enable-dp-attention --dp-size, TensorRT-LLM "
        "enable_attention_dp); engine limits are per rank. 1 = off.",
    )
    pp: int = Field(
        default=1,
        ge=1,
        description="Pipeline parallelism: stages of tp GPUs each, holding consecutive layers "
        "(an instance is tp x pp GPUs; vLLM --pipeline-parallel-size, SGLang --pp-size, "
        "TensorRT-LLM pipeline_parallel_size). Engine token budgets are per micro-batch. "
        "1 = off.",
    )
    allow_multi_node: bool = Field(
        default=False,
        description="Allow an instance beyond one server's GPUs (tensor parallelism with its "
        "all-reduce, or pipeline stages with their hops, over the inter-node network); off, "
        "such a layout is an error.",
    )
    weight_precision: Literal["bf16", "fp16", "fp8", "int8", "int8_wo", "fp4", "int4"] = Field(
        default="bf16", description="Precision of the GEMM weights."
    )
    kv_precision: Literal["bf16", "fp16", "fp8", "fp4"] = Field(
        default="bf16", description="Precision of the KV cache."
    )
    instances: int = Field(default=1, ge=1, description="Identical engine instances in the pool.")
    # ----- engine -------------------------------------------------------------------------------
    backend: str = Field(
        default="vllm",
        description="Backend preset: 'vllm', 'sglang', 'trtllm' or a preset YAML file; "
        "supplies every engine default left as None here.",
    )
    scheduler: str | None = Field(
        default=None,
        description=f"Batch scheduler: one of {', '.join(SCHEDULERS)} (None = preset).",
    )
    chunk_tokens: int | None = Field(
        default=None, ge=1, description="Largest prefill chunk per request per step, tokens."
    )
    max_batched_tokens: int | None = Field(
        default=None, ge=1, description="Token budget of one step (None = preset)."
    )
    max_running_requests: int | None = Field(
        default=None, ge=1, description="Most requests admitted at once (None = preset)."
    )
    overlap_scheduling: bool | None = Field(
        default=None,
        description="Schedule step k+1 while step k runs (TensorRT-LLM overlap scheduler, "
        "SGLang overlap schedule); None = the backend preset's default.",
    )
    marlin_moe: bool | None = Field(
        default=None,
        description="Run MXFP4 experts on a GPU without fp4 tensor cores in vLLM's Marlin MoE "
        "kernel (VLLM_MXFP4_USE_MARLIN=1) instead of the engine's default; None = the "
        "backend preset's.",
    )
    mxfp4_moe_activation: Mxfp4Activation | None = Field(
        default=None,
        description="Activation precision of MXFP4 experts where the kernel runs either "
        "(Blackwell): bf16 or mxfp8 (vLLM VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1); None = the "
        "backend preset's.",
    )
    linear_state_precision: LinearStatePrecision | None = Field(
        default=None,
        description="Precision of linear-attention layers' recurrent state (Gated DeltaNet, "
        "Mamba): fp32 or bf16 (SGLang --mamba-ssm-dtype bfloat16); None = the backend "
        "preset's.",
    )
    moe_kernel: str | None = Field(
        default=None,
        min_length=1,
        description="The fused-MoE kernel the deployment runs where not the engine's default, "
        "as kernel profiles name it (part of kernel_source, e.g. flashinfer_trtllm for vLLM's "
        "VLLM_USE_FLASHINFER_MOE_INT4=1): its measured rows, in the engine's profile or one "
        "lending it that kernel's rows, price the routed experts where they exist; None = the "
        "profiles' kept kernel.",
    )
    kv_admission: KvAdmission | None = Field(
        default=None,
        description="Future KV growth set aside before admitting a request: on_demand, "
        "reserve_full, reserve_estimate or reserve_timeline (SGLang's check for requests that "
        "ignore end-of-sequence tokens with the radix cache off; simulator/engine/admission.py)"
        " (None = the backend preset's).",
    )
    frontend_us: tuple[_CpuUs, _CpuUs, _CpuUs] | None = Field(
        default=None,
        description="The serial front end's CPU time (µs) per request taken in, per prompt "
        "token taken in and per response streamed (a token at stream_interval 1), e.g. "
        "[4000, 2, 75] "
        "(simulator/engine/frontend.py); [0, 0, 0] = none; None = the backend preset's. A PD "
        "prefill pool keeps the per-prompt-token cost only, a decode pool none.",
    )
    tokenize_us_per_prompt_token: _CpuUs | None = Field(
        default=None,
        description="Latency before the engine sees a request: the API server tokenising its "
        "prompt, µs per prompt token (None = the backend preset's).",
    )
    scheduler_recv_interval: int | None = Field(
        default=None,
        ge=1,
        description="Decode-only steps between the scheduler's looks at newly arrived requests "
        "while it runs (SGLang --scheduler-recv-interval: a step with a prefill, or an idle "
        "engine, looks at once); None = the backend preset's (1).",
    )
    stream_interval: int | None = Field(
        default=None,
        ge=1,
        description="Decode steps per streamed response after the first token (TensorRT-LLM "
        "and SGLang stream_interval): the front end's per-response cost is spread over that "
        "many tokens; None = the backend preset's (1).",
    )
    schedule_conservativeness: float = Field(
        default=1.0,
        gt=0,
        description="reserve_estimate (SGLang --schedule-conservativeness): scales the share "
        "of running requests' remaining output set aside (lower admits more).",
    )
    spec_tokens: int = Field(
        default=0,
        ge=0,
        description="Speculative decoding: draft tokens proposed per decode step (0 = off; "
        "EAGLE / MTP / draft model).",
    )
    spec_acceptance: float = Field(
        default=0.7,
        gt=0,
        le=1,
        description="Speculative decoding: probability that a draft token is accepted, given "
        "the ones before it (an input: it depends on the draft, the model and the data).",
    )
    spec_draft_layers: float = Field(
        default=1.0,
        ge=0,
        le=1000,
        description="Speculative decoding: cost of one draft token in decoder layers of the "
        "model (1 for MTP and EAGLE heads).",
    )
    hbm_utilization: float | None = Field(
        default=None, gt=0, le=1, description="Fraction of HBM the engine may use (None = preset)."
    )
    cuda_graphs_in_kv_budget: bool | None = Field(
        default=None,
        description="Whether the engine takes its CUDA graphs' memory off the KV pool (vLLM "
        "0.21+ estimates them while profiling; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 "
        "turns it off) rather than capturing them in what its memory fraction leaves; None = "
        "the backend preset's.",
    )
    kv_capacity_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Override the L1 KV capacity (tokens per instance) instead of fitting "
        "weights and KV into HBM; for what-if studies and analytic tests.",
    )
    kv_capacity_scale: float = Field(
        default=1.0,
        gt=0,
        le=100,
        description="What-if factor on the L1 KV capacity of every instance, after the memory "
        "fit (or kv_capacity_tokens): 0.9 asks what a pool 10% smaller than the rule's does. "
        "Near the KV-capacity edge predictions move steeply with the pool, and an engine's "
        "own sizing can differ from the rule's (bench/README.md, 'KV-capacity margin').",
    )
    preemption: Literal["recompute", "swap"] = Field(
        default="recompute",
        description="What happens to a request preempted when L1 runs out: recompute its KV "
        "later, or swap it to L2 (needs L2; falls back to recompute when L2 is full).",
    )
    latency_model: str = Field(
        default="auto",
        description="Step-time model: 'auto' (the measured kernel table of the GPU and "
        "backend's engine where one exists, else the roofline), 'roofline', 'table[:DIR]', "
        "'calibrated[:FILE]', or the analytic 'constant:SECONDS' / "
        "'linear:BASE,PER_TOKEN[,PER_CONTEXT_TOKEN]'.",
    )
    kernel_profiles_dir: str | None = Field(
        default=None,
        description="Directory of user-imported kernel profiles (`kvplan profiles import`; "
        "one sub-directory per GPU), preferred over the shipped ones; None = shipped only.",
    )
    latency_cache_dir: str | None = Field(
        default=None,
        description="Directory where built kernel tables are kept between runs (the CLI "
        "passes $XDG_CACHE_HOME/kvplan/tables); None = every process builds its own. "
        "Never changes a result.",
    )
    router: str = Field(
        default="round_robin",
        description=f"Request router: one of {', '.join(ROUTERS)}, optionally with "
        "parameters 'name:key=value,...', e.g. 'cache_aware:cache_threshold=0.5' "
        "(simulator/cluster/router.py).",
    )
    # ----- KV tiers -----------------------------------------------------------------------------
    prefix_caching: bool | None = Field(
        default=None,
        description="Reuse cached KV blocks across requests that share a prefix (vLLM "
        "--enable-prefix-caching, SGLang's radix cache); off, every request computes its "
        "whole prompt and holds its own blocks. None = the backend preset's default.",
    )
    l1_policy: str = Field(default="lru", description="Eviction policy of the HBM tier (L1).")
    l2_dram_gib: float = Field(
        default=0.0,
        ge=0,
        le=MAX_STORAGE_GIB,
        description="Host DRAM KV tier (L2) per instance, GiB; 0 = none.",
    )
    l2_policy: str = Field(default="lru", description="Eviction policy of the DRAM tier (L2).")
    l3_tier: str | None = Field(
        default=None,
        description="Catalog storage tier of the L3 store shared by all instances "
        "(e.g. 'nvme_4tib', 'pool_16tib'); None = no L3.",
    )
    l3_capacity_gib: float | None = Field(
        default=None,
        gt=0,
        le=MAX_STORAGE_GIB,
        description="L3 capacity in GiB (None = the tier's default).",
    )
    l3_policy: str = Field(default="lru", description="Eviction policy of the L3 store.")
    write_policy: Literal["write_through", "write_back"] = Field(
        default="write_through",
        description="write_through: copy a block to L2 (and L3) when it is computed; "
        "write_back: copy it one tier down when it is evicted.",
    )
    prefetch_policy: Literal["best_effort", "wait_complete", "timeout"] = Field(
        default="best_effort",
        description="When a request with an L3 hit may start: with what has arrived when "
        "the GPU is ready, only after the whole prefetch, or after a timeout.",
    )
    prefetch_timeout_base_s: float = Field(
        default=1.0, ge=0, description="'timeout' policy: fixed allowance, seconds."
    )
    prefetch_timeout_per_1k_tokens_s: float = Field(
        default=0.25,
        ge=0,
        description="'timeout' policy: extra seconds per 1024 prefetched tokens (SGLang's "
        "per-ki-token allowance).",
    )
    l3_prefetch_threshold_tokens: int = Field(
        default=256, ge=0, description="Smallest L3 hit worth prefetching, tokens (SGLang: 256)."
    )
    l3_write_backlog_s: float = Field(
        default=1.0,
        ge=0,
        description="Seconds of queued L3 writes beyond which new copies are dropped (an "
        "assumption: a store that falls behind skips copies rather than stall).",
    )
    # ----- PD disaggregation --------------------------------------------------------------------
    pd_mode: Literal["aggregated", "disaggregated"] = Field(
        default="aggregated",
        description="aggregated: every instance prefills and decodes; disaggregated: a "
        "prefill pool hands each request's KV to a decode pool after its first token.",
    )
    prefill: PoolConfig | None = Field(
        default=None,
        description="Disaggregated: the prefill pool (instances, gpu, tp, limits; "
        "simulator/pool_config.py).",
    )
    decode: PoolConfig | None = Field(
        default=None,
        description="Disaggregated: the decode pool (instances, gpu, tp, limits, router).",
    )
    autoscale: AutoscaleConfig | None = Field(
        default=None,
        description="Aggregated pools: start and drain instances as the load moves, up to "
        "'instances' (simulator/cluster/autoscale.py).",
    )
    pd_transfer_overlap: Literal["none", "layerwise"] = Field(
        default="none",
        description="Disaggregated: 'none' = the prompt's KV moves after the prefill, the "
        "whole transfer delays the second token (vLLM/SGLang connectors); 'layerwise' = it "
        "streams layer by layer during the prefill (Mooncake), exposing about one layer's "
        "share when the decode side has room at once.",
    )

    pd_first_token: PdFirstToken | None = Field(
        default=None,
        description="Disaggregated: where the client's first token comes from: 'prefill' = "
        "the prefill instance, when its prefill ends; 'decode_ready' = the decode instance, "
        "once the request holds a running slot there and its KV has arrived (SGLang); "
        "'decode_step' = the decode instance, at the end of the request's first step there "
        "(vLLM KV-connector proxy, TensorRT-LLM disaggregated); None = the backend preset's "
        "(simulator/cluster/pd.py).",
    )

    # ----- validation ---------------------------------------------------------------------------
    @field_validator("scheduler")
    @classmethod
    def _known_scheduler(cls, value: str | None) -> str | None:
        if value is not None and value not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {value!r}; known: {', '.join(SCHEDULERS)}")
        return value

    @field_validator("router")
    @classmethod
    def _known_router(cls, value: str) -> str:
        parse_router_spec(value)  # one-line ValueError naming the router and parameter
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_model(cls, data: Any) -> Any:
        # Per-pool models are not fields; say why rather than "extra inputs are not permitted".
        if isinstance(data, dict):
            for key in ("prefill_model", "decode_model"):
                if key in data and data[key] != data.get("model"):
                    raise ValueError(
                        f"{key} ({data[key]!r}) differs from model ({data.get('model')!r}): "
                        "both PD pools must serve the same model (a decode instance continues "
                        "from the prefill's KV); set 'model' only"
                    )
            drop = ("prefill_model", "decode_model")
            if any(key in data for key in drop):
                data = {k: v for k, v in data.items() if k not in drop}
        return data

    @model_validator(mode="before")
    @classmethod
    def _nested_pools(cls, data: Any) -> Any:
        # Files written before PoolConfig use flat twin keys (prefill_tp, ...): still accepted;
        # search spaces name the autoscaling fields flat (autoscale_target_concurrency, ...).
        if not isinstance(data, dict):
            return data
        return fold_autoscale_keys(fold_pool_keys(data)[0])

    @field_validator("l1_policy", "l2_policy", "l3_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        policy = POLICIES.get(value)
        if policy is None:
            raise ValueError(f"unknown eviction policy {value!r}; known: {', '.join(POLICIES)}")
        if policy.needs_next_access:
            raise ValueError(
                f"policy {value!r} is an oracle (needs future accesses); the serving engine "
                "cannot annotate the future — use it with `kvplan replay`"
            )
        return value

    @field_validator("latency_model", "backend")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.l3_tier is None and self.l3_capacity_gib is not None:
            raise ValueError("l3_capacity_gib is set but l3_tier is not")
        if self.l3_tier is not None and self.l2_dram_gib <= 0:
            raise ValueError(
                "an L3 tier needs an L2 tier: set l2_dram_gib > 0 (prefetches land there)"
            )
        if self.preemption == "swap" and self.l2_dram_gib <= 0:
            raise ValueError("preemption 'swap' needs an L2 tier: set l2_dram_gib > 0")
        for tier in ("l1", "l2"):
            name = getattr(self, f"{tier}_policy")
            if not POLICIES[name].supports_pinning:
                raise ValueError(
                    f"{tier}_policy {name!r} cannot honour pins; in-flight requests pin their "
                    "blocks, so the engine needs a pinning policy"
                )
        if (
            self.chunk_tokens
            and self.max_batched_tokens
            and self.chunk_tokens > self.max_batched_tokens
        ):
            raise ValueError(
                f"chunk_tokens ({self.chunk_tokens}) must not exceed max_batched_tokens "
                f"({self.max_batched_tokens})"
            )
        if (
            self.max_batched_tokens
            and self.max_running_requests
            and self.max_batched_tokens < self.max_running_requests
        ):
            raise ValueError(
                f"max_batched_tokens ({self.max_batched_tokens}) must be at least "
                f"max_running_requests ({self.max_running_requests}): every running request "
                "decodes one token per step"
            )
        self._check_layout()
        self._check_pd()
        if self.autoscale is not None:
            if self.pd_mode != "aggregated":
                raise ValueError(
                    "autoscale: a disaggregated deployment scales each pool on its own; set "
                    "prefill.autoscale and/or decode.autoscale instead"
                )
            _check_autoscale_bounds("autoscale", self.autoscale, self.instances)
        return self

    def _check_layout(self) -> None:
        if self.ep is not None and self.tp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide tp ({self.tp})")
        # Disaggregated pools check their own TP (``_check_pd``).
        if self.pd_mode == "aggregated" and self.tp % self.attention_dp:
            raise ValueError(f"attention_dp ({self.attention_dp}) must divide tp ({self.tp})")

    def _check_pd(self) -> None:
        if self.pd_mode == "aggregated":
            for pool in POOLS:
                settings = getattr(self, pool)
                given = settings.given() if settings is not None else []
                if settings is not None:
                    where = f"{pool}.{given[0]}" if given else pool
                    raise ValueError(
                        f"{where} is set but pd_mode is 'aggregated'; set pd_mode: disaggregated"
                    )
            return
        if self.prefill is not None and self.prefill.router is not None:
            raise ValueError(
                "prefill.router: the prefill instance is picked by 'router'; a pool router "
                "exists for the decode pool only"
            )
        for pool in POOLS:
            count = self.pool(pool).instances
            if count is None:
                raise ValueError(f"pd_mode 'disaggregated' needs {pool}.instances")
            if count < 1:
                raise ValueError(
                    f"{pool}.instances is 0: a disaggregated deployment needs at least one "
                    f"{pool} instance"
                )
            tp = self.pool_shape(pool)[1]
            ep = self.pool_ep(pool)
            if ep is not None and tp % ep:
                where = f"{pool}.ep" if self.pool(pool).ep is not None else "ep"
                raise ValueError(f"{where} ({ep}) must divide {pool}.tp ({tp})")
            settings = self.pool(pool)
            if settings.autoscale is not None:
                _check_pool_autoscale(pool, settings.autoscale, count)
            dp = self.pool_attention_dp(pool)
            if tp % dp:
                raise ValueError(f"{pool}.attention_dp ({dp}) must divide {pool}.tp ({tp})")
            budget, running = self.pool_limits(pool)
            if budget and running and budget < running:
                raise ValueError(
                    f"{pool}: max_batched_tokens ({budget}) must be at least "
                    f"max_running_requests ({running}): every running request decodes one "
                    "token per step"
                )

    def pool(self, name: PoolName) -> PoolConfig:
        """The settings of a PD pool as given (all ``None`` when the pool is not given)."""
        settings: PoolConfig | None = self.prefill if name == "prefill" else self.decode
        return settings if settings is not None else PoolConfig()

    def pool_limits(self, pool: PoolName | None) -> tuple[int | None, int | None]:
        """(step token budget, most running requests) of a pool's instances (None = the
        preset's); ``pool`` None for an aggregated deployment."""
        budget, running = self.max_batched_tokens, self.max_running_requests
        if pool is None:
            return budget, running
        settings = self.pool(pool)
        return (
            settings.max_batched_tokens or budget,
            settings.max_running_requests or running,
        )

    def pool_shape(self, pool: PoolName) -> tuple[str, int, int]:
        """(GPU, TP, instances) of a disaggregated pool, defaults filled in."""
        settings = self.pool(pool)
        return settings.gpu or self.gpu, settings.tp or self.tp, settings.instances or 0

    def pool_pp(self, pool: PoolName | None) -> int:
        """Pipeline stages of an instance of ``pool`` (None: the aggregated pool)."""
        if pool is None:
            return self.pp
        return self.pool(pool).pp or self.pp

    def pool_attention_dp(self, pool: PoolName | None) -> int:
        """Attention DP ranks of an instance of ``pool`` (None: the aggregated pool)."""
        if pool is None:
            return self.attention_dp
        return self.pool(pool).attention_dp or self.attention_dp

    def pool_ep(self, pool: PoolName | None) -> int | None:
        """Expert parallelism of an instance of ``pool`` (None: the aggregated pool); None
        where neither the pool nor the deployment sets one."""
        if pool is None:
            return self.ep
        own = self.pool(pool).ep
        return self.ep if own is None else own

    def decode_router(self) -> str:
        """Router spec that picks the decode instance after a prefill (the pool's, else
        ``router``)."""
        return self.pool("decode").router or self.router

    @classmethod
    def from_yaml(cls, path: str | Path) -> ServingConfig:
        """Read a config file (YAML, TOML or JSON; keys are the field names), one-line errors."""
        return load_input_file(path, cls)


def _check_autoscale_bounds(where: str, policy: AutoscaleConfig, instances: int) -> None:
    lowest = max(policy.min_instances, policy.initial_instances or 0)
    if lowest > instances:
        raise ValueError(
            f"{where}: min/initial instances ({lowest}) exceed instances ({instances}), the "
            "most the pool may run"
        )


#: The latency target each PD pool's SLO policy may act on, and the pool that makes the other:
#: the first token is emitted by the prefill instance, every later one by the decode instance.
_POOL_TARGET = {
    "prefill": ("ttft_ms_target", "tpot_ms_target"),
    "decode": ("tpot_ms_target", "ttft_ms_target"),
}


def _check_pool_autoscale(pool: PoolName, policy: AutoscaleConfig, instances: int) -> None:
    """A pool's policy fits the pool: its bounds, and (policy slo) only the target it makes."""
    _check_autoscale_bounds(f"{pool}.autoscale", policy, instances)
    own, other = _POOL_TARGET[pool]
    if policy.policy == "slo" and getattr(policy, other) is not None:
        maker = "decode" if pool == "prefill" else "prefill"
        raise ValueError(
            f"{pool}.autoscale.{other}: the {maker} pool makes that latency, not the {pool} "
            f"pool; give it under {maker}.autoscale (this pool scales on {own})"
        )
