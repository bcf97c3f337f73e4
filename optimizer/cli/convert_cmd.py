"""``kvplan convert``: write a trace as an lcp file (binary, with next-access annotation)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optimizer.cli._output import console, print_json
from simulator.workload import BLOCK_ID_MODES, TRACE_FORMATS, ConvertSummary, convert_to_lcp
from slo.inputfile import InputError

__all__ = ["register", "summary_dict", "summary_line"]


def register(app: typer.Typer) -> None:
    """Add the ``convert`` command to ``app``."""
    app.command("convert")(convert)


def convert(
    trace: Annotated[
        Path,
        typer.Argument(
            help="Trace to read: Mooncake or Qwen-Bailian JSONL (or lcp), optionally .zst."
        ),
    ],
    out: Annotated[Path, typer.Argument(help="Output file, OUT.lcp or OUT.lcp.zst (zstd).")],
    *,
    block_id: Annotated[
        str,
        typer.Option(
            "--block-id",
            help="Block identity; lcp stores prefix-interned ids only (raw is refused).",
        ),
    ] = "prefix",
    block_size: Annotated[
        int | None,
        typer.Option(
            "--block-size", min=1, help="Tokens per block (default: 512 for Mooncake, 16 for Qwen)."
        ),
    ] = None,
    skip_bad_lines: Annotated[
        bool,
        typer.Option("--skip-bad-lines", help="Skip and count corrupt or invalid JSONL lines."),
    ] = False,
    fmt: Annotated[
        str,
        typer.Option("--format", help=f"Source format, one of {', '.join(TRACE_FORMATS)}."),
    ] = "auto",
    zstd_level: Annotated[
        int, typer.Option("--zstd-level", min=1, max=22, help="zstd level for .lcp.zst output.")
    ] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Convert TRACE to the lcp binary format and print a one-line summary."""
    if block_id not in BLOCK_ID_MODES:
        raise InputError(f"--block-id must be one of {', '.join(BLOCK_ID_MODES)}, got {block_id!r}")
    if block_id != "prefix":
        raise InputError(f"--block-id {block_id}: lcp files store prefix-interned ids only")
    if fmt not in TRACE_FORMATS:
        raise InputError(f"--format must be one of {', '.join(TRACE_FORMATS)}, got {fmt!r}")
    summary = convert_to_lcp(
        trace,
        out,
        fmt=fmt,
        block_size_tokens=block_size,
        skip_bad_lines=skip_bad_lines,
        zstd_level=zstd_level,
    )
    if as_json:
        print_json(summary_dict(summary))
        return
    console.print(summary_line(summary), markup=False, highlight=False, soft_wrap=True)


def summary_dict(s: ConvertSummary) -> dict[str, object]:
    """What ``convert --json`` prints: the figures of ``summary_line``, by name."""
    return {
        "source": str(s.source),
        "output": str(s.output),
        "requests": s.n_requests,
        "block_accesses": s.n_block_accesses,
        "unique_blocks": s.n_unique_blocks,
        "bad_lines": s.n_bad_lines,
        "out_of_order": s.n_out_of_order,
        "source_bytes": s.source_bytes,
        "lcp_bytes": s.lcp_bytes,
        "output_bytes": s.output_bytes,
        "compression_ratio": s.compression_ratio,
        "share_next_access_delta_0_or_1": s.share_delta_0_or_1,
        "share_never_accessed_again": s.share_never,
    }


def summary_line(s: ConvertSummary) -> str:
    """The one line ``convert`` prints."""
    line = (
        f"{s.source} -> {s.output}: {s.n_requests:,} requests, {s.n_block_accesses:,} blocks, "
        f"{s.n_unique_blocks:,} unique, {s.output_bytes:,} bytes "
        f"(compression {s.compression_ratio:.2f}x of {s.lcp_bytes:,} lcp bytes; "
        f"source {s.source_bytes:,}), next-access deltas 0/1: {s.share_delta_0_or_1:.1%}, "
        f"never again: {s.share_never:.1%}"
    )
    if s.n_bad_lines:
        line += f", skipped {s.n_bad_lines:,} bad lines"
    if s.n_out_of_order:
        line += f", {s.n_out_of_order:,} requests out of time order (file order kept)"
    return line
