"""End-to-end fidelity: measured serving benchmarks → closed-loop simulations → MAPE.

Input: rows of a measured-benchmark CSV (``silicon/rows.py`` reads aiconfigurator's
``silicon_sample.csv`` format: one row = one deployment benchmarked with ``batch_size``
concurrent users sending requests of exactly ``isl`` input and ``osl`` output tokens;
``silicon_ttft_ms`` / ``silicon_tpot_ms`` are the measured means). Every row, aggregated
(``mode == agg``) or disaggregated (``disagg``), is simulated as the benchmark ran:

- **Workload**: a closed loop of ``batch_size`` users, prompts of fresh blocks (the
  benchmark's random-token prompts share no prefix), every user starting at time 0, with the
  client protocol of the row's harness (``rules.PROTOCOLS``): aiperf sends exactly
  ``isl`` / ``osl`` tokens, 20 requests per user; InferenceX's client draws each length
  uniformly from [0.8·L, L] and sends 10 per user — its requests finish at different steps,
  which is what desynchronises its users (no parameter is fitted: both are the harnesses'
  documented settings).
- **Client turnaround** (assumption, ``CLIENT_TURNAROUND_S`` = 1 ms): a user's next request
  reaches the engine that long after its previous response ended, not at the same instant.
  With the overlap scheduler of TensorRT-LLM and SGLang (on in their presets, and in these
  deployments) the request then misses the step scheduled while the previous one ran and
  joins a step later (``simulator/engine/instance.py``).
- **Warm-up** (documented choice): not simulated. aiperf (``--warmup-request-count 2·N``) waits
  for every warm-up response before the profiling phase starts, so profiling begins from an
  idle server with all N users sending at once — exactly the simulated start — and warm-up
  leaves nothing behind that the simulator models (no shared prefixes; JIT and allocation
  effects are not simulated). Every simulated request counts.
- **Length of the run**: aiperf sends 20·N requests (20 rounds of N; InferenceX 10·N). We simulate
  ``rounds`` rounds (``DEFAULT_ROUNDS``) and extrapolate: the closed loop settles into a
  periodic pattern within a few rounds, so the second-to-last simulated round stands for the
  steady rounds not simulated, and the last (drain) round for the benchmark's last
  (``benchmark_mean``). The first rounds, where all users start together, keep their 1/20
  weight each, as in the benchmark. ``--rounds 20`` simulates the whole benchmark
  (``bench/validate_fidelity.py`` measures the difference).
- **Deployment**: ``tp_size`` GPUs of ``system``, the ``backend`` preset, weight and KV-cache
  precision from the checkpoint's quantisation recipe and the engine's ``auto`` rule, MoE
  experts split ``moe_ep_size`` ways (``simulator/validation/rules.py``: a ModelOpt FP8 or NVFP4
  checkpoint carries an FP8 KV cache, a vendor block-FP8 or bf16 one does not). A
  disaggregated row deploys its prefill and decode workers as a PD deployment
  (``silicon/disagg.py``) with the same precision rules; its concurrency comes from
  ``silicon_data_source`` (module doc there). The report groups rows by (model, backend,
  mode), or by ``gpu`` / ``engine`` / ``model`` / ``concurrency`` (``report.py``).
- **Engine limits** (``deployment="benchmark"``, the default): the engine arguments of the
  harness that produced the row, from ONE table of rules with their sources
  (``rules.RULES``; a generator's override applies only to rows that say they came
  from it): aiconfigurator's generator sizes TensorRT-LLM, vLLM and SGLang workers to the
  benchmark (running cap N, a step budget of N + isl + 1500, TensorRT-LLM's KV cache 0.80 of
  the free memory, SGLang's running cap); InferenceX's vLLM launch scripts pass
  ``--max-num-seqs N --max-num-batched-tokens 8192 --async-scheduling``. Settings that follow
  the engine's release (SGLang's by-TP memory fraction before 0.5.4) apply to both
  deployments. ``deployment="generator"`` takes a generator's rules literally where the rows
  contradict them (SGLang's mixed chunked prefill: ``DeploymentRule.note``);
  ``deployment="defaults"`` runs every backend on its preset's engine defaults.

**Fitted, opt-in** (``ttft_offset=True``): ``FITTED_TTFT_OFFSET_MS`` adds a constant per
backend to the predicted TTFT — request-path latency outside the engine's step loop (HTTP
frontend, tokenisation, the executor's request intake and response path) that the simulator
does not model. It is fitted to the measured rows, not derived from documentation; see
``bench/README.md`` for the fit and the held-out error. Off by default.

A row with attention data parallelism (``attention_dp_size`` D > 1) is a worker of
``tp_size × D`` GPUs with ``attention_dp: D`` and its experts split ``moe_ep_size`` ways
(``silicon/layout.py``); its ``batch_size`` is per rank (``silicon/rows.py``). An InferenceX
row whose id names the harness's own ``tp`` / ``ep`` is read in that harness's convention
(``rules.recorded_layout``: its ``tp`` GPUs hold the D ranks).

Rows that cannot be simulated are returned as ``Skipped`` with the reason, never dropped:
models or GPUs not in the catalog, pipeline parallelism (``layout.PP_ROW_REASON``), MoE layouts
the simulator cannot express (``moe_tp × moe_ep`` ≠ the worker's GPUs; for disaggregated rows
also per-pool expert parallelism), and configurations that do not fit in memory.

Errors: a malformed CSV raises ``InputError`` from ``read_silicon`` (file, line, column); a
bad latency-model spec raises ``InputError`` from the first simulation.
"""

