"""Fidelity against measured serving benchmarks: the simulator checked on real rows.

- ``silicon/``: the measured-benchmark CSV format (aiconfigurator's ``silicon_sample.csv``),
  read into checked rows — aggregated (``rows.py``), disaggregated (``disagg.py``), both in file
  order with the rows set aside and why (``read.py``).
- ``rules.py``: how each row's deployment was configured (per harness and engine, with
  sources) and the benchmark client's protocol.
- ``validate.py``: every row simulated as its benchmark ran (closed loop of ``batch_size``
  users) → predicted vs measured TTFT and TPOT.
- ``report.py``: error statistics per group and overall (MAPE, median APE, bias).
- ``steps.py``: the latency model alone on measured fixed batches (HiSim's estimator check).

Part of the simulator, not of the optimizer: nothing here searches, so it imports the
simulator's public modules, ``hardware`` and ``slo.inputfile`` only (``tests/test_layering.py``).
"""
