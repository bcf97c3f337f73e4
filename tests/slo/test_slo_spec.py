"""SLO file schema and loader: valid files in three formats, one-line errors for bad ones."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pydantic
import pytest

from slo import (
    OBJECTIVE_ROLES,
    InputError,
    SloSpec,
    canonical_stat,
    load_slo,
    percentile_of,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slo"

CHAT_YAML = """\
name: chat-production
targets:
  ttft_ms: {p90: 2000, p99: 5000}
  tpot_ms: {p90: 50}
  e2e_ms: {p99: 60000}
attainment: 0.95
budget: {usd_per_hour: 200, max_gpus: 64}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_file_loads_with_default_objectives(tmp_path: Path) -> None:
    spec = load_slo(_write(tmp_path, "chat.yaml", CHAT_YAML))
    assert spec.name == "chat-production"
    assert spec.target_items() == [
        ("ttft_ms", "p90", 2000.0),
        ("ttft_ms", "p99", 5000.0),
        ("tpot_ms", "p90", 50.0),
        ("e2e_ms", "p99", 60000.0),
    ]
    assert spec.attainment == 0.95
    assert spec.budget.limits() == {"usd_per_hour": 200.0, "max_gpus": 64.0}
    assert spec.objectives.latency.metric == "ttft_ms.p90"
    assert spec.objectives.throughput.metric == "goodput_tokens_per_s"
    assert spec.objectives.cost.metric == "usd_per_hour"
    assert spec.objectives.directions == {
        "latency": "minimize",
        "throughput": "maximize",
        "cost": "minimize",
    }
    assert spec.per_request_bars() == {"ttft_ms": 2000.0, "tpot_ms": 50.0, "e2e_ms": 60000.0}


def test_toml_and_json_give_the_same_spec_as_yaml(tmp_path: Path) -> None:
    toml = _write(
        tmp_path,
        "chat.toml",
        'name = "chat-production"\nattainment = 0.95\n'
        "[targets]\nttft_ms = { p90 = 2000, p99 = 5000 }\ntpot_ms = { p90 = 50 }\n"
        "e2e_ms = { p99 = 60000 }\n[budget]\nusd_per_hour = 200\nmax_gpus = 64\n",
    )
    as_dict = {
        "name": "chat-production",
        "targets": {"ttft_ms": {"p90": 2000, "p99": 5000}, "tpot_ms": {"p90": 50}},
        "attainment": 0.95,
        "budget": {"usd_per_hour": 200, "max_gpus": 64},
    }
    as_dict["targets"]["e2e_ms"] = {"p99": 60000}  # type: ignore[index]
    js = _write(tmp_path, "chat.json", json.dumps(as_dict))
    from_yaml = load_slo(_write(tmp_path, "chat.yaml", CHAT_YAML))
    assert load_slo(toml) == from_yaml
    assert load_slo(js) == from_yaml


def test_shipped_examples_load() -> None:
    files = sorted(EXAMPLES.iterdir())
    assert {f.suffix for f in files} >= {".yaml", ".toml", ".json"}
    for path in files:
        spec = load_slo(path)
        assert spec.name
        assert spec.required_metrics()


def test_objective_direction_derives_from_role_and_may_be_stated(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "o.yaml",
        "name: x\nobjectives:\n  latency: e2e_ms.p99.90\n"
        "  throughput: {metric: requests_per_s}\n"
        "  cost: {metric: usd_per_million_output_tokens, direction: minimize}\n",
    )
    objectives = load_slo(path).objectives
    assert objectives.latency.metric == "e2e_ms.p99.9"  # canonical spelling
    assert objectives.throughput.direction == "maximize"
    assert objectives.cost.direction == "minimize"
    assert list(objectives.directions) == list(OBJECTIVE_ROLES)