from __future__ import annotations

import math
import multiprocessing
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from hardware.catalog import load_catalog
from hardware.schema import Catalog
from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.presets import BACKEND_PRESETS
from simulator.validation.inferencex_disagg import decode_cap, prefill_limits
from simulator.validation.report import FidelityReport, mape
from simulator.validation.rules import (
    benchmark_engine_settings,
    kv_precision,
    precision_reason,
    protocol,
    protocol_settings,
    recorded_layout,
    version_settings,
    weight_precision,
)
from simulator.validation.silicon.disagg import DisaggRow, disagg_config
from simulator.validation.silicon.layout import PP_ROW_REASON, worker_layout
from simulator.validation.silicon.read import read_silicon
from simulator.validation.silicon.rows import Row, SiliconRow, Skipped, select_rows
from simulator.workload.closed_loop import closed_loop_workload
from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError, validate

__all__ = [
    "BENCHMARK_ROUNDS",
    "DEFAULT_ROUNDS",
    "DEPLOYMENTS",
    "FITTED_TTFT_OFFSET_MS",
    "START_MODES",
    "DisaggRow",
    "FidelityReport",
    "Row",
    "RowResult",
    "SiliconRow",
    "Skipped",
    "UserFiles",
    "benchmark_engine_settings",
    "benchmark_mean",
    "mape",
    "read_silicon",
    "run_validation",
    "select_rows",
    "simulate_row",
]

#: When the simulated users send their first request (``simulate_row``): ``together`` is the
#: benchmark's protocol (aiperf starts every user at once after draining the warm-up);
#: ``spread`` staggers them evenly over one request's duration, the limit a real system
#: drifts towards when timing noise breaks up the waves of a synchronised start.
START_MODES = ("together", "spread")
StartMode = Literal["together", "spread"]

#: How the measured engines were configured (``row_config``): ``benchmark`` = the limits
#: aiconfigurator's benchmark generator sets (module doc), ``defaults`` = the backend presets.
DEPLOYMENTS = ("benchmark", "generator", "defaults")
Deployment = Literal["benchmark", "generator", "defaults"]

