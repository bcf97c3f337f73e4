"""The KV-cache core: eviction policies and the PrefixSim-style trace replay.

- ``simulator.kvcache.policies``: the ``EvictionPolicy`` protocol and the ``POLICIES`` registry.
- ``simulator.kvcache.replay``: ``replay(requests, policy, ...) -> ReplayResult``, the exact
  PrefixSim serve loop (skip, match, allocate, access).
- ``simulator.kvcache.cost``: cost models (``parse_cost_model``) for the compute-saving ratio.
- ``simulator.kvcache.holes``: runs of missed blocks and PrefixSim's ``--dump-holes`` files.

This package module imports nothing on purpose: ``simulator.workload`` and the policies import
each other's leaf modules, and an eager import here would close that cycle.
"""
