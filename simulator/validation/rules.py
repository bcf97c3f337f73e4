"""How each measured benchmark's deployment was configured: ONE table of rules, with sources.

A silicon row (``silicon/rows.py``) records the engine, its version, the model and the
weight quantisation, but not the engine arguments. Those come from the *harness* that produced
the row, recognised by its ``silicon_data_source`` (``harness``):

- ``aiconfigurator``: rows whose source is aiconfigurator's gap-analysis output
  (``source_file=…/aic-auto-gap-analysis/…``). Their deployments were written by aiconfigurator's
  generator, whose benchmark rules (``src/aiconfigurator/generator/rule_plugin/benchmark/
  {trtllm,vllm,sglang}.rule``) size an aggregated worker to the benchmark.
- ``inferencex``: rows from dated exports of a benchmark database (``source_file=2026-04-06.csv;
  model=…; measured=…``, ``db-dump/…; workflow_run_id=…``, often ``image=vllm/vllm-openai:…``):
  the InferenceMAX / InferenceX harness. Its launch scripts (``benchmarks/*_docker.sh``, read
  for Llama-3.1-70B FP8 on H100) run ``vllm serve … --quantization=modelopt
  --gpu-memory-utilization=0.9 --max-num-seqs=$CONC --max-num-batched-tokens=8192
  --async-scheduling``; where its script for the row's model family, GPU and engine was read
  (``inferencex.LAUNCHES``: gpt-oss, DeepSeek-R1, Llama-70B, MiniMax, Kimi-K2.5, GLM-5,
  DeepSeek-V4-Pro and Qwen3.5 on vLLM, SGLang and TensorRT-LLM, Hopper and Blackwell), that
  script's settings and KV-cache precision instead.
  Recognising the harness from the source's format is an inference from the data, not a field
  of it.
- ``unknown``: anything else: the engine's own defaults (its preset).

``RULES`` maps (harness, backend) to the ``ServingConfig`` overrides of the benchmark
deployment; a generator's override is applied only to rows that say they came from it.
``version_settings`` holds what depends on the engine's release, whatever the harness:
SGLang before 0.5.4 used a fixed ``mem_fraction_static`` by TP size (later releases derive it
from the GPU, ``simulator/latency/memory_rules.py``); vLLM before 0.21 captured its CUDA graphs
in the memory ``gpu_memory_utilization`` leaves rather than taking them off the KV pool
(``VLLM_GRAPHS_IN_BUDGET``, ``cuda_graphs_in_kv_budget``).

KV-cache precision (``kv_precision``) follows the checkpoint's recipe (``hardware/
checkpoints.py``) and the engine's ``auto`` rule: a ModelOpt FP8 or NVFP4 checkpoint carries an
FP8 KV cache, a vendor's block-FP8 checkpoint or a bf16 one does not. The checkpoint is the row's
model name when it names a quantised repository, else the recipe its ``gemm_quant_mode``
implies (``fp8`` → ModelOpt FP8, the NVIDIA harnesses' FP8 checkpoints; ``fp8_block`` → the
vendor's block FP8; ``nvfp4`` → ModelOpt NVFP4; empty → the model's own checkpoint), except
where the model's own repository is already quantised with those weights (DeepSeek-V3/R1,
natively block FP8): then that is the checkpoint served (``recipe_for``). vLLM's
``auto`` honours a ModelOpt KV scheme from 0.13 (PR #29980); older vLLM rows keep bf16 KV.
A harness that sets the KV dtype itself overrides both (``FP8_KV_DEPLOYMENTS``:
aiconfigurator's generator gives every FP8 or FP4 deployment an FP8 KV cache).
The release rules read ``MeasuredRow.release``: the row's version, or for a row that names
none the bound its export implies (``silicon/versions.py``; InferenceX's Llama-3.1-70B
rows, measured 2025-10-29 in an export whose vLLM rows of 2025-12-08 ran 0.11.2).

A MoE row's ``moe_quant_mode`` must name the weights of the checkpoint it resolves to; 16-bit
GEMMs beside quantised experts resolve to a checkpoint that keeps its attention in bf16 (gpt-oss's
MXFP4). Routed experts in another precision than the rest, and aiconfigurator's modes without a
precision here (``w4afp8``), are skipped with the reason (``precision_reason``),
never simulated at the wrong width.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hardware.checkpoints import RECIPES, Recipe, resolve_checkpoint
from hardware.checkpoints import kv_precision as auto_kv_precision
from hardware.schema import Catalog
from simulator.presets import load_preset
from simulator.validation.inferencex import launch_for
from simulator.validation.silicon.rows import MeasuredRow, SiliconRow
from simulator.validation.silicon.versions import version_key
from slo.inputfile import InputError

__all__ = [
    "HARNESSES",
    "PROTOCOLS",
    "RANDOM_ID_TOKENIZE_FACTOR",
    "RULES",
    "VLLM_GRAPHS_IN_BUDGET",
    "ClientProtocol",
    "DeploymentRule",
    "benchmark_engine_settings",
    "harness",
    "kv_precision",
    "precision_reason",
    "protocol",
    "protocol_settings",
    "recipe_for",
    "recorded_layout",
    "version_settings",
    "weight_precision",
]

#: Harnesses ``harness`` recognises (module doc).
HARNESSES = ("aiconfigurator", "inferencex", "unknown")
#: A dated export of the benchmark database (``source_file=2026-04-06.csv; …``, ``db-dump/…``).
_DATED_EXPORT = re.compile(r"\s*(?:source_file=\d{4}-\d{2}-\d{2}\.csv|db-dump/)")
#: The vLLM release from which the profiling run takes the CUDA graphs off the KV budget
#: (``vllm.yaml``, ``cuda_graphs_in_kv_budget``): older rows keep them outside.
VLLM_GRAPHS_IN_BUDGET = (0, 21, 0)
#: Tokens aiconfigurator's rules add to the prompt length in an aggregated worker's budget.
_HEADROOM = 1500


@dataclass(frozen=True, slots=True)
class DeploymentRule:
    """The engine settings one harness gives one backend, and where that is written."""

    harness: str
    backend: str
    source: str
    settings: Callable[[MeasuredRow], dict[str, Any]]
    #: The generator's settings taken literally, where ``settings`` departs from them because
    #: the measured rows contradict them (``deployment="generator"`` applies these); ``note``
    #: gives the evidence.
    literal: Callable[[MeasuredRow], dict[str, Any]] | None = None
    note: str = ""


def _aic_trtllm(row: MeasuredRow) -> dict[str, Any]:
    return {
        "max_running_requests": row.concurrency,
        "max_batched_tokens": row.concurrency + row.isl + _HEADROOM,
        # extra_engine_args template: kv_cache_config.free_gpu_memory_fraction 0.80.
        "hbm_utilization": 0.80,
    }


def _aic_vllm(row: MeasuredRow) -> dict[str, Any]:
    budget = row.concurrency + row.isl + _HEADROOM
    return {"max_running_requests": row.concurrency, "max_batched_tokens": budget,
            "chunk_tokens": budget}  # fmt: skip


def _aic_sglang_literal(row: MeasuredRow) -> dict[str, Any]:
    # --enable-mixed-chunk: a prefill chunk runs in the same step as the running decodes (the
    # simulator's 'chunked' policy); --max-prefill-tokens isl + 1500 bounds the prefill part,
    # the decodes of the N running requests ride along.
    return {
        "max_running_requests": row.concurrency,
        "scheduler": "chunked",
        "max_batched_tokens": row.concurrency + row.isl + _HEADROOM,
    }


def _aic_sglang(row: MeasuredRow) -> dict[str, Any]:
    return {"max_running_requests": row.concurrency}


def _ix_vllm(row: MeasuredRow) -> dict[str, Any]:
    launch = launch_for(row)
    if launch is not None:
        return launch.settings(row)
    return {
        "max_running_requests": row.concurrency,
        "max_batched_tokens": 8192,
        "chunk_tokens": 8192,
        "hbm_utilization": 0.90,
        "overlap_scheduling": True,  # --async-scheduling
    }


def _ix_script(row: MeasuredRow) -> dict[str, Any]:
    launch = launch_for(row)
    return {} if launch is None else launch.settings(row)


_AIC = "aiconfigurator generator/rule_plugin/benchmark/{backend}.rule"
#: (harness, backend) → rule (module doc). A pair not listed runs on the backend's preset.
RULES: dict[tuple[str, str], DeploymentRule] = {
    (r.harness, r.backend): r
    for r in (
        DeploymentRule(
            "aiconfigurator", "trtllm",
            _AIC.format(backend="trtllm") + ": max_batch_size = N, max_num_tokens = N + isl + "
            "1500; extra_engine_args template: free_gpu_memory_fraction 0.80",
            _aic_trtllm,
        ),
        DeploymentRule(
            "aiconfigurator", "vllm",
            _AIC.format(backend="vllm") + ": --max-num-seqs N, --max-num-batched-tokens "
            "N + isl + 1500",
            _aic_vllm,
        ),
        DeploymentRule(
            "aiconfigurator", "sglang",
            _AIC.format(backend="sglang") + ": --enable-mixed-chunk, --max-prefill-tokens "
            "isl + 1500, --max-running-requests N",
            _aic_sglang, _aic_sglang_literal,
            "the running cap is applied; mixed chunks and the isl + 1500 prefill budget are "
            "not: the 84 H100 rows (SGLang 0.5.1/0.5.8) behave as whole prefill waves "
            "(TTFT MAPE 15.4% with the preset's prefill-first 16k budget, 74.1% and TPOT "
            "28.5% with the rule taken literally, bench/README.md)",
        ),
        DeploymentRule(
            "inferencex", "vllm",
            "InferenceMAX benchmarks/*_docker.sh: --max-num-seqs $CONC, "
            "--max-num-batched-tokens 8192, --gpu-memory-utilization 0.9, --async-scheduling; "
            "per model family and GPU the script's own settings (inferencex.LAUNCHES)",
            _ix_vllm,
        ),
        DeploymentRule(
            "inferencex", "sglang",
            "InferenceX benchmarks/<family>_<precision>_<gpu>.sh per model family and GPU "
            "(inferencex.LAUNCHES); others the preset",
            _ix_script,
        ),
        DeploymentRule(
            "inferencex", "trtllm",
            "InferenceX benchmarks/<family>_<precision>_<gpu>_trt.sh per model family and GPU "
            "(inferencex.LAUNCHES); others the preset",
            _ix_script,
        ),
    )
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ClientProtocol:
    """How a harness's client drives the closed loop (what desynchronises its users)."""

    #: Requests per user in the measured phase.
    requests_per_user: int
    #: Each request's input and output lengths are drawn uniformly from
    #: ``[ratio · length, length]``; 1 = exactly the row's lengths.
    length_ratio: float
    source: str
    #: Whether the prompts are decoded random token ids (InferenceX's random dataset) rather
    #: than natural text, which a tokenizer is slower on (``RANDOM_ID_TOKENIZE_FACTOR``).
    random_id_prompts: bool = False


