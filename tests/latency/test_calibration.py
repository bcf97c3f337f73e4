"""Calibration: NNLS, the held-out split, recovering known coefficients, the calibration file,
``ScaledKernels`` and ``kvplan calibrate``."""

from __future__ import annotations

import itertools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hardware.catalog import shipped_catalog
from optimizer.cli.main import app
from simulator.latency import Deployment, make_latency_model
from simulator.latency.calibrated import (
    CLASS_TERMS,
    Calibration,
    PeakRates,
    ScaledKernels,
    VariantFit,
    calibrated_kernels,
    default_calibration_path,
    load_calibration,
    term_matrix,
)
from simulator.latency.fit import (
    catalog_shape_filter,
    fit_calibration,
    grid_holdout_split,
    model_gemm_shapes,
    nnls,
    predict_frame,
)
from simulator.latency.kernels import KERNEL_CLASSES, KernelClass
from simulator.latency.profiles import ProfileSet, load_profiles, shipped_profiles
from slo.inputfile import InputError
from tests.latency.test_table import write_profile_dir

CATALOG = shipped_catalog()
H100 = CATALOG.gpu("h100_sxm")
RATES = PeakRates.of(H100)

#: Known coefficients the synthetic profiles are generated with (a scaled roofline plus a few
#: of the extra terms, others zero).
TRUE: dict[KernelClass, dict[str, float]] = {
    "gemm": {"overhead_s": 4e-6, "roofline": 1.25, "memory": 0.3},
    "context_attention": {
        "overhead_s": 1.2e-5,
        "compute": 1.5,
        "memory": 2.0,
        "per_request_s": 3e-8,
    },
    "generation_attention": {"overhead_s": 1e-5, "roofline": 1.1, "per_request_kv_head_s": 2e-8},
    "nccl": {"overhead_s": 5e-6, "per_peer_s": 1.5e-6, "wire": 1.2, "wire_below_1024KiB": 0.7},
}


def _calibration(
    coefficients: dict[KernelClass, dict[str, float]], gpu: str = "h100_sxm"
) -> Calibration:
    variant = {"gemm": "bf16", "context_attention": "bf16", "generation_attention": "bf16"}
    return Calibration(
        gpu=gpu,
        source="test",
        method="known",
        holdout_fraction=0.0,
        seed=0,
        classes={
            kind: {
                variant.get(kind, "all_reduce"): VariantFit(coefficients=c, fit_mape_pct=0, n_fit=1)
            }
            for kind, c in coefficients.items()
        },
    )


def _synthetic_profiles(coefficients: dict[KernelClass, dict[str, float]]) -> ProfileSet:
    """Profile rows on full grids whose seconds are exactly the calibrated model's."""
    heads = {"num_heads": 32.0, "num_kv_heads": 8.0, "head_dim": 128.0, "kv_dtype": "bf16"}
    grid = {
        "gemm": [
            {"dtype": "bf16", "m": m, "n": n, "k": k}
            for m, n, k in itertools.product(
                (1, 8, 64, 256, 1024, 4096, 16384), (512, 2048, 8192), (256, 1024, 4096, 16384)
            )
        ],
        "context_attention": [
            {**heads, "batch_size": b, "new_tokens": s}
            for b, s in itertools.product((1, 2, 8, 32), (16, 128, 1024, 4096, 16384))
        ],
        "generation_attention": [
            {**heads, "num_heads": h, "num_kv_heads": kv, "batch_size": b, "kv_len": s}
            for (h, kv), b, s in itertools.product(
                ((32.0, 8.0), (16.0, 2.0)), (1, 4, 32, 256, 1024), (1, 63, 1023, 16383, 131071)
            )
        ],
        "nccl": [
            {"num_gpus": g, "message_bytes": float(1 << e)}
            for g, e in itertools.product((2, 4, 8), range(9, 30, 2))
        ],
    }
    calibration = _calibration(coefficients)
    frames = {}
    for kind, rows in grid.items():
        frame = pd.DataFrame(rows)
        frame["seconds"] = predict_frame(calibration, H100, kind, frame)  # type: ignore[arg-type]
        frames[kind] = frame
    return ProfileSet(gpu="h100_sxm", source="synthetic", **frames)


# ----- NNLS and the split ------------------------------------------------------------------------
def test_nnls_matches_brute_force_and_clips_negative_solutions() -> None:
    rng = np.random.default_rng(1)
    a = rng.random((40, 3))
    x_true = np.array([2.0, 0.0, 0.5])
    assert np.allclose(nnls(a, a @ x_true), x_true, atol=1e-10)
    b = a @ np.array([1.0, -3.0, 1.0])  # the unconstrained optimum is negative
    x = nnls(a, b)
    assert np.all(x >= 0)
    brute = min(
        (
            float(np.sum((a @ c - b) ** 2))
            for c in itertools.product(np.linspace(0, 3, 25), repeat=3)
        ),
    )
    assert float(np.sum((a @ x - b) ** 2)) <= brute + 1e-12


