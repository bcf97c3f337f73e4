"""Random prefix traces for contract checks: each request extends a random cut of an earlier one.

New blocks always get new ids, so an id identifies a whole prefix path (what the PrefixSim
interner would produce from a real trace).
"""

from __future__ import annotations

import numpy as np

from simulator.workload.request import TraceRequest

__all__ = ["random_prefix_trace"]


def random_prefix_trace(
    rng: np.random.Generator,
    n_requests: int,
    *,
    max_new: int = 6,
    reuse: float = 0.8,
    sessions: int = 0,
) -> list[TraceRequest]:
    """``n_requests`` requests, one second apart, 16 tokens per block.

    With probability ``reuse`` a request extends a random cut of an earlier request's path by
    0..``max_new`` new blocks, else it starts a fresh path (≥ 1 block). With ``sessions > 0``
    requests carry session ids (uniform over ``sessions``), turns and types, for the
    session-aware policies.
    """
    paths: list[tuple[int, ...]] = []
    next_id = 1
    requests = []
    for i in range(n_requests):
        if paths and rng.random() < reuse:
            base = paths[int(rng.integers(len(paths)))]
            base = base[: int(rng.integers(len(base) + 1))]
        else:
            base = ()
        grow = int(rng.integers(1 if not base else 0, max_new + 1))
        path = base + tuple(range(next_id, next_id + grow))
        next_id += grow
        paths.append(path)
        session = int(rng.integers(sessions)) if sessions else -1
        requests.append(
            TraceRequest(
                index=i,
                timestamp_s=float(i),
                input_length=16 * len(path),
                output_length=1,
                block_ids=path,
                session_id=session,
                turn=1 + i // max(sessions, 1) if sessions else 0,
                type_id=session % 3 if sessions else 0,
            )
        )
    return requests
