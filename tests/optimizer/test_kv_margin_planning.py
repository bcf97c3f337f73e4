"""Planning's KV margin: each pick re-simulated with its KV pool at 90% of the rule's."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.objective import TrialEvaluator
from optimizer.planning import KV_MARGIN_SCALE, _kv_margin
from optimizer.report_sections import Planning, planning_sections
from optimizer.run import OptimizeSetup, build_evaluator

SPACE = """\
model: Qwen/Qwen3-8B
dimensions:
  instances: {low: 1, high: 2}
fixed: {backend: vllm, gpu: h100_sxm, scheduler: chunked}
"""
#: One H100 with a forced pool serves the slice's first 30 requests; the pool decides the TTFT.
PICK = {"instances": 1, "scheduler": "chunked", "backend": "vllm", "gpu": "h100_sxm"}


def _evaluator(tmp_path: Path, ttft_p90_ms: int) -> TrialEvaluator:
    (tmp_path / "space.yaml").write_text(SPACE)
    (tmp_path / "slo.yaml").write_text(
        f"name: t\ntargets:\n  ttft_ms: {{p90: {ttft_p90_ms}}}\nattainment: 0.5\n"
        "budget: {usd_per_hour: 100}\n"
    )
    setup = OptimizeSetup(
        slo_path=str(tmp_path / "slo.yaml"), space_path=str(tmp_path / "space.yaml"),
        workload=None, catalog_path=None, storage=None, study_name="t", sampler="nsga2",
        seed=7, n_trials=2, max_requests=30,
    )  # fmt: skip
    return build_evaluator(setup)


def test_a_pick_with_room_still_meets_the_slo(tmp_path: Path) -> None:
    entry = _kv_margin(_evaluator(tmp_path, 60_000), PICK)
    assert entry["kv_capacity_scale"] == pytest.approx(KV_MARGIN_SCALE)
    assert entry["meets SLO"] is True
    assert entry["TTFT p90 ratio"] == pytest.approx(1.0)  # the rule's pool holds the slice
    assert entry["extra instances"] == 0


def test_a_pick_on_the_edge_needs_another_instance(tmp_path: Path) -> None:
    """A 40,000-token pool meets a 40 s TTFT p90 (37.0 s); at 36,000 tokens it takes 41.9 s,
    and a second instance restores it."""
    evaluator = _evaluator(tmp_path, 40_000)
    pick = {**PICK, "kv_capacity_tokens": 40_000}
    assert all(c <= 0 for c in evaluator.evaluate_params(pick).constraints)
    entry = _kv_margin(evaluator, pick)
    assert entry["meets SLO"] is False
    assert entry["TTFT p90 ratio"] > 1.05
    assert entry["extra instances"] == 1


def test_a_pool_too_small_for_the_longest_prompt_cannot_be_restored(tmp_path: Path) -> None:
    """At 23,400 tokens more of the slice's prompts exceed the pool of every instance: they are
    rejected however many instances run."""
    entry = _kv_margin(_evaluator(tmp_path, 60_000), {**PICK, "kv_capacity_tokens": 26_000})
    assert entry["meets SLO"] is False
    assert entry["extra instances"] is None


def test_the_report_states_each_pick_and_what_restores_it() -> None:
    planning = Planning(
        kv_margin={
            "best cost": {"kv_capacity_scale": 0.9, "meets SLO": False,
                          "TTFT p90 ratio": 3.1, "extra instances": 1},
            "best latency": {"kv_capacity_scale": 0.9, "meets SLO": True,
                                 "TTFT p90 ratio": 1.0, "extra instances": 0},
            "balanced": {"kv_capacity_scale": 0.9, "meets SLO": False,
                         "TTFT p90 ratio": None, "extra instances": None},
        }
    )  # fmt: skip
    text = "".join(planning_sections(planning, 8.0))
    assert "## If the engine holds less KV cache than the memory rule says" in text
    assert "at 90% of the memory rule's" in text
    assert "| best cost | no | x3.10 | +1 |" in text
    assert "| best latency | yes | x1.00 | – |" in text
    assert "| balanced | no | – | none within +8 |" in text
    assert Planning.from_dict(planning.to_dict()) == planning
