"""Parallel layouts as search dimensions (issue 17): a grid over TP x attention DP x EP x PP
of an MoE model simulates every valid layout once and rules out every invalid one with its
reason, without simulating it."""

from __future__ import annotations

from pathlib import Path

from optuna.trial import FrozenTrial, TrialState

from hardware.catalog import shipped_catalog
from optimizer.objective import is_repeat
from optimizer.run import OptimizeSetup, run_workers
from simulator.config import ServingConfig
from simulator.latency import Deployment
from slo.inputfile import InputError

DATA = Path(__file__).parent / "data"


def _layout(trial: FrozenTrial) -> tuple[int, int, int, int]:
    p = trial.params
    return p["tp"], p["attention_dp"], p["ep"], p["pp"]


def _valid(tp: int, dp: int, ep: int, pp: int) -> bool:
    """The layout rules, asked of the configuration and the deployment directly."""
    catalog = shipped_catalog()
    try:
        ServingConfig(model="Qwen/Qwen3-30B-A3B", gpu="h100_sxm", tp=tp, attention_dp=dp, ep=ep)
        Deployment(
            catalog.model("Qwen/Qwen3-30B-A3B"),
            catalog.gpu("h100_sxm"),
            tp=tp,
            attention_dp=dp,
            ep=ep,
            pp=pp,
        )
    except (ValueError, InputError):
        return False
    return True


def test_a_layout_grid_simulates_the_valid_layouts_and_explains_the_rest(tmp_path: Path) -> None:
    setup = OptimizeSetup(
        slo_path=str(DATA / "moe_layout_slo.yaml"),  # every layout within its budget
        space_path=str(DATA / "moe_layout_space.yaml"),
        workload=None,
        catalog_path=None,
        storage=f"sqlite:///{tmp_path / 'layouts.db'}",
        study_name="layouts",
        sampler="grid",
        seed=0,
        n_trials=36,
        max_requests=20,
    )
    study = run_workers(setup, workers=1)
    trials = [t for t in study.trials if not is_repeat(t)]
    assert {_layout(t) for t in trials} == {
        (tp, dp, ep, pp) for tp in (2, 4) for dp in (1, 2, 4) for ep in (1, 2, 4) for pp in (1, 2)
    }
    simulated = [t for t in trials if t.user_attrs["metrics"].get("simulated_requests", 0) > 0]
    ruled_out = [t for t in trials if t not in simulated]
    assert {_layout(t) for t in simulated} == {_layout(t) for t in trials if _valid(*_layout(t))}
    assert simulated, "no layout was valid"
    assert ruled_out, "no layout was invalid"
    reasons = " | ".join(t.user_attrs["infeasible_reason"] for t in ruled_out)
    for fragment in ("must divide tp", "is not modelled"):
        assert fragment in reasons
    assert all(t.user_attrs["infeasible_reason"] for t in ruled_out)
    # Ruled out before simulating = pruned (Optuna's "stopped early"), simulated = complete.
    assert {t.state for t in ruled_out} == {TrialState.PRUNED}
    assert {t.state for t in simulated} == {TrialState.COMPLETE}