def test_holdout_is_by_grid_value_and_never_extrapolates() -> None:
    profiles = _synthetic_profiles(TRUE)
    fitting, held = grid_holdout_split(profiles, 0.3, seed=7)
    again_fit, again_held = grid_holdout_split(profiles, 0.3, seed=7)
    for kind in KERNEL_CLASSES:
        whole, fit, out = profiles.frame(kind), fitting.frame(kind), held.frame(kind)
        assert len(fit) + len(out) == len(whole)
        assert set(fit.index).isdisjoint(out.index)
        assert fit.equals(again_fit.frame(kind))
        assert out.equals(again_held.frame(kind))
        assert len(out) > 0, kind
        axis = {"gemm": "m", "nccl": "message_bytes"}.get(kind, "batch_size")
        assert fit[axis].min() == whole[axis].min()
        assert fit[axis].max() == whole[axis].max()
    none_fit, none_held = grid_holdout_split(profiles, 0.0, seed=0)
    assert len(none_held) == 0
    assert len(none_fit) == len(profiles)
    with pytest.raises(InputError, match="holdout fraction"):
        grid_holdout_split(profiles, 1.0, seed=0)


# ----- recovering known coefficients --------------------------------------------------------
def test_fit_recovers_the_coefficients_that_generated_the_data() -> None:
    fitted = fit_calibration(_synthetic_profiles(TRUE), H100, holdout=0.2, seed=0)
    for kind, known in TRUE.items():
        (fit,) = fitted.classes[kind].values()
        for term in CLASS_TERMS[kind]:
            expected = known.get(term, 0.0)
            assert fit.coefficients[term] == pytest.approx(expected, rel=1e-6, abs=1e-12), (
                kind,
                term,
            )
        assert fit.fit_mape_pct < 1e-6
        assert fit.holdout_mape_pct is not None
        assert fit.holdout_mape_pct < 1e-6
        assert fitted.summary[kind].n_holdout == fit.n_holdout > 0


def test_fit_recovers_a_scaled_roofline_from_noisy_measurements() -> None:
    scaled = {kind: {"overhead_s": 8e-6, "roofline": 1.4} for kind in ("gemm",)}
    profiles = _synthetic_profiles({**TRUE, **scaled})  # type: ignore[dict-item]
    rng = np.random.default_rng(0)
    noisy = profiles.gemm.assign(
        seconds=profiles.gemm.seconds * rng.lognormal(0, 0.03, len(profiles.gemm))
    )
    fitted = fit_calibration(profiles.replace(gemm=noisy), H100, holdout=0.2, seed=3)
    fit = fitted.classes["gemm"]["bf16"]
    assert fit.coefficients["roofline"] + fit.coefficients["compute"] == pytest.approx(
        1.4, rel=0.08
    )
    assert fit.fit_mape_pct < 4.0


def test_fit_refuses_profiles_of_another_gpu() -> None:
    other = _synthetic_profiles(TRUE)
    with pytest.raises(InputError, match="measured on 'h100_sxm', not 'h200_sxm'"):
        fit_calibration(other, CATALOG.gpu("h200_sxm"))


# ----- ScaledKernels and the file --------------------------------------------------------------
def test_scaled_kernels_equal_the_vectorised_prediction() -> None:
    calibration = _calibration(TRUE)
    kernels = ScaledKernels(H100, calibration)
    profiles = _synthetic_profiles(TRUE)
    for r in profiles.gemm.itertuples():
        assert kernels.gemm(int(r.m), int(r.n), int(r.k), "bf16") == pytest.approx(
            r.seconds, rel=1e-12
        )
    for r in profiles.generation_attention.itertuples():
        heads = (int(r.num_heads), int(r.num_kv_heads), 128, "bf16")
        got = kernels.generation_attention(int(r.batch_size), int(r.kv_len), *heads)
        assert got == pytest.approx(r.seconds, rel=1e-12)
    for r in profiles.nccl.itertuples():
        got = kernels.all_reduce(r.message_bytes, int(r.num_gpus))
        assert got == pytest.approx(r.seconds, rel=1e-12)
    assert kernels.all_reduce(1e6, 1) == 0.0
    assert kernels.context_attention(2, 512, 4096, 32, 8, 128, "bf16") > kernels.context_attention(
        2, 512, 0, 32, 8, 128, "bf16"
    )