#: Harness → client protocol. aiperf (aiconfigurator's ``bench_run.sh.j2``): ``--num-requests
#: 20·N``, fixed ``--isl/--osl`` with ``ignore_eos``, warm-up drained before profiling.
#: InferenceX: ``benchmark_serving.py --dataset-name random --random-range-ratio
#: $RANDOM_RANGE_RATIO --num-prompts $((CONC * 10)) --max-concurrency $CONC --ignore-eos``, with
#: ``RANDOM_RANGE_RATIO=0.8`` in the workflow scripts read; the random dataset of that client
#: (a fork of vLLM's older ``benchmark_serving.py``) draws every length uniformly from
#: ``[ratio · L, L]``, so requests finish at different times and the users drift apart.
#: InferenceX's prompts are consecutive token ids from a random offset, decoded, re-encoded, cut
#: to the sampled length and decoded again (``kimbochen/bench_serving`` and InferenceX's
#: ``utils/bench_serving``, read); aiperf sends text from a corpus.
PROTOCOLS: dict[str, ClientProtocol] = {
    "aiconfigurator": ClientProtocol(20, 1.0, "aiperf --num-requests 20·N, fixed lengths"),
    "inferencex": ClientProtocol(
        10, 0.8, "bench_serving --num-prompts 10·N --random-range-ratio 0.8", True
    ),
    "unknown": ClientProtocol(20, 1.0, "assumed: aiperf's protocol"),
}
#: How much longer a tokenizer takes per token on prompts of decoded random ids than on
#: natural text (``bench/tokenize_speed.py``: byte-level BPE of 128k-200k tokens, prompts of
#: 1k-8k tokens, one core: 1.45-2.11×, median 1.55).
RANDOM_ID_TOKENIZE_FACTOR = 1.5


