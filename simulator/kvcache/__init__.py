"""The KV-cache core: eviction policies and the PrefixSim-style trace replay.

- ``simulator.kvcache.policies``: the ``EvictionPolicy`` protocol and the ``POLICIES`` registry.
- ``simulator.kvcache.replay``: ``replay(requests, policy, ...) -> ReplayResult``, the exact
  PrefixSim serve loop (skip, match, allocate, access).
- ``simulator.kvcache.compiled``: the same serve loop compiled with numba over arrays
  (``CompiledReplay`` over ``BlockChunk``s) for the policies in ``compiled.COMPILED`` (every
  registered one); ``replay`` stays the reference, and the path of ``--engine python`` and of
  hole dumps (and of any policy in ``compiled.PYTHON_ONLY``, none today).
- ``simulator.kvcache.cost``: cost models (``parse_cost_model``) for the compute-saving ratio.
- ``simulator.kvcache.holes``: runs of missed blocks and PrefixSim's ``--dump-holes`` files.
- ``simulator.kvcache.params``: ``name:key=value`` policy specs, validated per policy;
  ``simulator.kvcache.policy_table``: what each policy needs and guarantees (pin safety).
- ``simulator.kvcache.served_future``: the oracle future without the requests a cache skips.
- ``simulator.kvcache.stack_distance`` / ``lru_curve`` / ``trace_stats`` / ``analyze``: the
  exact LRU curve of a trace for every cache size in one pass, and its reuse distributions
  (``kvplan analyze``).

This package module imports nothing on purpose: ``simulator.workload`` and the policies import
each other's leaf modules, and an eager import here would close that cycle.
"""
