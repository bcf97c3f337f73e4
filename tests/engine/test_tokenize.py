"""The API server's tokenising latency: a request reaches the engine (or its serial front end)
prompt tokens × ``tokenize_us_per_prompt_token`` after it arrives, concurrent prompts in
parallel."""

from __future__ import annotations

import pytest
from engine_helpers import BT, built_params, request

from hardware.schema import Catalog
from simulator.api import simulate
from simulator.config import ServingConfig
from simulator.presets import load_preset
from simulator.validation.rules import RANDOM_ID_TOKENIZE_FACTOR, protocol_settings
from simulator.validation.silicon.rows import SiliconRow
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

MS = 1e-3


def _config(tokenize_us: float | None, **fields: object) -> ServingConfig:
    return ServingConfig.model_validate(
        {
            "model": "toy/Toy-1B",
            "gpu": "toy_gpu",
            "latency_model": "constant:0.01",
            "kv_capacity_tokens": 1 << 20,
            "max_batched_tokens": 8192,
            "chunk_tokens": 8192,
            "tokenize_us_per_prompt_token": tokenize_us,
            **fields,
        }
    )


def _ttfts(config: ServingConfig, catalog: Catalog, *requests: TraceRequest) -> list[float]:
    source = OpenLoopSource(list(requests), BT)
    result = simulate(config, source, seed=0, catalog=catalog, check_invariants=True)
    return [r.ttft_s for r in sorted(result.records, key=lambda r: r.index)]


def test_a_prompt_reaches_the_engine_after_its_tokens_are_tokenised(catalog: Catalog) -> None:
    # 1,000 prompt tokens at 2 µs: the engine sees the request at 2 ms, its 10 ms prefill step
    # ends at 12 ms; without tokenising, at 10 ms.
    assert _ttfts(_config(2.0), catalog, request(0, 0.0, 1000, 4)) == pytest.approx([12 * MS])
    assert _ttfts(_config(0.0), catalog, request(0, 0.0, 1000, 4)) == pytest.approx([10 * MS])


def test_concurrent_prompts_are_tokenised_side_by_side(catalog: Catalog) -> None:
    # Four 1,000-token prompts arriving together are all tokenised by 2 ms (not one after the
    # other: 2, 4, 6, 8 ms) and share the first prefill step: 12 ms each. A 4,000-token prompt
    # arriving with them reaches the engine at 8 ms, while their step runs: its own step
    # starts at 12 ms.
    same = [request(i, 0.0, 1000, 4) for i in range(4)]
    assert _ttfts(_config(2.0), catalog, *same) == pytest.approx([12 * MS] * 4)
    mixed = [request(0, 0.0, 1000, 4), request(1, 0.0, 4000, 4)]
    assert _ttfts(_config(2.0), catalog, *mixed) == pytest.approx([12 * MS, 22 * MS])


def test_a_serial_tokenizer_takes_prompts_one_after_the_other(catalog: Catalog) -> None:
    # SGLang's way (its preset): the tokenising is the serial front end's, 2 µs per prompt
    # token. Two 1,000-token prompts arriving together reach the engine at 2 and 4 ms: the
    # first prefills 2-12 ms, the second in the next step, 12-22 ms.
    config = _config(0.0, frontend_us=(0.0, 2.0, 0.0))
    together = [request(0, 0.0, 1000, 4), request(1, 0.0, 1000, 4)]
    assert _ttfts(config, catalog, *together) == pytest.approx([12 * MS, 22 * MS])


def test_tokenising_precedes_the_serial_front_end(catalog: Catalog) -> None:
    # 1,000 tokens at 2 µs (2 ms), then the front end's 3 ms intake: the engine sees it at
    # 5 ms, its step ends at 15 ms and the first token is streamed 1 ms later.
    config = _config(2.0, frontend_us=(3000.0, 0.0, 1000.0))
    assert _ttfts(config, catalog, request(0, 0.0, 1000, 4)) == pytest.approx([16 * MS])


def test_presets_and_the_engine_line() -> None:
    assert load_preset("vllm").tokenize_us_per_prompt_token == pytest.approx(2.2)
    # SGLang's TokenizerManager tokenises in its one loop: its serial front end, by the token.
    sglang = load_preset("sglang")
    assert sglang.tokenize_us_per_prompt_token == 0.0
    assert sglang.frontend_prompt_token_us == pytest.approx(2.2)
    assert sglang.frontend_request_us == sglang.frontend_token_us == 0.0
    # TensorRT-LLM's fitted serial intake already holds its tokeniser.
    assert load_preset("trtllm").tokenize_us_per_prompt_token == 0.0
    assert _config(None).tokenize_us_per_prompt_token is None  # the preset's
    params = built_params(backend="vllm")
    assert params.tokenize_s_per_prompt_token == pytest.approx(2.2e-6)
    assert "tokenising 2.2 µs per prompt token" in params.describe()
    off = built_params(backend="vllm", tokenize_us_per_prompt_token=0.0)
    assert "tokenising" not in off.describe()


def _row(source: str, backend: str) -> SiliconRow:
    return SiliconRow(
        line=2, id="r", model="Qwen/Qwen3-32B", backend=backend, system="h100_sxm",
        precision="fp8", isl=1024, osl=1024, concurrency=8, tp=2, pp=1, attention_dp=1,
        moe_tp=2, moe_ep=1, measured_ttft_ms=1.0, measured_tpot_ms=1.0, source=source,
    )  # fmt: skip


def test_random_id_prompts_tokenise_slower() -> None:
    # InferenceX's client sends decoded random token ids: RANDOM_ID_TOKENIZE_FACTOR times the
    # preset's natural-text cost; aiperf's prompts (aiconfigurator) are text: the preset's.
    inferencex = "source_file=2026-04-06.csv; model=x; silicon_concurrency=8"
    aiperf = "source_file=/x/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/Qwen_Qwen3-32B.csv"
    assert protocol_settings(_row(inferencex, "vllm")) == {
        "tokenize_us_per_prompt_token": pytest.approx(2.2 * RANDOM_ID_TOKENIZE_FACTOR)
    }
    assert protocol_settings(_row(aiperf, "vllm")) == {}
    assert protocol_settings(_row(inferencex, "sglang")) == {
        "frontend_us": (0.0, pytest.approx(2.2 * RANDOM_ID_TOKENIZE_FACTOR), 0.0)
    }
    assert protocol_settings(_row(inferencex, "trtllm")) == {}  # no separate tokenising
