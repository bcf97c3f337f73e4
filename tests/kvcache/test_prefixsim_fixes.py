"""The PrefixSim fixes of issue 16, each pinned by a test that fails on the earlier behaviour:
micro eviction by default for partial-node policies, ``name:key=value`` policy parameters,
unobserved eviction rounds, hole statistics, the ``--no-pin`` self-eviction warning, the
oracle future without skipped requests, and the 1-based ``session_next`` of lcp files."""

from __future__ import annotations

import json
import struct
from collections import OrderedDict
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pytest
from kvcache_helpers import TRACES_DIR, as_requests, random_prefix_trace, read_mooncake
from typer.testing import CliRunner

from optimizer.cli.main import app
from simulator.kvcache.holes import HoleStats
from simulator.kvcache.params import PolicySpec, parse_policy_specs
from simulator.kvcache.policies import EvictionPolicy, make_policy
from simulator.kvcache.policies.partial_node import PartialNodeRandomCompute
from simulator.kvcache.replay import replay
from simulator.kvcache.served_future import without_skipped
from simulator.workload import build_future, convert_to_lcp, open_trace
from simulator.workload.lcp_header import HEADER_BYTES
from slo.inputfile import InputError

runner = CliRunner()


def test_partial_node_defaults_to_micro_batches_of_64() -> None:
    policy = PartialNodeRandomCompute(8, rng=np.random.default_rng(0))
    assert (policy.eviction_mode, policy.micro_batch) == ("micro", 64)


# --- policy parameters ----------------------------------------------------------------------


def test_policy_specs_parse_typed_values_and_split_on_names() -> None:
    specs = parse_policy_specs(
        "partial_node_random_compute:eviction_mode=drain,n_sample=32,lru,s3fifo:small_ratio=0.2"
    )
    assert specs == [
        PolicySpec("partial_node_random_compute", (("eviction_mode", "drain"), ("n_sample", 32))),
        PolicySpec("lru"),
        PolicySpec("s3fifo", (("small_ratio", 0.2),)),
    ]
    assert specs[0].label == "partial_node_random_compute:eviction_mode=drain,n_sample=32"
    assert parse_policy_specs("wtinylfu:doorkeeper=false")[0].kwargs() == {"doorkeeper": False}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "unknown policy"),
        ("lru:size=3", "unknown parameter 'size'; lru takes none"),
        ("random_compute:n_samples=3", "random_compute takes n_sample=<int, default 8>"),
        ("random_compute:n_sample=x", "expected a value of type int"),
        ("random_compute:n_sample=0", "n_sample must be ≥ 1"),
        ("partial_node_random_compute:eviction_mode=bulk", "expected one of drain, micro"),
        ("random_compute:n_sample", "expected key=value"),
        ("n_sample=3", "a parameter needs a policy"),
    ],
)
def test_policy_spec_errors_are_one_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        parse_policy_specs(text)
    assert "\n" not in str(err.value)


def test_cli_accepts_parameters_and_names_runs_by_them(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    lines = [{"timestamp": i, "input_length": 64, "output_length": 1, "hash_ids": [i % 3, i]}
             for i in range(40)]  # fmt: skip
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    algo = "partial_node_random_compute:eviction_mode=drain,partial_node_random_compute"
    result = runner.invoke(app, ["replay", str(trace), "--cache-size", "8", "--algo", algo])
    assert result.exit_code == 0, result.output
    assert "algo=partial_node_random_compute:eviction_mode=drain " in result.stdout
    assert "algo=partial_node_random_compute " in result.stdout
    bad = runner.invoke(app, ["replay", str(trace), "--cache-size", "8", "--algo", "lru:k=1"])
    assert isinstance(bad.exception, InputError)


# --- unobserved eviction rounds ----------------------------------------------------------------


class _Composite(EvictionPolicy):
    """FIFO that evicts inside a "sub-cache" and reports no victim (as S3FIFO-family composites
    do in libCacheSim), so the serve loop must observe the occupancy drop itself."""

    name = "composite"
    supports_pinning = False

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, rng=np.random.default_rng(0))
        self.queue: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self.queue)

    def find(self, block: int) -> bool:
        return block in self.queue

    def access(self, block: int, cost: float, next_access: int) -> None:
        del cost, next_access
        self.queue[block] = None

    def evict(self, pinned: Collection[int]) -> list[int]:
        del pinned
        self.queue.popitem(last=False)
        return []  # freed one block, reported none

    def remove(self, block: int) -> None:
        self.queue.pop(block, None)


def test_unreported_victims_are_counted_as_unobserved_rounds() -> None:
    # Cache 3: [1,2,3] fills it (FIFO order 3,2,1 deepest-first); [1,4] needs one slot: the
    # policy drops 3 silently (one unobserved round, progress 1). [1,5,6] needs two: it drops
    # 2, then 1 (the re-probe finds the request's own block gone: a self-eviction), then 4.
    result = replay(as_requests([[1, 2, 3], [1, 4], [1, 5, 6]]), _Composite(3), pin=False)
    assert result.n_unobserved_eviction_round == result.n_eviction == 4
    assert result.n_self_eviction == 1
    assert result.n_unexpected_eviction == 0
    assert (
        replay(as_requests([[1, 2], [3, 4]]), make_policy("lru", 2)).summary()[
            "n_unobserved_eviction_round"
        ]
        == 0
    )


