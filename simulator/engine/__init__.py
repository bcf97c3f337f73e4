"""One serving instance: scheduler + tiered KV cache + latency model, in simulated time.

- ``EngineInstance`` (``instance.py``): queues, continuous batching, decode runs.
- ``SCHEDULERS`` (``scheduler.py``): ``chunked``, ``decode_first``, ``prefill_first``.
- ``CacheTier`` / ``KVManager``: L1/L2 tiers with pins and private blocks, the shared L3.
- ``EngineParams``: the resolved numbers an instance runs with.
- ``StepTimer`` and the analytic ``ConstantLatency`` / ``LinearLatency`` models.
"""

from simulator.engine.analytic import ConstantLatency, LinearLatency, parse_analytic
from simulator.engine.instance import EngineInstance
from simulator.engine.kvmanager import KVManager
from simulator.engine.params import EngineParams
from simulator.engine.request import EngineRequest
from simulator.engine.scheduler import SCHEDULERS, Scheduler
from simulator.engine.steps import StepTimer
from simulator.engine.tiers import CacheTier
from simulator.engine.transfer import LoadLink, PrefetchChannel

__all__ = [
    "SCHEDULERS",
    "CacheTier",
    "ConstantLatency",
    "EngineInstance",
    "EngineParams",
    "EngineRequest",
    "KVManager",
    "LinearLatency",
    "LoadLink",
    "PrefetchChannel",
    "Scheduler",
    "StepTimer",
    "parse_analytic",
]
