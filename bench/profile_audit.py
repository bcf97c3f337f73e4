"""Physical checks of kernel-profile tables: what no measurement of the kernel can show.

    python bench/profile_audit.py [--profiles DIR] [--min-mb 512]

Reads every ``<gpu>/<engine>_<version>_{gemm,context_attention,generation_attention,moe}.csv.gz``
under ``--profiles`` (default ``../shared/data/profiles``; the README there has the columns) and
prints, per table:

- GEMM: the largest share of the GPU's dense tensor peak a row reaches (``2mnk / latency``), and
  of its HBM peak for rows whose weights exceed ``--min-mb`` (weights read once per call) and for
  decode-sized rows (m <= 16) below it, where a benchmark loop can keep the weights in L2;
- context attention: the largest share of the bf16 tensor peak (causal ``4·b·h·d·s(s+1)/2``);
- generation attention: the largest share of the HBM peak for calls reading more than
  ``--min-mb`` of KV (``b·(isl+step)·2·kv_heads·head_dim·bytes``; far beyond any L2) and how
  many rows exceed 1.0× — a decode call cannot read its KV faster than HBM delivers it;
- fused MoE: the median speedup of ``moe_tp 1 × moe_ep e`` over ``moe_ep 1`` at the largest token
  count both measured, e = 2 / 4 / 8 (balanced rows): per-rank work falls as 1/e, so a speedup
  near 1 says the EP rows time the whole layer on one rank; and the largest share of the HBM
  peak at which a balanced row reads the weights of the experts its picks touch (the collectors'
  striding touches ``min(E, k·T)``, ``moe_table.py``; ``1/ep`` of them and ``1/tp`` of each on
  one rank; gate, up and down projections, two for a non-gated kernel) for rows reading more
  than ``--min-mb`` — above 1.0× the row read fewer experts or weights than assumed: the
  grouped router's artefact (``moe_table.GROUP_ROUTED_SHAPES``), or a non-gated (ReLU²) layer
  whose kernel name does not say so (Nemotron's shapes in vLLM's and SGLang's tables: 1.2-1.6×
  as gated, ≤ 1.1× as non-gated).

Peaks are the shipped catalog's (``hardware/data/gpus.yaml``). A share above 1.0× is not a
measurement of the kernel's own work (shared KV pages, re-routed experts, a cache the serving
step would not keep warm): ``bench/README.md``, "Decode attention never faster than its KV read
from HBM" and "Experts priced from their own format's rows", for what the simulator does about
the ones found. Nothing here is fitted.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from hardware.catalog import shipped_catalog
from slo.inputfile import InputError

DEFAULT_PROFILES = Path(__file__).resolve().parents[2] / "shared/data/profiles"
#: Bytes per element of a profile dtype name (weights or KV).
_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5,
          "int8_wo": 1.0, "int4_wo": 0.5, "sq": 1.0}  # fmt: skip
#: The catalog precision whose tensor peak a profile GEMM dtype computes at.
_PEAK = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4",
         "int8_wo": "bf16", "int4_wo": "bf16", "sq": "int8"}  # fmt: skip
#: Bytes per expert weight of a MoE profile dtype, block scales included (MXFP4 one byte per 32
#: weights, NVFP4 one per 16; int4 group scales taken as MXFP4's).
_MOE_BYTES = {**_BYTES, "w4a16_mxfp4": 0.53125, "w4a8_mxfp4_mxfp8": 0.53125, "nvfp4": 0.5625,
              "int4_wo": 0.53125}  # fmt: skip


def _rows(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt", newline="") as handle:
        return list(csv.DictReader(handle))


def _gemm(rows: list[dict[str, str]], tflops: dict[str, float], hbm: float, min_b: float) -> str:
    compute = memory = small = 0.0
    for r in rows:
        seconds = float(r["latency"]) / 1e3
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        peak = tflops.get(_PEAK.get(r["gemm_dtype"], "bf16"), tflops["bf16"]) * 1e12
        compute = max(compute, 2.0 * m * n * k / seconds / peak)
        weights = k * n * _BYTES.get(r["gemm_dtype"], 2.0)
        if weights > min_b:
            memory = max(memory, weights / seconds / hbm)
        elif m <= 16:  # decode-sized, weights small enough for L2 in a benchmark loop
            small = max(small, weights / seconds / hbm)
    return (
        f"max {compute:.2f}x tensor peak, {memory:.2f}x HBM (weights > limit), "
        f"{small:.2f}x HBM at m <= 16 below it"
    )


def _context(rows: list[dict[str, str]], tflops: dict[str, float]) -> str:
    worst, over = 0.0, 0
    for r in rows:
        if r.get("window_size", "0") not in ("0", "") or r.get("step", "0") not in ("0", ""):
            continue
        b, s = int(r["batch_size"]), int(r["isl"])
        flops = 4.0 * b * int(r["num_heads"]) * int(r["head_dim"]) * s * (s + 1) / 2
        share = flops / (float(r["latency"]) / 1e3) / (tflops["bf16"] * 1e12)
        worst, over = max(worst, share), over + (share > 1.0)
    return f"max {worst:.2f}x bf16 peak, {over} rows above"


def _decode(rows: list[dict[str, str]], hbm: float, min_b: float) -> str:
    worst, over, big = 0.0, 0, 0
    for r in rows:
        if r.get("window_size", "0") not in ("0", ""):
            continue
        tokens = int(r["batch_size"]) * (int(r["step"]) + int(r.get("isl") or 1))
        kv = float(tokens * 2 * int(r["num_key_value_heads"]) * int(r["head_dim"]))
        kv *= 1.0 if "fp8" in r["kv_cache_dtype"] else 2.0
        if kv <= min_b:
            continue
        share = kv / (float(r["latency"]) / 1e3) / hbm
        big, worst, over = big + 1, max(worst, share), over + (share > 1.0)
    return f"max {worst:.2f}x HBM over {big} calls > limit, {over} above 1.0x"


def _moe_weights(rows: list[dict[str, str]], hbm: float, min_b: float) -> str:
    worst, over, big, where = 0.0, 0, 0, ""
    for r in rows:
        if r["distribution"] != "balanced" or r["moe_dtype"] not in _MOE_BYTES:
            continue
        experts, top_k, ep = int(r["num_experts"]), int(r["topk"]), int(r["moe_ep_size"])
        touched = min(experts, top_k * int(r["num_tokens"])) / ep
        matrices = 2 if "nongated" in r["kernel_source"] else 3
        width = int(r["inter_size"]) / int(r["moe_tp_size"])
        weights = touched * matrices * int(r["hidden_size"]) * width * _MOE_BYTES[r["moe_dtype"]]
        if weights <= min_b:
            continue
        share = weights / (float(r["latency"]) / 1e3) / hbm
        big, over = big + 1, over + (share > 1.0)
        if share > worst:
            worst = share
            where = f"{r['hidden_size']}/{r['inter_size']}/{experts}/top-{top_k} {r['moe_dtype']}"
    return f"weights max {worst:.2f}x HBM over {big} rows > limit, {over} above 1.0x ({where})"


def _moe(rows: list[dict[str, str]]) -> str:
    times: dict[tuple[str, ...], dict[tuple[int, int], float]] = defaultdict(dict)
    for r in rows:
        if r["distribution"] != "balanced" or r["moe_tp_size"] != "1":
            continue
        shape = (r["moe_dtype"], r["kernel_source"], r["hidden_size"], r["inter_size"],
                 r["num_experts"], r["topk"])  # fmt: skip
        times[shape][(int(r["moe_ep_size"]), int(r["num_tokens"]))] = float(r["latency"])
    speedups: dict[int, list[float]] = defaultdict(list)
    for cells in times.values():
        for ep in (2, 4, 8):
            common = [t for (e, t) in cells if e == 1 and (ep, t) in cells]
            if common:
                top = max(common)
                speedups[ep].append(cells[(1, top)] / cells[(ep, top)])
    if not speedups:
        return "no EP rows"
    return (
        "EP speedup "
        + " / ".join(
            f"{statistics.median(speedups[e]):.2f}" if speedups[e] else "-" for e in (2, 4, 8)
        )
        + " at EP 2 / 4 / 8 (median over shapes)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES)
    parser.add_argument("--min-mb", type=float, default=512.0, help="bytes floor, MB")
    args = parser.parse_args(argv)
    if not args.profiles.is_dir():
        print(f"{args.profiles}: no such directory", file=sys.stderr)
        return 2
    catalog, min_b = shipped_catalog(), args.min_mb * 1e6
    for path in sorted(args.profiles.glob("*/*.csv.gz")):
        gpu_name, stem = path.parent.name, path.name.removesuffix(".csv.gz")
        try:
            gpu = catalog.gpu(gpu_name)
        except InputError:  # a directory the catalog does not know: not audited
            continue
        tflops: dict[str, float] = {str(k): v for k, v in gpu.dense_tflops.items()}
        hbm = gpu.hbm_tb_per_s * 1e12
        if stem.endswith("_gemm"):
            verdict = _gemm(_rows(path), tflops, hbm, min_b)
        elif stem.endswith("_context_attention"):
            verdict = _context(_rows(path), tflops)
        elif stem.endswith("_generation_attention"):
            verdict = _decode(_rows(path), hbm, min_b)
        elif stem.endswith("_moe"):
            rows = _rows(path)
            verdict = f"{_moe(rows)}; {_moe_weights(rows, hbm, min_b)}"
        else:
            continue
        print(f"{gpu_name:9s} {stem:42s} {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
