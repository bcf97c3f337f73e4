"""LFU kernels (``policies.lfu.LFU``): count nodes over slots.

A block enters with count 1, a hit adds 1, eviction walks the counts upward, oldest first
within a count, passing pinned blocks over. Each distinct count is a *node* in a list sorted
by count (``UP`` = next higher); a node holds its blocks in a member list through the slots'
``nxt``/``prv`` (0 = none), so a hit moves its block to the next node up (or a new one put
there): O(1), as in Python. ``nodes`` has shape (6, capacity + 2): rows ``COUNT``, ``HEAD``,
``TAIL``, ``UP``, ``DOWN`` per node id (1 … capacity + 1; 0 = none) and ``FREE``, a stack of
unused ids. At most one node per resident block exists, plus one for a moment during an access.
Scalars in the row ``FREE``'s column 0 and the row ``COUNT``'s column 0 (node 0 is never used):
nodes[FREE, 0] = free ids on the stack, nodes[COUNT, 0] = the lowest node (0 = none).

Not cached on their own: only the entry points of ``_kernels`` are (see there).
"""

# ruff: noqa: PLR0917  (numba kernels take their state arrays positionally)

from __future__ import annotations

from numba import njit

from simulator.kvcache.compiled._layout import COUNT, DOWN, FREE, HEAD, I64, TAIL, U8, UP


@njit()
def _append(nodes: I64, node: int, x: int, nxt: I64, prv: I64) -> None:
    tail = nodes[TAIL, node]
    prv[x] = tail
    nxt[x] = 0
    if tail:
        nxt[tail] = x
    else:
        nodes[HEAD, node] = x
    nodes[TAIL, node] = x


@njit()
def _detach(nodes: I64, node: int, x: int, nxt: I64, prv: I64) -> None:
    before = prv[x]
    after = nxt[x]
    if before:
        nxt[before] = after
    else:
        nodes[HEAD, node] = after
    if after:
        prv[after] = before
    else:
        nodes[TAIL, node] = before


@njit()
def _new_after(nodes: I64, below: int, count: int) -> int:
    """A fresh node of ``count`` just above ``below`` (0: at the bottom)."""
    top = nodes[FREE, 0]
    node = nodes[FREE, top]
    nodes[FREE, 0] = top - 1
    nodes[COUNT, node] = count
    nodes[HEAD, node] = 0
    nodes[TAIL, node] = 0
    above = nodes[COUNT, 0] if below == 0 else nodes[UP, below]
    if below == 0:
        nodes[COUNT, 0] = node
    else:
        nodes[UP, below] = node
    nodes[DOWN, node] = below
    nodes[UP, node] = above
    if above:
        nodes[DOWN, above] = node
    return node  # type: ignore[no-any-return]


@njit()
def _drop_if_empty(nodes: I64, node: int) -> None:
    if nodes[HEAD, node]:
        return
    below = nodes[DOWN, node]
    above = nodes[UP, node]
    if below:
        nodes[UP, below] = above
    else:
        nodes[COUNT, 0] = above
    if above:
        nodes[DOWN, above] = below
    top = nodes[FREE, 0] + 1
    nodes[FREE, top] = node
    nodes[FREE, 0] = top


@njit()
def lfu_access(x: int, res: U8, nxt: I64, prv: I64, cls: I64, nodes: I64) -> int:
    """``LFU.access`` for slot ``x``; returns 1 if it was inserted."""
    if res[x]:
        node = cls[x]
        count = nodes[COUNT, node] + 1
        above = nodes[UP, node]
        target = above if above and nodes[COUNT, above] == count else _new_after(nodes, node, count)
        _detach(nodes, node, x, nxt, prv)
        _drop_if_empty(nodes, node)
        _append(nodes, target, x, nxt, prv)
        cls[x] = target
        return 0
    low = nodes[COUNT, 0]
    target = low if low and nodes[COUNT, low] == 1 else _new_after(nodes, 0, 1)
    _append(nodes, target, x, nxt, prv)
    cls[x] = target
    res[x] = 1
    return 1


@njit()
def lfu_evict(
    k: int, pin: bool, cur: int, res: U8, nxt: I64, prv: I64, nodes: I64, stamp: I64
) -> tuple[int, int]:
    """``LFU.evict_n``: up to ``k`` unpinned blocks, lowest count first, oldest first within a
    count. Returns (freed, of which in α)."""
    got = inside = 0
    node = nodes[COUNT, 0]
    while got < k and node:
        above = nodes[UP, node]
        x = nodes[HEAD, node]
        while got < k and x:
            after = nxt[x]
            in_alpha = stamp[x] == cur
            if not (pin and in_alpha):
                _detach(nodes, node, x, nxt, prv)
                res[x] = 0
                got += 1
                inside += in_alpha
            x = after
        _drop_if_empty(nodes, node)
        node = above
    return got, inside
