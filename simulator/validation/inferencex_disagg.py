"""InferenceX's multi-node disaggregated recipes: the decode workers' running caps.

InferenceX runs its multi-node disaggregated benchmarks with Dynamo and TensorRT-LLM workers
(``framework: dynamo-trt``) from the search spaces of ``.github/configs/nvidia-master.yaml``
(SemiAnalysisAI/InferenceX, read whole at commit 0004cf5f2577a1c1007a9bed7cc7d55656519507). Each
search-space point names the users it ran (``conc-list``), the prefill and decode worker counts
with their ``tp`` / ``ep`` / ``dp-attn``, and (but for ``gptoss-fp4-gb200-dynamo-trt``) an
srt-slurm recipe, ``CONFIG_FILE=recipes/trtllm/<gpu>[-<precision>]/<isl>k<osl>k/{stp,mtp}/
[c<users>_]ctx<P>_gen<D>_{tep,dep,tp,dp}<N>_batch<B>_eplb<E>_mtp<K>[_<users>].yaml``.
``simulator/data/inferencex_disagg_recipes.csv`` holds every point of the eleven ``dynamo-trt``
keys there (DeepSeek-R1 FP4/FP8 on B200, B300, GB200, GB300, FP8 on H100 and H200, gpt-oss-120b
FP4 on GB200; no other model has a ``dynamo-trt`` key at that commit): 336 points, one row per
(point, user count), 416 rows, as written (commented-out points skipped). Every recipe name
agrees with its point's worker counts, decode layout and decoding mode, but for two
``gb200-fp4/8k1k/stp/ctx1_gen4_tep8_*`` points whose decode the master file marks
``dp-attn: true``; the table keeps the master file's value (it is what the exports record).

The decode ``max_batch_size`` of a recipe is the ``B`` of its name — so in 11 of the 18 stored
recipe files read (b200-fp8 of ishandhanani/srt-slurm@fe2cd905 and @e71238b3, h200 of
@4893f83e, gb300-fp8 of NVIDIA/srt-slurm; and the eight h100-fp8 ones of @51962c0f read
before). The seven others are all b200-fp8: six DEP8 recipes whose ``B`` is the worker's
total over its 8 attention-DP ranks (``dep8_batch768``: ``max_batch_size: 96``) and one
``tp8_batch1024`` whose cap is 48. The table's ``decode_batch`` is the file's value where a
file was read (``decode_batch_from = recipe_file <repo@commit>``), the name's ``B`` otherwise
(``name``; the unread b200-fp8 DEP caps may thus be 8× loose, i.e. not binding), and for the
gpt-oss points the ``DECODE_MAX_BATCH_SIZE`` the master file sets. TensorRT-LLM's
``max_batch_size`` is per attention-DP rank with ``enable_attention_dp`` (``dep``/``dp``
layouts), per worker otherwise.

The exported rows do not record that cap: the DeepSeek-V3 rows of ``config_id=494`` record
``decode_batch_size`` = users / decode workers (2 at 6 users over 3 workers), an even split of
the load. InferenceX runs more users than decode slots (6 users on three workers of one slot), so
users wait for a slot; simulated with the even split every user had one, and the measured 5-14 s
TTFTs came out 5-25× short (``bench/README.md``).

``decode_cap(row)`` is the cap of the recipe that ran ``row``: the points of the row's model
family, GPU, engine, weight precision (``inferencex.weights_of``), lengths and users whose worker
counts and decode layout agree with what the row records (a decode worker of ``N`` GPUs: ``tp`` ×
``attention_dp`` = N, attention DP > 1 exactly where the point says ``dp-attn``; silicon rows
record a DEP worker as TP1 × DP N, ``silicon/layout.py``; TP N × DP N, the way the 2026-04-06
export wrote InferenceX's aggregated attention-DP rows, ``rules.recorded_layout``, is read as N
GPUs too). At some points InferenceX ran a speculative-decoding (MTP) recipe besides the plain
one and the export does not say which a row is; where the candidates agree on the cap it is
returned (whatever the decoding: MTP is not modelled, for any row), where they differ, None (the
row keeps its recorded batch size; 12 such (key, lengths, users, workers, layout) groups).

``prefill_limits(row)``: the prefill workers' ``max_batch_size`` and ``max_num_tokens`` (per
attention-DP rank) of the matching points, where they are known and agree. They were read in 87
recipe files: the eight H100 ones above, and 79 STP files of connorcarpenter15/srt-slurm@5a156f6
(every gb200-fp4 one; 5-10 of each other GPU and precision). Within a GPU, precision and input
length every file read agrees (b200-fp8 at 8k input aside: one TP8 recipe of 64 / 8320 beside
the DEP ones of 1 / 8320), e.g. gb200 and gb300 16 / 16384 at 1k input, 2 / 16384-16640 at 8k;
b200 / b300 FP4 8 / 10240 and 2 / 16896; h200 8 / 8192 and 2 / 16640. The MTP recipe files read
(four H100, two gb200-fp4) carry the prefill settings of their group's STP ones, so the unread
recipes of a group that agrees, STP or MTP, take its values (``prefill_from`` says which).
Those files also corrected ten rows' decode caps whose name's ``B`` the file contradicts
(e.g. b200-fp8 ``ctx1_gen3_tp8_batch1024_…_32``: 12). Without them a prefill worker keeps the
benchmark rules of ``silicon/disagg.py`` (the recorded batch, 1 in the H100 exports, and the
prompt + 1,500 tokens), which at InferenceX's largest points prefills one prompt per rank per
step where the recipe batches 16: a GB200 FP4 point of 4,301 users then waits 36 s for its
first token instead of 20 s.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from simulator.validation.inferencex import family_of, gpu_key, weights_of
from simulator.validation.rules import harness
from simulator.validation.silicon.disagg import DisaggRow

__all__ = ["DisaggRecipe", "decode_cap", "prefill_limits", "recipes"]

_MASTER = "SemiAnalysisAI/InferenceX .github/configs/nvidia-master.yaml@0004cf5f"


@dataclass(frozen=True, slots=True)
class DisaggRecipe:
    """One (search-space point, user count) of the source (module doc)."""

    #: The master file's key, ``dsr1-fp8-h100-dynamo-trt``.
    key: str
    family: str
    #: The shipped catalog's GPU key (``inferencex.gpu_key``).
    gpu: str
    #: ``fp4`` / ``fp8``: the key's precision, compared with the row's (``inferencex.weights_of``).
    weights: str
    backend: str
    isl: int
    osl: int
    users: int
    spec: Literal["stp", "mtp"]
    prefill_workers: int
    prefill_tp: int
    prefill_ep: int
    prefill_dp_attn: bool
    decode_workers: int
    #: GPUs per decode worker (the master file's ``tp``).
    decode_tp: int
    decode_ep: int
    #: ``dp-attn``: a decode worker is ``decode_tp`` attention-DP ranks of TP1.
    decode_dp_attn: bool
    #: The ``B`` of the recipe's name; None where there is no recipe file (gpt-oss).
    name_batch: int | None
    #: Decode ``max_batch_size``: per attention-DP rank with ``decode_dp_attn``, else per worker.
    decode_batch: int
    #: ``name``, ``recipe_file <repo@commit>`` or ``DECODE_MAX_BATCH_SIZE`` (module doc).
    decode_batch_from: str
    config_file: str
    #: The recipe file's prefill ``max_batch_size`` and ``max_num_tokens`` (per attention-DP
    #: rank with ``prefill_dp_attn``); None where no copy of the file was read.
    prefill_batch: int | None = None
    prefill_tokens: int | None = None
    #: ``recipe_file <repo@commit>``, or ``group <gpu> <input>: N files read agree`` where the
    #: prefill settings of the point's group were read in every file of it read (module doc).
    prefill_from: str = ""

    @property
    def source(self) -> str:
        """Where this point and its cap were read."""
        recipe = self.config_file or "additional-settings"
        return f"{_MASTER} {self.key}; {recipe}; decode_batch from {self.decode_batch_from}"


def _optional(text: str | None) -> int | None:
    """A positive count of the table, or None for an empty cell."""
    if not text:
        return None
    value = int(text)
    if value < 1:
        raise ValueError(f"inferencex_disagg_recipes.csv: expected a positive count, got {text}")
    return value


def _row(raw: dict[str, str]) -> DisaggRecipe:
    spec = raw["spec"]
    if spec not in ("stp", "mtp"):
        raise ValueError(f"inferencex_disagg_recipes.csv: spec {spec!r}")
    number = {k: int(raw[k]) for k in (
        "isl", "osl", "users", "prefill_workers", "prefill_tp", "prefill_ep", "prefill_dp_attn",
        "decode_workers", "decode_tp", "decode_ep", "decode_dp_attn", "decode_batch",
    )}  # fmt: skip
    return DisaggRecipe(
        key=raw["key"], family=raw["family"], gpu=raw["gpu"], weights=raw["weights"],
        backend=raw["backend"], isl=number["isl"], osl=number["osl"], users=number["users"],
        spec="mtp" if spec == "mtp" else "stp",
        prefill_workers=number["prefill_workers"], prefill_tp=number["prefill_tp"],
        prefill_ep=number["prefill_ep"], prefill_dp_attn=bool(number["prefill_dp_attn"]),
        decode_workers=number["decode_workers"], decode_tp=number["decode_tp"],
        decode_ep=number["decode_ep"], decode_dp_attn=bool(number["decode_dp_attn"]),
        name_batch=int(raw["name_batch"]) if raw["name_batch"] else None,
        decode_batch=number["decode_batch"], decode_batch_from=raw["decode_batch_from"],
        config_file=raw["config_file"],
        prefill_batch=_optional(raw.get("prefill_batch")),
        prefill_tokens=_optional(raw.get("prefill_tokens")),
        prefill_from=raw.get("prefill_from") or "",
    )  # fmt: skip


@functools.cache
def recipes() -> tuple[DisaggRecipe, ...]:
    """The packaged table (module doc), read once."""
    text = (resources.files("simulator") / "data" / "inferencex_disagg_recipes.csv").read_text(
        encoding="utf-8"
    )
    return tuple(_row(raw) for raw in csv.DictReader(text.splitlines()))


def _candidates(row: DisaggRow) -> list[DisaggRecipe]:
    """The points that can have run ``row``: same family, GPU, engine, weights, lengths and
    users, and the worker counts and decode layout the row records (module doc)."""
    if harness(row) != "inferencex":
        return []
    family, gpu, weights = family_of(row.model), gpu_key(row.system), weights_of(row)
    decode, ranks = row.decode, max(1, row.decode.attention_dp)
    decode_gpus = decode.tp if decode.tp == ranks else decode.tp * ranks
    decode_dp = ranks > 1
    return [
        r
        for r in recipes()
        if (r.family, r.gpu, r.backend, r.weights) == (family, gpu, row.backend, weights)
        and (r.isl, r.osl, r.users) == (row.isl, row.osl, row.concurrency)
        and (r.prefill_workers, r.decode_workers) == (row.prefill.workers, row.decode.workers)
        and (r.decode_tp, r.decode_dp_attn) == (decode_gpus, decode_dp)
    ]


def decode_cap(row: DisaggRow) -> DisaggRecipe | None:
    """The recipe whose decode ``max_batch_size`` applies to ``row`` (module doc), or None where
    no recipe matches or the matching ones disagree on it."""
    candidates = _candidates(row)
    if not candidates or len({r.decode_batch for r in candidates}) != 1:
        return None
    return candidates[0]


def prefill_limits(row: DisaggRow) -> tuple[int, int] | None:
    """The prefill workers' ``(max_batch_size, max_num_tokens)`` per attention-DP rank of the
    recipe that ran ``row``, where every matching point's recipe file was read and they agree
    and the step holds a whole prompt; else None (the row keeps the benchmark rules of
    ``silicon/disagg.py``)."""
    limits = {(r.prefill_batch, r.prefill_tokens) for r in _candidates(row)}
    if len(limits) != 1:
        return None
    batch, tokens = next(iter(limits))
    if batch is None or tokens is None or tokens < row.isl:
        return None
    return batch, tokens
