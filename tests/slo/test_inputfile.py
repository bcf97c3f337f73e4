"""``slo.inputfile.load_mapping``: what every user file gets before a model sees it (issue #12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slo.inputfile import MAX_INPUT_BYTES, InputError, load_mapping


def _load(tmp_path: Path, text: str, name: str = "f.yaml") -> dict[str, object]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_mapping(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\nb: 2\na: 3\n", "line 3: key 'a' given twice"),
        ("gpus:\n  H100: {x: 1}\n  h100: {x: 2}\n", "line 3: key 'h100' given as 'H100' and"),
        ("a: {b: .inf}\n", "a.b: expected a finite number, got inf"),
        ("a: [1, .nan]\n", "a[1]: expected a finite number, got nan"),
    ],
)
def test_yaml_refusals_name_line_or_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=r"f\.yaml: ") as info:
        _load(tmp_path, text)
    assert message in str(info.value)


def test_json_duplicates_and_non_finite_numbers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="key 'a' given twice"):
        _load(tmp_path, '{"a": 1, "a": 2}', "f.json")
    with pytest.raises(InputError, match="x: expected a finite number, got inf"):
        _load(tmp_path, '{"x": Infinity}', "f.json")


def test_a_merge_key_may_be_overridden(tmp_path: Path) -> None:
    """``<<: *base`` then a key of the base is an override (the shipped models use it)."""
    data = _load(tmp_path, "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 3\n")
    assert data["other"] == {"x": 3, "y": 2}


def test_not_a_regular_file_is_refused_at_once() -> None:
    with pytest.raises(InputError, match="/dev/urandom: not a regular file"):
        load_mapping("/dev/urandom")


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: " + b"x" * MAX_INPUT_BYTES + b"\n")
    with pytest.raises(InputError, match=r"big\.yaml: larger than 16 MiB"):
        load_mapping(path)
