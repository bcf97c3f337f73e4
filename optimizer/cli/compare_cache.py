"""``kvplan simulate --compare-cache idle,device,host,disk``: HiSim's cache case study as one run.

The same workload and deployment, simulated once per cache configuration (any subset, in this
order):

- ``idle``: prefix caching off, no L2, no L3 (every prompt computed in full);
- ``device``: prefix caching on, HBM only (no L2, no L3);
- ``host``: HBM + host DRAM: the config's ``l2_dram_gib``, else the catalog DRAM tier's
  ``default_capacity_gib`` (256 GiB shipped);
- ``disk``: HBM + DRAM (as ``host``) + SSD: the config's L3 tier, else the catalog's first local
  SSD tier (``nvme_4tib`` shipped) at its default capacity.

Every other field (model, GPU, TP, instances, engine knobs, policies, router) is the config's,
and every run uses the same seed. Output: one row per configuration with TTFT/TPOT, throughput
and per-tier hit ratios (a rich table, or ``--json``: ``{"compare_cache": [row, ...]}``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from rich import box
from rich.table import Table

from hardware.schema import Catalog
from optimizer.cli._output import console, print_json
from simulator.api import SimResult, WorkloadBuilder, simulate
from simulator.config import ServingConfig
from slo.inputfile import InputError, validate

__all__ = [
    "CACHE_SETUPS",
    "CacheRow",
    "cache_configs",
    "compare_cache",
    "parse_setups",
    "print_comparison",
]

#: The cache configurations, in the order they are always run and printed.
CACHE_SETUPS: tuple[str, ...] = ("idle", "device", "host", "disk")


def parse_setups(spec: str) -> tuple[str, ...]:
    """``"idle,host"`` → the named setups in ``CACHE_SETUPS`` order; one-line ``InputError``
    for an unknown or repeated name, or an empty list."""
    names = [part.strip().lower() for part in spec.split(",")]
    for name in names:
        if name not in CACHE_SETUPS:
            raise InputError(
                f"--compare-cache: unknown setup {name!r}; expected a comma-separated subset "
                f"of {','.join(CACHE_SETUPS)}"
            )
    if len(set(names)) != len(names):
        raise InputError(f"--compare-cache {spec!r}: a setup is named twice")
    return tuple(name for name in CACHE_SETUPS if name in names)


def _default_l3_tier(catalog: Catalog) -> str:
    """The catalog's first local SSD tier (the 'disk' setup when the config has no L3)."""
    for name, tier in catalog.storage.items():
        if tier.kind == "ssd":
            return name
    raise InputError("--compare-cache disk: the catalog has no local SSD storage tier (kind: ssd)")


def _default_l2_gib(catalog: Catalog) -> float:
    """The catalog DRAM tier's default size (the 'host' setup when the config has no L2)."""
    for tier in catalog.storage.values():
        if tier.kind == "dram":
            return float(tier.default_capacity_gib)
    raise InputError("--compare-cache host: the catalog has no DRAM storage tier (kind: dram)")


def cache_configs(
    serving: ServingConfig, setups: tuple[str, ...], catalog: Catalog
) -> dict[str, ServingConfig]:
    """``serving`` rewritten for each setup (module docstring), in ``setups`` order."""
    base = serving.model_dump()
    l2 = serving.l2_dram_gib if serving.l2_dram_gib > 0 else None
    no_tiers = {"l2_dram_gib": 0.0, "l3_tier": None, "l3_capacity_gib": None}
    # Swap preemption needs an L2; without one the engine recomputes, as engines do.
    no_swap = {"preemption": "recompute"}
    out: dict[str, ServingConfig] = {}
    for name in setups:
        if name == "idle":
            fields: dict[str, Any] = {**no_tiers, **no_swap, "prefix_caching": False}
        elif name == "device":
            fields = {**no_tiers, **no_swap, "prefix_caching": True}
        else:
            fields = {
                "prefix_caching": True,
                "l2_dram_gib": l2 if l2 is not None else _default_l2_gib(catalog),
                "l3_tier": None,
                "l3_capacity_gib": None,
            }
            if name == "disk":
                fields["l3_tier"] = serving.l3_tier or _default_l3_tier(catalog)
                fields["l3_capacity_gib"] = serving.l3_capacity_gib
        out[name] = validate(ServingConfig, {**base, **fields}, f"--compare-cache {name}")
    return out


