"""User catalogs (--catalog FILE): overrides, additions and the one-line errors for mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware import InputError, load_catalog, shipped_catalog

REPO = Path(__file__).resolve().parents[2]

NEW_GPU = """
gpus:
  my_gpu:
    vendor: other
    dense_tflops: {bf16: 100.0, fp8: 200.0}
    hbm_gib: 24.0
    hbm_tb_per_s: 1.0
    gpu_link: pcie
    gpu_link_gb_per_s: 32.0
    pcie_gb_per_s: 32.0
    nic_gb_per_s: 12.5
    gpus_per_node: 4
    usd_per_gpu_hour: 1.0
"""


def _write(tmp_path: Path, text: str, name: str = "user.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(InputError) as err:
        load_catalog(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


def test_no_file_is_the_shipped_catalog() -> None:
    assert load_catalog() is shipped_catalog()


def test_price_override_keeps_everything_else(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  H100_SXM:\n    usd_per_gpu_hour: 2.1\n")
    shipped = shipped_catalog()
    user = load_catalog(path)
    gpu = user.gpu("h100_sxm")
    assert gpu.usd_per_gpu_hour == 2.1
    assert gpu.model_dump(exclude={"usd_per_gpu_hour"}) == shipped.gpu("h100_sxm").model_dump(
        exclude={"usd_per_gpu_hour"}
    )
    assert gpu.name == "h100_sxm"
    assert user.gpus.keys() == shipped.gpus.keys()
    assert user.models == shipped.models
    assert user.storage == shipped.storage
    # The cached shipped catalog is untouched.
    assert shipped.gpu("h100_sxm").usd_per_gpu_hour != 2.1


def test_mapping_fields_merge_key_by_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  h100_sxm:\n    dense_tflops: {bf16: 800.0}\n")
    tflops = load_catalog(path).gpu("h100_sxm").dense_tflops
    assert tflops["bf16"] == 800.0
    assert tflops["fp8"] == shipped_catalog().gpu("h100_sxm").dense_tflops["fp8"]


def test_new_gpu_with_all_fields_is_added(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path, NEW_GPU))
    gpu = catalog.gpu("MY_GPU")
    assert gpu.name == "my_gpu"
    assert gpu.supports("fp8")
    assert "h100_sxm" in catalog.gpus


def test_new_gpu_missing_a_field_names_it(tmp_path: Path) -> None:
    path = _write(tmp_path, NEW_GPU.replace("    hbm_gib: 24.0\n", ""))
    message = _error(path)
    assert "gpus.my_gpu.hbm_gib: required field is missing" in message


def test_new_model_missing_a_field_names_it(tmp_path: Path) -> None:
    text = "models:\n  org/tiny:\n    num_layers: 2\n    hidden_size: 8\n"
    message = _error(_write(tmp_path, text))
    assert "models.org/tiny." in message
    assert "required field is missing" in message


def test_new_model_is_found_by_short_name(tmp_path: Path) -> None:
    text = """
models:
  Org/Tiny-1B:
    num_layers: 2
    hidden_size: 64
    num_attention_heads: 4
    num_kv_heads: 2
    head_dim: 16
    ffn_size: 128
    vocab_size: 1000
    max_context_tokens: 2048