def protocol_settings(row: MeasuredRow) -> dict[str, Any]:
    """``ServingConfig`` overrides the client's prompts imply: the API server's tokenising
    (the backend preset's, for natural text: a latency, ``tokenize_us_per_prompt_token``, or
    the serial front end's ``frontend_prompt_token_us``) slower by
    ``RANDOM_ID_TOKENIZE_FACTOR`` on random-id prompts; empty otherwise."""
    if not protocol(row).random_id_prompts:
        return {}
    preset = load_preset(row.backend)
    settings: dict[str, Any] = {}
    if preset.tokenize_us_per_prompt_token:
        scaled = preset.tokenize_us_per_prompt_token * RANDOM_ID_TOKENIZE_FACTOR
        settings["tokenize_us_per_prompt_token"] = scaled
    if preset.frontend_prompt_token_us:
        prompt_us = preset.frontend_prompt_token_us * RANDOM_ID_TOKENIZE_FACTOR
        settings["frontend_us"] = (
            preset.frontend_request_us, prompt_us, preset.frontend_token_us
        )  # fmt: skip
    return settings


def protocol(row: MeasuredRow) -> ClientProtocol:
    """The client protocol of ``row``'s harness."""
    return PROTOCOLS[harness(row)]


def harness(row: MeasuredRow) -> str:
    """Which harness produced ``row`` (module doc)."""
    source = row.source.lower()
    if "aic-auto-gap-analysis" in source or "aiconfigurator" in source:
        return "aiconfigurator"
    if _DATED_EXPORT.match(source) or re.search(r"(?:^|;)\s*image\s*=", source):
        return "inferencex"
    return "unknown"


