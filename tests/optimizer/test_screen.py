"""Screening: lower bounds that rule points out without simulating, and only sound ones."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from optimizer.objective import TrialEvaluator
from optimizer.run import OptimizeSetup, build_evaluator
from optimizer.screen import _grid_down

TIGHT = """\
name: tight
targets:
  ttft_ms: {p90: 1500}
  tpot_ms: {p90: 40}
attainment: 0.9
budget: {usd_per_hour: 400}
"""
SPACE = Path(__file__).resolve().parents[2] / "bench" / "spaces" / "search_quality.yaml"


def _evaluator(tmp_path: Path, *, screen: bool = True) -> TrialEvaluator:
    slo = tmp_path / "tight.yaml"
    slo.write_text(TIGHT)
    setup = OptimizeSetup(
        slo_path=str(slo), space_path=str(SPACE), workload=None, catalog_path=None,
        storage=None, study_name="s", sampler="random", seed=0, n_trials=1, max_requests=60,
    )  # fmt: skip
    evaluator = build_evaluator(setup)
    evaluator.screening = screen
    return evaluator


def test_screened_points_are_infeasible_when_simulated(tmp_path: Path) -> None:
    screened = _evaluator(tmp_path)
    simulated = _evaluator(tmp_path, screen=False)
    n_screened = 0
    for gpu, tp, instances in itertools.product(["a100_sxm", "h200_sxm"], [2, 4], [1, 4]):
        params = {"gpu": gpu, "tp": tp, "instances": instances, "backend": "vllm",
                  "scheduler": "chunked", "chunk_tokens": 2048, "l2_dram_gib": 0}  # fmt: skip
        quick = screened.evaluate_params(params)
        if not quick.infeasible_reason.startswith("screened without simulation"):
            continue
        n_screened += 1
        assert "ttft_ms.p90" not in quick.metrics  # nothing was simulated
        full = simulated.evaluate_params(params)
        assert any(c > 0 for c in full.constraints), (params, quick.infeasible_reason)
    assert n_screened >= 2  # the A100 TP2 points: a 32B model's long prompts alone exceed 1.5 s


@pytest.mark.parametrize("n", [0, 1, 16, 17, 100, 1024, 40_000])
def test_grid_rounds_down_by_at_most_a_sixteenth_octave(n: int) -> None:
    down = _grid_down(n)
    assert down <= n
    assert down >= n / 2 ** (1 / 16) - 1
