"""Profile loading and the ``table`` kernel source: exact at measured points, interpolation
between them, monotone grids, and the warned roofline fallback outside the measurements."""

from __future__ import annotations

import gzip
import itertools
import math
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.catalog import shipped_catalog
from simulator.latency import (
    Deployment,
    LatencyContext,
    RooflineKernels,
    make_latency_model,
    profiles,
)
from simulator.latency.profile_files import (
    LAYER_KINDS,
    MLA_KINDS,
    MOE_KIND,
    MOE_LENDERS,
    lent_moe_kind,
    resolve_profile_files,
)
from simulator.latency.profile_grid import _isotonic, _isotonic_along
from simulator.latency.profiles import (
    PROFILE_KINDS,
    ProfileSet,
    load_profiles,
    normalise_dtype,
    shipped_profiles,
    shipped_profiles_dir,
)
from simulator.latency.table import (
    KernelMemo,
    ProfileKernels,
    ProfileTable,
    TableFallbackWarning,
)
from simulator.latency.table_source import table_kernels
from simulator.presets import load_preset
from slo.inputfile import InputError

H100 = shipped_catalog().gpu("h100_sxm")
B200 = shipped_catalog().gpu("b200_sxm")
LLAMA_8B = shipped_catalog().model("meta-llama/Llama-3.1-8B")
ROOFLINE = RooflineKernels(H100)


# ----- a small synthetic profile directory (same format as the shipped one) -------------------
def _gemm_ms(m: float, n: float, k: float) -> float:
    return 0.004 + 2 * m * n * k / 600e12 * 1e3 + (n * k * 2) / 2.5e12 * 1e3


def write_profile_dir(directory: Path, *, gemm_m: tuple[int, ...] = (1, 16, 256, 4096)) -> Path:
    """Write gzipped CSVs in the shipped format; times follow simple known formulas (ms)."""
    directory.mkdir(parents=True, exist_ok=True)
    gemm = [
        {"gemm_dtype": "bfloat16", "m": m, "n": n, "k": k, "kernel_source": "torch", "latency": 0}
        for m in gemm_m
        for n in (1024, 4096)
        for k in (1024, 4096)
    ]
    for row in gemm:
        row["latency"] = _gemm_ms(row["m"], row["n"], row["k"])
    context = [
        {
            "batch_size": b,
            "isl": s,
            "num_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "kv_cache_dtype": "bfloat16",
            "window_size": 0,
            "step": 0,
            "kernel_source": "vllm_flash_attn_fa3",
            "latency": 0.01 + 1e-7 * b * s * s / 1000,
        }
        for b in (1, 4, 16)
        for s in (16, 256, 4096)
    ]
    decode = [
        {
            "batch_size": b,
            "step": s,
            "num_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "kv_cache_dtype": "bfloat16",
            "latency": 0.01 + 2e-7 * b * s,
        }
        for b in (1, 8, 64)
        for s in (15, 255, 4095)
    ]
    nccl = [
        {
            "op_name": op,
            "nccl_dtype": "half",
            "num_gpus": g,
            "message_size": size,
            "latency": 0.006 + g * 1e-3 + size * 2 / 300e9 * 1e3,
        }
        for op in ("all_reduce", "all_gather")
        for g in (2, 8)
        for size in (1024, 1 << 16, 1 << 22)
    ]
    frames = {
        "gemm": gemm,
        "context_attention": context,
        "generation_attention": decode,
        "nccl": nccl,
    }
    for kind, rows in frames.items():
        with gzip.open(directory / f"test_{kind}.csv.gz", "wt") as handle:
            pd.DataFrame(rows).to_csv(handle, index=False)
    return directory


@pytest.fixture
def small(tmp_path: Path) -> ProfileSet:
    return load_profiles(write_profile_dir(tmp_path / "h100_sxm"))


@pytest.fixture
def small_kernels(small: ProfileSet) -> ProfileKernels:
    return ProfileKernels(ProfileTable(small, ROOFLINE, monotone=False), ROOFLINE)