@pytest.mark.parametrize(
    ("role", "metric", "direction"),
    [
        ("latency", "ttft_ms.p90", "maximize"),
        ("throughput", "goodput_tokens_per_s", "minimize"),
        ("cost", "usd_per_hour", "maximize"),
    ],
)
def test_objective_against_its_role_is_refused(
    tmp_path: Path, role: str, metric: str, direction: str
) -> None:
    """Issue #12: a maximized latency was accepted and searched for the slowest deployments."""
    text = f"name: x\nobjectives:\n  {role}: {{metric: {metric}, direction: {direction}}}\n"
    with pytest.raises(InputError, match=f"objectives.{role}: direction '{direction}' would"):
        load_slo(_write(tmp_path, "o.yaml", text))


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("mean", "mean"),
        ("p90", "p90"),
        ("p90.0", "p90"),
        ("p099", "p99"),
        ("p99.90", "p99.9"),
        ("p100", "p100"),
        ("p0.1", "p0.1"),
        ("p99.999", "p99.999"),
    ],
)
def test_canonical_stat(key: str, expected: str) -> None:
    assert canonical_stat(key) == expected


@pytest.mark.parametrize("key", ["p0", "p0.0", "p100.5", "p120", "P90", "p", "median", "p-5"])
def test_canonical_stat_rejects(key: str) -> None:
    with pytest.raises(ValueError, match=r"percentile|statistic"):
        canonical_stat(key)


def test_percentile_of() -> None:
    assert percentile_of("p99.9") == 99.9
    assert percentile_of("p90.0") == 90.0
    assert percentile_of("mean") is None


def test_target_keys_are_canonicalised(tmp_path: Path) -> None:
    spec = load_slo(_write(tmp_path, "c.yaml", "name: x\ntargets: {ttft_ms: {p90.0: 10}}\n"))
    assert spec.targets == {"ttft_ms": {"p90": 10.0}}
    assert spec.required_metrics()[0] == "ttft_ms.p90"


def test_required_metrics_lists_everything_evaluate_reads(tmp_path: Path) -> None:
    text = CHAT_YAML.replace("max_gpus: 64", "usd_per_month: 9000, max_gpus: 64")
    spec = load_slo(_write(tmp_path, "chat.yaml", text))
    assert spec.required_metrics() == (
        "ttft_ms.p90",
        "ttft_ms.p99",
        "tpot_ms.p90",
        "e2e_ms.p99",
        "attainment",
        "usd_per_hour",
        "usd_per_month",
        "gpus",
        "goodput_tokens_per_s",
    )


