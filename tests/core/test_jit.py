"""``simulator.core.jit.cached_njit``: a cache hit loads without numba's registry refresh, and
gives what a refreshed load gives.

Each step runs in a fresh interpreter over one private numba cache: the first compiles and
writes the cache, the next load from it (lean, then numba's own way).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from simulator.core.jit import LeanFunctionCache, cached_njit

ROOT = Path(__file__).resolve().parents[2]

# Allocates (NRT) and takes a numpy Generator, the two things the replay kernels need of
# numba's runtime besides plain arrays.
KERNELS = """
import numpy as np
from simulator.core.jit import cached_njit


@cached_njit
def draw(values, rng):
    out = np.empty(values.shape[0], dtype=np.int64)
    for i in range(values.shape[0]):
        out[i] = values[i] * 3 + rng.integers(0, 1000)
    return out
"""

RUN = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import kernels
if sys.argv[2] == "plain":  # numba's own FunctionCache, which refreshes before loading
    from numba.core.caching import FunctionCache
    kernels.draw._cache = FunctionCache(kernels.draw.py_func)
out = kernels.draw(np.arange(5, dtype=np.int64), np.random.default_rng(7))
refreshed = "numba.np.linalg" in sys.modules  # imported by the refresh, by nothing else here
hits = sum(kernels.draw.stats.cache_hits.values())
# A new signature after a lean load: numba compiles it, refreshing the target itself.
floats = kernels.draw(np.arange(3, dtype=np.float64), np.random.default_rng(7))
print(json.dumps({"out": out.tolist(), "refreshed": refreshed, "hits": hits,
                  "floats": floats.tolist()}))
"""


def _run(module_dir: Path, cache: Path, how: str) -> dict[str, object]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(module_dir), how],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_lean_cache_is_installed() -> None:
    """With the numba installed here the lean cache is in place (a numba that dropped the
    internals it overrides would fall back silently: this test says so)."""

    def double(x: int) -> int:
        return 2 * x

    for dispatcher in (cached_njit(double), cached_njit(nogil=True)(double)):
        assert isinstance(getattr(dispatcher, "_cache", None), LeanFunctionCache)
        assert dispatcher(21) == 42


def test_cache_hit_skips_refresh_with_the_same_result(tmp_path: Path) -> None:
    module_dir = tmp_path / "mod"
    module_dir.mkdir()
    (module_dir / "kernels.py").write_text(textwrap.dedent(KERNELS), encoding="utf-8")
    cache = tmp_path / "numba-cache"
    first = _run(module_dir, cache, "lean")  # compiles (a miss) and writes the cache
    lean = _run(module_dir, cache, "lean")
    plain = _run(module_dir, cache, "plain")
    assert first["hits"] == 0
    assert first["refreshed"]  # compiling refreshes, as before
    assert lean["hits"] == 1
    assert not lean["refreshed"]
    assert plain["hits"] == 1
    assert plain["refreshed"]
    assert lean["out"] == plain["out"] == first["out"]
    assert lean["floats"] == plain["floats"] == first["floats"]
