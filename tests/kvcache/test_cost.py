"""Cost models: formulas, the table file format, and one-line errors for bad specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.kvcache.cost import UNIFORM, parse_cost_model
from slo.inputfile import InputError


@pytest.mark.parametrize(
    ("spec", "costs"),
    [
        ("uniform", [1, 1, 1, 1]),
        ("position", [1, 2, 3, 4]),
        ("linear:1,2", [1, 3, 5, 7]),
        ("linear:0.5,0", [0.5, 0.5, 0.5, 0.5]),
        ("qwen3coder30b_blksz_16", [865, 867, 869, 871]),
        ("qwen3coder30b_blksz_64", [3472, 3504, 3536, 3568]),
    ],
)
def test_formulas(spec: str, costs: list[float]) -> None:
    model = parse_cost_model(spec)
    assert model.spec == spec
    assert [model.cost(p) for p in range(4)] == costs
    assert model.table(4)[:4] == costs
    assert model.total(4) == sum(costs)
    assert model.total(0) == 0
    assert model.uniform == (spec == "uniform")


def test_qwen_64_is_four_16_token_blocks() -> None:
    small, big = (
        parse_cost_model("qwen3coder30b_blksz_16"),
        parse_cost_model("qwen3coder30b_blksz_64"),
    )
    for p in range(50):
        assert big.cost(p) == sum(small.cost(4 * p + j) for j in range(4))


def test_table_grows_on_demand() -> None:
    model = parse_cost_model("position")
    assert len(model.table(3)) >= 3
    assert model.table(1000)[999] == 1000
    assert model.total(1000) == 1000 * 1001 / 2
    assert UNIFORM.total(123) == 123


def test_table_file_formats_and_tail(tmp_path: Path) -> None:
    plain = tmp_path / "costs.txt"
    plain.write_text("# measured\n10\n\n20\n30\n")
    model = parse_cost_model(f"table:{plain}")
    assert [model.cost(p) for p in range(5)] == [10, 20, 30, 30, 30]  # last value repeats
    csv = tmp_path / "costs.csv"
    csv.write_text("position,cost\n0,5\n1,6.5\n")
    model = parse_cost_model(f"table:{csv}")
    assert [model.cost(p) for p in range(3)] == [5, 6.5, 6.5]
    assert model.total(3) == 18


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no rows"),
        ("# nothing\n", "no rows"),
        ("1\nabc\n", ":2: expected a cost"),
        ("1\n-2\n", ":2: cost must be a positive"),
        ("0,1\n2,2\n", ":2: expected position 1"),
        ("1,2,3\n", ":1: expected a cost"),
        ("1\nnan\n", "positive"),
    ],
)
def test_bad_table_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        parse_cost_model(f"table:{path}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("quadratic", "unknown; expected one of uniform"),
        ("linear:1", "linear:A,B"),
        ("linear:a,b", "linear:A,B"),
        ("linear:0,1", "A > 0"),
        ("linear:1,-1", "B >= 0"),
        ("linear:1,inf", "finite"),
        ("table:/nonexistent/costs.csv", "no such file"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        parse_cost_model(spec)
    assert "\n" not in str(info.value)
