"""The compiled replay core: ``CompiledReplay`` serves ``BlockChunk`` arrays through numba
kernels with the exact semantics of ``simulator.kvcache.replay.replay`` (the reference).

- ``engine``: ``CompiledReplay``, ``COMPILED`` (policies with a compiled path) and
  ``PYTHON_ONLY`` (every other policy, with the reason it stays on the Python path);
- ``_kernels``: the numba kernels (serve loop and the policies' array structures).
"""

from simulator.kvcache.compiled.engine import (
    COMPILED,
    PYTHON_ONLY,
    CompiledReplay,
    compiled_reason,
)

__all__ = ["COMPILED", "PYTHON_ONLY", "CompiledReplay", "compiled_reason"]
