"""Figures of ``kvplan analyze --plot DIR``: the LRU curve and the reuse distributions (PNG)."""

from __future__ import annotations

from pathlib import Path

from simulator.kvcache.analyze import Analysis
from simulator.kvcache.trace_stats import Distribution
from slo.inputfile import InputError

__all__ = ["write_plots"]


def write_plots(analysis: Analysis, directory: Path) -> list[Path]:
    """Write ``lru_curve.png`` and ``distributions.png`` into ``directory`` (created); return
    the paths. ``InputError`` if the directory cannot be created."""
    import matplotlib  # noqa: PLC0415  (plotting is optional at import time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(
            f"--plot {directory}: cannot create the directory: {err.strerror}"
        ) from None
    sizes = [p.cache_size for p in analysis.points]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(sizes, [p.block_hit_ratio for p in analysis.points], label="block hit ratio")
    ax.plot(sizes, [p.compute_saving_ratio for p in analysis.points], label="compute saving")
    for row in analysis.capacities:
        if row.metric == "block_hit_ratio":
            ax.axvline(row.blocks, linestyle=":", color="grey")
            ax.annotate(f"{row.fraction:.0%}", (row.blocks, 0.02), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel(f"LRU capacity (blocks of {analysis.block_size_tokens} tokens)")
    ax.set_ylabel("ratio")
    ax.set_title("Exact LRU curve (stack distance)")
    ax.legend()
    curve_path = directory / "lru_curve.png"
    fig.savefig(curve_path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    s = analysis.stats
    panels: list[tuple[str, Distribution]] = [
        ("reuse distance (blocks)", s.reuse_distance_blocks),
        ("reuse time (s)", s.reuse_time_s),
        ("block lifetime (s)", s.lifetime_s),
        ("session footprint (blocks)", s.session_footprint_blocks),
        ("request length (blocks)", s.request_blocks),
        ("reuse time (requests)", s.reuse_time_requests),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (title, dist) in zip(axes.flat, panels, strict=True):
        labels = dist.bucket_labels()
        ax.bar(range(len(dist.buckets)), dist.buckets)
        ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_yscale("log")
    fig.tight_layout()
    dist_path = directory / "distributions.png"
    fig.savefig(dist_path, dpi=110)
    plt.close(fig)
    return [curve_path, dist_path]