#: Fitted (not documented) constant TTFT latency per backend, in ms, added when
#: ``ttft_offset`` is on (module doc). TensorRT-LLM, with its overlap scheduler and its serial
#: front end modelled (2026-12-03): 30 ms is the best constant on its 357 rows (TTFT MAPE
#: 29.4% -> 27.3%, table model, benchmark deployment). Before the front end it was 55 ms
#: (the midpoint of 40 ms on Qwen3-32B and 70 ms on Llama-3.1-8B), before the overlap
#: scheduler 85 / 95 ms. vLLM's best constant is 0-5 ms (none needed); SGLang is not fitted.
FITTED_TTFT_OFFSET_MS: dict[str, float] = {"trtllm": 30.0}

#: Requests per user simulated by default (aiperf sends 20 per user; see module doc).
DEFAULT_ROUNDS = 5
#: Seconds from a response's last token to the user's next request reaching the engine
#: (assumption: aiperf's own handling, the network and the HTTP frontend, of order 1 ms). It
#: matters with an overlap scheduler: a request that arrives after a step started waits one
#: more step.
CLIENT_TURNAROUND_S = 0.001
#: Requests per user aiperf sends in the profiling phase (``--num-requests 20·N``).
BENCHMARK_ROUNDS = 20


# ----- rows -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RowResult:
    """Predicted against measured means for one simulated row."""

    row: Row
    predicted_ttft_ms: float
    predicted_tpot_ms: float
    requests: int
    """Requests simulated (the means extrapolate them to the benchmark's 20 rounds)."""

    @property
    def ttft_error(self) -> float:
        """Signed relative error of TTFT, (predicted − measured) / measured."""
        return _relative(self.predicted_ttft_ms, self.row.measured_ttft_ms)

    @property
    def tpot_error(self) -> float:
        """Signed relative error of TPOT, (predicted − measured) / measured."""
        return _relative(self.predicted_tpot_ms, self.row.measured_tpot_ms)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the row's identity, both means, both signed errors."""
        return {
            **self.row.describe(),
            "measured_ttft_ms": self.row.measured_ttft_ms,
            "predicted_ttft_ms": self.predicted_ttft_ms,
            "ttft_error": self.ttft_error,
            "measured_tpot_ms": self.row.measured_tpot_ms,
            "predicted_tpot_ms": self.predicted_tpot_ms,
            "tpot_error": self.tpot_error,
            "simulated_requests": self.requests,
        }


@dataclass(frozen=True, slots=True)
class UserFiles:
    """The user's folders every row's simulation reads (the CLI passes its caches; the
    defaults read the shipped profiles only and build every table in process). Neither
    changes what a deployment is, so they are applied to each row's ``ServingConfig`` as is."""

    kernel_profiles_dir: str | None = None
    """Imported kernel profiles (``ServingConfig.kernel_profiles_dir``)."""
    latency_cache_dir: str | None = None
    """Built kernel tables kept between runs (``ServingConfig.latency_cache_dir``)."""

    def apply(self, config: ServingConfig) -> ServingConfig:
        """``config`` reading these folders."""
        update = {
            name: value
            for name in ("kernel_profiles_dir", "latency_cache_dir")
            if (value := getattr(self, name)) is not None
        }
        return config.model_copy(update=update) if update else config