"""
    model = load_catalog(_write(tmp_path, text)).model("tiny-1b")
    assert model.name == "Org/Tiny-1B"
    assert model.kv_bytes_per_token("bf16") == 2 * 2 * 2 * 16 * 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpus:\n  h100_sxm:\n    hbm_gb: 80\n", "gpus.h100_sxm.hbm_gb: unknown key"),
        (
            "gpus:\n  h100_sxm:\n    hbm_gib: 0\n",
            "gpus.h100_sxm.hbm_gib: Input should be greater than 0",
        ),
        (
            "gpus:\n  h100_sxm:\n    usd_per_gpu_hour: -1\n",
            "gpus.h100_sxm.usd_per_gpu_hour: Input should be greater than or equal to 0",
        ),
        (
            "gpus:\n  h100_sxm:\n    dense_tflops: {fp8: -5}\n",
            "gpus.h100_sxm: dense_tflops.fp8 must lie in [0.01, 1e+06] TFLOPS, got -5",
        ),
        ("gpus:\n  h100_sxm:\n    dense_tflops: {fp6: 5}\n", "gpus.h100_sxm.dense_tflops.fp6"),
        ("gpus:\n  h100_sxm:\n    gpu_link: ethernet\n", "gpus.h100_sxm.gpu_link"),
        (
            "gpus:\n  mi300x:\n    cuda_capability: 90\n",
            "gpus.mi300x: cuda_capability is NVIDIA's compute capability; this GPU's vendor is "
            "'amd'",
        ),
        (
            "gpus:\n  h100_sxm:\n    cuda_capability: 1e300\n",
            "gpus.h100_sxm.cuda_capability",
        ),
        (
            "storage:\n  dram:\n    default_capacity_gib: 99999\n",
            "storage.dram: default_capacity_gib must lie within the capacity range",
        ),
        (
            "models:\n  Qwen/Qwen3-8B:\n    num_kv_heads: 5\n",
            "models.qwen/qwen3-8b: num_attention_heads must be a multiple of num_kv_heads",
        ),
        ("gpu:\n  h100_sxm: {}\n", "gpu: unknown key"),
        ("gpus: [h100_sxm]\n", "gpus: expected a mapping of names to entries"),
        ("gpus:\n  h100_sxm: 3\n", "gpus.h100_sxm: expected a mapping of fields"),
    ],
)
def test_bad_user_catalog_is_one_line_naming_the_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert expected in _error(_write(tmp_path, text))


def test_malformed_yaml(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\n  h100_sxm: {usd_per_gpu_hour: [1,\n")
    assert "malformed YAML" in _error(path)


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in _error(tmp_path / "absent.yaml")


def test_empty_sections_are_allowed(tmp_path: Path) -> None:
    path = _write(tmp_path, "gpus:\nstorage:\n# models: all commented out\n")
    assert load_catalog(path).gpus == shipped_catalog().gpus


def test_unknown_gpu_suggests_the_closest_and_lists_all() -> None:
    catalog = shipped_catalog()
    with pytest.raises(InputError) as err:
        catalog.gpu("h200-sxm")
    message = str(err.value)
    assert message.startswith("unknown GPU 'h200-sxm' (did you mean 'h200_sxm'?); known: ")
    assert all(name in message for name in catalog.gpus)


def test_unknown_storage_tier() -> None:
    with pytest.raises(InputError, match=r"unknown storage tier 'nvme' \(did you mean"):
        shipped_catalog().storage_tier("nvme")


def test_shipped_example_override_file_loads() -> None:
    catalog = load_catalog(REPO / "examples" / "catalog_override.yaml")
    assert catalog.gpu("h100_sxm").usd_per_gpu_hour == 2.40
    assert catalog.gpu("h100_nvl").hbm_gib == pytest.approx(95830 / 1024, abs=0.006)
    assert catalog.storage_tier("dram").usd_per_gib_month == 0.20


def test_gpu_aliases_and_kernel_stand_ins(tmp_path: Path) -> None:
    shipped = shipped_catalog()
    assert shipped.gpu("GB200_SXM") is shipped.gpu("gb200")  # aiconfigurator's system name
    user = load_catalog(
        _write(tmp_path, NEW_GPU + "    aliases: [mine]\n    kernel_profiles_from: h100_sxm\n")
    )
    assert user.gpu("MINE").name == "my_gpu"
    assert user.gpu("my_gpu").kernel_profiles_from == "h100_sxm"
    clash = _write(tmp_path, NEW_GPU + "    aliases: [gb200_sxm]\n", "clash.yaml")
    assert "gpus.my_gpu.aliases: 'gb200_sxm' already names GPU 'gb200'" in _error(clash)
    key = _write(tmp_path, NEW_GPU + "    aliases: [h100_sxm]\n", "key.yaml")
    assert "'h100_sxm' already names GPU 'h100_sxm'" in _error(key)
    unknown = _write(tmp_path, NEW_GPU + "    kernel_profiles_from: b400\n", "unknown.yaml")
    assert "gpus.my_gpu.kernel_profiles_from: unknown GPU 'b400'" in _error(unknown)
