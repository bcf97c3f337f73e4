"""Per-pool engine limits of a PD deployment: each pool's step budget and running-request cap."""

from __future__ import annotations

from typing import Any

import pytest
from engine_helpers import built_pool

from simulator.config import ServingConfig

#: One prefill and two decode instances (``built_pool`` adds the model and GPU).
SPLIT: dict[str, Any] = {"pd_mode": "disaggregated", "prefill_instances": 1, "decode_instances": 2}
PD: dict[str, Any] = {"model": "Qwen/Qwen3-8B", "gpu": "h100_sxm", **SPLIT}


def test_each_pool_runs_with_its_own_limits_and_falls_back_to_the_shared_ones() -> None:
    pool = built_pool(
        **SPLIT,
        max_running_requests=64,
        prefill_max_running_requests=2,
        prefill_max_batched_tokens=4096,
        decode_max_batched_tokens=256,
    )
    prefill, decode = pool.instances[0].params, pool.instances[1].params
    assert (prefill.max_batched_tokens, prefill.max_running) == (4096, 2)
    assert (decode.max_batched_tokens, decode.max_running) == (256, 64)
    assert pool.instances[2].params == decode


def test_per_pool_limits_are_checked_and_only_mean_something_disaggregated() -> None:
    with pytest.raises(ValueError, match="decode: max_batched_tokens \\(32\\) must be at least"):
        ServingConfig(**PD, decode_max_batched_tokens=32, decode_max_running_requests=64)
    with pytest.raises(ValueError, match=r"prefill.max_running_requests is set but pd_mode"):
        ServingConfig(model="m", gpu="g", prefill_max_running_requests=1)
    config = ServingConfig(**PD, max_batched_tokens=2048, decode_max_running_requests=128)
    assert config.pool_limits("prefill") == (2048, None)
    assert config.pool_limits("decode") == (2048, 128)
    assert config.pool_limits(None) == (2048, None)
