"""InferenceX's multi-node disaggregated recipes: the decode workers' running caps.

InferenceX runs its multi-node disaggregated benchmarks (Dynamo with TensorRT-LLM workers,
``framework: dynamo-trt``) from srt-slurm recipes, one per point of the search space of
``.github/configs/nvidia-master.yaml`` (SemiAnalysisAI/InferenceX, read at commit 0004cf5f, key
``dsr1-fp8-h100-dynamo-trt``, image ``nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post3``):
each entry names the users it ran (``conc-list``), the prefill and decode worker counts, whether
the decode workers use attention DP, and the recipe file, ``recipes/trtllm/h100-fp8/<isl>k<osl>k/
{stp,mtp}/ctx<P>_gen<D>_{tep,dep}16_batch<B>_eplb0_mtp<K>.yaml``. A recipe sets its decode
workers' ``max_batch_size`` to the ``B`` of its name — so in the eight recipe files stored of
ishandhanani/srt-slurm@51962c0f (H100 FP8, the TEP16 batch-1 and batch-2 ones of both lengths and
both decoding modes), where ``concurrencies`` is 6 for batch 1 and 9 for batch 2. That cap is per
attention-DP rank for a ``dep16`` worker (TensorRT-LLM's ``max_batch_size`` is per rank with
``enable_attention_dp``), per worker for ``tep16``.

The exported rows do not record that cap: the DeepSeek-V3 rows of ``config_id=494`` record
``decode_batch_size`` = users / decode workers (2 at 6 users over 3 workers), an even split of
the load. InferenceX runs more users than decode slots (6 users on three workers of one slot), so
users wait for a slot; simulated with the even split every user had one, and the measured 5-14 s
TTFTs came out 5-25× short (``bench/README.md``).

``decode_cap(row)`` is the cap of the recipe that ran ``row``: the entries at the row's lengths and
users whose worker counts and decode attention DP agree with what the row records. At some
points InferenceX ran a speculative-decoding (MTP) recipe besides the plain one and the export
does not say which a row is; where the candidates agree on the cap it is returned (whatever the
decoding: MTP is not modelled, for any row), where they differ, None (the row keeps its recorded
batch size). Only the H100 FP8 DeepSeek-R1 recipes above are in the table; other GPUs' and
engines' multi-node recipes were not read. Prefill workers keep the benchmark rules of
``silicon/disagg.py`` (the recipes' prefill settings were read for four of the points only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from simulator.validation.inferencex import family_of, gpu_key
from simulator.validation.rules import harness
from simulator.validation.silicon.disagg import DisaggRow

__all__ = ["RECIPES", "DisaggRecipe", "decode_cap"]

_SOURCE = (
    "SemiAnalysisAI/InferenceX .github/configs/nvidia-master.yaml@0004cf5f "
    "dsr1-fp8-h100-dynamo-trt; recipes/trtllm/h100-fp8/{isl}k{osl}k/{spec}/"
    "ctx{prefill}_gen{decode}_{layout}16_batch{batch}_eplb0_mtp*.yaml"
)


@dataclass(frozen=True, slots=True)
class DisaggRecipe:
    """One search-space point of the source (module doc)."""

    family: str
    gpu: str
    backend: str
    isl: int
    osl: int
    users: int
    spec: Literal["stp", "mtp"]
    prefill_workers: int
    decode_workers: int
    #: ``dep``: a decode worker is 16 attention-DP ranks; ``tep``: one TP16 rank group.
    decode_layout: Literal["tep", "dep"]
    #: Decode ``max_batch_size``: per rank for ``dep``, per worker for ``tep``.
    decode_batch: int

    @property
    def source(self) -> str:
        """Where this point was read."""
        kib = {1024: "1", 8192: "8"}
        return _SOURCE.format(
            isl=kib.get(self.isl, self.isl), osl=kib.get(self.osl, self.osl), spec=self.spec,
            prefill=self.prefill_workers, decode=self.decode_workers,
            layout=self.decode_layout, batch=self.decode_batch,
        )  # fmt: skip


def _h100_dsr1(
    isl: int, spec: Literal["stp", "mtp"], points: tuple[tuple[int, int, int, str, int], ...]
) -> tuple[DisaggRecipe, ...]:
    """The points ``(users, prefill workers, decode workers, layout, batch)`` of one length."""
    return tuple(
        DisaggRecipe("dsr1", "h100_sxm", "trtllm", isl, 1024, users, spec, prefill, decode,
                     "dep" if layout == "dep" else "tep", batch)
        for users, prefill, decode, layout, batch in points
    )  # fmt: skip


#: The ``dsr1-fp8-h100-dynamo-trt`` search space (module doc), as written there.
RECIPES: tuple[DisaggRecipe, ...] = (
    *_h100_dsr1(1024, "mtp", (
        (6, 1, 3, "tep", 1), (9, 1, 3, "tep", 2), (30, 1, 3, "tep", 8), (60, 1, 3, "tep", 16),
        (117, 1, 3, "tep", 32), (231, 1, 3, "dep", 4), (462, 1, 3, "tep", 128),
        (615, 1, 1, "dep", 32), (1229, 1, 1, "dep", 64),
    )),
    *_h100_dsr1(1024, "stp", (
        (6, 1, 3, "tep", 1), (9, 1, 3, "tep", 2), (30, 1, 3, "tep", 8), (60, 1, 3, "tep", 16),
        (231, 1, 3, "dep", 4), (462, 1, 3, "dep", 8), (924, 1, 3, "dep", 16),
        (1845, 1, 3, "dep", 32), (4916, 2, 1, "dep", 256),
    )),
    *_h100_dsr1(8192, "mtp", (
        (6, 1, 3, "tep", 1), (9, 1, 3, "tep", 2), (30, 1, 3, "tep", 8), (77, 1, 1, "dep", 4),
        (154, 2, 1, "dep", 8),
    )),
    *_h100_dsr1(8192, "stp", (
        (6, 1, 3, "tep", 1), (9, 1, 3, "tep", 2), (30, 1, 3, "tep", 8), (154, 1, 2, "tep", 64),
        (308, 2, 1, "dep", 16),
    )),
)  # fmt: skip


def _candidates(row: DisaggRow) -> list[DisaggRecipe]:
    """The recipes that can have run ``row``: same family, GPU, engine, lengths and users, and
    the worker counts and decode attention DP the row records."""
    if harness(row) != "inferencex":
        return []
    family, gpu = family_of(row.model), gpu_key(row.system)
    decode_layout = "dep" if row.decode.attention_dp > 1 else "tep"
    return [
        r
        for r in RECIPES
        if (r.family, r.gpu, r.backend) == (family, gpu, row.backend)
        and (r.isl, r.osl, r.users) == (row.isl, row.osl, row.concurrency)
        and (r.prefill_workers, r.decode_workers) == (row.prefill.workers, row.decode.workers)
        and r.decode_layout == decode_layout
    ]


def decode_cap(row: DisaggRow) -> DisaggRecipe | None:
    """The recipe whose decode ``max_batch_size`` applies to ``row`` (module doc), or None where
    no recipe matches or the matching ones disagree on it."""
    candidates = _candidates(row)
    if not candidates or len({r.decode_batch for r in candidates}) != 1:
        return None
    return candidates[0]
