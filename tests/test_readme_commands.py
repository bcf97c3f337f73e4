"""Issue 15, item 3: every README line runs. Running them all takes minutes (they were run by
hand for the issue's audit); this checks what breaks them silently: each file a README command
names exists, and each SLO and search-space file it names loads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    """The ``kvplan`` lines of the README's bash blocks (continuations joined, comments cut)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for raw in joined.splitlines():
            line = re.split(r"\s{2,}#", raw)[0].strip()
            if line.startswith("kvplan "):
                lines.append(line)
    return lines


def _paths(command: str) -> list[str]:
    return [w for w in shlex.split(command) if w.startswith("examples/")]


def test_the_readme_has_its_commands() -> None:
    commands = _commands()
    assert len(commands) > 20
    assert any("--capacity --slo examples/slo/chat.yaml" in c for c in commands)


@pytest.mark.parametrize("path", sorted({p for c in _commands() for p in _paths(c)}))
def test_every_example_file_a_command_names_exists_and_loads(path: str) -> None:
    file = ROOT / path
    assert file.is_file(), path
    if path.startswith("examples/slo/"):
        from slo import load_slo  # noqa: PLC0415

        load_slo(file)
    elif path.startswith("examples/space"):
        from optimizer.space import load_space  # noqa: PLC0415

        load_space(file)
