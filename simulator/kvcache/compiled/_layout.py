"""The compiled core's constants: policy kinds, the state vector's slots, error codes and the
rows and columns of the queue/node table (no kernels here; every kernel module imports it).

numba freezes module-level integers into the machine code it compiles, so these are
compile-time constants of the kernels, not lookups.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
U8 = NDArray[np.uint8]
F64 = NDArray[np.float64]

# Policy kinds (``engine.COMPILED`` maps names to them). Kinds from ``K_SLRU`` on replay a
# request through one kernel call (``_kernels._replay_other``); the ones below it per block.
K_LRU, K_FIFO, K_CLOCK, K_SIEVE, K_LFU, K_S3FIFO, K_S3FIFOD = 0, 1, 2, 3, 4, 5, 6
K_SLRU, K_TWOQ, K_ARC, K_GDSF, K_GDSF_COMPUTE, K_BELADY = 7, 8, 9, 10, 11, 12
K_LIRS, K_WTINYLFU, K_ASYM, K_RANDOM, K_RANDOM_SMALL, K_WORKLOAD = 13, 14, 15, 16, 17, 18
K_PARTIAL, K_PARTIAL_FREQ = 19, 20  # PartialNodeRandomCompute, PartialNodeRandomFreq
K_BELADY_COMPUTE = 21
K_LHD, K_LHD_COMPUTE = 22, 23  # Lhd, LhdCompute (``_lhd``)
# The session policies (``_session``): every kind from K_SESSION_LRU on is one of them.
K_SESSION_LRU, K_SESSION_BELADY, K_SESSION_RANDOM, K_SESSION_S3FIFO = 24, 25, 26, 27
K_SESSION_ARC = 28

# Policy families: the kinds of one kernel module (``_kernels.FAMILIES`` lists them). Each family
# has its own cached entry point, compiled from its own kernels only. The families below
# ``FAM_SEGMENTED`` replay a request block by block in ``_kernels`` (``_replay_blocks``), the
# others through one kernel call (``_replay_other``).
FAM_LISTS, FAM_LFU, FAM_QUEUES, FAM_SEGMENTED, FAM_HEAPS, FAM_BELADY_COMPUTE = 0, 1, 2, 3, 4, 5
FAM_LIRS, FAM_TINYLFU, FAM_RANDOM, FAM_WORKLOAD, FAM_PARTIAL, FAM_LHD = 6, 7, 8, 9, 10, 11
FAM_SESSION = 12

# Indices into the int64 state vector ``st``.
S_SIZE = 0  # resident blocks
S_CUR = 1  # stamp of the request being served (requests seen so far, skipped ones included)
S_REQ = 2
S_SKIP = 3
S_BLOCKS = 4
S_HITS = 5
S_EVICT = 6
S_SELF = 7
S_UNEXP = 8
S_UNOBS = 9
S_SKIP_INDEX = 10  # first skipped request's index, -1 if none
S_SKIP_DISTINCT = 11
S_HAND = 12  # SIEVE's hand (a slot; 0 = start at the tail)
S_ERR_A = 13
S_ERR_B = 14
S_SMALL_TARGET = 15  # S3-FIFO(-D)'s, RandomComputeSmallQueue's small-queue target (blocks)
S_GHOST_CAP = 16  # S3-FIFO(-D)'s ghost-queue capacity (ids; each ghost of S3-FIFO-D)
S_LIMIT = 17  # SLRU's protected-segment capacity; 2Q's Kin; the sampling policies' n_sample
S_GHOST_LIMIT = 18  # 2Q's Kout (A1out capacity)
# GDSF's, AsymCache's access sequence number; the random policies', WorkloadAware's clock;
# session_belady's serve sequence, session_random_compute's tick
S_SEQ = 19
S_HEAP_N = 20  # GDSF's, Belady's and AsymCache's heap size; the random policies' resident list
# (session_belady's heap of sessions, session_random_compute's list of them)
S_FREE_N = 21  # free slots on the stack (``_slots``; 0 after growth: the next request sweeps)
S_SHIFT = 22  # 64 - log2(hash table size) (``_slots``)
S_RESUME = 23  # after ``E_GROW``: the request (index into the chunk's offsets) to resume at
S_LIR_COUNT = 24  # LIRS: blocks with LIR status (the Python ``_n_lir``)
S_LIR_TARGET = 25  # LIRS: ``lir_target``
S_WINDOW_TARGET = 26  # W-TinyLFU: window, main and protected targets (the policy's rounding)
S_MAIN_TARGET = 27
S_PROTECTED_TARGET = 28
S_ADDITIONS = 29  # W-TinyLFU's sketch: accesses recorded since the last halving (halved then)
S_PERIOD = 30  # ... the halving period (WorkloadAware's ``aging_period``, LHD's ``period``)
S_SKETCH_SHIFT = 31  # ... 64 - log2(sketch width)
S_DOOR_GEN = 32  # ... the doorkeeper's generation (a slot is in it iff its mark equals this)
S_DOORKEEPER = 33  # ... 1 if the doorkeeper is on
S_SMALL_N = 34  # RandomComputeSmallQueue: blocks in its small queue
S_NODE_FREE_N = 35  # the partial-node policies: free node ids on their stack (``_partial``)
S_ROUND = 36  # ... eviction rounds so far (a node drawn in this round is marked with it)
S_MICRO = 37  # ... ``micro_batch`` in ``"micro"`` mode, 0 in ``"drain"`` mode
S_CLOCK = 38  # BeladyCompute: the request clock ``now`` (``_belady``)
S_BUCKETS = 39  # ... its cost buckets
S_COARSE = 40  # LHD: the width of an age class in block accesses (``coarsening``)
S_SESS_FREE_N = 41  # the session policies: free session slots on their stack (``_session``)
S_SESS_SHIFT = 42  # ... 64 - log2(session table size)
S_POOL_TOP = 43  # ... where the next path record of the pool goes
S_SESS_NEED = 44  # ... after ``E_GROW``: session slots that must fit (0: enough)
S_POOL_NEED = 45  # ... pool entries that must fit (0: enough)
S_SESS_ANON = 46  # ... the key of the next request without a session (-2, -3, ...)
S_CUR_SESSION = 47  # ... the key of the session being served
S_CUR_NEXT = 48  # ... the request index of its next turn (session_belady)
S_NEUMAIER = 49  # ... 1 where Python's sum() of floats is compensated (3.12 on)
S_SIGNED = 50  # BeladyCompute: 1 once a bucket's cost is negative (or NaN): no lazy bucket heap
N_STATE = 51

# Indices into the float64 vector ``fs``.
F_TOTAL, F_SAVED = 0, 1  # cost sums of the serve loop
F_POLICY = 2  # ARC's (and session_arc's) adaptive target p; GDSF's inflation L; session_s3fifo's
# small_ratio
N_FLOAT = 3

# Error codes.
E_OK, E_NOTHING_FREED, E_OVER_CAPACITY, E_LOST, E_ALL_PINNED = 0, 1, 2, 3, 4
# Not an error: the slots are too few for the next request even after a sweep (``st[S_ERR_A]``
# slots are needed); the driver grows them and calls again from request ``st[S_RESUME]``.
E_GROW = 5
# The Python policy raises ``KeyError(st[S_ERR_A])`` (LIRS, in states only reachable when a
# run ends in a capacity error anyway; the compiled path raises the same).
E_KEY = 6

# Rows of the node table ``nodes`` (LFU's count nodes; the queues' heads, tails and lengths).
COUNT, HEAD, TAIL, UP, DOWN, FREE = 0, 1, 2, 3, 4, 5

# Queue columns of ``nodes`` for the queue policies (one policy uses a few of them; column 0 is
# never a queue). A slot is in at most one queue, named by ``cls[slot]`` (0: none).
Q_SMALL, Q_MAIN, Q_GHOST, Q_MAIN_GHOST = 1, 2, 3, 4  # S3-FIFO (-D adds the main ghost)
Q_PROBATION, Q_PROTECTED = 1, 2  # SLRU
Q_A1IN, Q_A1OUT, Q_AM = 1, 2, 3  # 2Q
Q_T1, Q_T2, Q_B1, Q_B2 = 1, 2, 3, 4  # ARC
Q_NONRESIDENT = 1  # LIRS: the non-resident HIR ids (its Q and S are lists of ``links``)
Q_WINDOW = 3  # W-TinyLFU: its window, then SLRU's two queues (its main cache)
N_QUEUES = 5  # columns of a queue policy's node table