# --- holes, warnings ---------------------------------------------------------------------------


def test_hole_statistics() -> None:
    stats = HoleStats()
    for holes in ([], [(0, 3)], [(1, 1), (4, 2), (9, 8)]):
        stats.add(holes)
    assert (stats.n_requests, stats.n_with_holes, stats.n_holes, stats.max_holes) == (3, 2, 4, 3)
    assert stats.mean_holes == 4 / 3
    assert stats.mean_holes_when_missing == 2.0
    assert (stats.missed_blocks, stats.max_length, stats.mean_length) == (14, 8, 3.5)
    assert stats.buckets() == {"1-1": 1, "2-3": 2, "8-15": 1}


def test_dump_holes_prints_and_writes_statistics(tmp_path: Path) -> None:
    trace = tmp_path / "tiny.jsonl"
    rows = [[0, 1, 2, 3], [0, 1, 4], [0, 1, 2, 3]]
    trace.write_text(
        "".join(
            json.dumps({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": r})
            + "\n"
            for r in rows
        )
    )
    args = ["replay", str(trace), "--cache-size", "16", "--dump-holes", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Holes" in result.stdout
    assert "hole lengths lru @ 16 (blocks: holes): 1-1:1 4-7:1" in result.stdout
    stats = json.loads((tmp_path / "holes_tiny_cache16_lru.stats.json").read_text())
    assert (stats["n_holes"], stats["missed_blocks"], stats["max_hole_length"]) == (2, 5, 4)


def test_no_pin_self_evictions_warn_for_pinning_policies() -> None:
    # Cache 5, PrefixSim case c: without pins LRU evicts 4 blocks of the request itself.
    unpinned = replay(as_requests([[1, 2, 3, 4], [5], [1, 2, 3, 4, 6]]), make_policy("fifo", 5),
                      pin=False)  # fmt: skip
    assert unpinned.n_self_eviction > 0
    assert any("pinning off" in w for w in unpinned.warnings)
    pinned = replay(as_requests([[1, 2, 3, 4], [5], [1, 2, 3, 4, 6]]), make_policy("fifo", 5))
    assert pinned.warnings == ()


# --- oracle future -----------------------------------------------------------------------------


def test_oracle_future_leaves_out_skipped_requests() -> None:
    # Cache 2: request 1 (three blocks) is skipped, so block 1's next access is request 4's.
    # Counting the skipped access would make belady keep 1 over 2 at request 2 and lose the
    # hit on 2 in request 3.
    lists = [[1, 2], [7, 8, 1], [3], [2, 9], [1]]
    requests = as_requests(lists)
    table = build_future(requests)
    served = np.array([len(set(ids)) <= 2 for ids in lists])
    cleaned = without_skipped(table, served)
    first, _ = cleaned.of(0)
    assert first.tolist()[0] == table.offsets[4] + 1  # 1 -> request 4, not request 1
    assert replay(requests, make_policy("belady", 2)).n_block_hits == 1
    with_skipped = replay(requests, make_policy("belady", 2), future=table.rows())
    assert with_skipped.n_block_hits == 0


def test_belady_at_64_blocks_excludes_skipped_accesses_on_the_bundled_trace() -> None:
    path = TRACES_DIR / "mooncake_conversation_trace.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not present")
    requests = read_mooncake(path)
    assert round(replay(requests, make_policy("belady", 64)).block_hit_ratio, 6) == 0.061137
    included = replay(requests, make_policy("belady", 64), future=build_future(requests).rows())
    assert round(included.block_hit_ratio, 6) == 0.061061


def test_cli_oracle_future_excludes_skipped_requests_for_stored_futures(tmp_path: Path) -> None:
    requests = random_prefix_trace(np.random.default_rng(5), 200, max_new=12)
    lines = [
        json.dumps(
            {
                "timestamp": r.index,
                "input_length": 1,
                "output_length": 1,
                "hash_ids": list(r.block_ids),
            }
        )
        for r in requests
    ]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    lcp = tmp_path / "t.lcp"
    convert_to_lcp(jsonl, lcp)
    expected = replay(list(open_trace(jsonl)), make_policy("belady", 12))
    assert expected.n_req_skipped > 0
    for path in (jsonl, lcp):
        args = ["replay", str(path), "--cache-size", "12", "--algo", "belady", "--json"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)[0]["block_hit_ratio"] == (expected.block_hit_ratio)


# --- lcp session_next ----------------------------------------------------------------------


def test_lcp_session_next_is_stored_one_based(tmp_path: Path) -> None:
    jsonl = tmp_path / "q.jsonl"
    rows = [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 16,
         "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 1.0, "input_length": 32,
         "output_length": 1, "type": "text", "turn": 2, "hash_ids": [1, 2]},
    ]  # fmt: skip
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "q.lcp"
    convert_to_lcp(jsonl, out)
    data = out.read_bytes()
    assert struct.unpack_from("<I", data, 8)[0] == 2  # format version 2
    first_session_next = struct.unpack_from("<q", data, HEADER_BYTES + 40)[0]
    assert first_session_next == 2  # request 1, 1-based
    second = HEADER_BYTES + 68 + 16  # after request 0's record and its one block entry
    assert struct.unpack_from("<q", data, second + 40)[0] == -1
    annotated = list(open_trace(out).annotated())
    assert annotated[0].session_next_index == 1
