"""The trace slice shipped in the package: found by name, attributed, unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.workload import bundled_trace_names, bundled_trace_path, open_trace
from slo.inputfile import InputError

NAME = "mooncake_conversation_head2000"
SHARED = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "data"
    / "traces"
    / "mooncake_conversation_trace.jsonl"
)


def test_bundled_trace_is_found_by_name_with_or_without_suffix() -> None:
    path = bundled_trace_path(NAME)
    assert path == bundled_trace_path(f"{NAME}.jsonl")
    assert path.is_file()
    assert f"{NAME}.jsonl" in bundled_trace_names()
    assert path.stat().st_size < 600_000


def test_unknown_bundled_trace_lists_what_exists() -> None:
    with pytest.raises(InputError, match=f"no bundled trace 'nope' \\(available: .*{NAME}"):
        bundled_trace_path("nope")


def test_bundled_trace_reads_as_mooncake() -> None:
    reader = open_trace(bundled_trace_path(NAME))
    requests = list(reader)
    assert len(requests) == 2000
    assert reader.info.schema == "mooncake"
    assert requests[-1].timestamp_s == 669.0
    assert reader.stats.n_bad_lines == 0


def test_bundled_trace_is_attributed_and_unchanged() -> None:
    path = bundled_trace_path(NAME)
    readme = (path.parent / "README.md").read_text(encoding="utf-8")
    for needle in ("kvcache-ai/Mooncake", "Apache-2.0", "FAST'25", "unchanged", "1–2,000"):
        assert needle in readme
    if not SHARED.exists():
        pytest.skip(f"{SHARED} is absent; cannot compare with the original")
    with SHARED.open("rb") as original:
        head = b"".join(next(original) for _ in range(2000))
    assert path.read_bytes() == head