#: InferenceX's own parallel settings in a dated export's row id: ``…_tp4_ep4_1322``,
#: ``…_tp4_0_ep4_0_215`` (the config's ``tp`` and ``ep``; the last number is the run).
_IX_ID_LAYOUT = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_\d+$")


def recorded_layout(row: SiliconRow) -> tuple[int, int, int, int]:
    """``(tp per rank, attention-DP ranks, moe_tp, moe_ep)`` of an aggregated row's worker, in
    aiconfigurator's convention (``silicon/layout.py``: the worker has ``tp × ranks`` GPUs).

    The columns as recorded, except for InferenceX rows with attention DP whose id names the
    harness's own settings. InferenceX's ``tp`` is the server's GPU count and ``dp-attn``
    spreads attention over those GPUs: its launch scripts run ``--tensor-parallel-size=1
    --data-parallel-size=$TP --enable-expert-parallel`` (vLLM; SGLang ``--dp-size $TP``,
    TensorRT-LLM ``enable_attention_dp``), experts over all ``tp`` GPUs. The 2026-04-06 export
    wrote such rows as ``tp_size`` = the GPUs, ``attention_dp_size`` = the ranks and
    ``moe_ep_size`` = their product (MiniMax-M2.5 on H100: ``tp 4 × dp 4``, ``ep 16``, id
    ``…_tp4_ep4_…``), which read in aiconfigurator's convention is a 16-GPU worker, four times
    the benchmark's. Here the id's ``tp`` GPUs hold the ranks (``tp / ranks`` each) and the
    id's ``ep`` splits the experts — unless the row's launch script has no attention-DP branch
    (``inferencex.Launch.attention_dp``): then the GPUs are one TP group. MiniMax-M2.5's H100
    script passes only ``--tensor-parallel-size=$TP --enable-expert-parallel``, and the
    2026-03-25 export records the same measurements (within 1-3%) as ``tp 4, dp 1, ep 4``.
    A row whose id names no such settings, or whose ranks do not divide them, keeps its
    columns (the layout check then names what does not fit).
    """
    recorded = (row.tp, row.attention_dp, row.moe_tp, row.moe_ep)
    ranks = max(1, row.attention_dp)
    match = _IX_ID_LAYOUT.search(row.id)
    if ranks == 1 or match is None or harness(row) != "inferencex":
        return recorded
    gpus, ep = int(match.group(1)), int(match.group(2))
    if gpus % ranks or gpus % ep:
        return recorded
    launch = launch_for(row)
    if launch is not None and not launch.attention_dp:
        return gpus, 1, gpus // ep, ep
    return gpus // ranks, ranks, gpus // ep, ep


def benchmark_engine_settings(row: MeasuredRow, *, literal: bool = False) -> dict[str, Any]:
    """``ServingConfig`` overrides of ``row``'s benchmark deployment (empty: the preset);
    ``literal`` takes a generator's settings as written even where the rows contradict them
    (``DeploymentRule.literal``)."""
    rule = RULES.get((harness(row), row.backend))
    if rule is None:
        return {}
    return (rule.literal if literal and rule.literal else rule.settings)(row)


