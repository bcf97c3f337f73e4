"""Space parameters → ServingConfig: aliases, conditional fields, PD pool split, capacity."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.configs import known_names, to_config, validate_space_names
from optimizer.run import OptimizeSetup, build_evaluator
from optimizer.space import SearchSpace
from slo.inputfile import InputError

DATA = Path(__file__).parent / "data"


def test_aliases_set_the_config_fields() -> None:
    config = to_config(
        "Qwen/Qwen3-8B",
        {
            "gpu": "h100_sxm",
            "precision": "fp8",
            "hbm_utilisation": 0.85,
            "eviction": "s3fifo",
            "l2_dram_gib": 128,
            "l3": "nvme_4tib",
            "l2_policy": "lru",
        },
    )
    assert config.weight_precision == "fp8"
    assert config.hbm_utilization == 0.85
    assert (config.l1_policy, config.l2_policy, config.l3_policy) == ("s3fifo", "lru", "s3fifo")
    assert config.l3_tier == "nvme_4tib"


def test_l3_dropped_without_l2_and_chunk_without_chunked() -> None:
    config = to_config(
        "Qwen/Qwen3-8B",
        {
            "gpu": "h100_sxm",
            "l2_dram_gib": 0,
            "l3": "pool_16tib",
            "scheduler": "prefill_first",
            "chunk_tokens": 2048,
        },
    )
    assert config.l3_tier is None
    assert config.chunk_tokens is None


@pytest.mark.parametrize(
    ("instances", "share", "split"), [(5, 0.4, (2, 3)), (2, 0.9, (1, 1)), (8, 0.2, (2, 6))]
)
def test_prefill_share_splits_instances(
    instances: int, share: float, split: tuple[int, int]
) -> None:
    config = to_config(
        "Qwen/Qwen3-8B",
        {
            "gpu": "h100_sxm",
            "instances": instances,
            "pd_mode": "disaggregated",
            "prefill_share": share,
        },
    )
    assert (config.pool("prefill").instances, config.pool("decode").instances) == split


def test_single_instance_cannot_be_disaggregated() -> None:
    with pytest.raises(ValueError, match="needs instances >= 2"):
        to_config("Qwen/Qwen3-8B", {"gpu": "h100_sxm", "instances": 1, "pd_mode": "disaggregated"})


def test_unknown_space_name_is_rejected_with_known_list() -> None:
    space = SearchSpace.model_validate({"model": "m", "dimensions": {"gpus": {"choices": [1]}}})
    with pytest.raises(InputError, match=r"space\.yaml: gpus: not a configuration setting; known:"):
        validate_space_names(space, "space.yaml")
    assert "prefill_share" in known_names()


def test_capacity_objective_is_the_sustainable_rate() -> None:
    setup = OptimizeSetup(
        slo_path=str(DATA / "tiny_slo.yaml"),
        space_path=str(DATA / "tiny_space.yaml"),
        workload=None,
        catalog_path=None,
        storage=None,
        study_name="c",
        sampler="random",
        seed=1,
        n_trials=1,
        max_requests=40,
        capacity=True,
    )
    evaluator = build_evaluator(setup)
    evaluation = evaluator.evaluate_params({"gpu": "h100_sxm", "instances": 2, "backend": "vllm"})
    assert evaluation.infeasible_reason == ""
    assert evaluation.metrics["capacity_load_scale"] >= 1.0
    assert evaluation.values["throughput"] == evaluation.metrics["capacity_requests_per_s"]
    assert evaluation.metrics["capacity_requests_per_s"] >= evaluation.metrics["requests_per_s"]
