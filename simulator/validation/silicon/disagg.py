"""Disaggregated (``mode == disagg``) rows of a silicon benchmark CSV: parse, check, deploy.

A disaggregated row benchmarks a prefill pool and a decode pool serving one model. Its
``batch_size`` / ``tp_size`` are empty; each role has its own columns
``{prefill,decode}_{batch_size, num_workers, tp_size, pp_size, attention_dp_size, moe_tp_size,
moe_ep_size}``. The benchmark's concurrency (users of the closed loop) is the
``silicon_concurrency=N`` entry of ``silicon_data_source``, else ``batch_size`` if filled.
``decode_batch_size × decode_num_workers`` is NOT used as a fallback: it equals the concurrency
in the 8 H100 rows that record both, but for rows without ``silicon_concurrency`` it can be
impossible as a load (Qwen3-32B vLLM, line 680: 2 × 224 users of 4000 + 1000 tokens would
read more KV per decode step than TP4 HBM delivers in the measured 8.7 ms TPOT).

Reading (``parse_disagg_row``): a value that is not the number its column needs raises
``InputError`` naming the file, the line and the column; a row whose file has no per-role
columns, that records no concurrency, or that leaves a role's ``*_num_workers`` empty becomes a
skip reason (a string), never dropped. Other empty cells take the defaults of the aggregated
rows (``pp`` and attention DP 1, MoE split 0 = "not recorded").

Why an empty worker count is a skip and not "one worker": the worker count is the deployment's
size (GPUs, decode slots), and the rows that leave it empty show it varied. In the shipped H100
file the 92 DeepSeek-R1 disaggregated rows leave it empty; 17 groups of them record identical
columns (engine, lengths, users, every per-role cell) with different measurements (SGLang,
1,024 / 8,192 tokens, one user: TPOT 17.0 ms on line 714, 7.7 ms on line 887), and 13 of the
TensorRT-LLM ones are, to every digit, the measurements of lines 2-9, which record 1 prefill
worker of TP1 × attention DP16 and 3 decode workers of TP16 (64 GPUs, not the 32 of "one
worker per role"). Simulating a guessed deployment would score the simulator against another
deployment's numbers.

Deploying (``disagg_problem``, ``disagg_config``): ``pd_mode: disaggregated`` with
``prefill_instances`` / ``decode_instances`` workers of ``prefill_tp`` / ``decode_tp`` GPUs of
``system`` (a TP wider than one server is modelled with the all-reduce over the network).
A role with attention DP is a worker of ``tp × attention_dp`` GPUs (``layout.py``; the
DeepSeek-V3 TensorRT-LLM rows' prefill worker: TP1 × DP16, experts EP16). Not expressible, so
skipped with the reason: pipeline parallelism (``layout.PP_ROW_REASON``) and an MoE split with
``moe_tp × moe_ep`` ≠ the worker's GPUs (the aggregated rows' rule: 0 counts as 1). Prefill and
decode pools may split their experts differently (each pool's ``ep``; the deployment's is the
decode pool's). The recorded batch sizes are per attention-DP rank, as the engine limits are
(``simulator/latency/data_parallel.py``).
Engine limits per pool (``role_limits``, aiconfigurator's benchmark rules): each role's
recorded batch size caps the running requests of its workers (a prefill cap of 1 serialises
prefills), a prefill step holds the prompt + 1,500 tokens and a decode step one token per
running request; a role without a recorded batch size keeps its backend preset's caps.

What this module is not: precision rules live in ``../validate.py`` (the caller passes
the weight and KV precisions it derives for every row), and it runs no simulation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hardware.schema import Catalog
from simulator.config import ServingConfig
from simulator.validation.silicon.layout import PP_ROW_REASON, worker_layout
from simulator.validation.silicon.rows import (
    ROLE_SUFFIXES,
    MeasuredRow,
    identity_fields,
    parse_number,
    source_concurrency,
)
from slo.inputfile import InputError, validate

__all__ = [
    "ROLE_COLUMNS",
    "DisaggRow",
    "PoolLayout",
    "disagg_config",
    "disagg_problem",
    "parse_disagg_row",
    "role_limits",
]

Role = Literal["prefill", "decode"]
_ROLES: tuple[Role, Role] = ("prefill", "decode")

#: Per-role column suffixes (``prefill_tp_size``, ``decode_tp_size``, ...).
ROLE_COLUMNS = ROLE_SUFFIXES


@dataclass(frozen=True, slots=True)
class PoolLayout:
    """One role's deployment as the CSV records it (counts; not yet checked for the simulator)."""

    workers: int
    """Engine instances of this role."""
    tp: int
    """Tensor parallelism: GPUs per instance."""
    pp: int
    attention_dp: int
    moe_tp: int
    """MoE tensor parallelism; 0 = not recorded."""
    moe_ep: int
    """MoE expert parallelism; 0 = not recorded."""
    batch_size: int | None
    """The engine's cap on running requests per attention-DP rank; None = not recorded
    (``role_limits`` applies it where no recipe of the benchmark is known)."""

    def label(self) -> str:
        """``'3×TP16'``, ``'1×TP1×DP16'`` with attention DP (workers × TP per rank × ranks)."""
        dp = f"×DP{self.attention_dp}" if self.attention_dp > 1 else ""
        return f"{self.workers}×TP{self.tp}{dp}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "workers": self.workers,
            "tp": self.tp,
            "pp": self.pp,
            "attention_dp": self.attention_dp,
            "moe_tp": self.moe_tp,
            "moe_ep": self.moe_ep,
            "batch_size": self.batch_size,
        }


