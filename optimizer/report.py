"""The planning report: ``report.md`` and ``report.html`` from a ``StudyResult``.

Sections: the summary and notes; what was asked (SLO targets, attainment, budget, objectives);
the workload (source, requests, offered rate, length distributions, rejected requests by
reason); the latency model and its validated error; the picks (why, in numbers, what each
gives up; configuration; launch lines and deployable artifacts); the front (an interactive
plot in the HTML, a table with units); what each cache tier buys, in words; headroom; the
baseline; the run's settings.

What this is not: it runs no simulation; every number comes from the stored trials, the
``ReportContext`` and ``Planning`` — all of which ``kvplan optimize`` stores in the study, so
``kvplan report`` renders the same report from storage alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizer.deploy import deploy_artifacts
from optimizer.launch import launch_commands
from optimizer.picks import ObjectiveInfo
from optimizer.report_html import PLOT_MARKER, md_escape, to_html
from optimizer.report_plot import front_figure_html
from optimizer.report_sections import (
    Planning,
    latency_section,
    md_table,
    planning_sections,
    slo_section,
    workload_section,
)
from optimizer.results import StudyResult, TrialRecord, settings_text
from optimizer.workload_profile import WorkloadProfile
from slo import SloSpec
from slo.units import HOURS_PER_MONTH

__all__ = ["Planning", "ReportContext", "grouped_picks", "render_markdown", "write_report"]

#: The headroom search's cap (load multiplier): ``simulator.capacity``'s 1/8 floor.
HEADROOM_CAP = 8.0


@dataclass(frozen=True, slots=True)
class ReportContext:
    """What the report states besides the trials: the SLO, workload, latency model, settings."""

    slo: SloSpec
    settings: Mapping[str, Any] = field(default_factory=dict)
    """The run's settings (model, sampler, seed, trials, storage, …), shown as a table."""
    workload: WorkloadProfile | None = None
    latency_model: str = "roofline"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON and the study's user attributes)."""
        return {
            "slo": self.slo.model_dump(mode="json"),
            "settings": dict(self.settings),
            "workload": self.workload.to_dict() if self.workload else None,
            "latency_model": self.latency_model,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportContext:
        """The inverse of ``to_dict``."""
        workload = data.get("workload")
        return cls(
            slo=SloSpec.model_validate(data["slo"]),
            settings=dict(data.get("settings") or {}),
            workload=WorkloadProfile.from_dict(workload) if workload else None,
            latency_model=str(data.get("latency_model") or "roofline"),
        )


def grouped_picks(result: StudyResult) -> list[tuple[str, TrialRecord]]:
    """Picks merged per trial: ``("best latency, balanced", trial)`` in first-pick order."""
    groups: dict[int, tuple[list[str], TrialRecord]] = {}
    for pick in result.picks:
        groups.setdefault(pick.trial.number, ([], pick.trial))[0].append(pick.label)
    return [(", ".join(labels), trial) for labels, trial in groups.values()]


def _objectives_text(record: TrialRecord, infos: Mapping[str, ObjectiveInfo]) -> str:
    return "; ".join(
        f"{md_escape(info.label)} {info.text(record.objectives[role])}"
        for role, info in infos.items()
    )


def _pick_sections(result: StudyResult) -> list[str]:
    out: list[str] = []
    why = {p.label: p.why for p in result.picks}
    for label, r in grouped_picks(result):
        usd_h = float(r.metrics.get("usd_per_hour") or float("nan"))
        out.append(f"### {md_escape(label)} — trial {r.number}\n")
        for part in label.split(", "):
            out.append(f"**Why {md_escape(part)}.** {md_escape(why[part])}\n")
        out.append(
            f"**Objectives:** {_objectives_text(r, result.objectives)}. Monthly cost "
            f"≈ USD {usd_h * HOURS_PER_MONTH:,.0f} (USD {usd_h:,.2f}/h × "
            f"{HOURS_PER_MONTH:.0f} h).\n"
        )
        rejected = r.metrics.get("n_rejected")
        if rejected:
            out.append(f"Rejected during simulation: {int(rejected):,} requests.\n")
        rows = [[k, v] for k, v in r.params.items()]
        out.append(md_table(["setting", "value"], rows))
        out.extend(_launch_lines(r.params))
    return out


def _launch_lines(params: Mapping[str, Any]) -> list[str]:
    out = ["#### Launch\n"]
    for engine, cmd in launch_commands(params).items():
        title = f"{engine} (simulated)" if cmd["simulated"] else engine
        out.append(f"{title}:\n\n```bash\n{cmd['command']}\n```\n")
        out.extend(f"- {md_escape(note)}\n" for note in cmd["notes"])
    for engine, art in deploy_artifacts(params).items():
        out.append(f"{engine} container:\n\n```bash\n{art['container']}\n```\n")
        out.append(f"{engine} Kubernetes Deployment:\n\n```yaml\n{art['kubernetes']}```\n")
    return out


def _front_table(result: StudyResult) -> str:
    infos = result.objectives
    headers = ["trial", "configuration", *(i.label for i in infos.values()), "USD/month"]
    rows = [
        [
            r.number,
            settings_text(r.params),
            *(r.objectives[role] for role in infos),
            float(r.metrics.get("usd_per_hour") or float("nan")) * HOURS_PER_MONTH,
        ]
        for r in result.front
    ]
    return md_table(headers, rows)


def _ruled_out(records: Sequence[TrialRecord]) -> str:
    """`` 12 of them were ruled out without simulating (…). 3 were given up part-way (…).``"""
    quick = [r for r in records if not r.feasible and "ttft_ms.p90" not in r.metrics]
    free = [r for r in quick if not r.metrics.get("simulated_requests")]
    out = ""
    if free:
        screened = sum(r.infeasible_reason.startswith("screened") for r in free)
        verb = "was" if len(free) == 1 else "were"
        out += (
            f" {len(free)} of them {verb} ruled out without simulating ({screened} by latency "
            "lower bounds, the rest over budget, not fitting in memory or invalid; reasons in "
            "trials.csv)."
        )
    given_up = len(quick) - len(free)
    if given_up:
        verb = "was" if given_up == 1 else "were"
        out += (
            f" {given_up} {verb} given up part-way, once so many requests had missed a target "
            "that the attainment floor was out of reach (each cost the share of the workload "
            "it simulated)."
        )
    return out


def render_markdown(
    result: StudyResult,
    context: ReportContext,
    planning: Planning | None,
    *,
    title: str,
    records: Sequence[TrialRecord] = (),
) -> str:
    """The whole report as Markdown (``PLOT_MARKER`` where the HTML puts the plot)."""
    md: list[str] = [f"# {md_escape(title)}\n"]
    model = context.settings.get("model", "?")
    md.append(
        f"{md_escape(str(model))} under SLO {md_escape(context.slo.name)}: {result.n_trials} "
        f"trials, {result.n_feasible} feasible, {len(result.front)} on the Pareto front."
        f"{_ruled_out(records)}\n"
    )
    md.extend(f"- {md_escape(note)}\n" for note in result.notes)
    md.extend(slo_section(context.slo, result.tolerance))
    md.extend(workload_section(context.workload))
    md.extend(latency_section(context.latency_model))
    if result.picks:
        md.append("## Recommendations\n")
        md.extend(_pick_sections(result))
        md.append("## The feasible Pareto front\n")
        md.append(f"{PLOT_MARKER}\n")
        md.append("(The interactive plot is in report.html.)\n")
        md.append(_front_table(result))
    else:
        md.append(
            "## No feasible configuration\n\nNo trial met every SLO target and budget. "
            "Widen the space, relax the SLO, or run more trials.\n"
        )
    names = {labels.split(", ")[0]: labels for labels, _ in grouped_picks(result)}
    md.extend(planning_sections(planning or Planning(), HEADROOM_CAP, names))
    md.append("## Settings\n")
    md.append(md_table(["setting", "value"], list(context.settings.items())))
    return "\n".join(md)


def write_report(
    out_dir: Path,
    *,
    title: str,
    result: StudyResult,
    records: Sequence[TrialRecord],
    context: ReportContext,
    planning: Planning | None = None,
) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (interactive plot inlined); return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = render_markdown(result, context, planning, title=title, records=records)
    plot = None
    if result.front:
        budget = context.slo.budget.usd_per_hour
        plot = front_figure_html(result, records, grouped_picks(result), budget_usd_per_hour=budget)
    md_path = out_dir / "report.md"
    md_path.write_text(text, encoding="utf-8")
    html_path = out_dir / "report.html"
    html_path.write_text(to_html(title, text, plot), encoding="utf-8")
    return md_path, html_path
