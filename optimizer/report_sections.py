"""The report's context sections: what was asked (SLO), the workload, the latency model, and
the planning results in words (tier verdicts, headroom, the baseline).

Each function returns Markdown lines; every interpolated name goes through ``md_escape``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optimizer.report_html import md_escape
from optimizer.results import settings_text
from optimizer.workload_profile import WorkloadProfile
from slo import SloSpec

__all__ = [
    "LATENCY_ERRORS",
    "Planning",
    "headroom_text",
    "latency_section",
    "md_table",
    "planning_sections",
    "slo_section",
    "source_text",
    "tier_verdict",
    "workload_section",
]

#: Validated error of each latency model against measured serving benchmarks: TTFT and TPOT
#: MAPE (%) over the 579 dense-model H100 rows of ../shared/data/silicon (vLLM, SGLang,
#: TensorRT-LLM; Qwen3-32B, Llama-3.1-8B/70B), from ``python bench/validate_fidelity.py
#: --latency table,roofline,calibrated --jobs 2`` as recorded in bench/README.md; all four
#: re-measured 2026-12-07 (579 rows, 0 skipped, 5 rounds, start together; ``auto`` is the table
#: on every H100 row) after that day's changes (TensorRT-LLM's first-token lag and eager
#: context steps, aiconfigurator's FP8 KV cache, vLLM's per-request CPU time and its async
#: scheduling, TensorRT-LLM's front end taking requests in ahead of its streams), and again
#: 2026-12-07 evening after the collectives' memory (``collective_gib``) and SGLang's start-up
#: memory (``startup_gib``) entered the KV pools.
LATENCY_ERRORS: dict[str, tuple[float, float]] = {
    "auto": (23.3, 7.1),
    "table": (23.3, 7.1),
    "roofline": (23.6, 8.9),
    "calibrated": (23.6, 7.6),
}


@dataclass(frozen=True, slots=True)
class Planning:
    """Cost-benefit figures measured for the picks by extra simulations (all optional)."""

    tier_value: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Pick label -> rows ``{"variant", "meets SLO", "instances", "GPUs", "USD/h", ...}``."""
    headroom: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """Pick label -> ``{"load_scale": k, "requests_per_s": y, "at_limit": bool, ...}``."""
    baseline: dict[str, Any] | None = None
    """``{"params": ..., "metrics": ..., "feasible": bool, "comparison": {...}}``."""
    kv_margin: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """Pick label -> ``{"kv_capacity_scale", "meets SLO", "TTFT p90 ms", "TTFT p90 ratio",
    "extra instances"}`` (``planning._kv_margin``; extra instances None: none restore it)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON and the study's user attributes)."""
        return {
            "tier_value": dict(self.tier_value),
            "headroom": dict(self.headroom),
            "baseline": self.baseline,
            "kv_margin": dict(self.kv_margin),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Planning:
        """The inverse of ``to_dict``."""
        return cls(
            tier_value=dict(data.get("tier_value") or {}),
            headroom=dict(data.get("headroom") or {}),
            baseline=data.get("baseline"),
            kv_margin=dict(data.get("kv_margin") or {}),
        )


def fmt(value: Any) -> str:
    """A table cell: thousands separators, 3 significant digits below 1000, '–' for none."""
    if value is None or (isinstance(value, float) and value != value):  # noqa: PLR0124  (NaN)
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return md_escape(str(value))


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-style Markdown table (cells formatted by ``fmt``)."""
    lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |"]
    lines.append("|" + "---|" * len(headers))
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


#: A budget limit in words, by ``Budget`` field name.
_BUDGET_WORDS = {
    "usd_per_hour": "at most USD {:,.2f}/h",
    "usd_per_month": "at most USD {:,.0f}/month",
    "max_gpus": "at most {:,.0f} GPUs",
}


def slo_section(spec: SloSpec, tolerance: float) -> list[str]:
    """Targets, attainment, budget and objectives, as the SLO file states them."""
    out = [f"## What was asked: SLO {md_escape(spec.name)}\n"]
    rows = [
        [metric, stat, f"{limit:,.0f} ms"]
        for metric, stat, limit in sorted(spec.target_items(), key=lambda t: (t[0], t[1]))
    ]
    if rows:
        out.append(md_table(["metric", "statistic", "limit"], rows))
    if spec.attainment is not None:
        out.append(
            f"At least {spec.attainment:.0%} of requests must meet every target (each "
            "request against the tightest limit of each metric).\n"
        )
    limits = spec.budget.limits()
    if limits:
        budget = ", ".join(_BUDGET_WORDS[k].format(v) for k, v in limits.items())
        out.append(f"Budget: {budget} (a configuration over it is infeasible).\n")
    objectives = [
        [role, o.metric, spec.objectives.directions[role]]
        for role, o in spec.objectives.by_role().items()
    ]
    out.append(md_table(["objective", "metric", "direction"], objectives))
    out.append(
        f"Picks take the cheapest configuration within {tolerance:.0%} of the best on each "
        "objective (`--tolerance`).\n"
    )
    return out


def _lengths_row(name: str, stats: Any) -> list[Any]:
    return [name, stats.mean, stats.p50, stats.p90, stats.p99, stats.max]


def _setting(value: Any) -> str:
    """A workload setting as written: ``1.0``, ``poisson``, nested ones as ``(key=value, …)``
    (not Python's ``{'key': 'value'}``)."""
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k}={_setting(v)}" for k, v in value.items() if v is not None)
        return f"({inner})"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_setting(v) for v in value) + "]"
    return str(value)


