"""Which profile files serve a GPU and engine, user-imported over shipped, and the ``auto``
latency model and its note; ``kvplan profiles import`` (validation, exit status 2, copying)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from hardware.catalog import shipped_catalog
from optimizer.cli.main import app
from optimizer.cli.profiles_cmd import config_latency_notes
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.latency import Batch, Deployment, LatencyContext, latency_note, make_latency_model
from simulator.latency.profile_files import (
    directory_files,
    engine_of,
    resolve_profile_files,
    shipped_profiles_dir,
)
from simulator.latency.profiles import load_profiles
from simulator.latency.table_source import table_kernels
from simulator.workload.closed_loop import closed_loop_workload
from slo.inputfile import InputError

from .test_table import write_profile_dir

CATALOG = shipped_catalog()
QWEN_8B = CATALOG.model("Qwen/Qwen3-8B")


def test_engine_of_backend_names() -> None:
    assert engine_of("vllm") == "vllm"
    assert engine_of("SGLang") == "sglang"
    assert engine_of("presets/trtllm_tuned.yaml") == "trtllm"
    assert engine_of("my_engine.yaml") == "vllm"  # a preset naming no engine: vLLM kernels


def test_directory_serves_each_engine_its_own_files_and_the_newest_version(
    tmp_path: Path,
) -> None:
    for name in (
        "vllm_0.24.0_gemm.csv",
        "sglang_0.5.14_gemm.csv",
        "nccl_2.27.3.csv",
        "nccl_2.29.2.csv",
        "sglang_0.5.14_moe.csv",  # not a class the table reads
    ):
        (tmp_path / name).write_text("x\n")
    vllm = directory_files(tmp_path, "vllm")
    assert {k: p.name for k, p in vllm.items()} == {
        "gemm": "vllm_0.24.0_gemm.csv",
        "nccl": "nccl_2.29.2.csv",  # 29 > 27, compared as numbers
    }
    assert directory_files(tmp_path, "sglang")["gemm"].name == "sglang_0.5.14_gemm.csv"
    assert "gemm" not in directory_files(tmp_path, "trtllm")  # never another engine's kernels
    (tmp_path / "gemm.csv").write_text("x\n")  # engine-neutral: serves every engine lacking one
    assert directory_files(tmp_path, "trtllm")["gemm"].name == "gemm.csv"
    assert directory_files(tmp_path, "vllm")["gemm"].name == "vllm_0.24.0_gemm.csv"
    (tmp_path / "nccl-2.29.2.csv").write_text("x\n")
    with pytest.raises(InputError, match="more than one nccl profile"):
        directory_files(tmp_path, "vllm")


def test_shipped_tables_differ_by_engine() -> None:
    h100 = CATALOG.gpu("h100_sxm")
    shapes = {"dtype": "bf16", "m": 64, "n": 4096, "k": 4096}
    for engine in ("vllm", "sglang", "trtllm"):
        kernels = table_kernels(h100, engine=engine)  # shared with the other tests' tables
        gemm = load_profiles(shipped_profiles_dir("h100_sxm"), engine=engine).gemm
        row = gemm[(gemm[list(shapes)] == pd.Series(shapes)).all(axis=1)]
        measured = float(row["seconds"].iloc[0])
        # the engine's own measurement (the monotone grid moves a point by a few % at most)
        assert kernels.gemm(64, 4096, 4096, "bf16") == pytest.approx(measured, rel=0.1), engine
        others = [e for e in ("vllm", "sglang", "trtllm") if e != engine]
        for other in others:
            theirs = load_profiles(shipped_profiles_dir("h100_sxm"), engine=other).gemm
            other_row = theirs[(theirs[list(shapes)] == pd.Series(shapes)).all(axis=1)]
            assert float(other_row["seconds"].iloc[0]) != measured


def test_auto_is_the_table_where_one_exists_and_the_roofline_elsewhere() -> None:
    h100 = make_latency_model("auto", Deployment(QWEN_8B, CATALOG.gpu("h100_sxm")))
    mi300 = make_latency_model("auto", Deployment(QWEN_8B, CATALOG.gpu("mi300x")))
    assert (h100.name, mi300.name) == ("table", "roofline")
    assert ServingConfig.model_fields["latency_model"].default == "auto"
    assert latency_note("auto", "h100_sxm", "sglang") is None
    note = latency_note("auto", "mi300x", "trtllm")
    assert note is not None
    assert "roofline" in note
    assert "mi300x" in note
    assert "\n" not in note
    assert "carries the h100_sxm / vllm table" in str(latency_note("table", "mi300x", "vllm"))
    assert latency_note("roofline", "mi300x", "vllm") is None
    config = ServingConfig(
        model=QWEN_8B.name,
        gpu="h100_sxm",
        pd_mode="disaggregated",
        prefill_instances=1,
        decode_instances=1,
        prefill_gpu="h100_sxm",
        decode_gpu="mi300x",
    )
    assert config_latency_notes(config) == [latency_note("auto", "mi300x", "vllm")]


def test_a_gpu_without_tables_is_timed_by_its_stand_ins_carried_by_the_roofline_ratio() -> None:
    gb200, b200 = CATALOG.gpu("gb200"), CATALOG.gpu("b200_sxm")
    assert gb200.kernel_profiles_from == "b200_sxm"
    assert resolve_profile_files("gb200", "vllm") is None  # no GB200 profiles ship
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # auto carries a declared stand-in without a warning
        model = make_latency_model("auto", Deployment(QWEN_8B, gb200))
        model.step_seconds(Batch.of([(0, 512)]))
    assert model.name == "table"
    note = latency_note("auto", "gb200", "trtllm")
    assert note is not None
    assert "times gb200 with the b200_sxm / trtllm kernel tables" in note
    assert latency_note("auto", "gb200_sxm", "trtllm") == note  # aiconfigurator's name
    assert latency_note("table", gb200, "trtllm") == note.replace("auto model", "table model")
    # The measured B200 GEMM, scaled by GB200's roofline over B200's (a compute-bound shape:
    # the dense bf16 peaks' ratio, 2500 / 2250).
    shape = (8192, 8192, 8192, "bf16")
    with pytest.warns(UserWarning, match="timing gb200: no profiles of this GPU"):
        on_gb200 = table_kernels(gb200, engine="vllm").gemm(*shape)
    on_b200 = table_kernels(b200, engine="vllm").gemm(*shape)
    ratio = on_b200 / on_gb200
    assert 1.0 < ratio <= 2500 / 2250 + 1e-9


def test_h800_is_h100_with_slower_nvlink() -> None:
    h100, h800 = CATALOG.gpu("h100_sxm"), CATALOG.gpu("h800_sxm")
    assert "times h800_sxm with the h100_sxm / vllm kernel tables" in str(
        latency_note("auto", "h800_sxm", "vllm")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine, theirs = table_kernels(h800, engine="vllm"), table_kernels(h100, engine="vllm")
        shape = (4096, 8192, 8192, "bf16")
        assert mine.gemm(*shape) == pytest.approx(theirs.gemm(*shape))  # the same die
        small, large = 64 * 8192 * 2.0, 8192 * 8192 * 2.0  # a decode / a prefill step's bytes
        assert mine.all_reduce(small, 8) > 1.2 * theirs.all_reduce(small, 8)  # latency-bound
        assert mine.all_reduce(large, 8) > 1.8 * theirs.all_reduce(large, 8)  # 450 / 200 link


def test_measured_moe_and_mla_layers_carry_to_a_stand_in_gpu() -> None:
    # B200's SGLang tables measure DeepSeek's fused-MoE layer and MLA cores; GB200 (the same
    # die, faster by its specs) is timed by them, carried by the roofline ratio: a little
    # faster than B200, not the composed layers' much faster answer (0.5-0.7x before).
    deepseek = CATALOG.model("deepseek-ai/DeepSeek-V3")
    context = LatencyContext("sglang")

    def step(gpu: str, batch: Batch) -> float:
        deployment = Deployment(deepseek, CATALOG.gpu(gpu), tp=8, ep=8, weight_precision="fp8")
        return make_latency_model("auto", deployment, context=context).step_seconds(batch)

    for batch in (Batch.of([(0, 2048)]), Batch.of([(2048, 1)] * 64)):
        b200, gb200 = step("b200_sxm", batch), step("gb200", batch)
        assert b200 / 1.12 < gb200 < b200
    # Another chip's fused kernels are not carried: `table` on MI300X (H100's tables, not its
    # silicon) composes the routed experts from the carried GEMMs.
    mi300 = Deployment(deepseek, CATALOG.gpu("mi300x"), tp=8, ep=8, weight_precision="fp8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_latency_model("table", mi300, context=context)
        assert model._measured_routed(64) is None  # type: ignore[attr-defined]


def _imported(tmp_path: Path) -> Path:
    """A user root holding a vLLM GEMM profile of H100 twice as slow as the shipped one."""
    source = tmp_path / "mine"
    source.mkdir()
    shipped = resolve_profile_files("h100_sxm", "vllm")
    assert shipped is not None
    gemm = pd.read_csv(shipped.files["gemm"])
    gemm["latency"] *= 2
    gemm.to_csv(source / "vllm_9.9_gemm.csv", index=False)
    root = tmp_path / "cache"
    result = CliRunner().invoke(
        app, ["profiles", "import", str(source), "--gpu", "h100_sxm", "--cache", str(root)]
    )
    assert result.exit_code == 0, result.output
    assert (root / "h100_sxm" / "vllm_9.9_gemm.csv").is_file()
    return root


def test_imported_profiles_win_class_by_class(tmp_path: Path) -> None:
    root = _imported(tmp_path)
    located = resolve_profile_files("h100_sxm", "vllm", [root])
    assert located is not None
    assert located.files["gemm"].parent == root / "h100_sxm"
    assert located.files["generation_attention"].parent == shipped_profiles_dir("h100_sxm")
    deployment = Deployment(QWEN_8B, CATALOG.gpu("h100_sxm"))
    mine = make_latency_model("auto", deployment, context=LatencyContext("vllm", (root,)))
    base = make_latency_model("auto", deployment)
    shapes = (64, 4096, 4096, "bf16")
    assert mine._timer.gemm(*shapes) == pytest.approx(  # type: ignore[attr-defined]
        2 * base._timer.gemm(*shapes),  # type: ignore[attr-defined]
        rel=1e-3,
    )
    other = make_latency_model("auto", deployment, context=LatencyContext("sglang", (root,)))
    assert other._timer.gemm(*shapes) != mine._timer.gemm(*shapes)  # type: ignore[attr-defined]
    # a GPU without shipped tables gains one by import, and auto then uses it
    mi300 = root / "mi300x"
    shutil.copytree(root / "h100_sxm", mi300)
    assert latency_note("auto", "mi300x", "vllm", [root]) is None
    deployment = Deployment(QWEN_8B, CATALOG.gpu("mi300x"))
    context = LatencyContext("vllm", (root,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert make_latency_model("auto", deployment, context=context).name == "table"


def test_simulation_uses_the_directory_it_is_given(tmp_path: Path) -> None:
    root = _imported(tmp_path)
    spec = closed_loop_workload(users=2, requests=4, input_tokens=256, output_tokens=16)
    base = ServingConfig(model=QWEN_8B.name, gpu="h100_sxm")
    mine = base.model_copy(update={"kernel_profiles_dir": str(root)})
    slow = simulate(mine, spec, seed=0).summary
    fast = simulate(base, spec, seed=0).summary
    assert slow is not None
    assert fast is not None
    assert slow.tpot_ms.mean > fast.tpot_ms.mean


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda f: f.drop(columns=["k"]), "line 1: missing column 'k'"),
        (lambda f: f.assign(gemm_dtype="fp6"), "line 2: column 'gemm_dtype': unknown dtype 'fp6'"),
        (lambda f: f.assign(latency=[0.1, 0.0]), "line 3: column 'latency': expected a positive"),
        (lambda f: f.assign(m=[-1, 2]), "line 2: column 'm': expected a positive"),
        (lambda f: f.assign(latency=[0.1, 1e300]), "line 3: column 'latency': expected at most"),
    ],
)
def test_import_rejects_bad_profiles_with_one_line(tmp_path: Path, edit, expected: str) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "bad"
    source.mkdir()
    frame = pd.DataFrame(
        {
            "gemm_dtype": ["bfloat16"] * 2,
            "m": [1, 2],
            "n": [64] * 2,
            "k": [64] * 2,
            "latency": [0.1] * 2,
        }
    )
    edit(frame).to_csv(source / "vllm_1.0_gemm.csv", index=False)
    root = tmp_path / "cache"
    result = CliRunner().invoke(
        app, ["profiles", "import", str(source), "--gpu", "h100_sxm", "--cache", str(root)]
    )
    assert isinstance(result.exception, InputError)
    message = str(result.exception)
    assert expected in message
    assert "vllm_1.0_gemm.csv" in message
    assert "\n" not in message
    assert not root.exists()  # nothing copied


def test_import_exits_2_on_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_profile_dir(tmp_path / "h100_sxm")
    (source / "test_gemm.csv.gz").unlink()
    pd.DataFrame({"gemm_dtype": ["bf16"], "m": [1], "n": [2], "k": [3], "latency": ["x"]}).to_csv(
        source / "gemm.csv", index=False
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "profiles", "import", str(source)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "gemm.csv: line 2: column 'latency'" in proc.stderr
    (source / "gemm.csv").unlink()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the CLI's default cache
    result = CliRunner().invoke(app, ["profiles", "import", str(source), "--json"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "xdg" / "kvplan" / "profiles" / "h100_sxm" / "test_nccl.csv.gz").is_file()


def test_import_copies_a_fused_moe_profile_and_validates_it(tmp_path: Path) -> None:
    # A user's *_moe file is what the table model prices routed experts from: import must
    # check it and copy it, not skip it.
    source = tmp_path / "mine"
    source.mkdir()
    shipped = shipped_profiles_dir("h100_sxm") / "vllm_0.24.0_moe.csv.gz"
    shutil.copyfile(shipped, source / "vllm_9.9_moe.csv.gz")
    root = tmp_path / "cache"
    result = CliRunner().invoke(
        app,
        ["profiles", "import", str(source), "--gpu", "h100_sxm", "--cache", str(root), "--json"],
    )
    assert result.exit_code == 0, result.output
    assert (root / "h100_sxm" / "vllm_9.9_moe.csv.gz").is_file()
    assert '"class": "moe"' in result.output

    bad = tmp_path / "bad"
    bad.mkdir()
    frame = pd.read_csv(shipped).drop(columns=["topk"])
    frame.to_csv(bad / "vllm_9.9_moe.csv", index=False)
    result = CliRunner().invoke(
        app, ["profiles", "import", str(bad), "--gpu", "h100_sxm", "--cache", str(tmp_path / "c2")]
    )
    assert isinstance(result.exception, InputError)
    assert "missing column 'topk'" in str(result.exception)
    assert not (tmp_path / "c2").exists()


def test_import_takes_engines_that_lend_each_other_moe_rows(tmp_path: Path) -> None:
    # SGLang borrows vLLM's fused-MoE rows (MOE_LENDERS): with both engines' files in one
    # directory each is validated and copied once, as its own engine's. The lent entry was once
    # taken for a kernel class: this directory failed as holding no kernel profile, a whole
    # shipped GPU directory with KeyError 'moe@sglang'.
    source = tmp_path / "both"
    source.mkdir()
    for name in ("vllm_0.24.0_moe.csv.gz", "sglang_0.5.14_moe.csv.gz"):
        shutil.copyfile(shipped_profiles_dir("h100_sxm") / name, source / name)
    root = tmp_path / "cache"
    result = CliRunner().invoke(
        app,
        ["profiles", "import", str(source), "--gpu", "h100_sxm", "--cache", str(root), "--json"],
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (root / "h100_sxm").iterdir()) == [
        "sglang_0.5.14_moe.csv.gz",
        "vllm_0.24.0_moe.csv.gz",
    ]
    assert "moe@" not in result.output


def test_import_notes_decode_rows_faster_than_hbm(tmp_path: Path) -> None:
    # A100's TensorRT-LLM 1.0 decode rows read up to 1.69x its HBM peak on 0.5-4 GB of KV:
    # import copies them and says so; the shipped H100 vLLM rows stay under the peak.
    source = tmp_path / "a100"
    source.mkdir()
    a100 = resolve_profile_files("a100_sxm", "trtllm")
    assert a100 is not None
    name = "trtllm_9.9_generation_attention.csv.gz"
    shutil.copyfile(a100.files["generation_attention"], source / name)
    root = tmp_path / "cache"
    args = ["profiles", "import", str(source), "--gpu", "a100_sxm", "--cache", str(root)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "rows read KV faster than a100_sxm's HBM peak" in " ".join(result.output.split())
    assert (root / "a100_sxm" / name).is_file()
    data = CliRunner().invoke(app, [*args, "--json"])
    assert '"beyond_hbm"' in data.output

    h100 = tmp_path / "h100"
    h100.mkdir()
    shipped = resolve_profile_files("h100_sxm", "vllm")
    assert shipped is not None
    shutil.copyfile(
        shipped.files["generation_attention"], h100 / "vllm_9.9_generation_attention.csv.gz"
    )
    result = CliRunner().invoke(
        app, ["profiles", "import", str(h100), "--gpu", "h100_sxm", "--cache", str(root)]
    )
    assert result.exit_code == 0, result.output
    assert "HBM peak" not in result.output