def test_missing_variant_uses_bf16_and_warns_once() -> None:
    kernels = ScaledKernels(H100, _calibration(TRUE))
    with pytest.warns(UserWarning, match="no gemm variant 'fp8'"):
        fp8 = kernels.gemm(4096, 4096, 4096, "fp8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernels.gemm(2048, 4096, 4096, "fp8")
    terms = term_matrix(RATES, "gemm", {"m": 4096.0, "n": 4096.0, "k": 4096.0, "dtype": "fp8"})[0]
    coef = [TRUE["gemm"].get(t, 0.0) for t in CLASS_TERMS["gemm"]]
    assert fp8 == pytest.approx(float(terms @ coef), rel=1e-12)


@given(
    m=st.integers(1, 40000),
    dm=st.integers(1, 5000),
    n=st.sampled_from([128, 1024, 4096, 28672]),
    k=st.sampled_from([128, 1024, 8192]),
    kv=st.integers(0, 100000),
    dkv=st.integers(1, 5000),
    batch=st.integers(1, 512),
)
@settings(max_examples=60, deadline=None)
def test_calibrated_times_never_decrease_with_size(
    *, m: int, dm: int, n: int, k: int, kv: int, dkv: int, batch: int
) -> None:
    kernels = ScaledKernels(H100, load_calibration(gpu="h100_sxm"))
    for dtype in ("bf16", "fp8", "fp8_block"):
        assert kernels.gemm(m + dm, n, k, dtype) >= kernels.gemm(m, n, k, dtype)
    heads = (32, 8, 128, "bf16")
    assert kernels.generation_attention(batch, kv + dkv, *heads) >= kernels.generation_attention(
        batch, kv, *heads
    )
    assert kernels.generation_attention(batch + 1, kv, *heads) >= kernels.generation_attention(
        batch, kv, *heads
    )
    ctx = kernels.context_attention
    assert ctx(batch, dm, kv + dkv, *heads) >= ctx(batch, dm, kv, *heads)
    assert kernels.all_reduce(m * 1000.0 + dm, 8) >= kernels.all_reduce(m * 1000.0, 8)


def test_calibration_file_round_trip_and_gpu_check(tmp_path: Path) -> None:
    calibration = _calibration(TRUE)
    path = tmp_path / "cal.yaml"
    path.write_text(yaml.safe_dump(calibration.model_dump(mode="json")))
    assert load_calibration(path, gpu="H100_SXM") == calibration
    with pytest.raises(InputError, match=r"cal\.yaml: gpu: fitted on 'h100_sxm', cannot be used"):
        load_calibration(path, gpu="h200_sxm")
    with pytest.raises(InputError, match="cannot time"):
        ScaledKernels(CATALOG.gpu("h200_sxm"), calibration)
    with pytest.raises(InputError, match="no such file"):
        load_calibration(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"flops": 1.0}, "unknown term 'flops'"),
        ({"roofline": -1.0}, "coefficient must be finite and ≥ 0"),
    ],
)
def test_bad_calibration_files_are_one_line_errors(
    tmp_path: Path, change: dict[str, float], expected: str
) -> None:
    document = _calibration(TRUE).model_dump(mode="json")
    document["classes"]["gemm"]["bf16"]["coefficients"].update(change)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(InputError, match=expected) as info:
        load_calibration(path)
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_shipped_calibration_meets_its_recorded_accuracy() -> None:
    calibration = load_calibration(gpu="h100_sxm")
    assert default_calibration_path("h100_sxm").is_file()
    assert set(calibration.classes) == set(KERNEL_CLASSES)
    for kind in KERNEL_CLASSES:
        summary = calibration.summary[kind]
        assert summary.holdout_mape_pct is not None
        assert summary.holdout_mape_pct <= 12.0, kind
        assert summary.fit_mape_pct <= 12.0, kind
    # refitting the shipped profiles, cut to the shapes of the models the file says it was fitted
    # on, reproduces the shipped coefficients (the catalog grew since: refitted on every model's
    # shapes the per-class MAPE rises, e.g. context attention 9.9% -> 12.6%, bench/README.md)
    named = calibration.shapes.split(" of ", 1)[1].rsplit(" at TP ", 1)[0].split(", ")
    fitted_on = [CATALOG.model(name) for name in named]
    assert len(fitted_on) == 13
    profiles = catalog_shape_filter(fitted_on, shipped_profiles()).apply(shipped_profiles())
    refit = fit_calibration(
        profiles, H100, holdout=calibration.holdout_fraction, seed=calibration.seed
    )
    for kind in KERNEL_CLASSES:
        for variant, fit in calibration.classes[kind].items():
            for term, value in fit.coefficients.items():
                got = refit.classes[kind][variant].coefficients[term]
                assert got == pytest.approx(value, rel=1e-9, abs=1e-15), (kind, variant, term)


