"""Search-space files: validation, conditional dimensions, grids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from optimizer.space import SearchSpace, load_space
from slo.inputfile import InputError


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


def test_conditional_dimension_sampled_only_when_parent_matches() -> None:
    space = SearchSpace.model_validate(
        {
            "model": "Qwen/Qwen3-8B",
            "dimensions": {
                "scheduler": {"choices": ["prefill_first", "chunked"]},
                "chunk_tokens": {"choices": [1024, 2048]},
            },
            "fixed": {"backend": "vllm"},
        }
    )
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen: list[dict[str, Any]] = []
    for _ in range(30):
        trial = study.ask()
        params = space.suggest(trial)
        seen.append(params)
        study.tell(trial, 0.0)
    assert all(p["backend"] == "vllm" for p in seen)
    assert all(("chunk_tokens" in p) == (p["scheduler"] == "chunked") for p in seen)
    assert {p["scheduler"] for p in seen} == {"prefill_first", "chunked"}


def test_integer_range_and_grid_values() -> None:
    space = SearchSpace.model_validate(
        {
            "model": "m",
            "dimensions": {
                "instances": {"low": 1, "high": 4},
                "u": {"low": 0.7, "high": 0.9, "step": 0.1},
            },
        }
    )
    grid = space.grid()
    assert grid["instances"] == [1, 2, 3, 4]
    assert grid["u"] == pytest.approx([0.7, 0.8, 0.9])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("dimensions: {tp: {choices: []}}", "dimensions.tp: choices must not be empty"),
        ("dimensions: {n: {low: 5, high: 1}}", "dimensions.n: low (5.0) must not exceed high"),
        ("dimensions: {tp: {choices: [1]}}\nbogus: 1", "bogus: unknown key"),
        ("dimensions: {tp: {choices: [1], when: {gpu: [a]}}}", "not a dimension"),
        ("dimensions: {n: {low: 0, high: 3, log: true}}", "a log range needs low > 0"),
    ],
)
def test_bad_space_files_give_one_line(tmp_path: Path, body: str, expected: str) -> None:
    path = _write(tmp_path, "model: m\n" + body + "\n")
    with pytest.raises(InputError) as info:
        load_space(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    assert expected in message
