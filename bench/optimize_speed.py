"""CPU and wall time of ``kvplan optimize``'s two phases: the trials and the planning after them.

The README's default command (bundled SLO, space and Mooncake slice, ``--trials 60``, seed 0,
TPE) run in this process, the way ``optimizer.cli.optimize_cmd`` runs it, with each phase timed:

    python bench/optimize_speed.py                  # one worker, in-memory storage
    python bench/optimize_speed.py --workers 2      # two workers on a temporary journal file
    python bench/optimize_speed.py --baseline examples/baseline.yaml
    python bench/optimize_speed.py --storage study.journal --workers 2  # again: planning only

With ``--storage`` the study is kept: a second run finds its trials done (the trials phase
costs only the reading) and times the planning alone, on the same picks for any tree and any
number of workers.

Printed: one line per phase — wall seconds, CPU seconds of this process and of its finished
child processes (the trial workers and the planning pool are reaped before the phase ends, so
their CPU is counted) — the planning's share of the total CPU, and a digest of the planning
figures (tier rows, headroom, baseline: ``Planning.to_dict``), equal between trees that plan the
same. ``--profile N`` prints the top cProfile entries of the planning (this process only).
On a shared machine CPU seconds are the steadier figure; the load average is printed too.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import json
import os
import pstats
import resource
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import optuna

from optimizer.cli._preflight import load_baseline
from optimizer.picks import DEFAULT_TOLERANCE, objective_infos
from optimizer.plan_runner import planning_runner
from optimizer.planning import plan
from optimizer.results import summarise
from optimizer.run import OptimizeSetup, StudyWorkers, build_evaluator, records_of


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@contextlib.contextmanager
def _phase(name: str, out: dict[str, dict[str, float]]) -> Iterator[None]:
    wall, (own, children) = time.perf_counter(), _cpu()
    yield
    own_after, children_after = _cpu()
    out[name] = {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": own_after - own,
        "children_cpu_s": children_after - children,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the default study and its planning; print the phases' times and a digest."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--storage", default=None, help="keep the study here (a journal file)")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--json", action="store_true", help="one JSON line instead of text")
    args = parser.parse_args(argv)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # Removed when the run ends (its finaliser runs at exit, error or not).
    scratch = tempfile.TemporaryDirectory(prefix="kvplan-optimize-speed-")
    folder = scratch.name
    storage = args.storage
    if storage is None and args.workers > 1:
        storage = os.path.join(folder, "study.journal")
    setup = OptimizeSetup(
        slo_path=str(resources.files("optimizer") / "data" / "default_slo.yaml"),
        space_path=None,
        workload=None,
        catalog_path=None,
        storage=storage,
        study_name="kvplan",
        sampler="tpe",
        seed=args.seed,
        n_trials=args.trials,
    )
    phases: dict[str, dict[str, float]] = {}
    evaluator = build_evaluator(setup)
    baseline = (
        None
        if args.baseline is None
        else load_baseline(args.baseline, evaluator.space, evaluator.catalog)
    )
    profiler = cProfile.Profile() if args.profile else None
    # As ``kvplan optimize`` runs them: the spawned trial workers stay for the planning.
    with StudyWorkers(setup, workers=args.workers) as crew:
        with _phase("trials", phases):
            study = crew.run()
        records = records_of(study)
        directions = dict(evaluator.spec.objectives.directions)
        infos = objective_infos(evaluator.spec, capacity=False)
        result = summarise(records, directions, tolerance=DEFAULT_TOLERANCE, objectives=infos)
        with _phase("planning", phases):
            if profiler is not None:
                profiler.enable()
            with planning_runner(
                setup, evaluator, records, workers=args.workers, kept=crew.pool
            ) as runner:
                planning = plan(evaluator, result, baseline=baseline, runner=runner)
            crew.close()  # the workers' exit (and their CPU, once reaped) in this phase
            if profiler is not None:
                profiler.disable()
    scratch.cleanup()
    figures = json.dumps(planning.to_dict(), sort_keys=True, default=str)
    digest = hashlib.sha256(figures.encode()).hexdigest()[:16]
    total = sum(p["cpu_s"] + p["children_cpu_s"] for p in phases.values())
    planning_cpu = phases["planning"]["cpu_s"] + phases["planning"]["children_cpu_s"]
    report: dict[str, Any] = {
        "workers": args.workers,
        "trials": len(records),
        "phases": phases,
        "planning_share": planning_cpu / total,
        "wall_s": sum(p["wall_s"] for p in phases.values()),
        "digest": digest,
        "load": os.getloadavg(),
    }
    if args.json:
        print(json.dumps(report))
    else:
        for name, p in phases.items():
            print(
                f"{name:9s} wall {p['wall_s']:6.1f} s  cpu {p['cpu_s']:6.1f} s  "
                f"children cpu {p['children_cpu_s']:6.1f} s"
            )
        print(
            f"workers {args.workers}  trials {len(records)}  planning {planning_cpu:.1f} of "
            f"{total:.1f} CPU-s ({report['planning_share']:.0%})  wall {report['wall_s']:.1f} s  "
            f"digest {digest}  load {report['load'][0]:.1f}"
        )
    if profiler is not None:
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
