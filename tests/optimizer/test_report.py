"""The planning report: sections present, Markdown rendered (no literal emphasis), the plot there.

Built from hand-made trial records and planning rows, so every sentence checked here comes from
known numbers. ``test_report_in_headless_chromium`` renders the HTML in a real browser when
Chromium is installed.
"""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from optimizer.picks import objective_infos
from optimizer.report import Planning, ReportContext, write_report
from optimizer.report_plot import PLOT_ID
from optimizer.report_sections import LATENCY_ERRORS, source_text, tier_verdict
from optimizer.results import TrialRecord, summarise
from optimizer.workload_profile import LengthStats, WorkloadProfile
from slo import SloSpec

DIRECTIONS = {"latency": "minimize", "throughput": "maximize", "cost": "minimize"}
SPEC = SloSpec.model_validate(
    {
        "name": "chat",
        "targets": {"ttft_ms": {"p90": 4000}},
        "attainment": 0.9,
        "budget": {"usd_per_hour": 150},
    }
)


def _rec(n: int, lat: float, thr: float, cost: float, l3: str) -> TrialRecord:
    return TrialRecord(
        number=n,
        params={"model": "Qwen/Qwen3-32B", "gpu": "h100_sxm", "tp": 2, "instances": 4, "l3": l3,
                "eviction": "s3_fifo", "l2_dram_gib": 64},
        objectives={"latency": lat, "throughput": thr, "cost": cost},
        constraints=(-1.0,),
        metrics={"n_requests": 50_000.0, "usd_per_hour": cost, "n_rejected": 3.0},
    )  # fmt: skip


TIER_ROWS = [
    {"variant": "as picked", "meets SLO": True, "instances": 4, "GPUs": 8, "USD/h": 134.0,
     "TTFT p90 ms": 1000.0, "L1+L2+L3 hit": 0.5},
    {"variant": "without L3", "meets SLO": True, "instances": 4, "GPUs": 8, "USD/h": 126.4,
     "TTFT p90 ms": 1030.0, "L1+L2+L3 hit": 0.4},
    {"variant": "without L2 and L3", "meets SLO": True, "instances": 6, "GPUs": 12,
     "USD/h": 190.0, "TTFT p90 ms": 990.0, "L1+L2+L3 hit": 0.1},
]  # fmt: skip


def _write(tmp_path: Path) -> tuple[str, str]:
    records = [
        _rec(0, 800.0, 3000.0, 134.0, "nvme_4tib"),
        _rec(1, 2500.0, 1500.0, 60.0, "none"),
        _rec(2, 3000.0, 1000.0, 90.0, "none"),  # dominated
        TrialRecord(
            number=3,
            params={"model": "Qwen/Qwen3-32B", "gpu": "a100_sxm", "tp": 2, "instances": 1},
            objectives={"latency": 1e9, "throughput": 0.0, "cost": 4.0},
            constraints=(1.0,),
            metrics={"usd_per_hour": 4.0, "gpus": 2.0},
            infeasible_reason="screened without simulation: ttft_ms.p90 >= 9,000 ms",
        ),
        TrialRecord(
            number=4,
            params={"model": "Qwen/Qwen3-32B", "gpu": "l40s", "tp": 1, "instances": 1},
            objectives={},
            constraints=(-1.0, 1.0),
            metrics={"usd_per_hour": 2.0, "gpus": 1.0, "simulated_requests": 60.0},
            infeasible_reason="given up after 60 of 200 requests: 30 certainly missed a target",
        ),
    ]
    result = summarise(records, DIRECTIONS, objectives=objective_infos(SPEC))
    label = result.picks[0].label
    planning = Planning(
        tier_value={label: TIER_ROWS},
        headroom={label: {"load_scale": 8.0, "requests_per_s": 40.0, "at_limit": True}},
        baseline={
            "params": {"gpu": "h100_sxm", "instances": 40},
            "feasible": False,
            "reason": "costs USD 246.20/h > budget USD 150/h",
            "comparison": {label: "saves USD 81,000/month"},
        },
    )
    profile = WorkloadProfile(
        source={"kind": "trace", "path": "trace.jsonl"},
        n_requests=800,
        span_s=240.0,
        requests_per_s=3.33,
        prompt_tokens=LengthStats(12000, 8000, 27000, 87000, 120000),
        output_tokens=LengthStats(350, 360, 590, 900, 930),
        max_context_tokens=40960,
        n_overlong=51,
        longest_tokens=122378,
        overlong_policy="drop",
        closed_loop=False,
    )
    context = ReportContext(slo=SPEC, settings={"model": "Qwen/Qwen3-32B"}, workload=profile)
    md, html = write_report(
        tmp_path, title="t", result=result, records=records, context=context, planning=planning
    )
    return md.read_text(), html.read_text()


