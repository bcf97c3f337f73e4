"""How an engine runs its prefill steps: a step with a prefill chunk lasts at least the engine's
eager-launch floor (``EngineParams.prefill_step_floor_s``, ``steps.StepPricer``; decode-only
steps, and an analytic timer's steps, do not), and a PD prefill pool schedules with or without
overlap as the preset says (``BackendPreset.overlap_for``)."""

from __future__ import annotations

import pytest
from engine_helpers import built_params, built_pool

from simulator.engine.analytic import LinearLatency
from simulator.engine.request import EngineRequest
from simulator.engine.scheduler import StepSplit
from simulator.engine.steps import StepPricer
from simulator.workload.request import TraceRequest

#: 1 ms a step + 2 µs a token: a small step costs far less than the floor below.
TIMER = LinearLatency(1e-3, 2e-6, 0.0)
FLOOR_S = 0.020


def _batch(*tokens: int) -> dict[EngineRequest, int]:
    batch: dict[EngineRequest, int] = {}
    for index, n in enumerate(tokens):
        req = EngineRequest(TraceRequest(index, 0.0, 4096, 10, ()), 16, 0, 0.0)
        req.processed = 100
        batch[req] = n
    return batch


def test_a_step_with_a_prefill_chunk_lasts_at_least_the_floor() -> None:
    pricer, plain = StepPricer(TIMER, FLOOR_S), StepPricer(TIMER)
    mixed = _batch(1, 1, 512)
    assert plain.step(mixed) < FLOOR_S
    assert pricer.step(mixed) == FLOOR_S
    # The scheduler's gathered split says the same as the batch.
    split = StepSplit()
    for req, n in mixed.items():
        split.add(req.processed, n)
    assert pricer.step(mixed, split) == FLOOR_S


def test_decode_only_steps_and_long_steps_keep_the_timer_seconds() -> None:
    pricer, plain = StepPricer(TIMER, FLOOR_S), StepPricer(TIMER)
    decodes = _batch(*[1] * 64)
    assert pricer.step(decodes) == plain.step(decodes) < FLOOR_S
    long_prefill = _batch(1, 16_000)  # 33 ms of the linear timer: above the floor
    assert pricer.step(long_prefill) == plain.step(long_prefill) > FLOOR_S


@pytest.mark.parametrize(("backend", "pp", "floor_ms"), [
    ("trtllm", 1, 36 * 0.6),  # Qwen3-8B: 36 decoder layers x 600 µs (trtllm.yaml)
    ("trtllm", 2, 18 * 0.6),  # a pipeline stage launches its own layers
    ("vllm", 1, 0.0),  # piecewise CUDA graphs: no eager floor in the preset
    ("sglang", 1, 0.0),
])  # fmt: skip
def test_the_built_engine_takes_the_presets_floor(backend: str, pp: int, floor_ms: float) -> None:
    params = built_params(backend=backend, pp=pp, tp=1, allow_multi_node=False)
    assert params.prefill_step_floor_s == pytest.approx(floor_ms / 1e3)
    assert ("eager launch" in params.describe()) is (floor_ms > 0)


def test_an_analytic_timer_states_its_own_step_times() -> None:
    """``constant:`` / ``linear:`` give every step's seconds: the preset's floor does not apply
    (the hand-checked validation tests rely on it)."""
    params = built_params(backend="trtllm", latency_model="constant:0.01")
    assert params.prefill_step_floor_s == 0.0
    assert "eager launch" not in params.describe()


@pytest.mark.parametrize(("backend", "prefill", "decode"), [
    ("trtllm", False, True),  # context servers run without the overlap scheduler
    ("sglang", True, True),
    ("vllm", False, False),
])  # fmt: skip
def test_a_pd_prefill_pool_takes_the_presets_overlap(
    backend: str, prefill: bool, decode: bool
) -> None:
    pool = built_pool(
        backend=backend,
        pd_mode="disaggregated",
        prefill={"instances": 1},
        decode={"instances": 1},
    )
    # Instances are numbered prefill pool first (one instance each here).
    first, second = (engine.params.overlap_scheduling for engine in pool.instances)
    assert (first, second) == (prefill, decode)
