"""``TraceRequest.at_time``: the same request as ``dataclasses.replace(..., timestamp_s=...)``."""

from __future__ import annotations

import dataclasses

from simulator.workload.request import TraceRequest


def test_at_time_equals_replace_in_every_field() -> None:
    # Every field set to a value unlike its default, so a field the copy forgot would show.
    values: dict[str, object] = {}
    for i, f in enumerate(dataclasses.fields(TraceRequest)):
        kind = str(f.type)
        values[f.name] = 0.25 + i if kind == "float" else (7 + i,) if "tuple" in kind else 3 + i
    request = TraceRequest(**values)  # type: ignore[arg-type]
    moved = request.at_time(99.5)
    assert moved == dataclasses.replace(request, timestamp_s=99.5)
    assert moved.timestamp_s == 99.5


def test_at_time_unchanged_is_the_request_itself() -> None:
    request = TraceRequest(0, 1.5, 10, 2, (1, 2))
    assert request.at_time(1.5) is request
