"""Approximate per-instance prefix trees of routed requests (the cache-aware router's memory).

What it is: for every instance, the set of prompt-block paths the router has sent there,
bounded to ``max_blocks`` nodes per instance with least-recently-routed pruning. It is the
router's *belief* about each instance's prefix cache (SGLang's router keeps the same kind of
tree on prompt text and never asks the engines); it is *not* the engine's cache and can claim
prefixes the engine has already evicted, or miss ones another path brought in.

Representation: one trie shared by all instances. A node is a block *path* — interned from
``(parent node, block id)`` — so it is right for ``raw`` trace ids that repeat under different
parents, not only for prefix-interned ids. Each instance keeps an LRU order of the nodes it
holds. A routed request is recorded deepest block first, so a node is always more recent than
its descendants and the LRU victim is always a leaf of that instance's tree: pruning never
leaves a gap inside a held path. A node held by no instance leaves the trie.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["ApproxPrefixTrees"]

_ROOT = 0


class ApproxPrefixTrees:
    """Per-instance prefix trees over one shared trie (see the module docstring)."""

    def __init__(self, n_instances: int, max_blocks: int) -> None:
        if n_instances < 1:
            raise ValueError("need at least one instance")
        if max_blocks < 1:
            raise ValueError("max_blocks must be ≥ 1")
        self.max_blocks = max_blocks
        self._child: dict[tuple[int, int], int] = {}
        """(parent node, block id) → node."""
        self._key: dict[int, tuple[int, int]] = {}
        """node → its (parent node, block id), to unlink it."""
        self._holders: dict[int, int] = {}
        """node → number of instances holding it."""
        self._held: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(n_instances)]
        """Per instance: nodes held, least recently routed first."""
        self._next_node = _ROOT + 1
        self.n_pruned = 0
        """Nodes dropped from an instance's tree by the size bound (all instances)."""

    def size(self, instance: int) -> int:
        """Nodes (blocks) in ``instance``'s tree."""
        return len(self._held[instance])

    def n_nodes(self) -> int:
        """Nodes in the shared trie (each held by at least one instance)."""
        return len(self._key)

    def known_path(self, blocks: Sequence[int]) -> list[int]:
        """Nodes of the longest prefix of ``blocks`` that some instance holds (no side effects)."""
        nodes: list[int] = []
        parent = _ROOT
        child = self._child
        for block in blocks:
            node = child.get((parent, block))
            if node is None:
                break
            nodes.append(node)
            parent = node
        return nodes

    def match_lengths(self, path: Sequence[int]) -> list[int]:
        """Per instance: how many leading nodes of ``path`` (from ``known_path``) it holds."""
        lengths = []
        for held in self._held:
            n = 0
            for node in path:
                if node not in held:
                    break
                n += 1
            lengths.append(n)
        return lengths

    def insert(self, instance: int, blocks: Sequence[int]) -> None:
        """Record that the prompt ``blocks`` was routed to ``instance`` (its whole path becomes
        the most recent), then prune that instance's tree to ``max_blocks`` nodes."""
        path = []
        parent = _ROOT
        for block in blocks:
            key = (parent, block)
            node = self._child.get(key)
            if node is None:
                node = self._next_node
                self._next_node += 1
                self._child[key] = node
                self._key[node] = key
                self._holders[node] = 0
            path.append(node)
            parent = node
        held = self._held[instance]
        for node in reversed(path):  # deepest first: ancestors end up more recent
            if node in held:
                held.move_to_end(node)
            else:
                held[node] = None
                self._holders[node] += 1
        while len(held) > self.max_blocks:
            victim, _ = held.popitem(last=False)
            self.n_pruned += 1
            self._release(victim)

    def forget(self, instance: int) -> None:
        """Empty ``instance``'s tree (its engine stopped, its cache is gone)."""
        held = self._held[instance]
        while held:  # least recent first: a leaf each time, so the trie stays consistent
            victim, _ = held.popitem(last=False)
            self._release(victim)

    def _release(self, node: int) -> None:
        left = self._holders[node] - 1
        if left:
            self._holders[node] = left
            return
        # No instance holds it; by the leaf property none holds a descendant either.
        del self._holders[node]
        del self._child[self._key.pop(node)]
