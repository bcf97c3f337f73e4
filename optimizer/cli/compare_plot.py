"""The figure of ``kvplan simulate --compare-cache ... --compare-plot FILE.png``: the cache
setups side by side — TTFT and TPOT (mean and p90, ms) and the prompt tokens each tier served."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from optimizer.cli.compare_cache import CacheRow
from slo.inputfile import InputError

__all__ = ["check_plot_path", "write_comparison_plot"]


def check_plot_path(path: Path) -> None:
    """``InputError`` (before any simulation) unless a PNG can be written at ``path``."""
    if path.suffix.lower() != ".png":
        raise InputError(f"--compare-plot {path}: expected a .png file name")
    if path.is_dir():
        raise InputError(f"--compare-plot {path}: is a directory; give a .png file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise InputError(f"--compare-plot {path}: directory {parent} is missing or read-only")


def write_comparison_plot(rows: Sequence[CacheRow], path: Path) -> Path:
    """Draw ``rows`` (one bar group per setup, in their order) into ``path``; return it."""
    import matplotlib  # noqa: PLC0415  (plotting is loaded only when asked for)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    names = [row.setup for row in rows]
    x = list(range(len(rows)))
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    for ax, metric, unit in (
        (axes[0], "ttft", "TTFT (ms)"),
        (axes[1], "tpot", "TPOT (ms)"),
    ):
        mean = [getattr(row, f"{metric}_mean_ms") for row in rows]
        p90 = [getattr(row, f"{metric}_p90_ms") for row in rows]
        ax.bar([i - 0.2 for i in x], mean, width=0.4, label="mean")
        ax.bar([i + 0.2 for i in x], p90, width=0.4, label="p90")
        ax.set_xticks(x, names)
        ax.set_ylabel(unit)
        finite = [v for v in (*mean, *p90) if math.isfinite(v)]  # NaN: a setup did not run
        ax.set_ylim(0, 1.25 * max(finite, default=1.0))  # headroom keeps the legend off the bars
        ax.legend(loc="upper center", ncol=2)
    bottom = [0.0] * len(rows)
    for tier in ("l1", "l2", "l3"):
        share = [getattr(row, f"hit_{tier}") for row in rows]
        axes[2].bar(x, share, bottom=bottom, label=tier.upper())
        bottom = [b + s for b, s in zip(bottom, share, strict=True)]
    axes[2].set_xticks(x, names)
    axes[2].set_ylabel("share of prompt tokens served from cache")
    axes[2].set_ylim(0, 1.25 * max(bottom, default=0.0) or 1.0)
    axes[2].legend(loc="upper center", ncol=3)
    fig.suptitle("Cache setups on the same workload and deployment")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as err:
        raise InputError(f"--compare-plot {path}: cannot write: {err.strerror}") from None
    finally:
        plt.close(fig)
    return path
