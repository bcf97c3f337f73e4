"""One serving instance: scheduler + tiered KV cache + latency model, in simulated time.

- ``EngineInstance`` (``instance.py``): queues, request lifecycle, the step loop; beside it
  ``admit.py`` (admission planning), ``inflight.py`` (the step or decode run in progress),
  ``kvuse.py`` (the KV-utilisation integral), ``stats.py`` (``InstanceStats``).
- ``SCHEDULERS`` (``scheduler.py``): ``chunked``, ``decode_first``, ``prefill_first``; each
  returns a ``StepPlan``.
- ``Host`` (``host.py``): what remote admission and the invariant checks see of an instance.
- ``CacheTier`` / ``KVManager``: L1/L2 tiers with pins and private blocks, the shared L3;
  ``KVManager.match_l12`` returns a ``PrefixMatch``.
- ``PrefetchChannel`` (per instance) / ``SharedPoolChannel`` (a remote pool's bandwidth, shared
  fairly): timed L3 → L2 reads.
- ``remote.py``: the engine's side of PD disaggregation (hand-off, decode-side admission).
- ``EngineParams``: the resolved numbers an instance runs with.
- ``StepTimer`` and the analytic ``ConstantLatency`` / ``LinearLatency`` models.
"""

from simulator.engine.analytic import ConstantLatency, LinearLatency, parse_analytic
from simulator.engine.instance import EngineInstance
from simulator.engine.kvmanager import KVManager
from simulator.engine.params import EngineParams
from simulator.engine.pool_channel import PoolPort, SharedPoolChannel
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
    "PoolPort",
    "PrefetchChannel",
    "Scheduler",
    "SharedPoolChannel",
    "StepTimer",
    "parse_analytic",
]
