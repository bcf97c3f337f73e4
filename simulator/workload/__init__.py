"""Workloads: the request type, trace readers (Mooncake / Qwen-Bailian JSONL, lcp) and writers.

Entry point: ``open_trace(path)`` streams ``TraceRequest`` objects from any supported file;
``reader.annotated()`` adds the future (next accesses) for oracle policies. ``convert_to_lcp``
writes the binary ``lcp`` format (spec: docs/lcp.md). ``bundled_trace_path`` finds the small
trace shipped with the package.
"""

from simulator.workload.blockids import BLOCK_ID_MODES, PrefixInterner, RawIdReport, RawIds
from simulator.workload.bundled import bundled_trace_names, bundled_trace_path
from simulator.workload.convert import ConvertSummary, convert_to_lcp
from simulator.workload.future import FutureTable, build_future, next_access_indices
from simulator.workload.lcp import LCP_SUFFIXES, LcpHeader, LcpWriter
from simulator.workload.request import TraceRequest
from simulator.workload.trace import TRACE_FORMATS, TraceReader, open_trace
from simulator.workload.traceinfo import AnnotatedRequest, ReadStats, TraceInfo

__all__ = [
    "BLOCK_ID_MODES",
    "LCP_SUFFIXES",
    "TRACE_FORMATS",
    "AnnotatedRequest",
    "ConvertSummary",
    "FutureTable",
    "LcpHeader",
    "LcpWriter",
    "PrefixInterner",
    "RawIdReport",
    "RawIds",
    "ReadStats",
    "TraceInfo",
    "TraceReader",
    "TraceRequest",
    "build_future",
    "bundled_trace_names",
    "bundled_trace_path",
    "convert_to_lcp",
    "next_access_indices",
    "open_trace",
]