@dataclass(frozen=True, slots=True)
class DisaggRow(MeasuredRow):
    """One measured disaggregated benchmark (numbers parsed and checked); ``concurrency`` is
    read as the module docstring says."""

    concurrency_from: str
    """Where ``concurrency`` was read: ``silicon_concurrency`` or ``batch_size``."""
    prefill: PoolLayout
    decode: PoolLayout

    @property
    def mode(self) -> str:
        """``disagg`` (``SiliconRow.mode`` is ``agg``)."""
        return "disagg"

    @property
    def tp(self) -> str:
        """A table's TP cell: ``'2×TP1 + 1×TP4'`` (prefill workers × TP + decode); the two pools
        differ, so this is a label, not a GPU count (see ``prefill`` / ``decode``)."""
        return f"{self.prefill.label()} + {self.decode.label()}"

    def describe(self) -> dict[str, Any]:
        """The identifying fields, JSON-ready (the keys of ``SiliconRow.describe`` plus the
        pools; ``tp`` is None because each pool has its own)."""
        return {
            **MeasuredRow.describe(self),
            "concurrency_from": self.concurrency_from,
            "tp": None,
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
        }


# ----- reading ----------------------------------------------------------------------------------
def parse_disagg_row(
    path: Path, line: int, record: Mapping[str, str | None], header: Sequence[str]
) -> DisaggRow | str:
    """The checked row of ``record`` (line ``line`` of ``path``), or why it cannot be one.

    Raises ``InputError`` (file, line, column) for a value that is not the number its column
    needs, including a malformed ``silicon_concurrency``. Returns a reason string when the file
    has no per-role columns, a role's worker count is empty, or the row records no concurrency.
    """
    missing = [f"{role}_{c}" for role in _ROLES for c in ("num_workers", "tp_size")]
    missing = [c for c in missing if c not in header]
    if missing:
        return f"mode 'disagg' but the file has no per-role columns ({', '.join(missing)})"
    unsized = [
        f"{role}_num_workers" for role in _ROLES if _empty(record.get(f"{role}_num_workers"))
    ]
    if unsized:
        return (
            f"worker count not recorded ({', '.join(unsized)} empty): the deployment's size is "
            "not determined"
        )
    users = _concurrency(path, line, record)
    if users is None:
        return (
            "benchmark concurrency not recorded (no silicon_concurrency=N in "
            "silicon_data_source and batch_size is empty; decode_batch_size is an engine cap, "
            "not the load)"
        )

    def positive(column: str, *, integer: bool) -> float:
        return parse_number(path, line, column, record.get(column), integer=integer)

    return DisaggRow(
        **identity_fields(line, record),
        isl=int(positive("isl", integer=True)),
        osl=int(positive("osl", integer=True)),
        concurrency=users[0],
        concurrency_from=users[1],
        measured_ttft_ms=positive("silicon_ttft_ms", integer=False),
        measured_tpot_ms=positive("silicon_tpot_ms", integer=False),
        prefill=_pool(path, line, record, "prefill"),
        decode=_pool(path, line, record, "decode"),
    )


def _concurrency(path: Path, line: int, record: Mapping[str, str | None]) -> tuple[int, str] | None:
    """Users of the benchmark and the column they came from (module doc), or None."""
    recorded = source_concurrency(path, line, record)
    if recorded is not None:
        return recorded, "silicon_concurrency"
    if _empty(record.get("batch_size")):
        return None
    users = parse_number(path, line, "batch_size", record.get("batch_size"), integer=True)
    return int(users), "batch_size"


def _empty(text: str | None) -> bool:
    value = (text or "").strip().lower()
    return not value or value == "nan"


def _pool(path: Path, line: int, record: Mapping[str, str | None], role: Role) -> PoolLayout:
    """One role's columns; empty cells take their defaults (module doc)."""

    def number(suffix: str) -> int:
        column = f"{role}_{suffix}"
        return int(parse_number(path, line, column, record.get(column), integer=True))

    def count(suffix: str, default: int) -> int:
        """The column's count, ``default`` when empty; 0 is allowed where ``default`` is 0
        (an MoE split that was not recorded)."""
        text = record.get(f"{role}_{suffix}")
        if _empty(text):
            return default
        if default == 0 and (text or "").strip() in ("0", "0.0"):
            return 0
        return number(suffix)

    return PoolLayout(
        workers=number("num_workers"),  # required (parse_disagg_row skips a row without it)
        tp=number("tp_size"),  # required, as tp_size is for an aggregated row
        pp=count("pp_size", 1),
        attention_dp=count("attention_dp_size", 1),
        moe_tp=count("moe_tp_size", 0),
        moe_ep=count("moe_ep_size", 0),
        batch_size=None if _empty(record.get(f"{role}_batch_size")) else number("batch_size"),
    )