# ----- profiles ----------------------------------------------------------------------------------
def test_dtype_names_are_normalised() -> None:
    assert normalise_dtype("bfloat16") == "bf16"
    assert normalise_dtype(" Half ") == "fp16"
    assert normalise_dtype("float8_e4m3fn") == "fp8"
    assert normalise_dtype("fp8_block") == "fp8_block"
    assert normalise_dtype("MyDtype") == "mydtype"  # unknown names are kept, lower-cased


def test_loader_converts_units_and_keeps_one_row_per_shape(small: ProfileSet) -> None:
    gemm = small.gemm
    row = gemm[(gemm.m == 256) & (gemm.n == 4096) & (gemm.k == 1024)]
    assert row["seconds"].item() == pytest.approx(_gemm_ms(256, 4096, 1024) / 1e3, rel=1e-12)
    assert set(gemm["dtype"]) == {"bf16"}
    assert not small.context_attention.duplicated(["batch_size", "new_tokens"]).any()
    # all-gather rows are dropped; all-reduce sizes become bytes (2-byte elements)
    assert len(small.nccl) == 6
    assert set(small.nccl["message_bytes"]) == {2048.0, 2.0 * (1 << 16), 2.0 * (1 << 22)}


def test_shipped_profiles_cover_every_class_and_stay_small() -> None:
    profiles = shipped_profiles()
    assert (profiles.gpu, profiles.engine) == ("h100_sxm", "vllm")
    for kind in PROFILE_KINDS:
        assert len(profiles.frame(kind)) > 0, kind
    assert set(profiles.gemm["dtype"]) == {"bf16", "fp8", "fp8_block"}
    assert set(profiles.context_attention["kv_dtype"]) == {"bf16", "fp8"}
    root = shipped_profiles_dir().parent
    files = list(root.glob("*/*.csv.gz"))
    # Six GPUs x three engines, cut to the catalog's shapes (7.0 MB with the 2026-12-07 models).
    assert sum(f.stat().st_size for f in files) < 8_000_000
    for gpu in ("a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "l40s"):
        for engine in ("vllm", "sglang", "trtllm"):
            located = resolve_profile_files(gpu, engine)
            assert located is not None
            # Every kernel class; the fused-MoE layer where the engine's profile has the
            # catalog's MoE shapes with balanced routing (TensorRT-LLM's only on L40S; A100's
            # vLLM profile has skewed routing only).
            # Besides, the MoE files other engines lend it (MOE_LENDERS).
            lent = {lent_moe_kind(lender.engine) for lender in MOE_LENDERS.get(engine, ())}
            own = set(located.files) - lent
            assert set(PROFILE_KINDS) <= own <= {*PROFILE_KINDS, *LAYER_KINDS}
            # MLA attention cores: measured for SGLang and TensorRT-LLM (vLLM's profiles time
            # whole MLA modules only, which do not ship; A100's SGLang profile has none).
            mla = engine != "vllm" and (gpu, engine) != ("a100_sxm", "sglang")
            assert (set(MLA_KINDS) <= set(located.files)) == mla, (gpu, engine)
            no_moe = (engine == "trtllm" and gpu != "l40s") or (gpu, engine) == (
                "a100_sxm",
                "vllm",
            )
            assert (MOE_KIND in located.files) != no_moe, (gpu, engine)
            assert all(
                path.name.startswith((f"{engine}_", "nccl_"))
                for kind, path in located.files.items()
                if kind not in lent
            )
    assert set(shipped_profiles("b200_sxm", "sglang").gemm["dtype"]) >= {"bf16", "fp8", "fp4"}


def test_kernel_source_preference_picks_one_implementation(tmp_path: Path) -> None:
    rows = [
        {"gemm_dtype": "fp8_block", "m": 1, "n": 64, "k": 128, "kernel_source": src, "latency": ms}
        for src, ms in (
            ("FlashInferFp8BlockScaledMMKernel", 1.0),
            ("DeepGemmFp8BlockScaledMMKernel", 2.0),
        )
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "gemm.csv", index=False)
    profiles = load_profiles(tmp_path)
    assert profiles.gemm["seconds"].tolist() == [2.0e-3]  # DeepGEMM, not the mean of both


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("gemm_dtype,m,n,latency\nbfloat16,1,2,0.1\n", "missing column 'k'"),
        (
            "gemm_dtype,m,n,k,latency\nbfloat16,1,2,3,0.1\nbfloat16,1,2,x,0.1\n",
            "line 3: column 'k'",
        ),
        ("gemm_dtype,m,n,k,latency\nbfloat16,1,2,3,-1\n", "line 2: column 'latency'"),
        ("", "empty file"),
    ],
)
def test_malformed_csv_is_one_line_input_error(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "my_gemm.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=expected) as info:
        load_profiles(tmp_path)
    assert "my_gemm.csv" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_profile_past_the_size_cap_is_one_line_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gzip bomb is refused by its decompressed size, before pandas sees it."""
    monkeypatch.setattr(profiles, "MAX_PROFILE_BYTES", 1 << 20)
    (tmp_path / "gemm.csv.gz").write_bytes(gzip.compress(b"0" * ((1 << 20) + 1)))
    with pytest.raises(InputError, match=r"gemm\.csv\.gz: larger than 1 MiB") as info:
        load_profiles(tmp_path)
    assert "\n" not in str(info.value)


def test_unreadable_and_missing_profiles_are_input_errors(tmp_path: Path) -> None:
    (tmp_path / "gemm.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="cannot read CSV"):
        load_profiles(tmp_path)
    with pytest.raises(InputError, match="no such profile directory"):
        load_profiles(tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no kernel profile CSV"):
        load_profiles(empty)
    with pytest.raises(InputError, match="no shipped kernel profiles for GPU 'tpu'"):
        shipped_profiles_dir("tpu")


# ----- interpolation ---------------------------------------------------------------------------
def _sample(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    return frame.sample(min(n, len(frame)), random_state=0)


def test_table_is_exact_at_measured_points_of_the_shipped_profiles() -> None:
    profiles = shipped_profiles()
    kernels = ProfileKernels(ProfileTable(profiles, ROOFLINE, monotone=False), ROOFLINE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TableFallbackWarning)  # measured points never fall back
        for r in _sample(profiles.gemm, 300).itertuples():
            assert kernels.gemm(int(r.m), int(r.n), int(r.k), str(r.dtype)) == r.seconds
        for r in _sample(profiles.context_attention, 200).itertuples():
            heads = (int(r.num_heads), int(r.num_kv_heads), int(r.head_dim), str(r.kv_dtype))
            got = kernels.context_attention(int(r.batch_size), int(r.new_tokens), 0, *heads)
            assert got == r.seconds
        for r in _sample(profiles.generation_attention, 200).itertuples():
            heads = (int(r.num_heads), int(r.num_kv_heads), int(r.head_dim), str(r.kv_dtype))
            assert (
                kernels.generation_attention(int(r.batch_size), int(r.kv_len), *heads) == r.seconds
            )
        for r in profiles.nccl.itertuples():
            assert kernels.all_reduce(r.message_bytes, int(r.num_gpus)) == r.seconds


def test_interpolation_is_a_power_law_between_grid_points(small_kernels: ProfileKernels) -> None:
    lo, hi = (
        small_kernels.gemm(256, 4096, 4096, "bf16"),
        small_kernels.gemm(4096, 4096, 4096, "bf16"),
    )
    mid = small_kernels.gemm(1024, 4096, 4096, "bf16")  # halfway in log m
    assert mid == pytest.approx(math.sqrt(lo * hi), rel=1e-12)
    assert lo < mid < hi
    a, b = small_kernels.all_reduce(2048, 2), small_kernels.all_reduce(2.0 * (1 << 16), 2)
    assert small_kernels.all_reduce(2048 * 8, 2) == pytest.approx(math.sqrt(a * b), rel=1e-12)


def test_cached_prefix_scales_by_the_roofline_ratio_without_warning(
    small_kernels: ProfileKernels,
) -> None:
    heads = (32, 8, 128, "bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error", TableFallbackWarning)
        for new, cached in ((256, 2048), (1024, 2000)):
            base = small_kernels.context_attention(4, new, 0, *heads)
            got = small_kernels.context_attention(4, new, cached, *heads)
            ratio = ROOFLINE.context_attention(4, new, cached, *heads)
            ratio /= ROOFLINE.context_attention(4, new, 0, *heads)
            # ... and never below decoding one token over the same KV (another measured kernel)
            floor = small_kernels.generation_attention(4, cached + new, *heads)
            assert got == pytest.approx(max(base * ratio, floor), rel=1e-12)
            assert got > base


def test_monotone_grid_never_gets_cheaper_with_size() -> None:
    profiles = shipped_profiles()
    gemm = profiles.gemm[(profiles.gemm.n == 4096) & (profiles.gemm.k == 4096)]
    table = ProfileTable(profiles.replace(gemm=gemm), ROOFLINE, monotone=True)
    kernels = ProfileKernels(table, ROOFLINE)
    times = [kernels.gemm(m, 4096, 4096, "bf16") for m in range(1, 32769, 37)]
    assert all(b >= a for a, b in itertools.pairwise(times))
    raw = gemm[gemm.dtype == "bf16"].set_index("m")["seconds"]
    kept = sum(kernels.gemm(int(m), 4096, 4096, "bf16") == s for m, s in raw.items())
    assert kept >= len(raw) // 4  # points already in order are kept bit-exact
    heads = (32, 8, 128, "bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableFallbackWarning)  # batch 64 x 32K KV: a filled gap
        decode = [kernels.generation_attention(64, kv, *heads) for kv in range(1, 60000, 997)]
    assert all(b >= a for a, b in itertools.pairwise(decode))
    prefill = [kernels.context_attention(b, 512, 0, *heads) for b in range(1, 200, 3)]
    assert all(b >= a for a, b in itertools.pairwise(prefill))


# ----- fallback ----------------------------------------------------------------------------------
def test_outside_range_scales_the_roofline_at_the_edge_and_warns_once(
    small_kernels: ProfileKernels,
) -> None:
    edge = small_kernels.gemm(4096, 4096, 4096, "bf16")
    with pytest.warns(TableFallbackWarning, match="outside the measured grid"):
        beyond = small_kernels.gemm(16384, 4096, 4096, "bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error", TableFallbackWarning)  # said once per instance and reason
        small_kernels.gemm(65536, 4096, 4096, "bf16")
    expected = (
        ROOFLINE.gemm(16384, 4096, 4096, "bf16") * edge / ROOFLINE.gemm(4096, 4096, 4096, "bf16")
    )
    assert beyond == pytest.approx(expected, rel=1e-12)


def test_unprofiled_head_config_and_gpu_count_use_the_nearest(
    small_kernels: ProfileKernels,
) -> None:
    with pytest.warns(TableFallbackWarning, match=r"not profiled \(nearest"):
        t40 = small_kernels.generation_attention(8, 255, 40, 8, 128, "bf16")
    t32 = small_kernels.generation_attention(8, 255, 32, 8, 128, "bf16")
    ratio = ROOFLINE.generation_attention(
        8, 255, 40, 8, 128, "bf16"
    ) / ROOFLINE.generation_attention(8, 255, 32, 8, 128, "bf16")
    assert t40 == pytest.approx(t32 * ratio, rel=1e-12)
    with pytest.warns(TableFallbackWarning, match="all-reduce over 4 GPUs not profiled"):
        assert small_kernels.all_reduce(1e5, 4) > 0
    assert small_kernels.all_reduce(1e5, 1) == 0.0


def test_another_gpu_carries_measurements_by_the_roofline_ratio(small: ProfileSet) -> None:
    table = ProfileTable(small, ROOFLINE, monotone=False)
    b200 = RooflineKernels(B200)
    with pytest.raises(ValueError, match="profile_fallback"):
        ProfileKernels(table, b200, gpu="b200_sxm")
    kernels = ProfileKernels(table, b200, gpu="b200_sxm", profile_fallback=ROOFLINE)
    h100 = ProfileKernels(table, ROOFLINE).gemm(256, 4096, 4096, "bf16")
    with pytest.warns(TableFallbackWarning, match="no profiles of this GPU"):
        got = kernels.gemm(256, 4096, 4096, "bf16")
    ratio = b200.gemm(256, 4096, 4096, "bf16") / ROOFLINE.gemm(256, 4096, 4096, "bf16")
    assert got == pytest.approx(h100 * ratio, rel=1e-12)


def test_gaps_in_the_grid_are_filled_from_the_nearest_measurement(tmp_path: Path) -> None:
    directory = write_profile_dir(tmp_path / "h100_sxm")
    path = directory / "test_generation_attention.csv.gz"
    frame = pd.read_csv(path)
    frame = frame[~((frame.batch_size == 64) & (frame.step == 4095))]  # drop one corner
    frame.to_csv(path, index=False)
    table = ProfileTable(load_profiles(directory), ROOFLINE, monotone=False)
    kernels = ProfileKernels(table, ROOFLINE)
    # the anchor is the nearest measurement of the same batch: (64, 255)
    near = kernels.generation_attention(64, 255, 32, 8, 128, "bf16")
    with pytest.warns(TableFallbackWarning, match="in a gap"):
        filled = kernels.generation_attention(64, 4095, 32, 8, 128, "bf16")
    ratio = ROOFLINE.generation_attention(64, 4095, 32, 8, 128, "bf16")
    ratio /= ROOFLINE.generation_attention(64, 255, 32, 8, 128, "bf16")
    assert filled == pytest.approx(near * ratio, rel=1e-12)


# ----- the registered model ------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::simulator.latency.table.TableFallbackWarning")
def test_table_model_is_registered_and_prices_steps() -> None:
    deployment = Deployment(LLAMA_8B, H100)
    table = make_latency_model("table", deployment)
    roofline = make_latency_model("roofline", deployment)
    assert table.name == "table"
    prefill, decode = [(0, 2048)], [(1024, 1)] * 32
    for batch in (prefill, decode):
        # the roofline's defaults were read off the same profiles: within a factor of 2
        assert 0.5 < table.step_seconds(batch) / roofline.step_seconds(batch) < 2.0
    assert table.step_seconds([(0, 4096)]) > table.step_seconds(prefill)


def test_table_with_a_user_directory(tmp_path: Path) -> None:
    directory = write_profile_dir(tmp_path / "mine")
    kernels = table_kernels(H100, directory, monotone=False)
    assert kernels.gemm(256, 4096, 1024, "bf16") == pytest.approx(_gemm_ms(256, 4096, 1024) / 1e3)
    with pytest.raises(InputError, match="no such profile directory"):
        make_latency_model(f"table:{tmp_path / 'absent'}", Deployment(LLAMA_8B, H100))


def test_lookups_are_cheap_once_cached(small_kernels: ProfileKernels) -> None:
    args = [(m, 4096, 4096, "bf16") for m in range(1, 4000)]
    first = [small_kernels.gemm(*a) for a in args]
    assert [small_kernels.gemm(*a) for a in args] == first
    assert np.all(np.diff(first) >= 0)  # this synthetic profile is monotone in m


def _said(call: Callable[[], float]) -> tuple[float, list[str]]:
    """``call()`` and the TableFallbackWarning messages it said."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seconds = call()
    return seconds, [str(w.message) for w in caught if w.category is TableFallbackWarning]


def test_instances_sharing_a_memo_answer_and_warn_as_if_each_computed(small: ProfileSet) -> None:
    table = ProfileTable(small, ROOFLINE, monotone=False)
    memo = KernelMemo()
    first, second = (ProfileKernels(table, ROOFLINE, memo=memo) for _ in range(2))
    alone = ProfileKernels(table, ROOFLINE)  # its own memo: computes everything itself
    heads = (40, 8, 128, "bf16")  # not profiled: carried from the nearest configuration
    calls: list[Callable[[ProfileKernels], float]] = [
        lambda k: k.gemm(16384, 4096, 4096, "bf16"),  # outside the grid
        lambda k: k.context_attention(4, 256, 1000, *heads),  # a decode bound computed inside
        lambda k: k.generation_attention(8, 255, *heads),
        lambda k: k.all_reduce(1e5, 4),
    ]
    for call in calls:
        computed = _said(lambda call=call: call(first))
        size = len(memo.answers)
        assert _said(lambda call=call: call(second)) == computed  # answered from the memo
        assert len(memo.answers) == size
        assert _said(lambda call=call: call(alone)) == computed
    # Prefill and decode grids of the unprofiled heads and the 4-GPU all-reduce grid: each
    # carried once for both instances.
    assert len(memo.carried) == 3
    # The nested decode time's warning came with the prefill answer: said again on its own
    # by a fresh instance only once, as one computing it would.
    third = ProfileKernels(table, ROOFLINE, memo=memo)
    _, said = _said(lambda: calls[1](third))
    assert any("not profiled" in message for message in said)
    assert _said(lambda: calls[2](third))[1] == []


def test_a_full_memo_is_emptied_and_answers_the_same(small: ProfileSet) -> None:
    table = ProfileTable(small, ROOFLINE, monotone=False)
    memo = KernelMemo(max_answers=3)
    kernels = ProfileKernels(table, ROOFLINE, memo=memo)
    args = [(m, 4096, 4096, "bf16") for m in range(100, 110)]
    times = [kernels.gemm(*a) for a in args]
    assert 1 <= len(memo.answers) <= 3
    fresh = ProfileKernels(table, ROOFLINE, memo=memo)
    assert [fresh.gemm(*a) for a in args] == times


def test_table_kernels_of_one_gpu_share_their_memo() -> None:
    catalog = shipped_catalog()
    h100, l40s = catalog.gpu("h100_sxm"), catalog.gpu("l40s")
    one, two = table_kernels(h100, warn_range=False), table_kernels(h100, warn_range=False)
    assert one is not two
    assert one.memo is two.memo
    assert table_kernels(h100).memo is not one.memo  # warns about shapes past the grids
    assert table_kernels(l40s, warn_range=False).memo is not one.memo


#: Measured fused-MoE layer (SGLang 0.5.14 ``fused_moe_triton``, fp8_block, balanced routing,
#: DeepSeek shapes: hidden 7168, expert width 2048, top-8 of 256, moe_tp 16, moe_ep 1) on H100,
#: ms per layer by tokens: ``../shared/data/profiles/h100_sxm/sglang_0.5.14_moe.csv.gz``.
_FUSED_MOE_TP16_MS = {16: 0.116, 32: 0.190, 128: 0.208, 512: 0.273}


@pytest.mark.filterwarnings("ignore::simulator.latency.table.TableFallbackWarning")
def test_routed_experts_at_expert_tp16_price_like_the_measured_fused_moe() -> None:
    """The per-GPU expert slices at expert TP 16 (n = 256, k = 128) are one grouped GEMM, not
    hundreds of narrow ones: pricing each as its own measured GEMM made DeepSeek-R1's routed
    experts 3.5-4.4× the measured fused-MoE layer (and its disaggregated TP16 TPOT ~2×)."""
    r1 = shipped_catalog().model("DeepSeek-R1")
    d = Deployment(r1, H100, tp=16, ep=1, weight_precision="fp8", allow_multi_node=True)
    model = make_latency_model("table", d, context=LatencyContext.of("sglang"))
    for tokens, measured_ms in _FUSED_MOE_TP16_MS.items():
        seconds = model.breakdown([(1000, 1)] * tokens).seconds["moe_experts"]
        ratio = seconds / (measured_ms * 1e-3 * r1.num_moe_layers)
        assert 0.7 < ratio < 1.3, (tokens, ratio)


def test_isotonic_along_an_axis_is_the_plain_fit_of_every_run() -> None:
    """Runs that never decrease are skipped by ``_isotonic_along``; the result must be the
    pool-adjacent-violators fit of every run, bit for bit."""
    rng = np.random.default_rng(3)
    values = np.cumsum(rng.normal(0.3, 1.0, size=(5, 7, 9)), axis=1)  # some runs decrease
    for axis in range(3):
        expected = np.apply_along_axis(_isotonic, axis, values)
        got = _isotonic_along(values, axis)
        assert got.tobytes() == expected.tobytes()
        assert np.all(np.diff(got, axis=axis) >= 0)


def test_a100_trtllm_times_weight_only_int8_with_its_measured_kernels() -> None:
    """TensorRT-LLM's weight-only int8 GEMMs (``int8_wo``, measured on A100): no fallback to
    another dtype; a prefill step costs about what bf16 does (16-bit compute), a decode step
    less (half the weight bytes)."""
    a100 = shipped_catalog().gpu("a100_sxm")
    context = LatencyContext.of("trtllm", [], None)
    params = load_preset("trtllm").compose_params()

    def times(precision: str) -> tuple[float, float]:
        d = Deployment(LLAMA_8B, a100, weight_precision=precision)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = make_latency_model("table", d, params=params, context=context)
            prefill = model.step_seconds([(0, 2048)])
            decode = model.step_seconds([(1000, 1)] * 32)
        assert not [w for w in caught if "not profiled" in str(w.message)]
        return prefill, decode

    bf16, wo = times("bf16"), times("int8_wo")
    assert wo[0] == pytest.approx(bf16[0], rel=0.1)
    assert wo[1] < 0.9 * bf16[1]


def test_decode_attention_never_beats_reading_its_kv_from_hbm() -> None:
    """A100's TensorRT-LLM 1.0 decode rows time Llama-3.1-8B's layer (64 × 4,095 tokens, 8 KV
    heads of 128, bf16: 1.07 GB of KV) at 0.338 ms, 3.2 TB/s against the A100's 2.04: the table
    answers the HBM floor instead; vLLM's A100 rows (1.6 TB/s) are answered as measured."""
    a100 = shipped_catalog().gpu("a100_sxm")
    heads = (32, 8, 128, "bf16")
    kv_bytes = 64 * 4095 * 2 * 8 * 128 * 2
    floor = kv_bytes / (a100.hbm_tb_per_s * 1e12)
    trt = table_kernels(a100, engine="trtllm", warn_range=False)
    measured = trt.table.decode  # the grid as built, before the floor
    assert measured
    seconds = trt.generation_attention(64, 4095, *heads)
    assert seconds >= floor
    assert seconds == pytest.approx(floor, rel=0.01)  # the query's Q/O bytes are ~0.1% more
    raw = pd.read_csv(resolve_profile_files("a100_sxm", "trtllm").files["generation_attention"])
    row = raw[(raw["batch_size"] == 64) & (raw["step"] == 4095) & (raw["num_heads"] == 32)
              & (raw["num_key_value_heads"] == 8) & (raw["head_dim"] == 128)
              & (raw["kv_cache_dtype"] == "bfloat16")]  # fmt: skip
    assert float(row["latency"].iloc[0]) / 1e3 < 0.7 * floor
    vllm = table_kernels(a100, engine="vllm", warn_range=False)
    assert vllm.generation_attention(64, 4095, *heads) > 1.2 * floor


def test_a_gemm_never_beats_reading_its_operands_from_hbm() -> None:
    """L40S's TensorRT-LLM rows time a 1 × 8,192 × 1,536 bf16 GEMM (25 MB of weights) at
    13 µs, 2.2× its 864 GB/s: its 96 MB L2 kept the weights warm in the benchmark loop, which a
    serving step never does. The table answers the HBM floor; at m = 4,096 (compute-bound) the
    measurement stands."""
    l40s = shipped_catalog().gpu("l40s")
    trt = table_kernels(l40s, engine="trtllm", warn_range=False)
    floor = 2 * (1 * 8192 + 8192 * 1536 + 1 * 1536) / (l40s.hbm_tb_per_s * 1e12)
    assert trt.gemm(1, 1536, 8192, "bf16") == pytest.approx(floor, rel=1e-9)
    raw = pd.read_csv(resolve_profile_files("l40s", "trtllm").files["gemm"])
    row = raw[(raw["m"] == 1) & (raw["n"] == 1536) & (raw["k"] == 8192)
              & (raw["gemm_dtype"] == "bfloat16")]  # fmt: skip
    assert float(row["latency"].iloc[0]) / 1e3 < 0.5 * floor
    big = trt.gemm(4096, 1536, 8192, "bf16")
    assert big > 2 * 2 * (4096 * 8192 + 8192 * 1536 + 4096 * 1536) / (l40s.hbm_tb_per_s * 1e12)
