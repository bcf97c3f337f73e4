"""``cached_njit``: ``numba.njit(cache=True)`` whose cache hits skip numba's target refresh.

On every load from its on-disk cache numba first refreshes the CPU target (``Cache.
load_overload`` calls ``target_context.refresh()``): it imports and installs every typing and
lowering registry numba has (linear algebra, the random generators, polynomials, typed
containers, jitclass, datetime, ...), about 0.1 s of CPU per process, the largest single part
of a warm ``kvplan replay`` start-up. Machine code loaded from the cache uses none of it: it is
already lowered and linked, and needs only numba's runtime (NRT) symbols, which
``rtsys.initialize`` installs. Compiling is unaffected: numba's compiler refreshes the target
itself (``CompilerBase.__init__``), so a cache miss compiles exactly as before.

The loaded machine code and the dispatch on argument types are the same either way, so
results are too (``tests/core/test_jit.py`` checks a lean load against a refreshed one). This uses
internals of numba (``Dispatcher._cache``, ``Cache._load_overload`` and
``_guard_against_spurious_io_errors``, unchanged for many releases up to the 0.68 used here);
should a numba release drop them, the plain ``njit(cache=True)`` dispatcher is kept, which is
only slower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

from numba import njit
from numba.core.caching import FunctionCache
from numba.core.runtime import nrt

__all__ = ["LeanFunctionCache", "cached_njit"]

F = TypeVar("F", bound=Callable[..., Any])


class LeanFunctionCache(FunctionCache):
    """numba's per-function disk cache, loading without refreshing the target first."""

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        """The cached compile result of ``sig``, or ``None`` (then numba compiles it)."""
        # The one part of the refresh that loaded code needs: NRT's symbols in LLVM's table.
        nrt.rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)  # type: ignore[no-untyped-call]


@overload
def cached_njit(func: F, /) -> F: ...
@overload
def cached_njit(*, nogil: bool = False) -> Callable[[F], F]: ...
def cached_njit(func: F | None = None, /, *, nogil: bool = False) -> F | Callable[[F], F]:
    """``numba.njit(cache=True, nogil=nogil)(func)``, loading from the cache with
    ``LeanFunctionCache``: ``@cached_njit`` or ``@cached_njit(nogil=True)``."""
    if func is None:
        return lambda later: _lean(later, nogil)
    return _lean(func, nogil)


def _lean(func: F, nogil: bool) -> F:
    dispatcher: Any = njit(cache=True, nogil=nogil)(func)
    if isinstance(getattr(dispatcher, "_cache", None), FunctionCache) and all(
        hasattr(FunctionCache, name)
        for name in ("_load_overload", "_guard_against_spurious_io_errors")
    ):
        dispatcher._cache = LeanFunctionCache(func)  # type: ignore[no-untyped-call]
    return cast(F, dispatcher)
