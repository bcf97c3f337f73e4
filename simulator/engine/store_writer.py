"""Copies into an L3 store at the store's write bandwidth; a block is readable once it landed.

Write model (documented choice): every store (a server's drive, or the remote pool) has one
writer. Copies (write-through of freshly computed prompt blocks, or write-back of blocks evicted
from the tier above) queue first come, first served at the tier's ``write_gb_per_s``; a batch of
blocks handed over together lands as a whole after the tier's latency plus its bytes at that
rate, and only then can a request match it in L3. Copies never delay compute (the engine does
not wait for them), but the store can fall behind: when the queue already holds more than
``max_backlog_s`` seconds of writes, a new batch is dropped (not cached), as a cache that
cannot keep up skips copies rather than stall. A block already in the store, or already queued,
is not written again.

On a local drive the writer shares the drive with the store's read channel
(``transfer.DriveClock``): copies and prefetch reads queue in device time in the order they are
handed over, so a burst of writes delays the reads behind it and the other way round, and the
backlog that drops copies counts the reads ahead too. A remote pool's RDMA reads and writes use
the two directions of the link: its writer has no clock and writes do not slow its reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.core import Kernel
from simulator.engine.tiers import CacheTier
from simulator.engine.transfer import DriveClock, TransferTime

__all__ = ["StoreWriter"]


class StoreWriter:
    """The write queue of one L3 store (module docstring)."""

    __slots__ = (
        "_pending",
        "bytes_per_block",
        "clock",
        "kernel",
        "max_backlog_s",
        "n_dropped",
        "n_written",
        "seconds_for",
        "tier",
    )

    def __init__(
        self,
        kernel: Kernel,
        tier: CacheTier,
        seconds_for: TransferTime,
        bytes_per_block: float,
        max_backlog_s: float,
        *,
        clock: DriveClock | None = None,
    ) -> None:
        """``clock``: the drive's device time, shared with its read channel (a local drive);
        None gives the writer a device of its own (a remote pool's write direction)."""
        if max_backlog_s < 0:
            raise ValueError("max_backlog_s must be >= 0")
        self.kernel = kernel
        self.tier = tier
        self.seconds_for = seconds_for
        self.bytes_per_block = bytes_per_block
        self.max_backlog_s = max_backlog_s
        self.clock = clock if clock is not None else DriveClock()
        self._pending: set[int] = set()
        self.n_written = 0
        """Blocks that landed in the store (whether or not it had room to keep them)."""
        self.n_dropped = 0
        """Blocks not written because the queue was over ``max_backlog_s``."""

    def backlog_s(self) -> float:
        """Seconds of device work (writes, and reads on a shared drive) queued ahead of a
        batch handed over now."""
        return max(0.0, self.clock.free_at - self.kernel.now)

    def write(self, blocks: Sequence[int]) -> None:
        """Queue a copy of ``blocks`` (those not stored or queued already)."""
        has, pending = self.tier.has, self._pending
        todo = [b for b in blocks if not has(b) and b not in pending]
        if not todo:
            return
        now = self.kernel.now
        if self.clock.free_at - now > self.max_backlog_s:
            self.n_dropped += len(todo)
            return
        _, done_s = self.clock.reserve(now, self.seconds_for(len(todo) * self.bytes_per_block))
        pending.update(todo)
        self.kernel.at(done_s, lambda: self._land(todo))

    def _land(self, blocks: list[int]) -> None:
        self._pending.difference_update(blocks)
        self.tier.insert_all(blocks)
        self.n_written += len(blocks)