@dataclass(frozen=True)
class CacheRow:
    """One setup's outcome (latencies in ms, throughput per second, hit ratios in [0, 1])."""

    setup: str
    prefix_caching: bool
    l2_dram_gib: float
    l3_tier: str | None
    feasible: bool
    reason: str
    finished: int = 0
    rejected: int = 0
    ttft_mean_ms: float = float("nan")
    ttft_p90_ms: float = float("nan")
    tpot_mean_ms: float = float("nan")
    tpot_p90_ms: float = float("nan")
    requests_per_s: float = 0.0
    output_tokens_per_s: float = 0.0
    hit_l1: float = 0.0
    hit_l2: float = 0.0
    hit_l3: float = 0.0
    prefill_saved: float = 0.0
    """Share of prompt tokens not computed (``Summary.prefill_tokens_saved_ratio``)."""


def _row(name: str, result: SimResult) -> CacheRow:
    config = result.config
    head = CacheRow(
        name,
        bool(config.prefix_caching),
        config.l2_dram_gib,
        config.l3_tier,
        result.feasible,
        result.reason,
    )
    s = result.summary
    if s is None:
        return head
    return CacheRow(
        **{
            **asdict(head),
            "finished": s.n_requests,
            "rejected": s.n_rejected,
            "ttft_mean_ms": s.ttft_ms.mean,
            "ttft_p90_ms": s.ttft_ms.p90,
            "tpot_mean_ms": s.tpot_ms.mean,
            "tpot_p90_ms": s.tpot_ms.p90,
            "requests_per_s": s.requests_per_s,
            "output_tokens_per_s": s.output_tokens_per_s,
            "hit_l1": s.hit_ratio.get("l1", 0.0),
            "hit_l2": s.hit_ratio.get("l2", 0.0),
            "hit_l3": s.hit_ratio.get("l3", 0.0),
            "prefill_saved": s.prefill_tokens_saved_ratio,
        }
    )


def compare_cache(
    serving: ServingConfig,
    builder: WorkloadBuilder,
    setups: tuple[str, ...],
    *,
    catalog: Catalog,
    seed: int,
    drop: bool = True,
) -> list[CacheRow]:
    """Simulate ``builder`` on each setup of ``serving`` with the same seed, in order
    (``drop``: remove requests longer than the model's context, as ``simulate`` does)."""
    configs = cache_configs(serving, setups, catalog)
    return [
        _row(
            name,
            simulate(
                config,
                builder,
                seed=seed,
                catalog=catalog,
                drop_overlong_requests=drop,
            ),
        )
        for name, config in configs.items()
    ]


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"  # NaN: no sample


def print_comparison(rows: list[CacheRow], workload: dict[str, Any], *, json_out: bool) -> None:
    """The rows as ``{"compare_cache": [...], "workload": {...}}`` JSON or two rich tables
    (latency and throughput; what each tier served)."""
    if json_out:
        print_json({"compare_cache": [asdict(row) for row in rows], "workload": workload})
        return
    # Two tables, so each is readable at 80 columns: figures never wrap (two-line headers
    # keep them narrow), names fold instead.
    speed = Table(title="cache setups: same workload, deployment and seed", box=box.SIMPLE_HEAD)
    tiers = Table(title="what each tier served", box=box.SIMPLE_HEAD)
    for table in (speed, tiers):
        table.add_column("setup", overflow="fold")
    tiers.add_column("KV tiers", overflow="fold")
    for column in ("done", "TTFT\nmean", "TTFT\np90", "TPOT\nmean", "TPOT\np90", "out\ntok/s"):
        speed.add_column(column, justify="right", no_wrap=True)
    for column in ("hit L1", "hit L2", "hit L3"):
        tiers.add_column(column, justify="right", no_wrap=True)
    infeasible: list[str] = []
    for row in rows:
        if not row.prefix_caching:
            kv = "no prefix caching"
        else:
            kv = "HBM" + (f"+DRAM {row.l2_dram_gib:g}G" if row.l2_dram_gib else "")
            kv += f"+{row.l3_tier}" if row.l3_tier else ""
        if not row.feasible:  # its reason below the tables: a long cell would widen a column
            speed.add_row(row.setup, *["-"] * 6)
            tiers.add_row(row.setup, kv, *["-"] * 3)
            infeasible.append(f"{row.setup}: infeasible: {row.reason}")
            continue
        speed.add_row(
            row.setup, str(row.finished), _fmt(row.ttft_mean_ms), _fmt(row.ttft_p90_ms),
            _fmt(row.tpot_mean_ms, 2), _fmt(row.tpot_p90_ms, 2),
            _fmt(row.output_tokens_per_s, 0),
        )  # fmt: skip
        tiers.add_row(row.setup, kv, _fmt(row.hit_l1, 3), _fmt(row.hit_l2, 3), _fmt(row.hit_l3, 3))
    console.print(speed)
    console.print(tiers)
    for line in infeasible:
        console.print(line, markup=False, highlight=False)
    console.print("latencies in ms; hit = share of prompt tokens served from that tier")
