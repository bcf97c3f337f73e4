"""Fitting calibrations to kernel profiles; held-out splits; the catalog-shape filter.

The fit (``fit_calibration``) solves, per kernel class and variant, a non-negative least-squares
problem on **relative** error: minimise ``Σ ((Σ_j c_j·term_j(row)) / measured(row) - 1)²`` over
``c ≥ 0``, with the terms of ``calibrated.CLASS_TERMS``. Relative, because kernel times span five
orders of magnitude and a microsecond GEMM matters as much to a decode step as a millisecond one
does to a prefill. Non-negative, so the calibrated time never decreases when a shape grows.

Held-out rows are chosen by *grid value*, not by row: a random share of the interior values of
each axis (GEMM m, n and k; attention batch and length; all-reduce size) is held out with every
row that uses one of them. The fitting rows then still form complete grids, so a profile table
built from them answers held-out rows by true interpolation (what ``bench/latency_accuracy.py``
measures), and the calibration is judged on shapes it never saw.

Not a general optimiser: the NNLS here enumerates active sets exactly, fine for the ≤ 8 terms a
class has, not for wide problems.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hardware.schema import GpuSpec, ModelSpec
from simulator.latency.calibrated import (
    CLASS_TERMS,
    Calibration,
    ClassSummary,
    PeakRates,
    VariantFit,
    term_matrix,
)
from simulator.latency.kernels import KERNEL_CLASSES, KernelClass
from simulator.latency.profiles import ProfileSet
from slo.inputfile import InputError

__all__ = [
    "AXES",
    "FIT_METHOD",
    "ShapeFilter",
    "catalog_shape_filter",
    "fit_calibration",
    "grid_holdout_split",
    "mape_pct",
    "model_gemm_shapes",
    "nnls",
    "predict_frame",
    "variant_column",
]

#: The grid axes of each class's profile rows, used for the held-out split.
AXES: dict[KernelClass, tuple[str, ...]] = {
    "gemm": ("m", "n", "k"),
    "context_attention": ("batch_size", "new_tokens"),
    "generation_attention": ("batch_size", "kv_len"),
    "nccl": ("message_bytes",),
}

FIT_METHOD = (
    "non-negative least squares on relative error, per kernel class and variant, over the "
    "peak-rate terms of simulator/latency/calibrated.py"
)

_MAX_TERMS = 10  # exact active-set enumeration costs 2**terms least-squares solves


def variant_column(kind: KernelClass) -> str | None:
    """The profile column that splits ``kind`` into variants (None: one variant 'all_reduce')."""
    return {
        "gemm": "dtype",
        "context_attention": "kv_dtype",
        "generation_attention": "kv_dtype",
    }.get(kind)


def _variants(kind: KernelClass, frame: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    column = variant_column(kind)
    if column is None:
        if len(frame):
            yield "all_reduce", frame
        return
    for variant, rows in frame.groupby(column, sort=True):
        yield str(variant), rows


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``argmin ||a·x - b||₂`` subject to ``x ≥ 0``, exactly, by trying every active set.

    Columns are scaled to unit norm first (terms differ by twelve orders of magnitude).
    """
    _, cols = a.shape
    if cols > _MAX_TERMS:
        raise ValueError(f"nnls: {cols} columns is too many for exact enumeration")
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    scaled = a / norms
    best_x, best_res = np.zeros(cols), float(np.sum(b * b))
    for size in range(1, cols + 1):
        for subset in itertools.combinations(range(cols), size):
            x_sub, *_ = np.linalg.lstsq(scaled[:, subset], b, rcond=None)
            if np.any(x_sub < 0):
                continue
            res = float(np.sum((scaled[:, subset] @ x_sub - b) ** 2))
            if res < best_res - 1e-15 * max(best_res, 1.0):
                best_res = res
                best_x = np.zeros(cols)
                best_x[list(subset)] = x_sub
    solution: np.ndarray = best_x / norms
    return solution


