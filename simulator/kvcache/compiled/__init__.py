"""The compiled replay core: ``CompiledReplay`` serves ``BlockChunk`` arrays through numba
kernels with the exact semantics of ``simulator.kvcache.replay.replay`` (the reference).

- ``engine``: ``CompiledReplay``, ``COMPILED`` (policies with a compiled path; ``CONTEXT``:
  those of them that read the request context from the chunk) and
  ``PYTHON_ONLY`` (every other policy, with the reason it stays on the Python path);
- ``_kernels``: the numba serve loop (phases 0-3; LRU, FIFO, CLOCK, SIEVE) and its cached
  entry points, one per policy family (``FAMILIES``: the policies of one kernel module below),
  each compiled from its own family's kernels on first use and keyed on the source of every
  kernel module;
- ``_lfu``, ``_queues`` (S3-FIFO, S3-FIFO-D), ``_segmented`` (SLRU, 2Q, ARC), ``_heaps``
  (GDSF, Belady, AsymCache), ``_lirs`` (LIRS), ``_tinylfu`` (W-TinyLFU),
  ``_random`` (RandomCompute and its small-queue variant), ``_workload`` (WorkloadAware),
  ``_partial`` (the partial-node policies), ``_lhd`` (LHD), ``_session`` (the session
  policies): the other policies' array structures;
  ``_slots``: block id -> slot (the arrays' index) and slot recycling;
  ``_layout``: the constants they share.
"""

from simulator.kvcache.compiled.engine import (
    COMPILED,
    CONTEXT,
    PYTHON_ONLY,
    CompiledReplay,
    compiled_reason,
)

__all__ = ["COMPILED", "CONTEXT", "PYTHON_ONLY", "CompiledReplay", "compiled_reason"]
