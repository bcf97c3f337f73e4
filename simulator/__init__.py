"""kvplan's serving simulator: a pure library (no optuna, rich or typer; usable from a notebook).

The public face, one import away::

    from simulator import ServingConfig, WorkloadSpec, simulate

    config = ServingConfig(model="Qwen/Qwen3-8B", gpu="h100_sxm", instances=2)
    workload = WorkloadSpec.model_validate({"kind": "open_loop", "requests": 200,
                                            "arrival": {"process": "poisson", "rate_per_s": 4},
                                            "input_tokens": 1000, "output_tokens": 100})
    result = simulate(config, workload, seed=0)   # SimResult: summary, records, cost

- ``ServingConfig`` (``config.py``): one deployment, validated and frozen; ``load_preset`` the
  engine defaults behind ``backend`` (``presets.py``).
- ``WorkloadSpec`` / ``load_workload`` (``workload/spec.py``) and ``open_trace``: what arrives.
- ``simulate`` → ``SimResult`` (``api.py``, assembled by ``build.py``); ``capacity_search`` →
  ``Capacity``: the highest load that still meets an SLO (``capacity.py``).

Layers, each importing only those below it (``tests/test_layering.py``): ``config``,
``presets``, ``build``, ``api``, ``capacity`` on top of ``cluster`` → ``engine`` → ``latency``,
``kvcache`` → ``workload`` → ``core``; all of them on ``hardware`` and ``slo.inputfile``.
``validation`` (fidelity against measured benchmarks) and ``testing`` (contract kits) sit on
top of everything and nothing of the simulator imports them.
Names load on first use (PEP 562), so ``import simulator.workload`` stays cheap for commands
that never simulate.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Capacity",
    "ServingConfig",
    "SimResult",
    "WorkloadSpec",
    "capacity_search",
    "load_preset",
    "load_workload",
    "open_trace",
    "simulate",
]

#: Public name -> the module that defines it.
_HOME = {
    "Capacity": "simulator.capacity",
    "capacity_search": "simulator.capacity",
    "ServingConfig": "simulator.config",
    "SimResult": "simulator.api",
    "simulate": "simulator.api",
    "load_preset": "simulator.presets",
    "WorkloadSpec": "simulator.workload.spec",
    "load_workload": "simulator.workload.spec",
    "open_trace": "simulator.workload.trace",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
