"""Do fused-MoE layers follow the experts a batch's picks touch? The profiles' skewed rows say.

    python bench/moe_routing.py [--gpu h100_sxm ...] [--engine vllm ...] [--max-tokens 512]
        [--weights 0.25,0.5,0.75,1] [--json]

A fused-MoE profile times every shape under three routings (``distribution``): ``balanced``,
``power_law_1.01`` and ``power_law_1.2``. The latency model reads only the balanced rows
(``simulator/latency/moe_table.py``), whose picks stride over the experts so that ``T`` tokens
touch exactly ``min(E, k·T)`` of them, and prices a batch whose picks touch ``t`` experts at
``T_eq = (t/k)^w · min(T, E/k)^(1−w)`` balanced tokens plus the row's growth past ``E/k``
(``MoeTable.routed``, ``w = TOUCHED_TOKENS_WEIGHT``). This script scores that rule on the
measured power-law rows: each one is predicted from its shape's balanced rows (same kernel,
same split) at the touched experts of the generator that produced it, for several ``w``, and
the balanced row as it is (what the tables gave before).

The generator (aiconfigurator's collectors, ``power_law_logits_v3``): per-expert token counts
drawn independently from a power law of exponent ``α`` truncated to ``[1, 0.8·T]`` (``[0.01, 2]``
when ``k·T ≤ E``), scaled to ``k·T`` assignments, rounded, and the rounding's surplus or deficit
settled one token at a time from the largest count down (from the smallest count up). The
touched experts are those left with a token, averaged over ``--draws`` draws (seeded).
Rows are grouped by ``k·T / E``, the picks per expert: the even rows saturate at 1.

Prints MAPE (median signed error) per band and overall, per GPU and engine; ``--json`` for the
numbers. Uses the measured profiles of ``../shared/data/profiles`` (``--profiles``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.latency.moe_table import TOUCHED_TOKENS_WEIGHT

_SHAPE = ["kernel_source", "moe_dtype", "hidden_size", "inter_size", "topk", "num_experts",
          "moe_tp_size", "moe_ep_size"]  # fmt: skip
_BANDS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, float("inf"))
_ALPHAS = ("1.01", "1.2")


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parents[2] / "shared" / "data" / "profiles"
    parser.add_argument("--profiles", type=Path, default=root)
    parser.add_argument("--gpu", action="append", help="GPU folder (default: every one)")
    parser.add_argument("--engine", action="append", help="vllm, sglang, trtllm (default: all)")
    parser.add_argument("--max-tokens", type=int, default=512, help="largest token count scored")
    parser.add_argument("--weights", default="0.25,0.5,0.75,1", help="values of w to score")
    parser.add_argument("--draws", type=int, default=64, help="generator draws per point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def generator_touched(
    experts: int, top_k: int, tokens: int, *, alpha: float, draws: int, rng: np.random.Generator
) -> float:
    """Mean experts the power-law generator (module doc) leaves with at least one token."""
    picks = tokens * top_k
    low, high = (1.0, tokens * 0.8) if picks > experts else (0.01, 2.0)
    a = 1.0 - alpha
    counts = []
    for _ in range(draws):
        u = rng.random(experts)
        weights = ((high**a - low**a) * u + low**a) ** (1.0 / a)  # inverse CDF
        n = np.round(weights / weights.sum() * picks).astype(np.int64)
        order = np.argsort(-n, kind="stable")
        surplus = picks - int(n.sum())
        for i in range(abs(surplus)):
            j = order[i % experts] if surplus > 0 else order[-(i % experts) - 1]
            n[j] = max(0, n[j] + (1 if surplus > 0 else -1))
        counts.append(int(np.count_nonzero(n)))
    return float(np.mean(counts))


@dataclass(frozen=True)
class Point:
    """One measured power-law row and its predictions, by ``w``."""

    alpha: str
    picks_per_expert: float
    measured: float
    predicted: dict[float, float]


def score_file(
    path: Path, weights: list[float], max_tokens: int, draws: int, seed: int
) -> list[Point]:
    frame = pd.read_csv(path)
    if "distribution" not in frame.columns:
        return []
    rng = np.random.default_rng(seed)
    touched: dict[tuple[int, int, int, str], float] = {}
    points = []
    for key, rows in frame.groupby(_SHAPE):
        balanced = rows[rows["distribution"] == "balanced"].groupby("num_tokens")["latency"].mean()
        if len(balanced) < 4:
            continue
        grid_t, grid_s = np.log(balanced.index.to_numpy(float)), np.log(balanced.to_numpy(float))

        def at(tokens: float, grid_t: np.ndarray = grid_t, grid_s: np.ndarray = grid_s) -> float:
            return float(np.exp(np.interp(np.log(tokens), grid_t, grid_s)))  # log-log, clamped

        experts, top_k = int(str(key[5])), int(str(key[4]))
        saturation = experts / top_k
        for alpha in _ALPHAS:
            skewed = rows[rows["distribution"] == f"power_law_{alpha}"]
            for tokens, measured in skewed.groupby("num_tokens")["latency"].mean().items():
                t_count = int(str(tokens))
                if t_count > max_tokens:
                    continue
                memo = (experts, top_k, t_count, alpha)
                if memo not in touched:
                    touched[memo] = generator_touched(
                        experts, top_k, t_count, alpha=float(alpha), draws=draws, rng=rng
                    )
                even = min(float(t_count), saturation)
                growth = max(0.0, at(t_count) - at(saturation))
                predicted = {
                    w: at((touched[memo] / top_k) ** w * even ** (1.0 - w)) + growth
                    for w in weights
                }
                predicted[-1.0] = at(t_count)  # the balanced row as it is
                points.append(Point(alpha, t_count * top_k / experts, float(measured), predicted))
    return points


def summary(points: list[Point], weights: list[float]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for w in [-1.0, *weights]:
        name = "balanced row as is" if w < 0 else f"w = {w:g}"
        err = np.array([p.predicted[w] / p.measured - 1 for p in points])
        band = np.digitize([p.picks_per_expert for p in points], _BANDS[1:-1])
        row = {"all": f"{100 * np.mean(np.abs(err)):.1f}% ({100 * np.median(err):+.0f})"}
        for b in range(len(_BANDS) - 1):
            sel = err[band == b]
            label = f"kT/E {_BANDS[b]:g}-{_BANDS[b + 1]:g}"
            row[label] = (
                f"{100 * np.mean(np.abs(sel)):.1f}% ({100 * np.median(sel):+.0f})"
                if len(sel)
                else "-"
            )
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    weights = [float(w) for w in args.weights.split(",")]
    gpus = args.gpu or sorted(p.name for p in args.profiles.iterdir() if p.is_dir())
    report: dict[str, dict[str, dict[str, str]]] = {}
    for gpu in gpus:
        for path in sorted((args.profiles / gpu).glob("*_moe.csv.gz")):
            engine = path.name.split("_")[0]
            if args.engine and engine not in args.engine:
                continue
            points = score_file(path, weights, args.max_tokens, args.draws, args.seed)
            if points:
                report[f"{gpu} {path.name}"] = summary(points, weights)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"shipped w = TOUCHED_TOKENS_WEIGHT = {TOUCHED_TOKENS_WEIGHT:g}; MAPE (median signed)")
    for name, table in report.items():
        print(f"\n== {name}")
        columns = list(next(iter(table.values())))
        print(f"{'':20s} " + " ".join(f"{c:>15s}" for c in columns))
        for label, row in table.items():
            print(f"{label:20s} " + " ".join(f"{row[c]:>15s}" for c in columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