class _Text(HTMLParser):
    """Visible text (outside script/style/pre/code) and the ids of elements."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.ids: set[str] = set()
        self.tags: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.ids.update(v for k, v in attrs if k == "id" and v)
        self._skip += tag in ("script", "style", "pre", "code")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style", "pre", "code")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def test_markdown_has_every_section_and_the_numbers(tmp_path: Path) -> None:
    md, _ = _write(tmp_path)
    for heading in (
        "## What was asked: SLO chat",
        "## Workload",
        "## Latency model",
        "## Recommendations",
        "## The feasible Pareto front",
        "## What each cache tier buys",
        "## Headroom",
        "## Against your baseline",
    ):
        assert heading in md
    assert "| ttft\\_ms | p90 | 4,000 ms |" in md
    assert "Budget: at most USD 150.00/h (a configuration over it is infeasible)." in md
    assert "51 (6.4%; longest 122,378 tokens of prompt + output), dropped before simulating" in md
    assert "Source: kind=trace, path=trace.jsonl." in md
    ttft_error = LATENCY_ERRORS["roofline"][0]
    assert f"mean TTFT error {ttft_error:.1f}%" in md  # the roofline model's validated error
    assert "drop L3: saves USD 7.60/h, TTFT p90 +3%, still meets the SLO" in md
    assert "keep L2 and L3: without it the pick needs 2 more instances" in md
    assert "| best latency, best throughput | ≥ 8× (search cap) | 40 |" in md
    # The planning is keyed by a trial's first pick; its sections name every pick it is.
    tiers = md.split("## What each cache tier buys", 1)[1].split("## Headroom", 1)[0]
    assert "### best latency, best throughput\n" in tiers
    assert "**Why best throughput.** Goodput 3,000 tok/s is the best on the front" in md
    assert "1,000,000,000" not in md
    assert "It does not meet the SLO and budget: costs USD 246.20/h" in md
    assert "kind: Deployment" in md
    assert "docker run --gpus" in md
    assert "Rejected during simulation: 3 requests." in md
    assert "1 of them was ruled out without simulating (1 by latency lower bounds" in md
    assert "1 was given up part-way" in md


def test_html_is_rendered_markdown_with_the_plot(tmp_path: Path) -> None:
    _, html = _write(tmp_path)
    parsed = _Text()
    parsed.feed(html)
    visible = "".join(parsed.text)
    assert "**" not in visible
    assert "*" not in visible
    assert "\\_" not in visible  # escapes are consumed by the parser
    assert "s3_fifo" in visible
    assert PLOT_ID in parsed.ids
    assert {"table", "h2", "strong", "pre"} <= set(parsed.tags)
    assert "TTFT p90 (ms)" in html  # axis titles carry units
    assert "cost (USD/h)" in html
    assert "SLO TTFT p90 \\u2264 4,000 ms" in html  # plotly escapes non-ASCII in its JSON
    assert "budget USD 150.00" in html
    # Hovering a point shows its trial, objectives with units and configuration (plotly's
    # JSON escapes "<" and "/").
    assert (
        '"hovertext":["trial 2\\u003cbr\\u003eTTFT p90 (ms): 3,000 ms\\u003cbr\\u003e'
        "goodput (tok\\u002fs): 1,000 tok\\u002fs"
    ) in html
    assert "gpu=h100_sxm, tp=2, instances=4, l3=none, eviction=s3_fifo" in html


def test_a_generated_workload_source_reads_as_settings_not_python() -> None:
    source = {"block_tokens": 16, "kind": "sessions", "sessions": 300,
              "arrival": {"process": "poisson", "rate_per_s": 1.0, "profile": None},
              "turns": {"dist": "uniform", "low": 1.0, "high": 8.0}}  # fmt: skip
    assert source_text(source) == (
        "kind=sessions, block_tokens=16, sessions=300, arrival=(process=poisson, "
        "rate_per_s=1.0), turns=(dist=uniform, low=1.0, high=8.0)"
    )


def test_tier_verdict_of_a_pick_without_l2_or_l3() -> None:
    assert tier_verdict(TIER_ROWS[:1]) == [
        "nothing to drop: the pick caches in GPU memory (L1) only, with no L2 or L3 tier"
    ]


def test_tier_verdict_when_a_tier_cannot_be_replaced() -> None:
    rows = [TIER_ROWS[0], {**TIER_ROWS[1], "meets SLO": False, "instances": 12}]
    assert tier_verdict(rows) == [
        "keep L3: without it no deployment of up to +8 instances meets the SLO"
    ]


def _chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    return browser


def _rendered_dom(browser: str, page: Path) -> str:
    """``page`` as the browser's DOM after its scripts ran (plotly draws the figure)."""
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--window-size=1280,900", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip


def test_report_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    _, _ = _write(tmp_path)
    dom = _rendered_dom(browser, tmp_path / "report.html")
    parsed = _Text()
    parsed.feed(dom)
    visible = "".join(parsed.text)
    assert "*" not in visible
    assert PLOT_ID in parsed.ids
    assert 'class="main-svg"' in dom  # plotly drew the figure in the browser


#: Appended to report.html: once plotly has drawn, the boxes of every text label on the plot
#: (line annotations, axis titles, legend entries) that overlaps another, into a <pre>.
_OVERLAP_SCRIPT = """<script>
setTimeout(function () {
  var sel = '.annotation-text-g, .g-xtitle, .g-ytitle, .g-x2title, .g-y2title, .legend .traces';
  var boxes = Array.from(document.querySelectorAll(sel)).map(function (e) {
    var r = e.getBoundingClientRect();
    return {text: e.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom};
  }).filter(function (b) { return b.r > b.l && b.b > b.t; });
  var hits = [];
  for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
    var a = boxes[i], c = boxes[j];
    if (a.l < c.r && c.l < a.r && a.t < c.b && c.t < a.b) hits.push(a.text + ' / ' + c.text);
  }
  var out = document.createElement('pre');
  out.id = 'overlaps';
  out.textContent = JSON.stringify({labels: boxes.length, overlaps: hits});
  document.body.appendChild(out);
}, 2000);
</script>"""


def test_plot_labels_do_not_overlap_in_chromium(tmp_path: Path) -> None:
    """The SLO-target and budget lines' labels, the axis titles and the legend entries of the
    drawn figure: no two boxes intersect (the SLO and budget labels used to sit on top of each
    other in the panel's top-right corner)."""
    browser = _chromium()
    _, html = _write(tmp_path)
    page = tmp_path / "overlaps.html"
    page.write_text(html.replace("</body>", _OVERLAP_SCRIPT + "</body>"), encoding="utf-8")
    dom = _rendered_dom(browser, page)
    found = re.search(r'<pre id="overlaps">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    result = json.loads(htmllib.unescape(found.group(1)))
    assert result["labels"] >= 8  # 2 line labels + 4 axis titles + legend entries
    assert result["overlaps"] == []