# Each bad file: (file name, content, the field path and words the one-line error must contain).
BAD_FILES = [
    ("malformed.yaml", "name: x\ntargets: {ttft_ms: [unclosed\n", ["malformed YAML", "line"]),
    ("unknown_key.yaml", "name: x\ntarget: {}\n", ["target:", "unknown key"]),
    (
        "unknown_nested.yaml",
        "name: x\nbudget: {usd_per_day: 3}\n",
        ["budget.usd_per_day", "unknown key"],
    ),
    ("missing_name.yaml", "targets: {}\n", ["name", "required"]),
    (
        "wrong_type.yaml",
        "name: x\ntargets: {ttft_ms: {p90: fast}}\n",
        ["targets.ttft_ms.p90", "valid number"],
    ),
    (
        "quoted_number.yaml",
        "name: x\ntargets: {ttft_ms: {p90: '2000'}}\n",
        ["targets.ttft_ms.p90", "valid number"],
    ),
    (
        "stats_not_mapping.yaml",
        "name: x\ntargets: {ttft_ms: [1, 2]}\n",
        ["targets.ttft_ms", "dictionary"],
    ),
    ("no_stats.yaml", "name: x\ntargets: {ttft_ms: {}}\n", ["targets.ttft_ms", "at least one"]),
    (
        "p0.yaml",
        "name: x\ntargets: {ttft_ms: {p0: 5}}\n",
        ["targets.ttft_ms.p0", "percentile must be in (0, 100]"],
    ),
    (
        "p120.yaml",
        "name: x\ntargets: {ttft_ms: {p120: 5}}\n",
        ["targets.ttft_ms.p120", "percentile must be in (0, 100]"],
    ),
    (
        "bad_stat.yaml",
        "name: x\ntargets: {ttft_ms: {median: 5}}\n",
        ["targets.ttft_ms.median", "'mean' or a percentile"],
    ),
    (
        "negative.yaml",
        "name: x\ntargets: {ttft_ms: {p90: -5}}\n",
        ["targets.ttft_ms.p90", "greater than 0"],
    ),
    (
        "zero.yaml",
        "name: x\ntargets: {tpot_ms: {mean: 0}}\n",
        ["targets.tpot_ms.mean", "greater than 0"],
    ),
    ("inf.yaml", "name: x\ntargets: {tpot_ms: {mean: .inf}}\n", ["targets.tpot_ms.mean", "finite"]),
    (
        "attainment.yaml",
        "name: x\ntargets: {ttft_ms: {p90: 1}}\nattainment: 1.5\n",
        ["attainment", "less than or equal to 1"],
    ),
    (
        "attainment0.yaml",
        "name: x\ntargets: {ttft_ms: {p90: 1}}\nattainment: 0\n",
        ["attainment", "greater than 0"],
    ),
    ("attainment_alone.yaml", "name: x\nattainment: 0.9\n", ["attainment", "at least one target"]),
    (
        "unknown_metric.yaml",
        "name: x\ntargets: {ttfb_ms: {p90: 5}}\n",
        ["targets.ttfb_ms", "did you mean ttft_ms", "ttft_ms, tpot_ms, itl_ms, e2e_ms, queue_ms"],
    ),
    ("budget.yaml", "name: x\nbudget: {max_gpus: 0}\n", ["budget.max_gpus", "greater than"]),
    (
        "budget_neg.yaml",
        "name: x\nbudget: {usd_per_hour: -1}\n",
        ["budget.usd_per_hour", "greater than 0"],
    ),
    (
        "objective.yaml",
        "name: x\nobjectives: {throughput: tokens_per_s}\n",
        ["objectives.throughput", "unknown throughput metric", "goodput_tokens_per_s"],
    ),
    (
        "objective_cost.yaml",
        "name: x\nobjectives: {cost: usd}\n",
        ["objectives.cost", "usd_per_million_output_tokens"],
    ),
    (
        "objective_latency.yaml",
        "name: x\nobjectives: {latency: ttft.p90}\n",
        ["objectives.latency", "<target>.<statistic>"],
    ),
    (
        "objective_latency_stat.yaml",
        "name: x\nobjectives: {latency: ttft_ms.p120}\n",
        ["objectives.latency", "percentile must be in (0, 100]"],
    ),
    (
        "objective_role.yaml",
        "name: x\nobjectives: {speed: requests_per_s}\n",
        ["objectives.speed", "unknown key"],
    ),
    (
        "direction.yaml",
        "name: x\nobjectives: {cost: {metric: usd_per_hour, direction: down}}\n",
        ["objectives.cost.direction", "'minimize' or 'maximize'"],
    ),
    ("top_level_list.yaml", "- name: x\n", ["mapping"]),
    ("bad.toml", 'name = "x"\n[targets\n', ["malformed TOML"]),
    (
        "bad_p.toml",
        'name = "x"\n[targets.ttft_ms]\np120 = 5\n',
        ["targets.ttft_ms.p120", "percentile must be in (0, 100]"],
    ),
    ("bad.json", '{"name": "x", "targets": {', ["malformed JSON"]),
    (
        "bad_key.json",
        '{"name": "x", "attainment": 1.5, "targets": {"e2e_ms": {"p50": 1}}}',
        ["attainment", "less than or equal to 1"],
    ),
    (
        "bool.json",
        '{"name": "x", "targets": {"e2e_ms": {"p50": true}}}',
        ["targets.e2e_ms.p50", "valid number"],
    ),
]


@pytest.mark.parametrize(("name", "text", "expected"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_file_is_one_line_input_error(
    tmp_path: Path, name: str, text: str, expected: list[str]
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(InputError) as info:
        load_slo(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for fragment in expected:
        assert fragment in message, message


def test_missing_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_slo(tmp_path / "absent.yaml")


def test_spec_is_frozen(tmp_path: Path) -> None:
    spec = load_slo(_write(tmp_path, "chat.yaml", CHAT_YAML))
    with pytest.raises(pydantic.ValidationError):
        spec.name = "other"  # type: ignore[misc]


def _models(model: type[pydantic.BaseModel]) -> list[type[pydantic.BaseModel]]:
    """``model`` and every pydantic model reachable through its field annotations."""
    found = [model]
    for info in model.model_fields.values():
        stack: list[object] = [info.annotation]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
                if tp not in found:
                    found += _models(tp)
            else:
                stack.extend(typing.get_args(tp))
    return found


def test_every_field_is_described() -> None:
    models = _models(SloSpec)
    assert {m.__name__ for m in models} == {"SloSpec", "Budget", "Objectives", "Objective"}
    for model in models:
        for field_name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{field_name} has no description"
