"""Serving-engine presets: the defaults of vLLM, SGLang and TensorRT-LLM as data.

Each preset is a YAML file in ``simulator/data/presets/`` whose every number carries a comment
naming its source (the engine's documented or coded default) or saying it is an assumption.
``load_preset`` takes a preset name or a path to a user YAML file with the same fields; both are
validated by ``BackendPreset`` and fail with a one-line ``InputError``.

A preset feeds two things: ``compose_params()`` (framework CPU overheads for the latency model)
and ``memory_params(tp)`` (the HBM budget for ``memory_fit``). The scheduler and block size are
read by the engine.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hardware.schema import GpuSpec
from simulator.engine.admission import KvAdmission
from simulator.engine.remote import PdFirstToken
from simulator.engine.scheduler import SCHEDULERS
from simulator.latency.compose import ComposeParams
from simulator.latency.deployment import Fp8WeightOnly, LinearStatePrecision
from simulator.latency.memory import MemoryAccounting, MemoryParams
from simulator.latency.memory_rules import (
    SGLANG_MXFP4_ALIGNMENT,
    VLLM_MXFP4_ALIGNMENT,
    sglang_memory_defaults,
    sglang_mxfp4_backend,
    vllm_batch_defaults,
    vllm_mxfp4_backend,
)
from simulator.latency.moe_table import Mxfp4Activation
from slo.inputfile import InputError, load_mapping, validate

__all__ = ["BACKEND_PRESETS", "MAX_CPU_US", "BackendPreset", "EngineLimits", "load_preset"]

#: The largest CPU cost (front end, tokenising, step and launch overheads) a preset or a config
#: may give, µs: 10 s per request, token or step, far past any server. A mistyped exponent
#: (1e300) put events where adding a step no longer moved the clock: the simulation never ended.
MAX_CPU_US = 1e7

#: Shipped presets: name → file in ``simulator/data/presets``.
BACKEND_PRESETS: dict[str, str] = {
    "vllm": "vllm.yaml",
    "sglang": "sglang.yaml",
    "trtllm": "trtllm.yaml",
}


class EngineLimits(NamedTuple):
    """An engine's default batch limits on one GPU (``BackendPreset.limits_for``)."""

    #: Tokens of one step (prefill chunks plus decode tokens).
    max_batched_tokens: int
    #: Requests scheduled in one step.
    max_running_requests: int
    #: Largest prefill chunk of one request in one step, tokens, before the step budget
    #: bounds it (the engine's chunk is the smaller of the two: vLLM's is the budget).
    chunk_tokens: int
    #: Why they differ from the preset's numbers, one clause; empty where they do not.
    note: str


