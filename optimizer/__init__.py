"""The configuration optimizer: an Optuna search whose objective is the serving simulator.

- ``space.py`` / ``space_check.py``: the search space file (dimensions, fixed settings), every
  value checked before any trial; ``configs.py`` maps a trial's parameters onto a
  ``ServingConfig`` (aliases, the PD split by ``prefill_share``).
- ``objective.py``: one trial = budget check, screening (``screen.py``: cheap lower bounds that
  rule a point out without simulating), then ``simulator.simulate`` and the SLO evaluation;
  repeats of a configuration reuse the stored result.
- ``study.py`` / ``run.py`` / ``workers.py`` / ``claims.py``: the Optuna study (samplers,
  SQLite / PostgreSQL / journal storages), exactly N simulated trials across processes, worker
  lifetime and Ctrl-C.
- ``pareto.py`` / ``picks.py``: the front and the picks a planner reads; ``planning.py`` /
  ``plan_runner.py``: headroom and tier value after the search; ``report*.py``, ``results.py``,
  ``schema.py``: the report and the machine-readable results; ``launch.py`` / ``deploy.py``:
  launch lines and manifests per pick.
- ``cli/``: the ``kvplan`` command (typer), one module per subcommand.

Imports ``simulator``, ``hardware`` and ``slo`` (``tests/test_layering.py``); the simulator
never imports this package.
"""