def test_calibrated_model_is_registered_and_carries_to_other_gpus() -> None:
    model = CATALOG.model("meta-llama/Llama-3.1-8B")
    h100 = make_latency_model("calibrated", Deployment(model, H100))
    roofline = make_latency_model("roofline", Deployment(model, H100))
    assert h100.name == "calibrated"
    for batch in ([(0, 2048)], [(1024, 1)] * 32):
        assert 0.5 < h100.step_seconds(batch) / roofline.step_seconds(batch) < 2.0
    # every GPU with shipped profiles has its own calibration per engine; others carry H100's
    for gpu in ("a100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "l40s"):
        for engine in ("vllm", "sglang", "trtllm"):
            assert calibrated_kernels(CATALOG.gpu(gpu), engine=engine).calibration.gpu == gpu
    # a catalog stand-in's calibration (the same silicon), without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert calibrated_kernels(CATALOG.gpu("gb200"), engine="trtllm").calibration.gpu == (
            "b200_sxm"
        )
    with pytest.warns(UserWarning, match="no calibration for 'h100_pcie'"):
        pcie = calibrated_kernels(CATALOG.gpu("h100_pcie"))
    # H100 PCIe: less bandwidth than SXM; a memory-bound decode kernel gets slower
    decode = (64, 8192, 32, 8, 128, "bf16")
    assert pcie.generation_attention(*decode) > ScaledKernels(
        H100, load_calibration(gpu="h100_sxm")
    ).generation_attention(*decode)
    with pytest.raises(InputError, match="no such file"):
        make_latency_model("calibrated:/nonexistent.yaml", Deployment(model, H100))


def test_catalog_filter_brackets_the_models_gemms() -> None:
    llama = CATALOG.model("meta-llama/Llama-3.1-70B")
    assert (10240, 8192) in model_gemm_shapes(llama, 1)  # fused QKV: (64 + 2·8)·128
    assert (8192, 3584) in model_gemm_shapes(llama, 8)  # down projection at TP 8
    profiles = shipped_profiles()
    kept = catalog_shape_filter([llama], profiles, tps=(8,)).apply(profiles)
    pairs = set(zip(kept.gemm["n"], kept.gemm["k"], strict=True))
    assert (8192.0, 3584.0) in pairs  # measured exactly
    assert (1024.0, 8192.0) in pairs  # QKV n = (8 + 2)·128 = 1280 lies between 1024 ...
    assert (1536.0, 8192.0) in pairs  # ... and 1536 on the measured grid
    decode = kept.generation_attention
    heads = set(zip(decode["num_heads"], decode["num_kv_heads"], strict=True))
    assert heads == {(8.0, 1.0)}  # 64 heads / 8 and max(1, 8 KV heads / 8)
    assert len(kept.nccl) == len(profiles.nccl)


# ----- the CLI ----------------------------------------------------------------------------------
def test_calibrate_command_writes_a_loadable_file(tmp_path: Path) -> None:
    directory = write_profile_dir(tmp_path / "profiles", gemm_m=(1, 4, 16, 64, 256, 1024, 4096))
    out = tmp_path / "out" / "cal.yaml"
    args = ["calibrate", "--profiles", str(directory), "--shapes", "all", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--json", "--holdout", "0.25"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["out"] == str(out)
    classes = {row["class"] for row in report["fit"]}
    assert classes == set(KERNEL_CLASSES)
    calibration = load_calibration(out, gpu="h100_sxm")
    assert calibration.holdout_fraction == 0.25
    assert all(math.isfinite(row["fit_mape_pct"]) for row in report["fit"])
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0
    assert "held-out" in table.stdout
    assert "gemm" in table.stdout


def test_calibrate_command_input_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(
        app, ["calibrate", "--profiles", str(tmp_path / "x"), "--out", "o.yaml"]
    )
    assert isinstance(missing.exception, InputError)
    assert "no such profile directory" in str(missing.exception)
    gpu = runner.invoke(app, ["calibrate", "--gpu", "h300", "--out", str(tmp_path / "o.yaml")])
    assert isinstance(gpu.exception, InputError)
    assert "unknown GPU 'h300'" in str(gpu.exception)
    shapes = runner.invoke(
        app, ["calibrate", "--shapes", "some", "--out", str(tmp_path / "o.yaml")]
    )
    assert isinstance(shapes.exception, InputError)
    assert "--shapes" in str(shapes.exception)
    assert not (tmp_path / "o.yaml").exists()


def test_profiles_directory_named_after_the_gpu_loads(tmp_path: Path) -> None:
    directory = write_profile_dir(tmp_path / "h100_sxm")
    assert load_profiles(directory).gpu == "h100_sxm"