def mape_pct(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean absolute percentage error, in percent (NaN for no rows)."""
    if len(measured) == 0:
        return float("nan")
    return float(np.mean(np.abs(np.asarray(predicted) / np.asarray(measured) - 1.0)) * 100.0)


def _shapes(kind: KernelClass, rows: pd.DataFrame, variant: str) -> dict[str, Any]:
    shapes: dict[str, Any] = {c: rows[c].to_numpy(dtype=float) for c in AXES[kind]}
    for column in ("num_heads", "num_kv_heads", "head_dim", "num_gpus"):
        if column in rows:
            shapes[column] = rows[column].to_numpy(dtype=float)
    dtype_key = variant_column(kind)
    if dtype_key is not None:
        shapes[dtype_key] = variant
    return shapes


def predict_frame(
    calibration: Calibration, gpu: GpuSpec, kind: KernelClass, frame: pd.DataFrame
) -> np.ndarray:
    """Calibrated seconds for every row of a profile frame (vectorised; same result as
    ``ScaledKernels`` row by row). Rows of a variant the calibration lacks are NaN."""
    rates = PeakRates.of(gpu)
    out = np.full(len(frame), np.nan)
    positions = pd.Series(np.arange(len(frame)), index=frame.index)
    for variant, rows in _variants(kind, frame):
        fit = calibration.classes.get(kind, {}).get(variant)
        if fit is None:
            continue
        coef = np.array([fit.coefficients.get(t, 0.0) for t in CLASS_TERMS[kind]])
        terms = term_matrix(rates, kind, _shapes(kind, rows, variant))
        out[positions.loc[rows.index].to_numpy()] = terms @ coef
    return out


# ----- held-out split ---------------------------------------------------------------------------
def grid_holdout_split(
    profiles: ProfileSet, fraction: float, seed: int
) -> tuple[ProfileSet, ProfileSet]:
    """``(fitting, held_out)`` rows: a random share of every axis's interior grid values is held
    out, with each row that uses one (module docstring). ``fraction`` is the target share of
    rows; each of a class's ``d`` axes holds out ``1 - (1 - fraction)^(1/d)`` of its interior
    values (at least one when ``fraction`` > 0). The smallest and largest value of every axis
    always stay in the fitting set, so held-out rows are interpolation, never extrapolation."""
    if not 0 <= fraction < 1:
        raise InputError(f"holdout fraction must be in [0, 1), got {fraction}")
    rng = np.random.default_rng(seed)
    fitting: dict[str, pd.DataFrame] = {}
    held: dict[str, pd.DataFrame] = {}
    for kind in KERNEL_CLASSES:
        frame = profiles.frame(kind)
        out = pd.Series(False, index=frame.index)
        axes = AXES[kind]
        share = 1.0 - (1.0 - fraction) ** (1.0 / len(axes))
        for axis in axes:
            values = np.unique(frame[axis].to_numpy(dtype=float)) if len(frame) else np.array([])
            interior = values[1:-1]
            count = round(share * len(interior))
            if fraction > 0 and len(interior):
                count = max(count, 1)
            chosen = rng.choice(interior, size=count, replace=False) if count else interior[:0]
            out |= frame[axis].isin(chosen)
        fitting[kind], held[kind] = frame[~out], frame[out]
    return profiles.replace(**fitting), profiles.replace(**held)


# ----- the fit ----------------------------------------------------------------------------------
def fit_calibration(
    profiles: ProfileSet,
    gpu: GpuSpec,
    *,
    holdout: float = 0.2,
    seed: int = 0,
    model_scope: str = "any",
    shapes: str = "all",
) -> Calibration:
    """Fit every class and variant present in ``profiles`` and measure the fit.

    ``gpu`` must be the GPU the profiles were measured on (its peaks define the terms).
    ``holdout`` of the rows (by grid value, ``grid_holdout_split``) is kept out of the fit and
    reported as ``holdout_mape_pct``. ``model_scope`` and ``shapes`` only describe, in the file,
    which rows ``profiles`` was restricted to. A class without rows is an ``InputError``.
    """
    if gpu.name.lower() != profiles.gpu:
        raise InputError(
            f"profiles from {profiles.source} were measured on '{profiles.gpu}', not '{gpu.name}'"
        )
    fitting, held = grid_holdout_split(profiles, holdout, seed)
    rates = PeakRates.of(gpu)
    classes: dict[KernelClass, dict[str, VariantFit]] = {}
    summary: dict[KernelClass, ClassSummary] = {}
    for kind in KERNEL_CLASSES:
        if not len(fitting.frame(kind)):
            raise InputError(f"{profiles.source}: no {kind} rows to fit (after filtering)")
        classes[kind] = {
            variant: _fit_variant(rates, kind, variant, rows)
            for variant, rows in _variants(kind, fitting.frame(kind))
        }
    draft = Calibration(
        gpu=gpu.name,
        model_scope=model_scope,
        shapes=shapes,
        source=profiles.source,
        method=FIT_METHOD,
        holdout_fraction=holdout,
        seed=seed,
        classes=classes,
    )
    for kind in KERNEL_CLASSES:
        classes[kind] = _with_holdout(draft, gpu, kind, held.frame(kind))
        summary[kind] = _summary(draft, gpu, kind, fitting.frame(kind), held.frame(kind))
    return draft.model_copy(update={"classes": classes, "summary": summary})


def _fit_variant(
    rates: PeakRates, kind: KernelClass, variant: str, rows: pd.DataFrame
) -> VariantFit:
    measured = rows["seconds"].to_numpy(dtype=float)
    terms = term_matrix(rates, kind, _shapes(kind, rows, variant))
    coef = nnls(terms / measured[:, None], np.ones(len(measured)))
    return VariantFit(
        coefficients={t: float(c) for t, c in zip(CLASS_TERMS[kind], coef, strict=True)},
        fit_mape_pct=round(mape_pct(terms @ coef, measured), 3),
        n_fit=len(rows),
    )


def _with_holdout(
    calibration: Calibration, gpu: GpuSpec, kind: KernelClass, held: pd.DataFrame
) -> dict[str, VariantFit]:
    updated: dict[str, VariantFit] = {}
    held_by_variant = dict(_variants(kind, held))
    for variant, fit in calibration.classes[kind].items():
        rows = held_by_variant.get(variant)
        if rows is None or not len(rows):
            updated[variant] = fit
            continue
        predicted = predict_frame(calibration, gpu, kind, rows)
        error = mape_pct(predicted, rows["seconds"].to_numpy(dtype=float))
        updated[variant] = fit.model_copy(
            update={"holdout_mape_pct": round(error, 3), "n_holdout": len(rows)}
        )
    return updated


def _summary(
    calibration: Calibration,
    gpu: GpuSpec,
    kind: KernelClass,
    fitting: pd.DataFrame,
    held: pd.DataFrame,
) -> ClassSummary:
    def error(frame: pd.DataFrame) -> float | None:
        if not len(frame):
            return None
        predicted = predict_frame(calibration, gpu, kind, frame)
        known = ~np.isnan(predicted)  # held-out rows of a variant absent from the fit
        return round(mape_pct(predicted[known], frame["seconds"].to_numpy()[known]), 3)

    return ClassSummary(
        fit_mape_pct=error(fitting) or 0.0,
        holdout_mape_pct=error(held),
        n_fit=len(fitting),
        n_holdout=len(held),
    )


# ----- which shapes matter ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ShapeFilter:
    """The profile rows that matter for some models: GEMM ``(n, k)`` grid points that bracket
    their layers, attention head configurations they run; every all-reduce size."""

    gemm_nk: frozenset[tuple[float, float]]
    head_configs: frozenset[tuple[float, float, float]]
    description: str

    def apply(self, profiles: ProfileSet) -> ProfileSet:
        """``profiles`` restricted to the rows this filter keeps."""
        gemm = profiles.gemm
        keep = [(n, k) in self.gemm_nk for n, k in zip(gemm["n"], gemm["k"], strict=True)]
        frames = {"gemm": gemm[keep]}
        for kind in ("context_attention", "generation_attention"):
            frame = profiles.frame(kind)
            cols = zip(frame["num_heads"], frame["num_kv_heads"], frame["head_dim"], strict=True)
            frames[kind] = frame[[cfg in self.head_configs for cfg in cols]]
        return profiles.replace(**frames)


def model_gemm_shapes(model: ModelSpec, tp: int) -> set[tuple[int, int]]:
    """Per-GPU ``(n, k)`` of the model's GEMMs at tensor parallelism ``tp`` (experts whole, as
    under expert parallelism; shared experts and dense layers split by ``tp``)."""
    h = model.hidden_size
    heads = max(1, model.num_attention_heads // tp)
    shapes = {(max(1, model.vocab_size // tp), h)}
    if model.attention == "mla":
        qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
        v_head = model.v_head_dim or model.qk_nope_head_dim
        if model.q_lora_rank:
            shapes |= {(model.q_lora_rank, h), (heads * qk_head, model.q_lora_rank)}
        else:
            shapes.add((heads * qk_head, h))
        shapes |= {
            (model.kv_lora_rank + model.qk_rope_head_dim, h),
            (heads * (model.qk_nope_head_dim + v_head), model.kv_lora_rank),
            (h, heads * v_head),
        }
    else:
        kv_heads = max(1, model.num_kv_heads // tp)
        shapes |= {((heads + 2 * kv_heads) * model.head_dim, h), (h, heads * model.head_dim)}
    if not model.is_moe or model.first_dense_layers:
        shapes |= {(2 * model.ffn_size // tp, h), (h, model.ffn_size // tp)}
    if model.is_moe:
        shapes |= {
            (2 * model.expert_ffn_size, h),
            (h, model.expert_ffn_size),
            (model.num_experts, h),
        }
        if model.num_shared_experts:
            shared = model.num_shared_experts * model.expert_ffn_size // tp
            shapes |= {(2 * shared, h), (h, shared)}
    return {(n, k) for n, k in shapes if n > 0 and k > 0}


def _bracket(grid: Sequence[float], value: float) -> set[float]:
    i = bisect.bisect_left(grid, value)
    if i < len(grid) and grid[i] == value:
        return {grid[i]}
    return {grid[j] for j in (i - 1, i) if 0 <= j < len(grid)}


def catalog_shape_filter(
    models: Sequence[ModelSpec], profiles: ProfileSet, tps: Sequence[int] = (1, 2, 4, 8)
) -> ShapeFilter:
    """The rows of ``profiles`` that the table interpolates between for ``models`` at ``tps``.

    MLA attention (DeepSeek) has no matching head configuration in the profiles; its GEMMs are
    kept, its attention is timed by the fallback.
    """
    n_grid = sorted(set(profiles.gemm["n"].astype(float)))
    k_grid = sorted(set(profiles.gemm["k"].astype(float)))
    nk: set[tuple[float, float]] = set()
    heads: set[tuple[float, float, float]] = set()
    for model in models:
        for tp in tps:
            for n, k in model_gemm_shapes(model, tp):
                nk |= set(itertools.product(_bracket(n_grid, n), _bracket(k_grid, k)))
            if model.attention == "gqa":
                config = (
                    float(max(1, model.num_attention_heads // tp)),
                    float(max(1, model.num_kv_heads // tp)),
                    float(model.head_dim),
                )
                heads.add(config)
    names = ", ".join(m.name for m in models)
    description = (
        f"GEMM (n, k) grid points bracketing the layers, and the attention head configurations, "
        f"of {names} at TP {', '.join(map(str, tps))}; all all-reduce sizes"
    )
    return ShapeFilter(frozenset(nk), frozenset(heads), description)
