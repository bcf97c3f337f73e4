"""Prefix caching off (``ServingConfig.prefix_caching``): no reuse across requests, same work.

The switch renames each request's blocks to ids no other request shares
(``simulator.workload.no_reuse``); these tests hold it to what an engine with
``--no-enable-prefix-caching`` does: zero hits in every tier, every request still served, and
a shared-prefix workload slower than with caching on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.launch import launch_commands
from optimizer.workloads import workload_from_arg
from simulator.api import SimResult, simulate
from simulator.config import ServingConfig
from simulator.presets import BACKEND_PRESETS
from simulator.workload.no_reuse import NoPrefixReuse
from simulator.workload.request import TraceRequest
from simulator.workload.source import OpenLoopSource

SMALL = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "h100_sxm"}


def _bundled(**fields: object) -> SimResult:
    config = ServingConfig.model_validate({**SMALL, **fields})
    return simulate(config, workload_from_arg(None, max_requests=150), seed=3)


def test_off_gives_zero_hits_and_the_same_finished_requests_on_the_bundled_trace() -> None:
    on = _bundled(l2_dram_gib=64, l3_tier="nvme_4tib")
    off = _bundled(l2_dram_gib=64, l3_tier="nvme_4tib", prefix_caching=False)
    assert on.summary is not None
    assert off.summary is not None
    # The trace does share prefixes, so the zero below is the switch, not the workload.
    assert on.summary.prefill_tokens_saved_ratio > 0
    assert off.summary.hit_ratio == {"l1": 0.0, "l2": 0.0, "l3": 0.0}
    assert off.summary.prefill_tokens_saved_ratio == 0.0
    assert off.summary.n_requests == on.summary.n_requests
    assert off.summary.n_rejected == on.summary.n_rejected
    # Every prompt token is computed: more prefill work than with reuse.
    assert off.diagnostics["prefill_tokens"] > on.diagnostics["prefill_tokens"]


def _shared_prefix_source(
    n: int = 24, prefix_blocks: int = 200, block_tokens: int = 16
) -> Iterator[TraceRequest]:
    """``n`` requests, one every 0.5 s, each a 200-block shared prefix plus 4 own blocks."""
    next_id = prefix_blocks + 1
    for i in range(n):
        own = tuple(range(next_id, next_id + 4))
        next_id += 4
        blocks = tuple(range(1, prefix_blocks + 1)) + own
        yield TraceRequest(i, 0.5 * i, len(blocks) * block_tokens, 32, blocks)


def test_shared_prefixes_make_ttft_with_caching_off_no_better() -> None:
    ttft = {}
    for caching in (True, False):
        config = ServingConfig.model_validate({**SMALL, "prefix_caching": caching})
        source = OpenLoopSource(list(_shared_prefix_source()), block_tokens=16)
        result = simulate(config, source, seed=0)
        assert result.summary is not None
        assert result.summary.n_requests == 24
        ttft[caching] = result.summary.ttft_ms.mean
    assert ttft[False] >= ttft[True]
    assert ttft[False] > 2 * ttft[True]  # 3,264 prompt tokens computed vs 64 after the first


def test_none_follows_the_backend_preset(tmp_path: Path) -> None:
    shipped = Path(__file__).parents[2] / "simulator" / "data" / "presets" / BACKEND_PRESETS["vllm"]
    text = shipped.read_text().replace("prefix_caching: true", "prefix_caching: false")
    assert "prefix_caching: false" in text
    preset = tmp_path / "vllm_no_apc.yaml"
    preset.write_text(text)
    by_preset = _bundled(backend=str(preset))
    assert by_preset.summary is not None
    assert by_preset.summary.prefill_tokens_saved_ratio == 0.0
    overridden = _bundled(backend=str(preset), prefix_caching=True)
    assert overridden.summary is not None
    assert overridden.summary.prefill_tokens_saved_ratio > 0


class _Turns:
    """A closed-loop-like source: each finish triggers one more request, up to ``n``."""

    block_tokens = 16

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen: list[TraceRequest] = []

    def start(self) -> Iterator[TraceRequest]:
        yield TraceRequest(0, 0.0, 48, 1, (1, 2, 3))

    def on_finish(self, request: TraceRequest, now_s: float) -> TraceRequest | None:
        self.seen.append(request)
        if request.index + 1 >= self.n:
            return None
        # The next turn extends the previous prompt (a shared prefix).
        return TraceRequest(
            request.index + 1,
            now_s,
            16 * (len(request.block_ids) + 1),
            1,
            (*request.block_ids, 10 + request.index),
        )


def test_renamed_ids_are_unique_and_the_inner_source_sees_its_own_requests() -> None:
    inner = _Turns(4)
    source = NoPrefixReuse(inner)
    renamed = list(source.start())
    while True:
        follow = source.on_finish(renamed[-1], float(len(renamed)))
        if follow is None:
            break
        renamed.append(follow)
    assert [len(r.block_ids) for r in renamed] == [3, 4, 5, 6]
    ids = [b for r in renamed for b in r.block_ids]
    assert len(set(ids)) == len(ids)
    assert max(ids) < 0
    # The inner source got back what it made (positive ids), so its follow-ups extend them.
    assert [r.block_ids for r in inner.seen] == [
        (1, 2, 3),
        (1, 2, 3, 10),
        (1, 2, 3, 10, 11),
        (1, 2, 3, 10, 11, 12),
    ]


@pytest.mark.parametrize("caching", [None, True, False])
def test_launch_lines_carry_the_engine_flag(caching: bool | None) -> None:
    params = {"model": "Qwen/Qwen3-32B", "tp": 2} | (
        {} if caching is None else {"prefix_caching": caching}
    )
    out = launch_commands(params)
    off = caching is False
    assert ("--no-enable-prefix-caching" in out["vllm"]["command"]) is off
    assert ("--enable-prefix-caching" in out["vllm"]["command"].split()) is not off
    assert ("--disable-radix-cache" in out["sglang"]["command"]) is off
    reuse = f'"enable_block_reuse": {"false" if off else "true"}'
    assert any(reuse in note for note in out["trtllm"]["notes"])
