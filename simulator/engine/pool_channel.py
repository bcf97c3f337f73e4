"""The read bandwidth of a remote KV pool, shared fairly by every instance that reads from it.

Bandwidth model (documented choice): a remote pool (``kind: remote_pool`` in the catalog, e.g.
a Mooncake-store-like DRAM pool over RDMA) has **one** read bandwidth for the whole deployment,
the tier's stated ``read_gb_per_s``. The reads in flight share it equally (processor sharing,
as concurrent RDMA flows share a link): with ``n`` reads active each moves at ``rate / n``, so
two reads of the same size started together both finish after about twice the time of one.
Each read first waits the tier's fixed latency (lookup, first byte) without using bandwidth.
A server's local NVMe tier is not shared this way: its reads queue first come, first served
on one ``transfer.PrefetchChannel`` per server, which the instances on that server reach
through their own ``PoolPort`` (the catalog states NVMe rates per server), and share the
drive's device time with its writes (``transfer.DriveClock``).

Within one read, blocks arrive in prefix order in proportion to the bytes moved, so a read cut
at time ``t`` has delivered ``floor(n_blocks × moved / total)`` blocks.

``SharedPoolChannel`` is the resource; ``port()`` gives each instance a ``PoolPort`` with the
``Channel`` interface that counts that instance's delivered blocks. What this module is not: it
does not model writes (``engine/store_writer.py`` queues them separately at the tier's write
rate) nor any limit of the reading server's own NIC.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from simulator.core import Kernel
from simulator.engine.transfer import Channel, Transfer

__all__ = ["PoolPort", "SharedPoolChannel"]

#: A read whose remaining bytes are below this share of its size has arrived (float slack).
_DONE_TOL = 1e-9


class SharedPoolChannel:
    """Fair-shared L3 → L2 reads of every instance (module docstring)."""

    __slots__ = (
        "_active",
        "_event",
        "_last_s",
        "bytes_per_block",
        "bytes_per_s",
        "kernel",
        "latency_s",
        "n_blocks_moved",
    )

    def __init__(
        self, kernel: Kernel, *, bytes_per_s: float, latency_s: float, bytes_per_block: float
    ) -> None:
        if bytes_per_s <= 0 or latency_s < 0 or bytes_per_block <= 0:
            raise ValueError("need bytes_per_s > 0, latency_s >= 0 and bytes_per_block > 0")
        self.kernel = kernel
        self.bytes_per_s = bytes_per_s
        self.latency_s = latency_s
        self.bytes_per_block = bytes_per_block
        self.n_blocks_moved = 0
        """Blocks delivered so far, all instances together."""
        self._active: list[Transfer] = []
        self._event = -1
        self._last_s = 0.0

    def port(self) -> PoolPort:
        """A per-instance view of this channel."""
        return PoolPort(self)

    # ----- the Channel verbs --------------------------------------------------------------------
    def submit(
        self, blocks: Sequence[int], owner: Any, on_done: Callable[[Transfer], None]
    ) -> Transfer:
        """Start a read now: after the latency it shares the bandwidth with the others."""
        transfer = Transfer(blocks, owner, on_done)
        transfer.start_s = self.kernel.now
        transfer.total_bytes = len(transfer.blocks) * self.bytes_per_block
        transfer.token = self.kernel.after(self.latency_s, lambda: self._join(transfer))
        return transfer

    def arrived(self, transfer: Transfer) -> int:
        """Blocks of ``transfer`` delivered by now (0 during its latency)."""
        if transfer.end_s >= 0:
            return len(transfer.blocks)
        if transfer not in self._active:
            return 0
        self._advance()
        return _blocks(transfer)

    def cancel(self, transfer: Transfer) -> int:
        """Stop ``transfer`` now; return the blocks it delivered. The others speed up."""
        if transfer.end_s >= 0:
            return 0  # already complete and counted
        if transfer in self._active:
            self._advance()
            got = _blocks(transfer)
            self._active.remove(transfer)
            self._reschedule()
        else:
            if transfer.token >= 0:  # still in its latency
                self.kernel.cancel(transfer.token)
            got = 0
        transfer.token = -1
        self.n_blocks_moved += got
        return got

    def __len__(self) -> int:
        """Reads sharing the bandwidth now (those still in their latency excluded)."""
        return len(self._active)

    # ----- processor sharing --------------------------------------------------------------------
    def _join(self, transfer: Transfer) -> None:
        self._advance()
        transfer.token = -1
        self._active.append(transfer)
        self._reschedule()

    def _advance(self) -> None:
        """Credit every active read with its share of the bytes moved since the last change."""
        now = self.kernel.now
        elapsed = now - self._last_s
        self._last_s = now
        active = self._active
        if elapsed <= 0 or not active:
            return
        share = elapsed * self.bytes_per_s / len(active)
        for transfer in active:
            transfer.done_bytes = min(transfer.total_bytes, transfer.done_bytes + share)

    def _reschedule(self) -> None:
        """Schedule the next completion (the read with the fewest bytes left)."""
        if self._event >= 0:
            self.kernel.cancel(self._event)
            self._event = -1
        active = self._active
        if not active:
            return
        left = min(t.total_bytes - t.done_bytes for t in active)
        delay = max(0.0, left) * len(active) / self.bytes_per_s
        self._event = self.kernel.after(delay, self._complete)

    def _complete(self) -> None:
        self._event = -1
        self._advance()
        active = self._active
        done = [t for t in active if t.total_bytes - t.done_bytes <= _DONE_TOL * t.total_bytes]
        if not done:  # rounding left a few bytes: the earliest-finishing read is the one due
            done = [min(active, key=lambda t: t.total_bytes - t.done_bytes)]
        for transfer in done:
            active.remove(transfer)
            transfer.done_bytes = transfer.total_bytes
            transfer.end_s = self.kernel.now
            self.n_blocks_moved += len(transfer.blocks)
        self._reschedule()
        for transfer in done:
            transfer.on_done(transfer)


class PoolPort:
    """One instance's view of a channel it shares (a ``SharedPoolChannel``, or a server's
    ``PrefetchChannel``): the ``Channel`` verbs plus its own count of delivered blocks (so that
    summing over instances counts each block once)."""

    __slots__ = ("channel", "n_blocks_moved")

    def __init__(self, channel: SharedPoolChannel | Channel) -> None:
        self.channel = channel
        self.n_blocks_moved = 0

    def submit(
        self, blocks: Sequence[int], owner: Any, on_done: Callable[[Transfer], None]
    ) -> Transfer:
        """See ``SharedPoolChannel.submit``."""

        def done(transfer: Transfer) -> None:
            self.n_blocks_moved += len(transfer.blocks)
            on_done(transfer)

        return self.channel.submit(blocks, owner, done)

    def arrived(self, transfer: Transfer) -> int:
        """See ``SharedPoolChannel.arrived``."""
        return self.channel.arrived(transfer)

    def cancel(self, transfer: Transfer) -> int:
        """See ``SharedPoolChannel.cancel``."""
        got = self.channel.cancel(transfer)
        self.n_blocks_moved += got
        return got


def _blocks(transfer: Transfer) -> int:
    n = len(transfer.blocks)
    if transfer.total_bytes <= 0:
        return n
    return min(n, math.floor(n * transfer.done_bytes / transfer.total_bytes * (1 + _DONE_TOL)))
