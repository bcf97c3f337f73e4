"""Step times of a DeepSeek Sparse Attention model as its context grows, against the same model
attending every cached token (dense MLA): what the DSA pricing of ``compose.py`` does.

    python bench/dsa_steps.py [--model zai-org/GLM-5] [--latency auto] [--batch 64]

For GLM-5's InferenceX deployments (SGLang, 8 GPUs: FP8 weights with bf16 KV on H200, NVFP4 with
FP8 KV on B200) it prints one markdown table each: a decode step of ``--batch`` requests and a
prefill chunk of 8,192 new tokens after the context, with the attention and indexer parts of
each (``breakdown``), and the dense-MLA step at the same context. Predictions only: no GLM-5
measurement is at hand to check them against.
"""

from __future__ import annotations

import argparse
import warnings

from hardware import shipped_catalog
from hardware.schema import ModelSpec
from simulator.latency import Deployment, LatencyContext, make_latency_model
from simulator.latency.base import LatencyModel
from simulator.presets import load_preset

CONTEXTS = (1024, 2048, 8192, 32768, 131072)
CHUNK = 8192
#: (GPU, weight precision, KV precision): the InferenceX GLM-5 SGLang launches
#: (``simulator/validation/inferencex.py``).
DEPLOYMENTS = (("h200_sxm", "fp8", "bf16"), ("b200_sxm", "fp4", "fp8"))


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="zai-org/GLM-5")
    parser.add_argument("--latency", default="auto", help="latency model spec")
    parser.add_argument("--batch", type=int, default=64, help="decodes per step")
    return parser.parse_args(argv)


def _dense(model: ModelSpec) -> ModelSpec:
    return model.model_copy(update={"index_topk": 0, "index_n_heads": 0, "index_head_dim": 0})


def _latency(spec: str, deployment: Deployment) -> LatencyModel:
    preset = load_preset("sglang")
    context = LatencyContext.of("sglang")
    return make_latency_model(spec, deployment, params=preset.compose_params(), context=context)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def _rows(sparse: LatencyModel, dense: LatencyModel, batch: int) -> list[str]:
    rows = []
    for context in CONTEXTS:
        decode = [(context - 1, 1)] * batch
        prefill = [(context, CHUNK)]
        d, p = sparse.breakdown(decode).seconds, sparse.breakdown(prefill).seconds
        rows.append(
            f"| {context:,} | {_ms(sparse.step_seconds(decode))} | {_ms(d['attn_decode'])} | "
            f"{_ms(d['dsa_indexer'] + d['dsa_indexer_proj'])} | "
            f"{_ms(dense.step_seconds(decode))} | {_ms(sparse.step_seconds(prefill))} | "
            f"{_ms(p['attn_prefill'])} | {_ms(p['dsa_indexer'] + p['dsa_indexer_proj'])} | "
            f"{_ms(dense.step_seconds(prefill))} |"
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    """Print the tables (module doc)."""
    args = _args(argv)
    catalog = shipped_catalog()
    model = catalog.model(args.model)
    warnings.simplefilter("ignore")  # the table's fallbacks are said by `models show`
    for gpu, weights, kv in DEPLOYMENTS:
        deployments = [
            Deployment(m, catalog.gpu(gpu), tp=8, weight_precision=weights, kv_precision=kv)
            for m in (model, _dense(model))
        ]
        sparse, dense = (_latency(args.latency, d) for d in deployments)
        print(
            f"\n{model.name} {weights} weights, {kv} KV, {gpu} TP8, SGLang, "
            f"`{args.latency}` (ms per step)\n"
        )
        print(
            f"| context | decode x{args.batch} | attention | indexer | dense MLA | "
            f"prefill {CHUNK:,} after it | attention | indexer | dense MLA |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for row in _rows(sparse, dense, args.batch):
            print(row)


if __name__ == "__main__":
    main()
