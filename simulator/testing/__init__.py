"""Contract kits: the checks every eviction policy, router, scheduler and latency model passes.

A component added to one of the simulator's registries (``POLICIES``, ``ROUTERS``,
``SCHEDULERS``, ``LATENCY_MODELS``) is held to the same contract as the shipped ones, whether
it lives in this repository or in a user's plug-in::

    from simulator.testing import policy

    for check in policy.CHECKS.values():
        check("my_policy")          # raises AssertionError naming what broke

- ``policy``: ``find`` is read-only, capacity and pinning hold through the serve loop,
  ``evict_n`` / ``remove`` keep the books, runs are deterministic for a seed.
- ``router``: a valid index for any load, determinism, read-only views, named parameters.
- ``scheduler``: every step within the token budget and the running cap, only running requests
  scheduled, every request served, determinism — checked on a real engine instance.
- ``latency``: non-negative, monotone in tokens and context, order-independent, the
  breakdown summing to the step.
- ``traces``: the random prefix traces the checks replay.

Plain functions with plain ``assert``-style failures (``AssertionError`` with a message); no
test framework is imported, so the kits are usable from a notebook as well as from
``tests/`` (which parametrises them over the registries).
"""
