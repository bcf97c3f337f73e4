"""The H100 benchmark rows replayed on every other GPU: what the simulator predicts there.

    python bench/cross_gpu.py [--silicon CSV] [--gpus a100_sxm,h200_sxm,...] [--limit N]
        [--jobs N] [--worst 3] [--json OUT.json] [--faster h200_sxm,b200_sxm,...]

No end-to-end measurement of another GPU is used (the project keeps those aside to check the
simulator independently). Instead each measured H100 row is simulated as measured (H100) and
again with only its ``system`` changed to each GPU of ``--gpus`` (aiconfigurator's system
names, e.g. ``gb200_sxm``, resolve through the catalog's aliases), and the bench prints, per
GPU:

- how many rows can be expressed there and why the others are skipped (a GPU without FP8
  tensor cores, a model that does not fit, a name the catalog lacks);
- the deciles of predicted TTFT and TPOT on that GPU over the same rows' H100 predictions: the
  ratios the latency model, the memory rules and the scheduler imply together, to compare
  with the GPUs' specs (a faster GPU's TPOT ratio should sit near its bandwidth ratio);
- the rows whose predicted TTFT moves most against the H100 prediction, which is where a
  mechanism turns (KV capacity becoming the limit, a serial front end saturating), and, on a
  GPU faster than H100 at every kernel (``--faster``), the rows predicted *slower* there (TTFT
  above 1.05× H100's): a serial stage outside the GPU (TensorRT-LLM's front end) saturating at
  the faster GPU's token rate, or a closed loop settling into another state.

``--json`` also writes every row's two ratios (``ratios``: line → [TTFT, TPOT]).

What it catches: a GPU or model name the catalog cannot resolve, a KV capacity or latency rule
that goes wrong on one chip only, predictions that cross between regimes. What it cannot say:
whether the other GPUs' predictions are right; only their measurements can.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from _silicon import DEFAULT_SILICON

from simulator.validation.silicon.rows import MeasuredRow
from simulator.validation.validate import RowResult, read_silicon, run_validation, select_rows

DEFAULT_GPUS = "a100_sxm,h200_sxm,b200_sxm,gb200_sxm,b300_sxm,l40s"
#: A TTFT ratio to H100's above which a faster GPU's row is listed as predicted slower.
_SLOWER = 1.05


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--silicon", type=Path, default=DEFAULT_SILICON)
    parser.add_argument("--gpus", default=DEFAULT_GPUS, help="comma-separated system names")
    parser.add_argument("--limit", type=int, default=120, help="rows, spread evenly (0: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--worst", type=int, default=3, help="largest TTFT moves to list")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--faster",
        default="h200_sxm,b200_sxm,b300_sxm,gb200_sxm",
        help="GPUs faster than H100 at every kernel: rows predicted slower there are listed",
    )
    return parser.parse_args(argv)


def _predictions(rows: list[Any], jobs: int) -> tuple[dict[int, RowResult], list[Any]]:
    report = run_validation(rows, latency_model="auto", jobs=jobs, quiet=True)
    return {r.row.line: r for r in report.results}, list(report.skipped)


def _deciles(values: list[float]) -> list[float]:
    return [round(float(q), 2) for q in np.quantile(values, np.linspace(0.1, 0.9, 9))]


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not args.silicon.is_file():
        print(f"{args.silicon}: no such file", file=sys.stderr)
        return 2
    rows, _ = read_silicon(args.silicon)
    picked = select_rows(rows, limit=args.limit or None)
    base, _ = _predictions(picked, args.jobs)
    out: dict[str, Any] = {"rows": len(picked), "h100_simulated": len(base), "gpus": {}}
    print(f"{len(picked)} H100 rows, {len(base)} simulated on h100_sxm (predictions = 1.00)")
    for gpu in (g.strip() for g in args.gpus.split(",") if g.strip()):
        moved = [dataclasses.replace(row, system=gpu) for row in picked if row.line in base]
        results, skipped = _predictions(moved, args.jobs)
        ttft, tpot, moves = [], [], []
        ratios: dict[int, list[float]] = {}
        for line, result in results.items():
            h100 = base[line]
            ttft.append(result.predicted_ttft_ms / h100.predicted_ttft_ms)
            tpot.append(result.predicted_tpot_ms / h100.predicted_tpot_ms)
            moves.append((ttft[-1], tpot[-1], _label(result.row), result.predicted_ttft_ms))
            ratios[line] = [round(ttft[-1], 4), round(tpot[-1], 4)]
        reasons = Counter(_reason(s.reason, s.model, gpu) for s in skipped)
        entry: dict[str, Any] = {"simulated": len(results), "skipped": dict(reasons)}
        print(f"\n{gpu}: {len(results)} simulated, {len(skipped)} skipped")
        for reason, n in reasons.most_common():
            print(f"  skipped {n}: {reason}")
        if results:
            entry |= {"ttft_ratio_deciles": _deciles(ttft), "tpot_ratio_deciles": _deciles(tpot)}
            print(f"  TTFT / H100 deciles {entry['ttft_ratio_deciles']}")
            print(f"  TPOT / H100 deciles {entry['tpot_ratio_deciles']}")
            moves.sort(key=lambda m: -abs(np.log(m[0])))
            for t, p, label, ms in moves[: args.worst]:
                print(f"  TTFT x{t:.2f} (TPOT x{p:.2f}) {label}: {ms:,.0f} ms")
            entry["largest_ttft_moves"] = [
                {"row": label, "ttft_ratio": round(t, 3), "tpot_ratio": round(p, 3)}
                for t, p, label, _ in moves[: args.worst]
            ]
            entry["ratios"] = ratios
            if gpu in {g.strip() for g in args.faster.split(",")}:
                slower = sorted((m for m in moves if m[0] > _SLOWER), key=lambda m: -m[0])
                entry["slower_than_h100"] = len(slower)
                print(f"  predicted slower than on H100 (TTFT > {_SLOWER}x): {len(slower)} rows")
                for t, p, label, ms in slower[: args.worst]:
                    print(f"    TTFT x{t:.2f} (TPOT x{p:.2f}) {label}: {ms:,.0f} ms")
        out["gpus"][gpu] = entry
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


def _reason(reason: str, model: str, gpu: str) -> str:
    """A skip reason with the row's particulars (model, figures) taken out, for counting."""
    text = reason.replace(model, "<model>").replace(model.rsplit("/", 1)[-1], "<model>")
    text = re.sub(r"deployment of <model> on \S+: ", "", text.replace(gpu, "<gpu>"))
    return re.sub(r"(?<![A-Za-z\d.])\d+(?:[.,]\d+)*", "#", text)[:110]


def _label(row: MeasuredRow) -> str:
    return (
        f"{row.model.rsplit('/', 1)[-1]} {row.backend} N={row.concurrency} "
        f"{row.isl}/{row.osl} line {row.line}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
