"""The contract every eviction policy passes, run over every entry of ``POLICIES``.

The checks live in ``simulator/testing/policy.py`` (importable, so a user's own policy is held to
the same contract); here they are parametrised over the registry.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from simulator.kvcache.policies import POLICIES
from simulator.kvcache.policies.lru import LRU
from simulator.testing import policy

NAMES = sorted(POLICIES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("check", sorted(policy.CHECKS))
def test_every_policy_passes_the_contract(check: str, name: str) -> None:
    policy.CHECKS[check](name)


class _TouchingLRU(LRU):
    """A broken LRU: its ``find`` refreshes recency (a side effect the contract forbids)."""

    name: ClassVar[str] = "touching_lru"

    def find(self, block: int) -> bool:
        found = block in self._resident
        if found:
            self._resident.move_to_end(block)
        return found


def test_the_contract_catches_a_policy_that_breaks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(POLICIES, _TouchingLRU.name, _TouchingLRU)
    with pytest.raises(AssertionError, match="touching_lru: find changed"):
        policy.CHECKS["find_is_read_only"]("touching_lru")
