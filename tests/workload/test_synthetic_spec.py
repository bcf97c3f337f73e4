"""Workload files: every shape builds, bad files fail with one line naming file and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.workload.spec import WorkloadSpec, load_workload
from slo.inputfile import InputError

TRACE = """{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}
{"timestamp": 1000, "input_length": 700, "output_length": 6, "hash_ids": [0, 2]}
{"timestamp": 2000, "input_length": 100, "output_length": 7, "hash_ids": [3]}
{"timestamp": 3000, "input_length": 800, "output_length": 8, "hash_ids": [0, 1, 4]}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_trace_window_scale_and_limit(tmp_path: Path) -> None:
    _write(tmp_path, "t.jsonl", TRACE)
    spec = _write(
        tmp_path,
        "w.yaml",
        "kind: trace\npath: t.jsonl\ntime_scale: 0.5\nstart_s: 1\nmax_requests: 2\n",
    )
    source = load_workload(spec).build(np.random.default_rng(0))
    assert source.block_tokens == 512
    reqs = list(source.start())
    assert [r.timestamp_s for r in reqs] == [0.0, 0.5]
    assert [r.input_length for r in reqs] == [700, 100]
    assert list(source.start()) == reqs  # re-iterable, same requests


@pytest.mark.parametrize(
    "text",
    [
        "kind: open_loop\nrequests: 50\narrival: {process: gamma, rate_per_s: 3, cv: 2}\n"
        "input_tokens: {dist: trace, path: t.jsonl, field: input}\noutput_tokens: 16\n",
        "kind: sessions\nsessions: 5\narrival: {process: poisson, rate_per_s: 1}\n"
        "turns: {dist: uniform, low: 1, high: 3}\nuser_tokens: 30\noutput_tokens: 10\n"
        "think_time_s: {dist: exponential, mean: 2}\nsystem_prompt: {count: 2, tokens: 64}\n",
        "kind: closed_loop\nusers: 4\nrequests: 20\ninput_tokens: 100\noutput_tokens: 10\n",
    ],
)
def test_synthetic_shapes_build_deterministically(tmp_path: Path, text: str) -> None:
    _write(tmp_path, "t.jsonl", TRACE)
    workload = load_workload(_write(tmp_path, "w.yaml", text))
    first = list(workload.build(np.random.default_rng(4)).start())
    again = list(workload.build(np.random.default_rng(4)).start())
    assert first
    assert first == again
    if "trace" in text:
        assert {r.input_length for r in first} <= {600, 700, 100, 800}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "kind: open_loop\nrequests: 0\narrival: {process: poisson, rate_per_s: 1}\n"
            "input_tokens: 1\noutput_tokens: 1\n",
            "open_loop.requests",
        ),
        (
            "kind: open_loop\nrequests: 5\narrival: {process: poisson, rate_per_s: 1}\n"
            "input_tokens: {dist: zipf}\noutput_tokens: 1\n",
            "open_loop.input_tokens",
        ),
        (
            "kind: closed_loop\nusers: 2\nrequests: 5\ninput_tokens: 1\n",
            "closed_loop.output_tokens",
        ),
        ("kind: trace\npath: t.jsonl\nend_s: 1\nstart_s: 2\n", "end_s must be after start_s"),
        ("kind: replay\n", "does not match any of the expected tags"),
        (
            "kind: sessions\nsessions: 1\narrival: {process: poisson, rate_per_s: 1}\n"
            "user_tokens: 5\noutput_tokens: 5\nbogus: 1\n",
            "sessions.bogus: unknown key",
        ),
    ],
)
def test_bad_workload_files_fail_with_one_line(tmp_path: Path, text: str, where: str) -> None:
    path = _write(tmp_path, "w.yaml", text)
    with pytest.raises(InputError) as err:
        load_workload(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert where in message


def test_spec_round_trips_through_the_model() -> None:
    spec = WorkloadSpec.model_validate(
        {"kind": "closed_loop", "users": 2, "requests": 3, "input_tokens": 5, "output_tokens": 2}
    )
    assert WorkloadSpec.model_validate(spec.model_dump()) == spec