def source_text(source: Mapping[str, Any]) -> str:
    """``kind=trace, path=…, time_scale=1.0, …``: the workload's settings, its kind and file
    first (``optimizer.workloads.describe_workload``'s mapping)."""
    first = [k for k in ("kind", "path") if k in source]
    keys = first + [k for k in source if k not in first]
    return ", ".join(f"{k}={_setting(source[k])}" for k in keys if source[k] is not None)


def workload_section(profile: WorkloadProfile | None) -> list[str]:
    """Source, requests, offered rate, length distributions and overlong requests."""
    if profile is None:
        return []
    out = ["## Workload\n", f"Source: {md_escape(source_text(profile.source))}.\n"]
    first = "first requests of each user, " if profile.closed_loop else ""
    rate = (
        f", offered load {profile.requests_per_s:,.2f} requests/s over {profile.span_s:,.0f} s"
        if profile.requests_per_s
        else ""
    )
    out.append(f"{profile.n_requests:,} requests ({first}as every trial replays them){rate}.\n")
    rows = [
        _lengths_row("prompt tokens", profile.prompt_tokens),
        _lengths_row("output tokens", profile.output_tokens),
    ]
    out.append(md_table(["length", "mean", "p50", "p90", "p99", "max"], rows))
    out.append("Rejected requests by reason:\n")
    share = profile.n_overlong / profile.n_requests if profile.n_requests else 0.0
    action = {
        "drop": "dropped before simulating, not counted as SLO misses (`--overlong drop`)",
        "count-as-miss": "counted as SLO misses (`--overlong count-as-miss`)",
        "reject": "none present (`--overlong reject`)",
    }[profile.overlong_policy]
    out.append(
        f"- longer than the model's {profile.max_context_tokens:,}-token context: "
        f"{profile.n_overlong:,} ({share:.1%}; longest {profile.longest_tokens:,} tokens of "
        f"prompt + output), {action}\n"
        "- rejected by a configuration during simulation (a prompt larger than its whole L1 "
        "cache or step budget): per pick, below\n"
    )
    return out


def latency_section(model: str) -> list[str]:
    """The latency model and its validated error."""
    name = model.split(":", 1)[0]
    what = (
        " (the measured kernel table of the GPU and engine where one exists, else the roofline)"
        if name == "auto"
        else ""
    )
    out = ["## Latency model\n", f"Step times come from the `{model}` model{what}.\n"]
    errors = LATENCY_ERRORS.get(name)
    if errors is not None:
        out.append(
            f"Validated against 579 measured H100 serving benchmarks (dense models; vLLM, "
            f"SGLang, TensorRT-LLM): mean TTFT error {errors[0]:.1f}%, mean TPOT error "
            f"{errors[1]:.1f}% (MAPE; `bench/validate_fidelity.py`, bench/README.md). Read "
            "latency differences between picks smaller than that as ties.\n"
        )
    else:
        out.append("This model has no recorded validation against measured benchmarks.\n")
    return out


