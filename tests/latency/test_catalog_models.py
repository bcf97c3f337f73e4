"""Every shipped catalog model builds, fits (or says why not) and prices a step."""

from __future__ import annotations

import pytest

from hardware.catalog import shipped_catalog
from simulator.latency import Deployment, RooflineModel, memory_fit
from slo.inputfile import InputError

CATALOG = shipped_catalog()
BATCH = [(c, 1) for c in range(10, 20_000, 313)] + [(0, 2048), (1024, 512)]


@pytest.mark.parametrize("model_key", sorted(CATALOG.models))
@pytest.mark.parametrize("gpu_key", ["h100_sxm", "b200_sxm", "mi300x"])
def test_catalog_model_on_gpu(model_key: str, gpu_key: str) -> None:
    spec, gpu = CATALOG.models[model_key], CATALOG.gpus[gpu_key]
    weights = "fp8" if gpu.supports("fp8") and "fp8" in model_key else "bf16"
    built = 0
    errors: list[str] = []
    for tp in (1, 2, 4, 8):
        try:
            d = Deployment(spec, gpu, tp=tp, weight_precision=weights)
        except InputError as err:
            errors.append(str(err))
            continue
        built += 1
        fit = memory_fit(d)
        assert fit.reason
        assert fit.fits == (fit.kv_tokens > 0)
        seconds = RooflineModel(d).step_seconds(BATCH)
        assert 0 < seconds < 10
    assert built > 0
    assert all("\n" not in e for e in errors)