def _relative(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if measured > 0 else math.nan


def _unsupported(row: Row, catalog: Catalog) -> str | None:
    """Why the settings of ``row`` (apart from catalog names and, for a disaggregated row,
    its pools) cannot be simulated, if so."""
    if row.backend not in BACKEND_PRESETS:
        return f"backend '{row.backend}' has no preset (known: {', '.join(BACKEND_PRESETS)})"
    # A DisaggRow's pools are checked by disagg_config.
    if isinstance(row, SiliconRow) and row.pp > 1:
        return f"pipeline parallelism (pp_size={row.pp}): {PP_ROW_REASON}"
    reason = precision_reason(row, catalog)
    return reason if reason is not None else _overlong(row, catalog)


def _overlong(row: Row, catalog: Catalog) -> str | None:
    """Why ``row``'s requests cannot be served: prompt + output longer than the model's
    context. The simulator drops such requests before they arrive (``cluster/overlong.py``),
    so without this check the row would end as "no request finished" after a simulation, or
    abort the whole run when its lengths exceed what a workload may draw. An unknown model is
    left to ``row_config``, which names it."""
    try:
        limit = catalog.model(row.model).max_context_tokens
    except InputError:
        return None
    tokens = row.isl + row.osl
    if tokens <= limit:
        return None
    return (
        f"isl + osl = {tokens:,} tokens is longer than the {limit:,}-token context of "
        f"{row.model} (max_context_tokens): no request of it could be served"
    )


def row_config(
    row: Row,
    catalog: Catalog,
    *,
    latency_model: str,
    deployment: Deployment = "benchmark",
) -> ServingConfig | str:
    """The deployment ``row`` measured, or the reason it cannot be expressed (module doc).

    A disaggregated row gets per-pool limits from the benchmark rules and its recorded batch
    sizes with ``deployment="benchmark"`` (``silicon/disagg.py``, ``role_limits``).
    """
    problem = _unsupported(row, catalog)
    if problem:
        return problem
    weights = weight_precision(row, catalog)
    if isinstance(row, DisaggRow):
        return _disagg_row_config(row, catalog, latency_model, weights, deployment)
    try:
        model = catalog.model(row.model)
        gpu = catalog.gpu(row.system)
    except InputError as err:
        return str(err).split(";", 1)[0]  # "unknown model 'x' (did you mean ...)"
    layout = worker_layout(*recorded_layout(row), moe=model.is_moe)
    if isinstance(layout, str):
        return layout
    fields = {
        "model": model.name,
        "gpu": gpu.name,
        **layout,
        "weight_precision": weights,
        "kv_precision": kv_precision(row, catalog),
        "backend": row.backend,
        "latency_model": latency_model,
        **version_settings(row, layout["tp"]),
        **protocol_settings(row),
    }
    if layout["tp"] > gpu.gpus_per_node:  # the benchmark ran it: model the network
        fields["allow_multi_node"] = True
    if deployment != "defaults":
        fields.update(benchmark_engine_settings(row, literal=deployment == "generator"))
    try:
        return validate(ServingConfig, fields, f"row {row.id}")
    except InputError as err:
        return f"cannot express the deployment: {err}"


def _disagg_row_config(
    row: DisaggRow,
    catalog: Catalog,
    latency_model: str,
    weights: str | None,
    deployment: Deployment,
) -> ServingConfig | str:
    """``row_config`` of a disaggregated row (``silicon/disagg.py``), the client's prompts'
    settings (``rules.protocol_settings``) on top."""
    recipe = decode_cap(row)
    config = disagg_config(
        row,
        catalog,
        latency_model=latency_model,
        weight_precision=weights,
        kv_precision=kv_precision(row, catalog),
        engine_limits=deployment != "defaults",
        decode_cap=recipe.decode_batch if recipe else None,
        prefill_recipe=prefill_limits(row),
    )
    prompts = protocol_settings(row)
    if isinstance(config, str) or not prompts:
        return config
    return config.model_copy(update=prompts)


def rounds_for(rounds: int, total: int = BENCHMARK_ROUNDS) -> int:
    """Requests per user actually simulated: ``rounds`` capped at the benchmark's ``total``."""
    return max(1, min(total, rounds))


def simulate_row(
    row: Row,
    *,
    latency_model: str,
    catalog: Catalog,
    seed: int = 0,
    rounds: int = DEFAULT_ROUNDS,
    start: StartMode = "together",
    deployment: Deployment = "benchmark",
    ttft_offset: bool = False,
    files: UserFiles = UserFiles(),
    overrides: Mapping[str, Any] | None = None,
) -> RowResult | Skipped:
    """Simulate the benchmark of ``row`` and return its mean TTFT and TPOT (module doc).

    ``start`` is when the users send their first request: ``together`` at time 0 (the
    benchmark's protocol), or ``spread`` evenly over one request's duration, measured by a
    one-round pilot run (the fully desynchronised limit; see ``START_MODES``). ``deployment``
    chooses the engine limits (``DEPLOYMENTS``); ``ttft_offset`` adds the fitted
    ``FITTED_TTFT_OFFSET_MS`` of the row's backend to the TTFT; ``files`` are the user's
    profile and table folders; ``overrides`` are ``ServingConfig`` fields set over the row's
    deployment (e.g. ``kv_capacity_tokens``, to probe what pool a row implies:
    ``bench/implied_pool.py``).

    An ``InputError`` from a bad ``latency_model`` spec propagates (a user mistake that would
    fail every row); a configuration that cannot run becomes ``Skipped``.
    """
    config = row_config(row, catalog, latency_model=latency_model, deployment=deployment)
    if isinstance(config, str):
        return Skipped(row.line, row.id, row.model, row.backend, config)
    config = files.apply(config)
    if overrides:
        config = validate(ServingConfig, {**config.model_dump(), **overrides}, f"row {row.id}")
    ramp_s = 0.0
    if start == "spread":
        pilot = _run(row, config, catalog, seed, rounds=1, ramp_s=0.0)
        if isinstance(pilot, Skipped):
            return pilot
        ramp_s = float(np.mean([r.e2e_s for r in pilot.records])) / row.concurrency
    total = protocol(row).requests_per_user
    simulated = rounds_for(rounds, total)
    result = _run(row, config, catalog, seed, rounds=simulated, ramp_s=ramp_s)
    if isinstance(result, Skipped):
        return result
    order = np.argsort([r.index for r in result.records], kind="stable")
    arrays = result.per_request_ms()
    users = row.concurrency
    offset_ms = FITTED_TTFT_OFFSET_MS.get(row.backend, 0.0) if ttft_offset else 0.0
    ttft = benchmark_mean(arrays["ttft_ms"][order], users, simulated, total)
    return RowResult(
        row=row,
        predicted_ttft_ms=ttft + offset_ms,
        predicted_tpot_ms=benchmark_mean(arrays["tpot_ms"][order], users, simulated, total),
        requests=len(result.records),
    )


def _run(
    row: Row,
    config: ServingConfig,
    catalog: Catalog,
    seed: int,
    *,
    rounds: int,
    ramp_s: float,
) -> SimResult | Skipped:
    """``rounds`` rounds of the benchmark's closed loop; Skipped when nothing could run, or
    the loop is one the workload cannot express (more users than it supports)."""
    try:
        workload = closed_loop_workload(
            users=row.concurrency,
            requests=row.concurrency * rounds,
            input_tokens=row.isl,
            output_tokens=row.osl,
            ramp_s=ramp_s,
            turnaround_s=CLIENT_TURNAROUND_S,
            source=f"row {row.id}",
        )
    except InputError as err:
        reason = f"cannot express the benchmark's closed loop: {err}"
        return Skipped(row.line, row.id, row.model, row.backend, reason)
    ratio = protocol(row).length_ratio
    if ratio < 1:
        # The harness draws each length uniformly from [ratio · L, L] (rules.py).
        data = workload.root.model_dump()
        data["input_tokens"] = {"dist": "uniform", "low": ratio * row.isl, "high": row.isl}
        data["output_tokens"] = {"dist": "uniform", "low": ratio * row.osl, "high": row.osl}
        workload = validate(WorkloadSpec, data, f"row {row.id}")
    result = simulate(config, workload, seed=seed, catalog=catalog)
    if not result.feasible or result.summary is None:
        return Skipped(row.line, row.id, row.model, row.backend, f"infeasible: {result.reason}")
    if not result.records:
        rejected = result.summary.n_rejected
        return Skipped(
            row.line,
            row.id,
            row.model,
            row.backend,
            f"no request finished ({rejected} rejected: longer than the context or the KV cache)",
        )
    return result


def benchmark_mean(
    values: NDArray[np.float64], users: int, rounds: int, total: int = BENCHMARK_ROUNDS
) -> float:
    """The mean a ``total``-round benchmark would report, from ``rounds`` rounds.

    ``values`` are per request in issue order; round k is requests ``k·users … (k+1)·users − 1``.
    The closed loop settles into a periodic pattern within a few rounds, except for the last
    round, when no new requests arrive and the batch drains (running fewer requests, its
    decode steps are faster). So the benchmark's rounds map onto the simulated ones as: the
    first ``rounds − 1`` as simulated, the steady rounds not simulated as copies of the
    second-to-last simulated round, and the benchmark's own last round as the simulated last
    (drain) round — a request-weighted mean with weight ``total − rounds + 1`` on
    the second-to-last round. With ``rounds`` of 1 or ``total``, or fewer values
    than full rounds (rejections), it is the plain mean. NaN entries (one-token outputs' TPOT)
    are ignored.
    """
    finite = values[~np.isnan(values)]
    if not len(finite):
        return math.nan
    if rounds >= total or len(values) != users * rounds or rounds < 2:
        return float(finite.mean())
    per_round = values.reshape(rounds, users)
    means = np.array([np.nanmean(r) if np.any(~np.isnan(r)) else math.nan for r in per_round])
    if np.isnan(means).any():
        return float(finite.mean())
    weights = np.ones(rounds)
    weights[-2] += total - rounds
    return float(np.dot(means, weights) / weights.sum())


def _simulate_one(
    row: Row,
    *,
    latency_model: str,
    catalog_path: str | None,
    seed: int,
    rounds: int,
    start: StartMode,
    deployment: Deployment,
    ttft_offset: bool,
    quiet: bool,
    files: UserFiles,
) -> RowResult | Skipped:
    """Worker entry (module level so it pickles); the catalog is reloaded per process."""
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        return simulate_row(
            row,
            latency_model=latency_model,
            catalog=load_catalog(catalog_path),
            seed=seed,
            rounds=rounds,
            start=start,
            deployment=deployment,
            ttft_offset=ttft_offset,
            files=files,
        )


def run_validation(
    rows: Sequence[Row],
    *,
    latency_model: str,
    catalog_path: str | Path | None = None,
    seed: int = 0,
    rounds: int = DEFAULT_ROUNDS,
    jobs: int = 1,
    skipped: Sequence[Skipped] = (),
    progress: Callable[[int], None] | None = None,
    quiet: bool = False,
    start: StartMode = "together",
    deployment: Deployment = "benchmark",
    ttft_offset: bool = False,
    files: UserFiles = UserFiles(),
) -> FidelityReport:
    """Simulate every row (in ``jobs`` processes) and collect the report.

    ``skipped`` are rows already set aside (e.g. by ``read_silicon``); they come first in the
    report's skipped list. ``progress`` is called with 1 after each row. ``quiet`` silences the
    latency models' warnings (they repeat for every row of a deployment). ``files``: the
    user's profile and table folders (``UserFiles``).
    """
    catalog = None if catalog_path is None else str(catalog_path)
    work = partial(
        _simulate_one,
        latency_model=latency_model,
        catalog_path=catalog,
        seed=seed,
        rounds=rounds,
        start=start,
        deployment=deployment,
        ttft_offset=ttft_offset,
        quiet=quiet,
        files=files,
    )
    outcomes: list[RowResult | Skipped] = []
    if jobs > 1 and len(rows) > 1:
        # forkserver, not fork: the caller may be running a progress-bar thread.
        context = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            for outcome in pool.map(work, rows):
                outcomes.append(outcome)
                if progress:
                    progress(1)
    else:
        for row in rows:
            outcomes.append(work(row))
            if progress:
                progress(1)
    results = tuple(o for o in outcomes if isinstance(o, RowResult))
    more = tuple(o for o in outcomes if isinstance(o, Skipped))
    return FidelityReport(
        latency_model,
        rounds_for(rounds),
        results,
        (*skipped, *more),
        start,
        deployment,
        ttft_offset,
    )