def version_settings(row: MeasuredRow, tp: int) -> dict[str, Any]:
    """Overrides that follow the engine's release (module doc); empty when none apply."""
    version = version_key(row.release)
    if row.backend == "sglang" and version is not None and version < (0, 5, 4):
        return {"hbm_utilization": load_preset("sglang").hbm_utilization_for(tp)}
    if row.backend == "vllm" and version is not None and version < VLLM_GRAPHS_IN_BUDGET:
        return {"cuda_graphs_in_kv_budget": False}
    return {}


#: ``gemm_quant_mode`` / ``precision`` spellings → the checkpoint recipe they imply.
_MODE_RECIPES = {
    "bf16": "none",
    "bfloat16": "none",
    "fp16": "none",
    "float16": "none",
    "fp8": "modelopt_fp8",
    "fp8_static": "modelopt_fp8",
    "fp8_block": "fp8_block",
    "nvfp4": "modelopt_nvfp4",
    "fp4": "modelopt_nvfp4",
    "mxfp4": "mxfp4",
    "int8": "int8",
    "w8a8": "int8",
    "int4": "int4",
    "int4_wo": "int4",  # aiconfigurator's weight-only int4 (InferenceX's int4 Kimi-K2.5 rows)
    "int8_wo": "int8_wo",  # weight-only int8 (W8A16)
    "w8a16": "int8_wo",
    "w4a16": "int4",
    "awq": "int4",
    # aiconfigurator's other quant-mode names (sdk/common.py GEMMQuantMode / MoEQuantMode):
    "sq": "int8",  # SmoothQuant: W8A8 int8 GEMMs (the catalog's int8)
    "fp8_ootb": "modelopt_fp8",  # TensorRT-LLM's TRT-flow FP8 GEMMs of an FP8 checkpoint
    "w4a16_mxfp4": "mxfp4",  # MXFP4 experts, 16-bit activations (gpt-oss on Hopper)
    "w4a8_mxfp4_mxfp8": "mxfp4",  # MXFP4 experts, MXFP8 activations (gpt-oss on Blackwell)
}
#: aiconfigurator quant modes the simulator has no precision for, and why (the row is skipped).
_UNMODELLED_MODES = {
    "w4afp8": "int4 weights with FP8 activations (TensorRT-LLM W4A8) are not modelled",
}


def recipe_for(row: MeasuredRow, catalog: Catalog) -> Recipe | None:
    """The checkpoint recipe ``row`` served (module doc); None for an unknown spelling."""
    named = resolve_checkpoint(row.model, catalog.models)
    if named is not None:
        return named.recipe
    try:
        own: Recipe | None = catalog.checkpoint(row.model).recipe
    except InputError:
        own = None
    if row.precision:
        mode = _MODE_RECIPES.get(row.precision)
        if mode is None:
            return None
        # A model whose own repository is already quantised that way (DeepSeek-V3/R1's native
        # block FP8) was served from it: its recipe (bf16 KV), not ModelOpt's (FP8 KV). The
        # DeepSeek-R1 SGLang rows say so: at 64 users their 33.9 ms TPOT is half what the
        # measured FP8-KV MLA decode kernel allows, and what the bf16-KV kernel gives.
        if own is not None and own.name != "none" and own.weights == RECIPES[mode].weights:
            return own
        # 16-bit GEMMs beside quantised experts (moe_quant_mode) are what a checkpoint that
        # keeps its attention in bf16 serves (gpt-oss's MXFP4, Kimi's INT4 experts).
        experts = _MODE_RECIPES.get(row.moe_precision)
        if (
            own is not None
            and own.attention_bf16
            and RECIPES[mode].weights == "bf16"
            and experts is not None
            and RECIPES[experts].weights == own.weights
        ):
            return own
        return RECIPES[mode]
    return own or RECIPES["fp8_block" if "fp8" in row.model.lower() else "none"]


