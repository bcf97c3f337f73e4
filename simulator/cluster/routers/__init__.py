"""The router family's members, one module per kind (the registry is ``simulator.cluster.router``).

- ``base``: the ``Router`` base class, the ``InstanceView`` protocol routers read, parameters.
- ``balance``: load-only routers — ``random``, ``round_robin``, ``least_load``,
  ``power_of_two``, ``length_bucket``.
- ``cache_aware`` and ``prefix_tree``: SGLang's cache-aware router and its approximate trees.
"""
