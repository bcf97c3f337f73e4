"""The shipped catalog files: every entry validates and cites its sources; figures are sane."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from hardware import Catalog, shipped_catalog

NO_TF32 = {"mi355x"}  # CDNA 4: no TF32 matrix instructions
REQUIRED_GPUS = {"a100_sxm", "h100_sxm", "h200_sxm", "b200_sxm", "l40s", "mi300x"}
REQUIRED_STORAGE = {"dram", "nvme_4tib", "nvme_16tib", "pool_16tib", "pool_64tib"}
REQUIRED_MODELS = {
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-70B-Instruct",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1",
}
DATA_FILES = ("gpus.yaml", "storage.yaml", "models.yaml")
# `key: 12.5` (a number value), not a comment line.
NUMBER_LINE = re.compile(r"^\s*[^#\s][^:#]*:\s*-?\d")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return shipped_catalog()


def _data_text(filename: str) -> str:
    return (resources.files("hardware") / "data" / filename).read_text(encoding="utf-8")


def test_required_entries_present(catalog: Catalog) -> None:
    assert set(catalog.gpus) >= REQUIRED_GPUS
    assert set(catalog.storage) >= REQUIRED_STORAGE
    assert {m.lower() for m in REQUIRED_MODELS} <= set(catalog.models)
    assert {m.name for m in catalog.models.values()} >= REQUIRED_MODELS


def test_keys_are_lower_cased_names(catalog: Catalog) -> None:
    for table in (catalog.gpus, catalog.storage, catalog.models):
        for key, spec in table.items():
            assert key == spec.name.lower()


@pytest.mark.parametrize("filename", DATA_FILES)
def test_every_number_has_a_trailing_source_comment(filename: str) -> None:
    bare = [
        f"{filename}:{number}: {line.strip()}"
        for number, line in enumerate(_data_text(filename).splitlines(), start=1)
        if NUMBER_LINE.match(line) and "#" not in line
    ]
    assert bare == []


def test_model_short_names_are_unique(catalog: Catalog) -> None:
    shorts = [key.rsplit("/", 1)[-1] for key in catalog.models]
    assert len(shorts) == len(set(shorts))


@pytest.mark.parametrize(
    ("gpu", "nvidia_smi_mib"),
    [
        ("a100_sxm", 81920),
        ("h100_sxm", 81559),
        ("h100_pcie", 81559),
        ("h800_sxm", 81559),
        ("h20_sxm", 97871),
        ("h200_sxm", 143771),
        ("b200_sxm", 183359),
        ("b300_sxm", 275040),
        ("gb200", 189471),
        ("l40s", 46068),
    ],
)
def test_hbm_gib_is_what_the_driver_reports(
    catalog: Catalog, gpu: str, nvidia_smi_mib: int
) -> None:
    # The convention stated in gpus.yaml: driver-reported MiB / 1024, rounded to 0.01 GiB.
    assert catalog.gpu(gpu).hbm_gib == pytest.approx(nvidia_smi_mib / 1024, abs=0.006)


def test_gpu_figures_are_consistent(catalog: Catalog) -> None:
    for gpu in catalog.gpus.values():
        tflops = gpu.dense_tflops
        assert tflops["bf16"] == tflops["fp16"], gpu.name
        # fp32 is dense TF32 tensor throughput: half of bf16 on every chip with a TF32 matrix
        # type (L40S: 183 vs 362.05 / 2 = 181, within 2%); CDNA 4 has none, and its FP32
        # matrix rate is 1/16 of FP16.
        share = 16 if gpu.name in NO_TF32 else 2
        assert tflops["fp32"] == pytest.approx(tflops["bf16"] / share, rel=0.02), gpu.name
        ladder = [tflops[p] for p in ("bf16", "fp8", "fp4") if p in tflops]
        assert ladder == sorted(ladder), gpu.name
        assert gpu.usd_per_gpu_hour > 0
        assert gpu.pcie_gb_per_s <= gpu.gpu_link_gb_per_s or gpu.gpu_link == "pcie"


def test_precision_support_matches_the_generation(catalog: Catalog) -> None:
    assert not catalog.gpu("a100_sxm").supports("fp8")  # Ampere has no FP8 tensor cores
    assert catalog.gpu("h100_sxm").supports("fp8")
    assert not catalog.gpu("h100_sxm").supports("fp4")
    assert catalog.gpu("b200_sxm").supports("fp4")
    assert catalog.gpu("l40s").supports("fp8")  # Ada has FP8


def test_every_nvidia_gpu_states_its_compute_capability(catalog: Catalog) -> None:
    """NVIDIA's CUDA GPUs list; the engines pick kernels (and weight layouts) by it."""
    want = {"a100_sxm": 80, "l40s": 89, "h100_sxm": 90, "h20_sxm": 90, "h200_sxm": 90}
    want |= {"b200_sxm": 100, "gb200": 100, "b300_sxm": 103, "gb300": 103}
    for name, capability in want.items():
        assert catalog.gpu(name).cuda_capability == capability, name
    for gpu in catalog.gpus.values():
        assert (gpu.cuda_capability is not None) is (gpu.vendor == "nvidia"), gpu.name


