"""The workload argument of ``simulate`` / ``optimize``: a trace path, a workload file, or the
bundled default (a slice of the real Mooncake conversation trace).

A trace replay is read through once here, before any simulation: a corrupt line anywhere in
the replayed part is one ``file:line`` error now rather than a traceback inside trial 0, and a
window (``start_s``/``end_s``) that selects no request is refused instead of "simulating"
nothing and reporting it feasible. Reading costs about what parsing the trace in one trial does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.api import WorkloadBuilder, build_source
from simulator.cluster.overlong import OverlongPolicy, OverlongTally, scan_overlong
from simulator.workload.bundled import bundled_trace_path
from simulator.workload.spec import TraceWorkload, WorkloadSpec, load_workload
from simulator.workload.trace import open_trace
from slo.inputfile import InputError, validate

__all__ = [
    "DEFAULT_WORKLOAD",
    "TRACE_SUFFIXES",
    "check_overlong",
    "describe_workload",
    "overlong_sentence",
    "workload_from_arg",
]

TRACE_SUFFIXES = (".jsonl", ".lcp", ".zst")

#: The bundled default: the first 800 requests of the Mooncake conversation trace slice
#: (about four minutes of production traffic, mean prompt ≈ 12k tokens), replayed at the
#: trace's own rate.
DEFAULT_WORKLOAD: dict[str, Any] = {
    "kind": "trace",
    "trace": "mooncake_conversation_head2000",
    "max_requests": 800,
}


def workload_from_arg(
    arg: str | None, *, time_scale: float | None = None, max_requests: int | None = None
) -> WorkloadBuilder:
    """A builder for ``simulate``: ``arg`` is a trace file, a workload file, or None (default).

    ``time_scale`` and ``max_requests`` override a trace replay's own settings.
    """
    if arg is None:
        path = bundled_trace_path(DEFAULT_WORKLOAD["trace"])
        data: dict[str, Any] = {
            "kind": "trace",
            "path": str(path),
            "max_requests": DEFAULT_WORKLOAD["max_requests"],
        }
        return _with_overrides(data, "default workload", time_scale, max_requests)
    path = Path(arg)
    if not path.exists():
        raise InputError(f"{arg}: no such workload or trace file")
    if path.name.endswith(TRACE_SUFFIXES):
        data = {"kind": "trace", "path": str(path)}
        return _with_overrides(data, str(path), time_scale, max_requests)
    builder = load_workload(path)
    if time_scale is not None or max_requests is not None:
        if builder.spec.root.kind != "trace":
            raise InputError(f"{arg}: --time-scale/--max-requests apply to trace workloads only")
        data = builder.spec.root.model_dump()
        data["path"] = str(path.parent / builder.spec.root.path)
        return _with_overrides(data, str(path), time_scale, max_requests)
    if isinstance(builder.spec.root, TraceWorkload):
        _check_replay(builder.spec.root, builder.base, str(path))
    return builder


def _check_replay(trace: TraceWorkload, base: Path, source: str) -> None:
    """Read the replayed part of ``trace`` once (module docstring); ``InputError`` if bad."""
    reader = open_trace(base / trace.path, block_size_tokens=trace.block_tokens)
    selected = 0
    for request in reader:
        if request.timestamp_s < trace.start_s:
            continue
        if trace.end_s is not None and request.timestamp_s >= trace.end_s:
            continue
        selected += 1
        if trace.max_requests is not None and selected >= trace.max_requests:
            break
    if not selected:
        end = "the end" if trace.end_s is None else f"{trace.end_s:g} s"
        raise InputError(
            f"{source}: no requests in the replayed window ({trace.start_s:g} s to {end} of the "
            "trace's own time)"
        )


def _with_overrides(
    data: dict[str, Any], source: str, time_scale: float | None, max_requests: int | None
) -> WorkloadSpec:
    if time_scale is not None:
        data["time_scale"] = time_scale
    if max_requests is not None:
        data["max_requests"] = max_requests
    spec = validate(WorkloadSpec, data, source)
    assert isinstance(spec.root, TraceWorkload)  # only trace replays take overrides
    _check_replay(spec.root, Path("."), source)
    return spec


def describe_workload(builder: WorkloadBuilder) -> dict[str, Any]:
    """A JSON-able identity of the workload (for study fingerprints and reports)."""
    spec = builder if isinstance(builder, WorkloadSpec) else getattr(builder, "spec", None)
    if isinstance(spec, WorkloadSpec):
        data = spec.root.model_dump(mode="json")
        if "path" in data:
            data["path"] = Path(data["path"]).name  # the file, not where it is installed
        return data
    return {"kind": type(builder).__name__}


def check_overlong(
    builder: WorkloadBuilder, *, seed: int, max_context_tokens: int, policy: OverlongPolicy
) -> OverlongTally:
    """Count the workload's requests longer than the model's context, before any simulation.

    ``policy`` ``reject`` turns any such request into an ``InputError`` (exit 2) naming how many
    there are and the longest; ``drop`` and ``count-as-miss`` only count (the simulator applies
    them). Scans the requests known up front (``scan_overlong``).
    """
    tally = scan_overlong(build_source(builder, seed), max_context_tokens)
    if policy == "reject" and tally.n_overlong:
        raise InputError(
            f"workload: {overlong_sentence(tally)}; --overlong drop removes them, "
            "count-as-miss keeps them as SLO misses"
        )
    return tally


def overlong_sentence(tally: OverlongTally) -> str:
    """``51 of 800 requests (6.4%) exceed the model's 40,960-token context (longest 131,072)``."""
    return (
        f"{tally.n_overlong:,} of {tally.n_requests:,} requests ({tally.share:.1%}) exceed the "
        f"model's {tally.max_context_tokens:,}-token context (longest {tally.longest_tokens:,})"
    )
