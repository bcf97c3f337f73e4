"""Timed KV movement between tiers of one instance: L3→L2 prefetch and L2→L1 loads.

Bandwidth model (documented choice): every instance owns one channel per direction, and the
transfers on a channel are **serialised** first-come first-served at the link's full rate (no
bandwidth sharing between concurrent transfers). For the L3 store this means each instance reads
at the tier's bandwidth independently of the others (the bottleneck is the server's NIC or SSD
path, not the pool); the store's *content* is shared.

Within one transfer, blocks arrive in prefix order at a constant rate between its start and
end, so a transfer truncated at time ``t`` has delivered ``floor(n × (t - start) / (end -
start))`` blocks (the fixed per-transfer latency is spread over the blocks).

A remote pool shared by all instances is the exception: its bandwidth is one resource, shared
fairly among the reads in flight (``pool_channel.SharedPoolChannel``); ``Channel`` is what the
prefetcher needs from either.

A local drive reads and writes through one device (``DriveClock``): a read channel and the
store's writer (``store_writer.StoreWriter``) that share a clock take turns in the order they
hand work over, each operation holding the drive for its bytes at its own rate (read or write),
so a read queued behind a write waits for it. A read cancelled early gives the drive back only
if nothing was queued after it (what was queued keeps its planned times).

What this module is not: it does not touch cache contents; the caller inserts the delivered
blocks into L2 (``on_done``) or pins the loaded ones in L1.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from simulator.core import Kernel

__all__ = ["Channel", "DriveClock", "LoadLink", "PrefetchChannel", "Transfer", "TransferTime"]

TransferTime = Callable[[float], float]
"""Seconds to move a number of bytes over a link, per-transfer latency included."""


class DriveClock:
    """When one drive is next free: the reads and writes that share it queue in device time."""

    __slots__ = ("free_at",)

    def __init__(self) -> None:
        self.free_at = 0.0

    def reserve(self, now: float, seconds: float) -> tuple[float, float]:
        """Hold the drive for ``seconds`` from when it is next free; (start, end)."""
        start = max(now, self.free_at)
        self.free_at = start + seconds
        return start, self.free_at

    def release(self, end_s: float, now: float) -> None:
        """An operation planned to end at ``end_s`` stopped at ``now``: if it was the last one
        planned, the drive is free from ``now``."""
        if self.free_at == end_s:
            self.free_at = now


class Transfer:
    """One L3→L2 read of ``blocks`` for ``owner`` (an engine request)."""

    __slots__ = (
        "blocks",
        "done_bytes",
        "end_s",
        "on_done",
        "owner",
        "start_s",
        "token",
        "total_bytes",
    )

    def __init__(self, blocks: Sequence[int], owner: Any, on_done: Callable[[Transfer], None]):
        self.blocks = tuple(blocks)
        self.owner = owner
        self.on_done = on_done
        self.start_s = -1.0
        """When it reached the head of the channel (-1 while queued)."""
        self.end_s = -1.0
        self.token = -1
        self.total_bytes = 0.0
        """Shared channels only: bytes to move, and bytes moved so far."""
        self.done_bytes = 0.0


class Channel(Protocol):
    """An L3 → L2 read channel as the prefetcher uses it (FIFO per instance, or shared)."""

    n_blocks_moved: int
    """Blocks delivered so far (completed and truncated transfers) through this channel."""

    def submit(
        self, blocks: Sequence[int], owner: Any, on_done: Callable[[Transfer], None]
    ) -> Transfer:
        """Start (or queue) a read; ``on_done(transfer)`` runs when all of it has arrived."""
        ...

    def arrived(self, transfer: Transfer) -> int:
        """Blocks of ``transfer`` delivered by now (prefix order)."""
        ...

    def cancel(self, transfer: Transfer) -> int:
        """Stop ``transfer`` now; return the blocks it delivered."""
        ...


class PrefetchChannel:
    """FIFO-serialised L3→L2 reads of one instance or drive (module docstring); with a
    ``clock`` the reads also queue in device time with the drive's writes."""

    __slots__ = ("_queue", "bytes_per_block", "clock", "kernel", "n_blocks_moved", "seconds_for")

    def __init__(
        self,
        kernel: Kernel,
        seconds_for: TransferTime,
        bytes_per_block: float,
        clock: DriveClock | None = None,
    ) -> None:
        self.kernel = kernel
        self.seconds_for = seconds_for
        self.bytes_per_block = bytes_per_block
        self.clock = clock
        self._queue: deque[Transfer] = deque()
        self.n_blocks_moved = 0
        """Blocks delivered so far (completed and truncated transfers)."""

    def submit(
        self, blocks: Sequence[int], owner: Any, on_done: Callable[[Transfer], None]
    ) -> Transfer:
        """Queue a read; ``on_done(transfer)`` runs when the whole transfer has arrived."""
        transfer = Transfer(blocks, owner, on_done)
        self._queue.append(transfer)
        if len(self._queue) == 1:
            self._start(transfer)
        return transfer

    def seconds(self, n_blocks: int) -> float:
        """Duration of an unqueued transfer of ``n_blocks``."""
        return self.seconds_for(n_blocks * self.bytes_per_block)

    def arrived(self, transfer: Transfer) -> int:
        """Blocks of ``transfer`` delivered by now (prefix order)."""
        now = self.kernel.now
        if transfer.start_s < 0 or now <= transfer.start_s:
            return 0
        n = len(transfer.blocks)
        if now >= transfer.end_s:
            return n
        span = transfer.end_s - transfer.start_s
        return min(n, int(n * (now - transfer.start_s) / span)) if span > 0 else n

    def cancel(self, transfer: Transfer) -> int:
        """Stop ``transfer`` now; return the blocks it delivered. The next one starts now."""
        got = self.arrived(transfer)
        head = self._queue[0] is transfer
        self._queue.remove(transfer)
        if head:
            self.kernel.cancel(transfer.token)
            if self.clock is not None:
                self.clock.release(transfer.end_s, self.kernel.now)
            if self._queue:
                self._start(self._queue[0])
        self.n_blocks_moved += got
        return got

    def _start(self, transfer: Transfer) -> None:
        kernel = self.kernel
        seconds = self.seconds(len(transfer.blocks))
        if self.clock is None:
            transfer.start_s, transfer.end_s = kernel.now, kernel.now + seconds
        else:
            transfer.start_s, transfer.end_s = self.clock.reserve(kernel.now, seconds)
        transfer.token = kernel.at(transfer.end_s, self._complete)

    def _complete(self) -> None:
        transfer = self._queue.popleft()
        self.n_blocks_moved += len(transfer.blocks)
        if self._queue:
            self._start(self._queue[0])
        transfer.on_done(transfer)

    def __len__(self) -> int:
        return len(self._queue)


class LoadLink:
    """FIFO-serialised loads into L1 (L2→L1 over PCIe, swap-in); no cancellation."""

    __slots__ = ("busy_until", "bytes_per_block", "n_blocks_moved", "seconds_for")

    def __init__(self, seconds_for: TransferTime, bytes_per_block: float) -> None:
        self.seconds_for = seconds_for
        self.bytes_per_block = bytes_per_block
        self.busy_until = 0.0
        self.n_blocks_moved = 0

    def load(self, n_blocks: int, now: float) -> float:
        """Queue a load of ``n_blocks`` at ``now``; return when it completes (``now`` if 0)."""
        if n_blocks <= 0:
            return now
        self.n_blocks_moved += n_blocks
        done = max(now, self.busy_until) + self.seconds_for(n_blocks * self.bytes_per_block)
        self.busy_until = done
        return done