class BackendPreset(BaseModel):
    """One serving engine's defaults (every field documented; see the shipped YAML files)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Preset name, e.g. 'vllm'.")
    description: str = Field(default="", description="Engine and version the numbers describe.")
    max_batched_tokens: int = Field(
        ge=1, description="Token budget of one engine step (prefill chunks plus decode tokens)."
    )
    chunked_prefill_tokens: int = Field(
        ge=1, description="Largest prefill chunk of one request in one step, in tokens."
    )
    chunked_prefill_rule: Literal["fixed", "sglang_gpu_memory"] = Field(
        default="fixed",
        description="Where the chunk comes from: fixed = chunked_prefill_tokens; "
        "sglang_gpu_memory = SGLang's default chunked_prefill_size for the GPU's memory "
        "(simulator/latency/memory_rules.py SGLANG_BUCKETS: 4096 below 60 GiB, 8192 to "
        "160 GiB, 16384 above), chunked_prefill_tokens only where the memory is unknown.",
    )
    batch_defaults_rule: Literal["fixed", "vllm_gpu_class"] = Field(
        default="fixed",
        description="Where the step budget and running cap come from: fixed = "
        "max_batched_tokens and max_running_requests; vllm_gpu_class = those on GPUs of at "
        "least 70 GiB other than A100, vLLM's 2048 tokens (also the chunk) and 256 requests "
        "on every other GPU (simulator/latency/memory_rules.py vllm_batch_defaults).",
    )
    max_running_requests: int = Field(ge=1, description="Most requests scheduled in one step.")
    scheduler: str = Field(
        description="Batch composition policy: a name of the engine's Scheduler family "
        f"({', '.join(SCHEDULERS)})."
    )

    @field_validator("scheduler")
    @classmethod
    def _known_scheduler(cls, value: str) -> str:
        if value not in SCHEDULERS:  # the registry is the one list of names
            raise ValueError(f"unknown scheduler {value!r}; known: {', '.join(SCHEDULERS)}")
        return value

    kv_block_tokens: int = Field(ge=1, description="Tokens per KV-cache block (page).")
    prefix_caching: bool = Field(
        default=True, description="Whether automatic prefix caching is on by default."
    )
    hbm_utilization: float = Field(
        gt=0, le=1, description="Fraction of HBM the engine may use (see memory_accounting)."
    )
    hbm_utilization_by_tp: dict[int, float] = Field(
        default_factory=dict,
        description="Overrides of hbm_utilization by TP size: the entry with the largest "
        "key <= tp applies (SGLang lowers its fraction as TP grows).",
    )
    memory_accounting: MemoryAccounting = Field(
        description="reserve_inside: the fraction covers weights, activations and KV (vLLM); "
        "reserve_outside: it covers weights and KV only (SGLang mem_fraction_static); "
        "fraction_of_free: KV gets the fraction of memory left after weights and activations "
        "(TensorRT-LLM free_gpu_memory_fraction)."
    )
    mem_fraction_rule: Literal["fixed", "sglang_reserved"] = Field(
        default="fixed",
        description="fixed: hbm_utilization (by TP) as given; sglang_reserved: derived from "
        "the GPU's memory as SGLang 0.5.4+ does (simulator/latency/memory_rules.py).",
    )
    framework_reserve_gib: float = Field(
        ge=0,
        description="Per-GPU memory the engine holds besides weights, activations and KV when "
        "it sizes the pool (NCCL, cuBLAS and allocator workspaces, CUDA context), GiB.",
    )
    cuda_graph_gib: float = Field(
        default=0.0,
        ge=0,
        description="CUDA-graph memory allocated after the KV pool, outside the accounting "
        "(it must fit in what the fraction leaves), GiB.",
    )
    cuda_graphs_in_kv_budget: bool = Field(
        default=False,
        description="Whether the engine estimates its CUDA graphs while profiling and takes "
        "cuda_graph_gib off the KV pool (vLLM 0.21+, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS) "
        "instead of capturing them in the memory the fraction leaves.",
    )
    collective_gib: float = Field(
        default=0.0,
        ge=0,
        description="Per-GPU memory of the collectives (NCCL communicators, all-reduce "
        "buffers) of a tensor-parallel group spanning GPUs, allocated before the KV pool is "
        "sized, GiB (simulator/latency/memory.py).",
    )
    pcie_collective_gib: float = Field(
        default=0.0,
        ge=0,
        description="collective_gib where the GPUs talk over PCIe only (no NVLink; "
        "GpuSpec.gpu_link 'pcie'): NCCL runs few channels there and the engines' NVLink "
        "all-reduce buffers are not set up, GiB.",
    )
    startup_gib: float = Field(
        default=0.0,
        ge=0,
        description="Per-GPU memory already taken when the engine reads the total its static "
        "fraction applies to (memory_accounting reserve_outside): the driver's reserve in the "
        "catalog's nvidia-smi total and the CUDA context, GiB (simulator/latency/memory.py).",
    )
    sampler_logit_copies: float | None = Field(
        default=None,
        gt=0,
        description="fp32 copies of max_running_requests rows of logits the sampler holds at "
        "its peak, where the engine profiles it after the forward pass (the activation peak "
        "is then the larger of the two); unset: one copy on top of the forward pass "
        "(simulator/latency/memory.py).",
    )
    kv_cache_dtype_auto: Literal["checkpoint", "model_dtype"] = Field(
        default="checkpoint",
        description="What --kv-cache-dtype auto means: checkpoint = the checkpoint's KV "
        "quantisation (ModelOpt kv_cache_quant_algo), else the model dtype; model_dtype = "
        "always the model dtype (hardware/checkpoints.py).",
    )
    overlap_scheduling: bool = Field(
        default=False,
        description="Whether the engine schedules the next step while the current one runs "
        "(new requests then join a busy engine one step later).",
    )
    pd_prefill_overlap_scheduling: bool | None = Field(
        default=None,
        description="Overlap scheduling of a PD prefill pool's instances (None: as "
        "overlap_scheduling); TensorRT-LLM's context servers run without it.",
    )
    overlap_prefill_lag: bool = Field(
        default=False,
        description="With overlap scheduling: a step's first tokens reach their clients only "
        "when the next step ends if that step runs a prefill (TensorRT-LLM's overlap loop "
        "hands out step k's responses after launching step k+1, and a context step's launch "
        "returns with its GPU work).",
    )
    kv_admission: KvAdmission = Field(
        default="on_demand",
        description="Future KV growth set aside before admitting a request: on_demand (vLLM), "
        "reserve_full (TensorRT-LLM GUARANTEED_NO_EVICT), reserve_estimate (SGLang's "
        "new-token ratio), reserve_timeline (SGLang with the radix cache off, for requests "
        "that ignore end-of-sequence tokens); see simulator/engine/admission.py.",
    )
    pd_first_token: PdFirstToken = Field(
        default="prefill",
        description="Disaggregated serving: where the client's first token comes from "
        "(simulator/cluster/pd.py): prefill = the prefill instance, when its prefill ends; "
        "decode_ready = the decode instance, once the request holds a running slot there and "
        "its KV has arrived (SGLang); decode_step = the decode instance, at the end of the "
        "request's first step there (vLLM KV-connector proxy, TensorRT-LLM disaggregated).",
    )
    attention_dp_shares_limits: bool = Field(
        default=False,
        description="With attention DP, whether the prefill chunk and a max_running_requests "
        "the user sets are the whole instance's, divided among the ranks (SGLang), rather "
        "than each rank's (vLLM, TensorRT-LLM).",
    )
    frontend_request_us: float = Field(
        default=0.0,
        ge=0,
        le=MAX_CPU_US,
        description="The API server's serial CPU time per request taken in (parsing, "
        "tokenising, handing it to the executor), µs (simulator/engine/frontend.py).",
    )
    frontend_prompt_token_us: float = Field(
        default=0.0,
        ge=0,
        le=MAX_CPU_US,
        description="The API server's serial CPU time per prompt token taken in "
        "(tokenising), µs, on top of frontend_request_us.",
    )
    frontend_token_us: float = Field(
        default=0.0,
        ge=0,
        le=MAX_CPU_US,
        description="The API server's serial CPU time per response streamed back (one per "
        "generated token at stream_interval 1: detokenising, one server-sent event), µs; "
        "shares the CPU with the intake.",
    )
    scheduler_recv_interval: int = Field(
        default=1,
        ge=1,
        description="Decode-only steps between the scheduler's looks at newly arrived "
        "requests while it runs (SGLang --scheduler-recv-interval; EngineParams."
        "recv_interval): 1 = every step.",
    )
    stream_interval: int = Field(
        default=1,
        ge=1,
        description="Decode steps per streamed response after the first token (the engine's "
        "stream_interval): the front end's per-response cost is spread over that many "
        "tokens (frontend_token_us / stream_interval per token).",
    )
    tokenize_us_per_prompt_token: float = Field(
        default=0.0,
        ge=0,
        le=MAX_CPU_US,
        description="Latency before the engine sees a request: the API server tokenises its "
        "prompt text, µs per prompt token (EngineParams.tokenize_s_per_prompt_token; "
        "concurrent prompts in parallel, not a serial stage).",
    )
    eager_prefill_us_per_layer: float = Field(
        default=0.0,
        ge=0,
        le=MAX_CPU_US,
        description="Host launch time per decoder layer (of a pipeline stage) of a step that "
        "runs a prefill chunk, µs: an engine that replays CUDA graphs for decode-only steps "
        "only runs it eagerly, so it lasts at least this times the layers "
        "(EngineParams.prefill_step_floor_s); 0 = no floor. An analytic latency model "
        "(const:, linear:) states its step times itself and gets none.",
    )
    fp8_weight_only: Fp8WeightOnly = Field(
        default="none",
        description="Which FP8 layers the engine runs weight-only (W8A16, dequantised in a "
        "Marlin kernel) on a GPU without FP8 tensor cores (Ampere): 'none' (FP8 refused "
        "there), 'dense' (linear layers, not fused-MoE experts) or 'all' (Deployment."
        "fp8_weight_only).",
    )
    marlin_moe: bool = Field(
        default=False,
        description="Whether a weight-only MoE (MXFP4 on a GPU without fp4 tensor cores) runs "
        "in vLLM's Marlin kernel (ComposeParams.marlin_moe; ServingConfig.marlin_moe sets it "
        "per deployment).",
    )
    mxfp4_expert_padding: Literal["none", "vllm", "sglang"] = Field(
        default="none",
        description="How the engine pads MXFP4 routed experts when it loads them: 'vllm' or "
        "'sglang' (to its MoE backend's tiles, memory_rules.VLLM_MXFP4_ALIGNMENT / "
        "SGLANG_MXFP4_ALIGNMENT: resident memory the KV pool does not get) or 'none' (as "
        "stored; TensorRT-LLM's layout is not modelled).",
    )
    linear_state_precision: LinearStatePrecision = Field(
        default="fp32",
        description="The precision of a linear-attention layer's recurrent state (Gated "
        "DeltaNet, Mamba): 'fp32' or 'bf16' (Deployment.linear_state_precision; "
        "ServingConfig.linear_state_precision sets it per deployment).",
    )
    mxfp4_moe_activation: Mxfp4Activation = Field(
        default="bf16",
        description="The activation precision of MXFP4 experts where the kernel runs either "
        "(Blackwell's trtllm-gen MoE): 'bf16' or 'mxfp8' (ComposeParams.mxfp4_moe_activation; "
        "ServingConfig.mxfp4_moe_activation sets it per deployment).",
    )
    step_overhead_us: float = Field(
        ge=0, le=MAX_CPU_US, description="CPU time per engine step not hidden behind GPU work, µs."
    )
    request_overhead_us: float = Field(
        ge=0, le=MAX_CPU_US, description="CPU time per scheduled request per step, µs."
    )
    overlap_hides_request_overhead: bool = Field(
        default=False,
        description="Whether overlap scheduling takes the per-request CPU time off the step "
        "(the next step's scheduling and input preparation run while this one computes; "
        "step_overhead_us stays): vLLM's --async-scheduling.",
    )

    def chunked_prefill_tokens_for(self, gpu_bytes: float, tp: int) -> int:
        """The prefill chunk on a GPU of ``gpu_bytes`` at ``tp`` (``chunked_prefill_rule``)."""
        if self.chunked_prefill_rule == "sglang_gpu_memory" and gpu_bytes > 0:
            return sglang_memory_defaults(gpu_bytes, tp).chunked_prefill_tokens
        return self.chunked_prefill_tokens

    def limits_for(self, gpu: GpuSpec | None, tp: int) -> EngineLimits:
        """The step budget, running cap and prefill chunk this engine defaults to on ``gpu``
        at ``tp`` (``batch_defaults_rule``, ``chunked_prefill_rule``; None: the GPU unknown,
        the preset's numbers)."""
        budget, running = self.max_batched_tokens, self.max_running_requests
        chunk = self.chunked_prefill_tokens_for(gpu.hbm_bytes if gpu else 0.0, tp)
        note = ""
        if self.batch_defaults_rule == "vllm_gpu_class" and gpu is not None:
            names = (gpu.name, gpu.description, *gpu.aliases)
            rule = vllm_batch_defaults(gpu.hbm_bytes, names, (budget, running))
            if not rule.large:
                budget, running = rule.max_batched_tokens, rule.max_running_requests
                note = rule.explain()
        return EngineLimits(budget, running, chunk, note)

    def rank_limits(
        self,
        ranks: int,
        budget: int,
        running: int,
        chunk: int,
        *,
        scheduler: str,
        running_given: bool,
    ) -> tuple[int, int, int]:
        """(step token budget, most running requests, prefill chunk) of one attention-DP
        rank of ``ranks``, from the instance's settings.

        Under ``attention_dp_shares_limits`` the chunk is divided among the ranks, and so is
        a running limit the user gave (``running_given``; the preset's is a per-rank cap);
        a rank's prefill then takes at most its chunk per step, so under ``scheduler``
        ``prefill_first`` (prompts never share a step with decodes, whose steps are bounded by
        the running limit alone) the budget is capped by it. Everything else is per rank as
        given. SGLang: ``server_args._handle_data_parallelism`` (``chunked_prefill_size //=
        dp_size``, "to avoid MoE kernel issues") and the pool configurator's
        ``max_running_requests // attn_dp_size``.
        """
        if ranks <= 1 or not self.attention_dp_shares_limits:
            return budget, running, chunk
        chunk = max(1, chunk // ranks)
        if running_given:
            running = max(1, running // ranks)
        if scheduler == "prefill_first":
            budget = min(budget, chunk)
        return budget, running, chunk

    def rank_conservativeness(self, ranks: int, conservativeness: float) -> float:
        """SGLang's ``--schedule-conservativeness`` as its scheduler uses it: times 0.3 with
        attention DP (``server_args._handle_data_parallelism``, beside the chunk division of
        ``rank_limits``; under ``attention_dp_shares_limits``), as given otherwise."""
        if ranks > 1 and self.attention_dp_shares_limits:
            return conservativeness * 0.3
        return conservativeness

    def frontend_seconds(
        self,
        override_us: tuple[float, float, float] | None,
        stream_interval: int | None = None,
    ) -> dict[str, float]:
        """``EngineParams``' front-end costs in seconds: ``override_us`` (per request, per
        prompt token, per streamed response, µs; a ``ServingConfig.frontend_us``) or this
        preset's, the per-response cost spread over the tokens of a response
        (``stream_interval``; None: this preset's)."""
        request_us, prompt_us, token_us = override_us or (
            self.frontend_request_us,
            self.frontend_prompt_token_us,
            self.frontend_token_us,
        )
        interval = stream_interval or self.stream_interval
        return {
            "frontend_request_s": request_us / 1e6,
            "frontend_prompt_token_s": prompt_us / 1e6,
            "frontend_token_s": token_us / 1e6 / interval,
        }

    def overlap_for(self, role: str | None) -> bool:
        """Whether an instance of pool ``role`` (None: aggregated; ``prefill`` / ``decode``)
        schedules its next step while one runs (``pd_prefill_overlap_scheduling``)."""
        if role == "prefill" and self.pd_prefill_overlap_scheduling is not None:
            return self.pd_prefill_overlap_scheduling
        return self.overlap_scheduling

    def hbm_utilization_for(self, tp: int) -> float:
        """The utilisation that applies at tensor parallelism ``tp``."""
        keys = [k for k in self.hbm_utilization_by_tp if k <= tp]
        return self.hbm_utilization_by_tp[max(keys)] if keys else self.hbm_utilization

    def compose_params(
        self,
        *,
        overlapped: bool = False,
        marlin_moe: bool | None = None,
        mxfp4_moe_activation: Mxfp4Activation | None = None,
        moe_kernel: str | None = None,
    ) -> ComposeParams:
        """Framework overheads for the latency model (elementwise costs at their defaults) of
        an instance that schedules with overlap (``overlapped``) or without, running MXFP4
        experts in Marlin as ``marlin_moe`` says and at the activation precision
        ``mxfp4_moe_activation`` says (None: this preset's), its routed experts in the kernel
        ``moe_kernel`` names (None: each profile's kept one)."""
        hidden = overlapped and self.overlap_hides_request_overhead
        activation = mxfp4_moe_activation or self.mxfp4_moe_activation
        return ComposeParams(
            step_overhead_s=self.step_overhead_us / 1e6,
            request_overhead_s=0.0 if hidden else self.request_overhead_us / 1e6,
            marlin_moe=self.marlin_moe if marlin_moe is None else marlin_moe,
            mxfp4_moe_activation=activation,
            moe_kernel=moe_kernel or "",
        )

    def mxfp4_expert_alignment(self, gpu: GpuSpec, marlin_moe: bool | None) -> tuple[int, int]:
        """``Deployment.mxfp4_expert_alignment`` of this engine on ``gpu``, its MXFP4 experts
        in Marlin where ``marlin_moe`` says (None: this preset's ``marlin_moe``)."""
        if self.mxfp4_expert_padding == "sglang":
            runner = sglang_mxfp4_backend(gpu.cuda_capability)
            return (1, 1) if runner is None else SGLANG_MXFP4_ALIGNMENT[runner]
        if self.mxfp4_expert_padding == "none":
            return (1, 1)
        marlin = self.marlin_moe if marlin_moe is None else marlin_moe
        backend = vllm_mxfp4_backend(gpu.cuda_capability, marlin)
        return (1, 1) if backend is None else VLLM_MXFP4_ALIGNMENT[backend]

    def memory_params(
        self, tp: int = 1, *, min_kv_tokens: int = 0, gpu: GpuSpec | None = None
    ) -> MemoryParams:
        """The HBM budget settings for ``memory_fit`` at tensor parallelism ``tp`` (the
        fraction is left to ``memory_fit`` to derive from the GPU under ``sglang_reserved``;
        the activation peak is that of ``gpu``'s default step budget, ``limits_for``)."""
        derived = self.mem_fraction_rule == "sglang_reserved"
        limits = self.limits_for(gpu, tp)
        return MemoryParams(
            hbm_utilization=None if derived else self.hbm_utilization_for(tp),
            accounting=self.memory_accounting,
            framework_reserve_gib=self.framework_reserve_gib,
            cuda_graph_gib=self.cuda_graph_gib,
            cuda_graphs_in_budget=self.cuda_graphs_in_kv_budget,
            collective_gib=self.collective_gib,
            pcie_collective_gib=self.pcie_collective_gib,
            sampler_logit_copies=self.sampler_logit_copies,
            startup_gib=self.startup_gib,
            max_batched_tokens=limits.max_batched_tokens,
            max_running_requests=limits.max_running_requests,
            block_tokens=self.kv_block_tokens,
            min_kv_tokens=min_kv_tokens,
        )


@cache
def _shipped(name: str) -> BackendPreset:
    data_dir = resources.files("simulator") / "data" / "presets"
    with resources.as_file(data_dir / BACKEND_PRESETS[name]) as path:
        raw = load_mapping(path)
        return validate(BackendPreset, {"name": name, **raw}, str(path))


def load_preset(name_or_path: str | Path) -> BackendPreset:
    """A shipped preset by name ('vllm', 'sglang', 'trtllm'; case-insensitive) or a user file.

    A user file (YAML/TOML/JSON) holds the same fields; ``name`` defaults to the file's stem.
    Raises ``InputError`` (one line) for an unknown name, a missing file or a bad field.
    """
    text = str(name_or_path)
    key = text.strip().lower()
    if key in BACKEND_PRESETS:
        return _shipped(key)
    path = Path(text)
    if path.suffix.lower() in {".yaml", ".yml", ".toml", ".json"} or path.exists():
        raw = load_mapping(path)
        return validate(BackendPreset, {"name": path.stem, **raw}, str(path))
    known = sorted(BACKEND_PRESETS)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise InputError(
        f"unknown backend preset '{text}'{hint}; known: {', '.join(known)}, or a YAML file"
    )
