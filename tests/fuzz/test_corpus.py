"""The hostile-input corpus (``tests/data/bad/cases.yaml``, one case per defect of issue #12):
every case exits 2 with at most three lines, no traceback, within its time limit, and its one
line says what is wrong (the case's ``expect``)."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest

_SCRATCH = Path(__file__).resolve().parent / ".scratch"


def _cases(*, slow: bool) -> list[harness.Case]:
    return [c for c in harness.load_cases(_SCRATCH, include_slow=True) if c.slow == slow]


def _check(case: harness.Case) -> None:
    outcome = harness.run_case(case.argv, case.timeout_s)
    shown = "\n".join(outcome.lines[-5:])
    assert outcome.kind == "clean", f"{case.id}: {outcome.kind} (exit {outcome.exit_code})\n{shown}"
    assert len(outcome.lines) <= harness.MAX_LINES
    assert case.expect.lower() in outcome.output.lower(), f"{case.id}: {shown}"


@pytest.fixture(scope="module", autouse=True)
def _scratch() -> None:
    harness.materialize(_SCRATCH)


@pytest.mark.parametrize("case", _cases(slow=False), ids=lambda c: c.id)
def test_hostile_input_is_one_clean_line(case: harness.Case) -> None:
    _check(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", _cases(slow=True), ids=lambda c: c.id)
def test_slow_hostile_input_is_one_clean_line(case: harness.Case) -> None:
    _check(case)


def test_corpus_has_one_case_per_file() -> None:
    """Every hostile file in the corpus directory is used by some case (none is dead weight)."""
    text = (harness.BAD_DIR / "cases.yaml").read_text(encoding="utf-8")
    referenced_by_file = {"small_trace.jsonl"}  # the trace the workload cases replay
    unused = [
        p.name
        for p in harness.BAD_DIR.iterdir()
        if p.name != "cases.yaml" and p.name not in text and p.name not in referenced_by_file
    ]
    assert not unused


def test_classify_tells_the_outcomes_apart() -> None:
    assert harness.classify(2, "error: x.yaml: tp: bad\n") == "clean"
    assert harness.classify(0, "{}") == "accepted"
    assert harness.classify(None, "") == "hang"
    assert harness.classify(1, "Traceback (most recent call last):\n  ...\nValueError") == (
        "traceback"
    )
    assert harness.classify(2, "a\nb\nc\nd\n") == "traceback"  # too long to be one message
