"""Routing and the event loop that drives a pool of engine instances.

- ``Router`` and ``ROUTERS`` (``round_robin``, ``least_load``): where a request goes.
- ``Cluster``: arrivals → router → instances on one event kernel.
"""

from simulator.cluster.driver import Cluster
from simulator.cluster.router import ROUTERS, InstanceView, Router

__all__ = ["ROUTERS", "Cluster", "InstanceView", "Router"]
