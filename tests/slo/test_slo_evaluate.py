"""Evaluating hand-made metrics: exact relative violations, order, derived metrics, errors."""

from __future__ import annotations

import math
from typing import Any

import pytest

from slo import HOURS_PER_MONTH, MissingMetricError, SloSpec, evaluate, metric_value


def _spec(**fields: Any) -> SloSpec:
    return SloSpec.model_validate({"name": "test", **fields})


CHAT = _spec(
    targets={"ttft_ms": {"p90": 2000, "p99": 5000}, "tpot_ms": {"p90": 50}},
    attainment=0.95,
    budget={"usd_per_hour": 200, "usd_per_month": 100_000, "max_gpus": 64},
)

METRICS = {
    "ttft_ms.p90": 2500.0,  # 25% over
    "ttft_ms.p99": 4000.0,  # 20% under
    "tpot_ms.p90": 50.0,  # exactly at the limit: feasible
    "attainment": 0.76,  # 0.95 wanted: (0.95 - 0.76) / 0.95 = 0.2
    "usd_per_hour": 100.0,  # half the budget; per month 73,000 of 100,000
    "gpus": 80.0,  # 25% over
    "requests_per_s": 4.0,
    "output_tokens_per_s": 1000.0,
}


def test_violations_are_relative_and_in_fixed_order() -> None:
    report = evaluate(METRICS, CHAT)
    assert report.constraint_names == (
        "ttft_ms.p90",
        "ttft_ms.p99",
        "tpot_ms.p90",
        "attainment",
        "budget.usd_per_hour",
        "budget.usd_per_month",
        "budget.max_gpus",
    )
    assert report.violations == pytest.approx((0.25, -0.2, 0.0, 0.2, -0.5, -0.27, 0.25))
    assert [row.met for row in report.constraints] == [
        False, True, True, False, True, True, False,
    ]  # fmt: skip
    assert not report.feasible


def test_rows_carry_measured_and_limit_in_their_own_units() -> None:
    report = evaluate(METRICS, CHAT)
    first = report.targets[0]
    assert (first.name, first.kind, first.measured, first.limit) == (
        "ttft_ms.p90", "target", 2500.0, 2000.0,
    )  # fmt: skip
    assert report.attainment is not None
    assert (report.attainment.measured, report.attainment.limit) == (0.76, 0.95)
    month = report.budget[1]
    assert month.measured == pytest.approx(100.0 * HOURS_PER_MONTH)
    assert month.limit == 100_000


def test_all_met_is_feasible() -> None:
    good = {**METRICS, "ttft_ms.p90": 1000.0, "attainment": 0.99, "gpus": 64.0}
    report = evaluate(good, CHAT)
    assert report.feasible
    assert all(v <= 0 for v in report.violations)


def test_nan_measurement_is_infinitely_violated() -> None:
    report = evaluate({**METRICS, "ttft_ms.p99": math.nan, "attainment": math.nan}, CHAT)
    assert report.violations[1] == math.inf
    assert report.violations[3] == math.inf
    assert not any(math.isnan(v) for v in report.violations)


def test_spec_without_constraints_is_trivially_feasible() -> None:
    report = evaluate({}, _spec())
    assert report.constraints == ()
    assert report.violations == ()
    assert report.feasible


def test_objective_values_and_directions() -> None:
    report = evaluate(METRICS, CHAT)
    assert report.directions == {
        "latency": "minimize",
        "throughput": "maximize",
        "cost": "minimize",
    }
    # goodput_tokens_per_s derived as output_tokens_per_s × attainment = 1000 × 0.76
    assert report.objective_values() == pytest.approx(
        {"latency": 2500.0, "throughput": 760.0, "cost": 100.0}
    )
    other = {**METRICS, "ttft_ms.p90": 10.0, "goodput_tokens_per_s": 900.0}
    assert report.objective_values(other) == pytest.approx(
        {"latency": 10.0, "throughput": 900.0, "cost": 100.0}
    )


def test_objective_values_with_non_default_metrics() -> None:
    spec = _spec(
        targets={"e2e_ms": {"p99": 100}},
        objectives={
            "latency": "e2e_ms.p99",
            "throughput": "goodput_requests_per_s",
            "cost": "usd_per_million_output_tokens",
        },
    )
    metrics = {"e2e_ms.p99": 80.0, "attainment": 0.5, "requests_per_s": 10.0}
    metrics |= {"usd_per_hour": 36.0, "output_tokens_per_s": 1000.0}
    values = evaluate(metrics, spec).objective_values()
    # $36/h over 3.6 M tokens/h = $10 per million output tokens
    assert values == pytest.approx({"latency": 80.0, "throughput": 5.0, "cost": 10.0})


@pytest.mark.parametrize(
    ("name", "metrics", "expected"),
    [
        ("usd_per_month", {"usd_per_hour": 2.0}, 1460.0),
        ("usd_per_month", {"usd_per_hour": 2.0, "usd_per_month": 5.0}, 5.0),  # given wins
        ("goodput_requests_per_s", {"requests_per_s": 8.0, "attainment": 0.25}, 2.0),
        ("goodput_tokens_per_s", {"output_tokens_per_s": 8.0, "attainment": 0.5}, 4.0),
        ("goodput_tokens_per_s", {"output_tokens_per_s": 8.0, "goodput_tokens_per_s": 7.0}, 7.0),
        ("usd_per_million_output_tokens", {"usd_per_hour": 3.6, "output_tokens_per_s": 1.0}, 1000),
        (
            "usd_per_million_output_tokens",
            {"usd_per_hour": 3.6, "output_tokens_per_s": 0},
            math.inf,
        ),
    ],
)
def test_derived_metrics(name: str, metrics: dict[str, float], expected: float) -> None:
    spec = _spec(targets={"ttft_ms": {"p90": 1}})
    assert metric_value(metrics, name, spec) == pytest.approx(expected)


def test_attainment_is_one_without_targets() -> None:
    spec = _spec()
    assert metric_value({}, "attainment", spec) == 1.0
    assert metric_value({"output_tokens_per_s": 9.0}, "goodput_tokens_per_s", spec) == 9.0


def test_missing_metric_names_it_and_what_is_available() -> None:
    with pytest.raises(MissingMetricError) as info:
        evaluate({"ttft_ms.p90": 1.0}, CHAT)
    assert isinstance(info.value, KeyError)
    assert info.value.metric == "ttft_ms.p99"
    assert str(info.value).startswith("metric 'ttft_ms.p99' is needed by SLO 'test'")
    assert "available: ttft_ms.p90" in str(info.value)


def test_missing_base_of_derived_metric_names_both() -> None:
    spec = _spec(targets={"ttft_ms": {"p90": 1}})
    with pytest.raises(MissingMetricError, match=r"'attainment' \(to derive 'goodput_tokens"):
        evaluate({"ttft_ms.p90": 1.0, "output_tokens_per_s": 5.0}, spec).objective_values()


def test_report_does_not_alias_the_callers_mapping() -> None:
    metrics = dict(METRICS)
    report = evaluate(metrics, CHAT)
    metrics["ttft_ms.p90"] = 1.0
    assert report.objective_values()["latency"] == 2500.0
    with pytest.raises(TypeError):
        report.metrics["x"] = 1.0  # type: ignore[index]