# ----- deploying --------------------------------------------------------------------------------
def disagg_problem(row: DisaggRow) -> str | None:
    """Why the pool layouts of ``row`` cannot be simulated (catalog names aside), if so."""
    for role in _ROLES:
        pool: PoolLayout = getattr(row, role)
        if pool.pp > 1:
            return f"pipeline parallelism ({role}_pp_size={pool.pp}): {PP_ROW_REASON}"
    return None


def _layouts(row: DisaggRow, moe: bool) -> dict[str, dict[str, Any]] | str:
    """Each pool's ``{"tp", "attention_dp", "ep"}`` (``layout.worker_layout``), or why they
    cannot be expressed. The pools may split their experts differently (``PoolConfig.ep``)."""
    layouts: dict[str, dict[str, Any]] = {}
    for role in _ROLES:
        pool: PoolLayout = getattr(row, role)
        layout = worker_layout(
            pool.tp, pool.attention_dp, pool.moe_tp, pool.moe_ep, moe=moe, role=f"{role}_"
        )
        if isinstance(layout, str):
            return layout
        layouts[role] = layout
    return layouts


#: aiconfigurator's benchmark rules: a prefill worker's step budget is the prompt + 1,500
#: tokens (TensorRT-LLM / vLLM ``max_num_tokens``, SGLang ``max_prefill_tokens``).
_PREFILL_HEADROOM = 1500


def role_limits(
    row: DisaggRow,
    decode_cap: int | None = None,
    prefill_recipe: tuple[int, int] | None = None,
) -> dict[str, dict[str, int]]:
    """Per-pool engine limits of ``row``'s deployment (``PoolConfig`` fields by pool): each
    role's recorded batch size caps its running requests; a prefill step holds the prompt +
    1,500 tokens; a decode step (rule: ``max_num_tokens = max_batch_size``) one token per
    running request. Where the benchmark's own recipe is known (``inferencex_disagg.py``) its
    decode cap (``decode_cap``) and its prefill ``(max_batch_size, max_num_tokens)``
    (``prefill_recipe``) replace the recorded ones (all per attention-DP rank)."""
    prefill_limits = {"max_batched_tokens": row.isl + _PREFILL_HEADROOM}
    decode_limits: dict[str, int] = {}
    prefill, decode = row.prefill.batch_size, decode_cap or row.decode.batch_size
    if prefill_recipe is not None:
        prefill, prefill_limits["max_batched_tokens"] = prefill_recipe
    if prefill:
        prefill_limits["max_running_requests"] = prefill
    if decode:
        decode_limits["max_running_requests"] = decode
        decode_limits["max_batched_tokens"] = decode
    return {"prefill": prefill_limits, "decode": decode_limits}


def disagg_config(
    row: DisaggRow,
    catalog: Catalog,
    *,
    latency_model: str,
    weight_precision: str | None,
    kv_precision: str,
    engine_limits: bool = True,
    decode_cap: int | None = None,
    prefill_recipe: tuple[int, int] | None = None,
) -> ServingConfig | str:
    """The PD deployment ``row`` measured, or the reason it cannot be expressed (module doc).

    ``weight_precision`` / ``kv_precision`` are the simulator's names, derived by the caller
    with the aggregated rows' rules; ``engine_limits`` applies ``role_limits`` (else each pool
    keeps its backend preset's), with ``decode_cap`` and ``prefill_recipe`` (per attention-DP
    rank) in place of the recorded limits where given.
    """
    problem = disagg_problem(row)
    if problem:
        return problem
    try:
        model = catalog.model(row.model)
        gpu = catalog.gpu(row.system)
    except InputError as err:
        return str(err).split(";", 1)[0]  # "unknown model 'x' (did you mean ...)"
    layouts = _layouts(row, model.is_moe)
    if isinstance(layouts, str):
        return layouts
    # The benchmark ran it, so a TP wider than one server is real: model it (inter-node
    # all-reduce) rather than refuse it.
    multi_node = any(layouts[role]["tp"] > gpu.gpus_per_node for role in _ROLES)
    fields = {
        "model": model.name,
        "gpu": gpu.name,
        "tp": layouts["decode"]["tp"],
        "ep": layouts["decode"]["ep"],
        "weight_precision": weight_precision,
        "kv_precision": kv_precision,
        "backend": row.backend,
        "latency_model": latency_model,
        "pd_mode": "disaggregated",
        "allow_multi_node": multi_node,
    }
    limits = (
        role_limits(row, decode_cap, prefill_recipe)
        if engine_limits
        else {"prefill": {}, "decode": {}}
    )
    for role in _ROLES:
        shape, layout = getattr(row, role), layouts[role]
        fields[role] = {
            "instances": shape.workers,
            "tp": layout["tp"],
            "attention_dp": layout["attention_dp"],
            **({} if layout["ep"] is None else {"ep": layout["ep"]}),
            **limits[role],
        }
    try:
        return validate(ServingConfig, fields, f"row {row.id}")
    except InputError as err:
        return f"cannot express the deployment: {err}"
