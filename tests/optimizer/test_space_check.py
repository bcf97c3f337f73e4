"""Space values checked at load (``optimizer.space_check``): refused with the file and the
dimension named, and nothing a real space uses is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware.catalog import shipped_catalog
from optimizer.space import default_space_path, load_space
from optimizer.space_check import check_space_values

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "path",
    [
        default_space_path(),
        ROOT / "examples" / "space.yaml",
        ROOT / "bench" / "spaces" / "search_quality.yaml",
        ROOT / "tests" / "optimizer" / "data" / "tiny_space.yaml",
    ],
    ids=lambda p: Path(p).name,
)
def test_every_shipped_space_passes(path: Path) -> None:
    check_space_values(load_space(path), shipped_catalog(), str(path))


def _check(tmp_path: Path, dimensions: str, fixed: str = "{backend: vllm}") -> None:
    path = tmp_path / "space.yaml"
    path.write_text(f"model: Qwen/Qwen3-32B\ndimensions:\n{dimensions}\nfixed: {fixed}\n")
    check_space_values(load_space(path), shipped_catalog(), str(path))


@pytest.mark.parametrize(
    ("dimensions", "message"),
    [
        ("  eviction: {choices: [lru, nosuch]}", "dimensions: eviction: unknown eviction policy"),
        ("  tp: {choices: [1, two]}", "dimensions: tp: Input should be a valid integer"),
        ("  instances: {low: 1, high: 8, step: 0.5}", "instances is an integer setting"),
        ("  gpu: {choices: [h900]}", "dimensions: gpu: unknown GPU 'h900'"),
        ("  prefill_share: {low: 0, high: 0.5}", "prefill_share: expected a share between 0 and 1"),
        ("  hbm_utilisation: {low: 0.5, high: 2}", "dimensions: hbm_utilisation:"),
    ],
)
def test_bad_value_names_file_and_dimension(tmp_path: Path, dimensions: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"space\.yaml: ") as info:
        _check(tmp_path, dimensions)
    assert message in str(info.value)


def test_a_combination_only_some_points_violate_is_left_to_the_trials(tmp_path: Path) -> None:
    """chunk_tokens above the fixed token budget is infeasible per point, not a user error."""
    _check(
        tmp_path,
        "  scheduler: {choices: [chunked]}\n  chunk_tokens: {choices: [2048, 16384]}",
        fixed="{backend: vllm, max_batched_tokens: 8192}",
    )


def test_unknown_fixed_backend_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fixed: backend: unknown backend preset 'vllm_nightly'"):
        _check(tmp_path, "  tp: {choices: [1]}", fixed="{backend: vllm_nightly}")
