"""``kvplan analyze``: the one-pass LRU curve equals per-size LRU replays (the inclusion
property, stated in ``simulator/kvcache/stack_distance.py``), on both bundled traces and on
synthetic traces whose ids are not prefix-unique; the distributions on hand-made traces; the
CLI's tables, JSON, figures and errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from kvcache_helpers import TRACES_DIR, as_requests, read_mooncake
from typer.testing import CliRunner

from optimizer.cli.main import app
from simulator.kvcache.analyze import analyze
from simulator.kvcache.cost import parse_cost_model
from simulator.kvcache.lru_curve import LruCurve, TraceArrays, capacity_for, lru_curve
from simulator.kvcache.policies import make_policy
from simulator.kvcache.replay import replay
from simulator.workload.request import TraceRequest
from slo.inputfile import InputError

runner = CliRunner()
QWEN = parse_cost_model("qwen3coder30b_blksz_16")


def _sizes(curve: LruCurve, n: int) -> list[int]:
    """``n`` sizes: a few below d_max (computed by extra passes), the rest log-spaced above."""
    low = [s for s in (4, 16, 64, 100) if s < curve.d_max]
    high = np.geomspace(curve.d_max, curve.n_ids + 10, n - len(low)).round().astype(int)
    return sorted(set(low) | set(high.tolist()))


def _check_against_replays(requests: list[TraceRequest], n_sizes: int, **options: object) -> float:
    """Max |curve - replay| over ``n_sizes`` sizes for hit and saving ratios (must be 0)."""
    arrays = TraceArrays.from_requests(requests)
    stop = options.get("match") == "stop-at-first-miss"
    deepest = options.get("replay_order", "deepest-first") == "deepest-first"
    model = options.get("cost_model", parse_cost_model("uniform"))
    probe = lru_curve(arrays)
    sizes = _sizes(probe, n_sizes)
    curve = lru_curve(
        arrays,
        cost_model=model,  # type: ignore[arg-type]
        stop_at_first_miss=stop,
        deepest_first=deepest,
        low_sizes=sizes,
    )
    assert len(sizes) >= n_sizes - 1
    worst = 0.0
    for size in sizes:
        result = replay(requests, make_policy("lru", size), **options)  # type: ignore[arg-type]
        point = curve.at(size)
        assert (point.n_block_hits, point.n_blocks) == (result.n_block_hits, result.n_blocks)
        assert point.saved_cost == pytest.approx(result.saved_cost, rel=1e-12)
        worst = max(
            worst,
            abs(point.block_hit_ratio - result.block_hit_ratio),
            abs(point.compute_saving_ratio - result.compute_saving_ratio),
        )
    return worst


def _mooncake(name: str) -> list[TraceRequest]:
    path = TRACES_DIR / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    return read_mooncake(path)


def _raw_trace(seed: int, n: int = 400) -> list[TraceRequest]:
    """Ids from a small alphabet in random order: not prefix-unique, with repeats inside
    requests, long requests that small caches skip."""
    rng = np.random.default_rng(seed)
    lists = []
    for _ in range(n):
        length = int(rng.integers(1, 40))
        lists.append([int(x) for x in rng.zipf(1.3, size=length) % 300])
    return as_requests(lists)


@pytest.mark.parametrize(
    "name",
    [
        "mooncake_synthetic_trace",
        pytest.param("mooncake_conversation_trace", marks=pytest.mark.slow),  # 20 replays, ~10 s
    ],
)
def test_curve_equals_replays_on_bundled_traces(name: str) -> None:
    requests = _mooncake(name)
    assert _check_against_replays(requests, 20, cost_model=QWEN) == 0.0


@pytest.mark.parametrize("seed", [1, 2])
def test_curve_equals_replays_on_non_prefix_unique_traces(seed: int) -> None:
    requests = _raw_trace(seed)
    ids = {b for r in requests for b in r.block_ids}
    assert len(ids) < sum(len(r.block_ids) for r in requests) / 5  # heavy reuse of raw ids
    assert _check_against_replays(requests, 24) == 0.0
    assert _check_against_replays(requests, 24, cost_model=parse_cost_model("position")) == 0.0


@pytest.mark.parametrize(
    "options",
    [
        {"match": "stop-at-first-miss"},
        {"replay_order": "prefix-order"},
        {"match": "stop-at-first-miss", "replay_order": "prefix-order", "pin": False},
    ],
)
def test_curve_equals_replays_in_every_mode(options: dict[str, object]) -> None:
    assert _check_against_replays(_raw_trace(3, 300), 20, **options) == 0.0


def test_below_the_largest_request_skips_break_inclusion() -> None:
    # Request 1 (3 blocks) is served at C = 3 but skipped at C = 2; that changes what C = 2
    # keeps: the single pass would be wrong there, the extra pass is exact.
    requests = as_requests([[1, 2], [3, 4, 5], [1, 2]])
    curve = lru_curve(TraceArrays.from_requests(requests), low_sizes=[2])
    assert curve.d_max == 3
    assert curve.at(2).n_block_hits == replay(requests, make_policy("lru", 2)).n_block_hits == 2
    assert curve.at(3).n_block_hits == replay(requests, make_policy("lru", 3)).n_block_hits == 0
    with pytest.raises(KeyError):
        curve.at(1)  # below d_max and not computed


def test_capacity_for_a_share_of_the_maximum() -> None:
    requests = as_requests([[1, 2, 3], [1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]])
    curve = lru_curve(TraceArrays.from_requests(requests))
    best = curve.at(6).block_hit_ratio  # 9 hits of 15 probes
    assert best == 9 / 15
    # at C = 3 only the immediate repeat hits (3 of 9 hits); all 9 need C = 6
    assert capacity_for(curve, 0.3) == 3
    assert capacity_for(curve, 0.99) == 6


def test_distributions_on_a_hand_trace() -> None:
    requests = [
        TraceRequest(0, 0.0, 32, 5, (1, 2), session_id=7),
        TraceRequest(1, 10.0, 48, 6, (1, 2, 3), session_id=7),
        TraceRequest(2, 25.0, 16, 7, (1,), session_id=8),
    ]
    result = analyze(TraceArrays.from_requests(requests), 16)
    stats = result.stats
    # re-accesses: 1 and 2 in request 1 (stack positions 0 and 1), 1 in request 2 (position 0)
    assert stats.reuse_distance_blocks.n == 3
    assert stats.reuse_distance_blocks.max == 1.0
    assert sorted(stats.reuse_time_s.percentiles.values())[0] >= 10.0
    assert stats.reuse_time_requests.max == 1.0
    assert stats.lifetime_s.max == 25.0  # block 1: request 0 to request 2
    assert stats.sharing.shared_blocks == 1  # block 1 in sessions 7 and 8
    assert stats.sharing.shared_accesses == 3
    assert stats.sharing.sessions_known
    assert stats.session_footprint_blocks.max == 3.0
    assert stats.request_blocks.mean == 2.0
    assert stats.input_tokens.max == 48.0
    assert result.max_point.n_block_hits == 3


def test_cli_tables_json_and_plots(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    rows = [[0, 1, 2], [0, 1, 3], [4], [0, 1, 2, 5]]
    record = {"timestamp": 0, "input_length": 1024, "output_length": 2}
    trace.write_text("".join(json.dumps({**record, "hash_ids": r}) + "\n" for r in rows))
    table = runner.invoke(app, ["analyze", str(trace), "--model", "Qwen3-32B"])
    assert table.exit_code == 0, table.output
    assert "Exact LRU curve" in table.stdout
    assert "Capacity for a share of the maximum" in table.stdout
    out = runner.invoke(app, ["analyze", str(trace), "--json", "--plot", str(tmp_path / "fig")])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["n_blocks"] == 11
    assert data["max"]["n_block_hits"] == 5
    assert {row["metric"] for row in data["capacity"]} == {
        "block_hit_ratio",
        "compute_saving_ratio",
    }
    assert data["capacity"][0]["gib"] is None
    assert {"reuse_distance_blocks", "sharing", "session_footprint_blocks"} <= set(data["stats"])
    assert (tmp_path / "fig" / "lru_curve.png").stat().st_size > 0
    assert (tmp_path / "fig" / "distributions.png").stat().st_size > 0


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(tmp_path / "missing.jsonl")])
    assert isinstance(result.exception, InputError)
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"timestamp": 0, "input_length": 1, "output_length": 1,
                                 "hash_ids": [1]}) + "\n")  # fmt: skip
    bad = runner.invoke(app, ["analyze", str(trace), "--kv-precision", "fp3"])
    assert isinstance(bad.exception, InputError)
    assert "--kv-precision 'fp3'" in str(bad.exception)