def tier_verdict(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One sentence per variant: ``drop L3: saves USD 7.60/h, TTFT p90 +3%``."""
    if not rows:
        return []
    base = rows[0]
    if len(rows) == 1:
        return ["nothing to drop: the pick caches in GPU memory (L1) only, with no L2 or L3 tier"]
    out = []
    for row in rows[1:]:
        tier = str(row["variant"]).removeprefix("without ")
        extra = int(row["instances"]) - int(base["instances"])
        usd = float(row["USD/h"] or 0) - float(base["USD/h"] or 0)
        if not row["meets SLO"]:
            out.append(f"keep {tier}: without it no deployment of up to +8 instances meets the SLO")
        elif extra > 0:
            out.append(
                f"keep {tier}: without it the pick needs {extra} more instance"
                f"{'s' if extra > 1 else ''} to meet the SLO (+USD {usd:,.2f}/h)"
            )
        else:
            latency = ""
            if base.get("TTFT p90 ms") and row.get("TTFT p90 ms"):
                change = float(row["TTFT p90 ms"]) / float(base["TTFT p90 ms"]) - 1
                latency = f", TTFT p90 {change:+.0%}"
            verb = f"saves USD {-usd:,.2f}/h" if usd < 0 else f"costs USD {usd:,.2f}/h more"
            out.append(f"drop {tier}: {verb}{latency}, still meets the SLO")
    return out


def headroom_text(entry: Mapping[str, Any], cap: float) -> str:
    """``1.6×``, ``≥ 8× (search cap)``, or why there is no figure."""
    scale = entry.get("load_scale")
    if scale is None:
        return md_escape(str(entry.get("note") or "misses the SLO at the nominal load"))
    if entry.get("at_limit"):
        return f"≥ {cap:g}× (search cap)"
    return f"{float(scale):.2f}×"


def planning_sections(
    planning: Planning, cap: float, names: Mapping[str, str] | None = None
) -> list[str]:
    """Tier value with verdicts, headroom, and the baseline comparison.

    ``names``: a pick's display name by the label the planning keys it under (its first:
    ``best cost`` → ``best cost, balanced`` when one trial is both picks), as the
    Recommendations section heads it.
    """
    shown = dict(names or {})

    def name(label: str) -> str:
        return shown.get(label, label)

    out: list[str] = []
    if planning.tier_value:
        out.append("## What each cache tier buys\n")
        out.append(
            "Each pick re-simulated with a tier removed (same workload and seed); instances "
            "are added until the SLO holds again, so the difference is what the tier saves.\n"
        )
        for label, rows in planning.tier_value.items():
            out.append(f"### {md_escape(name(label))}\n")
            out.extend(f"- {md_escape(v)}\n" for v in tier_verdict(rows))
            headers = list(rows[0]) if rows else []
            out.append("\n" + md_table(headers, [[row[h] for h in headers] for row in rows]))
    if planning.headroom:
        out.append("## Headroom\n")
        cells = [
            [name(label), headroom_text(h, cap), h.get("requests_per_s")]
            for label, h in planning.headroom.items()
        ]
        out.append(md_table(["pick", "load growth that still meets the SLO", "requests/s"], cells))
    if planning.kv_margin:
        out.extend(_kv_margin_section(planning.kv_margin, name))
    if planning.baseline is not None:
        out.extend(_baseline_section(planning.baseline))
    return out


def _kv_margin_section(
    margins: Mapping[str, Mapping[str, Any]], name: Callable[[str], str]
) -> list[str]:
    """Each pick with its KV pool below the rule's: does it still meet the SLO?"""
    scale = next(iter(margins.values())).get("kv_capacity_scale", 0.9)
    out = [
        "## If the engine holds less KV cache than the memory rule says\n",
        f"Each pick re-simulated with its KV pool at {float(scale):.0%} of the memory rule's "
        "(engines size their pools from what they measure at start-up; several capacity-bound "
        "H100 benchmark rows behave as if their pool were 5-15% below the rule's). A pick that "
        "misses the SLO "
        "here sits on the KV-capacity edge, where predictions are least reliable: plan its "
        "extra instances or prefer a neighbour with room.\n",
    ]
    cells = []
    for label, entry in margins.items():
        extra = entry.get("extra instances")
        if entry.get("meets SLO"):
            restore = "–"
        else:
            restore = "none within +8" if extra is None else f"+{extra}"
        ratio = entry.get("TTFT p90 ratio")
        cells.append(
            [
                name(label),
                "yes" if entry.get("meets SLO") else "no",
                "–" if ratio is None else f"x{float(ratio):.2f}",
                restore,
            ]
        )
    out.append(md_table(["pick", "meets the SLO", "TTFT p90", "instances to restore it"], cells))
    return out


def _baseline_section(base: Mapping[str, Any]) -> list[str]:
    params = settings_text(base.get("params", {}))
    out = ["## Against your baseline\n", f"Baseline: {md_escape(params)}.\n"]
    if not base.get("feasible"):
        out.append(f"It does not meet the SLO and budget: {md_escape(base.get('reason') or '')}.\n")
    rows = [[k, v] for k, v in base.get("comparison", {}).items()]
    if rows:
        out.append(md_table(["pick", "saving / trade-off"], rows))
    return out