def test_published_headline_figures(catalog: Catalog) -> None:
    h100 = catalog.gpu("h100_sxm")
    assert h100.dense_tflops["bf16"] == 989.5
    assert h100.hbm_tb_per_s == 3.35
    assert h100.gpu_link_gb_per_s == 450.0  # NVLink 4: 900 GB/s bidirectional
    assert catalog.gpu("h200_sxm").hbm_tb_per_s == 4.8
    assert catalog.gpu("mi300x").dense_tflops["bf16"] == 1307.4
    assert catalog.gpu("b200_sxm").dense_tflops["fp4"] == 9000.0
    assert catalog.gpu("a100_sxm").hbm_tb_per_s == 2.039
    assert catalog.gpu("gb300").dense_tflops["fp4"] == 15000.0  # NVL72 1,080 PFLOPS dense / 72
    assert catalog.gpu("mi325x").dense_tflops["fp8"] == catalog.gpu("mi300x").dense_tflops["fp8"]
    assert catalog.gpu("mi355x").dense_tflops["fp8"] == 5033.2


def test_blackwell_ultra_has_no_int8_fast_path_and_gb300_borrows_b300s_tables(
    catalog: Catalog,
) -> None:
    for name in ("b300_sxm", "gb300"):
        assert not catalog.gpu(name).supports("int8")
    assert catalog.gpu("gb300").kernel_profiles_from == "b300_sxm"
    assert catalog.gpu("gb300").gpus_per_node == 72


@pytest.mark.parametrize(
    ("system", "key"),
    [
        # InferenceX's hardware keys (aiconfigurator config_adapter/inferencex.py) and the
        # _sxm system names aiconfigurator writes in silicon rows.
        ("h100", "h100_sxm"),
        ("h200", "h200_sxm"),
        ("b200", "b200_sxm"),
        ("b300", "b300_sxm"),
        ("gb200_sxm", "gb200"),
        ("gb300_sxm", "gb300"),
        ("B200", "b200_sxm"),
    ],
)
def test_benchmark_system_names_resolve(catalog: Catalog, system: str, key: str) -> None:
    assert catalog.gpu(system).name == key


def test_storage_tiers(catalog: Catalog) -> None:
    assert catalog.storage_tier("dram").kind == "dram"
    assert {catalog.storage_tier(n).kind for n in ("nvme_4tib", "nvme_16tib")} == {"ssd"}
    for name in ("pool_16tib", "pool_64tib"):
        pool = catalog.storage_tier(name)
        assert pool.kind == "remote_pool"
        assert pool.shared
    for tier in catalog.storage.values():
        assert tier.capacity_gib_min <= tier.default_capacity_gib <= tier.capacity_gib_max
        assert tier.usd_per_gib_month > 0
    # Bigger tiers are slower or cheaper per GiB, never both worse.
    dram, ssd = catalog.storage_tier("dram"), catalog.storage_tier("nvme_4tib")
    assert dram.read_gb_per_s > ssd.read_gb_per_s
    assert dram.usd_per_gib_month > ssd.usd_per_gib_month


def test_storage_cost_per_hour(catalog: Catalog) -> None:
    dram = catalog.storage_tier("dram")
    # 730 GiB for one month costs 730 x price; per hour that is exactly the monthly price per GiB.
    assert dram.usd_per_hour(730.0) == pytest.approx(dram.usd_per_gib_month)