def precision_reason(row: MeasuredRow, catalog: Catalog) -> str | None:
    """Why ``row``'s quant modes cannot be simulated, if so: a spelling the simulator has no
    precision for, or (MoE models) routed experts in another weight precision than the
    checkpoint the row resolves to, which a deployment here cannot hold (one weight precision,
    besides a recipe's bf16 attention)."""
    for column, mode in (("gemm_quant_mode", row.precision), ("moe_quant_mode", row.moe_precision)):
        if mode in _UNMODELLED_MODES:
            return f"{column} '{mode}': {_UNMODELLED_MODES[mode]}"
    recipe = recipe_for(row, catalog)
    if recipe is None:
        return f"unknown precision '{row.precision}'"
    return _experts_reason(row, catalog, recipe) if row.moe_precision else None


def _experts_reason(row: MeasuredRow, catalog: Catalog, recipe: Recipe) -> str | None:
    """Why ``row``'s ``moe_quant_mode`` contradicts the ``recipe`` it is served with, if so
    (MoE models only; an unknown model is left to ``row_config``, which names it)."""
    try:
        moe = catalog.model(row.model).is_moe
    except InputError:
        return None
    experts = _MODE_RECIPES.get(row.moe_precision)
    if not moe or (experts is not None and RECIPES[experts].weights == recipe.weights):
        return None
    if experts is None:
        return f"unknown moe_quant_mode '{row.moe_precision}'"
    return (
        f"moe_quant_mode '{row.moe_precision}' ({RECIPES[experts].weights} experts) beside the "
        f"{recipe.weights} weights of the checkpoint served ({recipe.name} recipe, "
        f"gemm_quant_mode '{row.precision}'): mixed expert and dense weight precisions are not "
        "modelled"
    )


def weight_precision(row: MeasuredRow, catalog: Catalog) -> str | None:
    """The simulator's weight precision for ``row``; None when the spelling is unknown.
    fp16 stays fp16 (the recipe table speaks of bf16 for an unquantised checkpoint)."""
    recipe = recipe_for(row, catalog)
    if recipe is not None and recipe.weights == "bf16" and row.precision in ("fp16", "float16"):
        return "fp16"
    return recipe.weights if recipe else None


#: (harness, backend) → the weight precisions whose deployments set an FP8 KV cache whatever
#: the checkpoint carries and the engine's ``auto`` would do.
#:
#: - InferenceX's TensorRT-LLM rows: an inference from the rows, not a launch script read in
#:   this repository — its DeepSeek-V3/R1 rows match an FP8 KV cache (TPOT 69.6% / 15.9%
#:   MAPE) and not the checkpoint's bf16 one (87.2% / 28.8%), with the measured MLA kernels.
#: - aiconfigurator's generated deployments, every engine: its quant inference
#:   (``sdk/models`` ``_infer_quant_modes_from_raw_config``) gives an fp8, fp8_block or nvfp4
#:   checkpoint ``kvcache_quant_mode`` fp8, and the generator passes that as the engine's KV
#:   dtype (``generator/module_bridge.py`` ``kv_cache_dtype``; ``backend_config_mapping.yaml``:
#:   vLLM and SGLang ``--kv-cache-dtype``, TensorRT-LLM ``kv_cache_config.dtype``; read). The
#:   rows agree: Qwen3-235B-A22B-FP8 on TensorRT-LLM (a block-FP8 checkpoint, whose own KV is
#:   bf16) TPOT median bias +5% -> 0% (bench/README.md).
FP8_KV_DEPLOYMENTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("inferencex", "trtllm"): ("fp8",),
    ("aiconfigurator", "trtllm"): ("fp8", "fp4"),
    ("aiconfigurator", "vllm"): ("fp8", "fp4"),
    ("aiconfigurator", "sglang"): ("fp8", "fp4"),
}


def kv_precision(row: MeasuredRow, catalog: Catalog) -> str:
    """KV-cache precision of ``row``'s deployment: its checkpoint's, under the engine's
    ``auto`` rule for the row's release (module doc), unless its harness sets FP8: for
    quantised weights (``FP8_KV_DEPLOYMENTS``), or in the launch script of its model family
    and GPU (InferenceX: ``inferencex.LAUNCHES``, e.g. every Blackwell script)."""
    recipe = recipe_for(row, catalog) or RECIPES["none"]
    if recipe.weights in FP8_KV_DEPLOYMENTS.get((harness(row), row.backend), ()):
        return "fp8"
    if harness(row) == "inferencex":
        launch = launch_for(row)
        if launch is not None and launch.kv_cache == "fp8":
            return "fp8"
    version = version_key(row.release)
    honours = not (row.backend == "vllm" and version is not None and version < (0, 13))
    return auto_kv_precision(recipe, honours_checkpoint=honours)
