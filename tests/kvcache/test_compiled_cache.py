"""The compiled core's entry points (``simulator.kvcache.compiled._kernels.serve_for``): one per
policy family, so a first run compiles only the family it uses, and numba's on-disk cache
serves it to the next process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

from simulator.kvcache.compiled import COMPILED, _kernels

REPO = Path(__file__).resolve().parents[2]

# Serves a small trace with POLICY and prints what numba did: whether the entry point was
# compiled or loaded from the cache, and which kernel-module functions this process compiled.
# Any numba warning fails it ("cannot cache ...").
_SERVE = """
import importlib
import json
import warnings
from numba.core.errors import NumbaWarning
from numba.core.registry import CPUDispatcher
from simulator.kvcache.compiled import COMPILED, CompiledReplay, _kernels
from simulator.workload.chunks import chunk_requests
from simulator.workload.request import TraceRequest

warnings.simplefilter("error", NumbaWarning)
lists = ([1, 2, 3], [1, 2, 4], [5, 6], [1, 7])
trace = [TraceRequest(i, float(i), 0, 0, tuple(ids), session_id=i % 2)
         for i, ids in enumerate(lists)]
run = CompiledReplay(POLICY, 3)
for chunk in chunk_requests(trace, max_blocks=4):
    run.feed(chunk)
serve = _kernels.serve_for(COMPILED[POLICY])
compiled = sorted({
    f"{value.py_func.__module__.rsplit('.', 1)[1]}.{value.py_func.__name__}"
    for name in _kernels.KERNEL_MODULES
    for value in vars(importlib.import_module(f"simulator.kvcache.compiled.{name}")).values()
    if isinstance(value, CPUDispatcher) and value.signatures and value is not serve
})
print(json.dumps({
    "hits": sum(serve.stats.cache_hits.values()),
    "misses": sum(serve.stats.cache_misses.values()),
    "compiled": compiled,
    "result": run.result().n_block_hits,
}))
"""


class _Run(TypedDict):
    hits: int  # the entry point's loads from numba's cache
    misses: int  # ... and compilations
    compiled: list[str]  # the kernel-module functions compiled in the process
    result: int  # block hits


def _serve(policy: str, cache: Path) -> _Run:
    """Run ``_SERVE`` in a fresh process with numba's cache in ``cache``."""
    script = _SERVE.replace("POLICY", repr(policy))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=REPO,
    )
    run: _Run = json.loads(proc.stdout)
    return run


def test_every_compiled_policy_has_one_family() -> None:
    kinds = [kind for _, family_kinds in _kernels.FAMILIES.values() for kind in family_kinds]
    assert sorted(kinds) == sorted(set(kinds)) == sorted(COMPILED.values())
    names = {_kernels.serve_for(ks[0]).py_func.__qualname__ for _, ks in _kernels.FAMILIES.values()}
    assert len(names) == len(_kernels.FAMILIES)  # one set of cache files per family


def test_a_first_run_compiles_one_family_only_and_the_next_process_loads_it(
    tmp_path: Path,
) -> None:
    """fifo's family (LRU, FIFO, CLOCK, SIEVE) compiles nothing of another family's kernel
    module, nor the session policies' steps of the serve loop."""
    first = _serve("fifo", tmp_path)
    assert (first["hits"], first["misses"]) == (0, 1)
    others = ("_lfu", "_queues", "_segmented", "_heaps", "_lirs", "_tinylfu", "_random",
              "_workload", "_partial", "_belady", "_lhd", "_session")  # fmt: skip
    assert not [name for name in first["compiled"] if name.split(".")[0] in others]
    assert "_kernels._evict_clock" in first["compiled"]
    cached = [p.name.split("-")[0] for p in tmp_path.rglob("_kernels.*.nbi")]
    assert cached == ["_kernels.serve_lists"]

    second = _serve("fifo", tmp_path)
    assert (second["hits"], second["misses"], second["compiled"]) == (1, 0, [])
    assert second["result"] == first["result"]
