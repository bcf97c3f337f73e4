"""``table_cache``: built kernel tables kept on disk between processes, keyed on their inputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from hardware.catalog import shipped_catalog
from optimizer.cli.main import app
from simulator.latency import table_cache
from simulator.latency.table import ProfileTable
from simulator.latency.table_cache import cached_build, table_key
from simulator.latency.table_source import _shared_table, table_kernels


def _counting(value: object) -> tuple[list[int], object]:
    calls: list[int] = []

    def build() -> object:
        calls.append(1)
        return value

    return calls, build


def test_a_stored_build_is_loaded_not_rebuilt(tmp_path: Path) -> None:
    calls, build = _counting({"grid": [1.0, 2.0]})
    first = cached_build(tmp_path, "k1", build, dict)
    again = cached_build(tmp_path, "k1", build, dict)
    assert first == again == {"grid": [1.0, 2.0]}
    assert calls == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["table-k1.pkl"]


def test_a_corrupt_or_foreign_entry_is_rebuilt_and_replaced(tmp_path: Path) -> None:
    (tmp_path / "table-k1.pkl").write_bytes(b"not a pickle")
    calls, build = _counting({"a": 1})
    assert cached_build(tmp_path, "k1", build, dict) == {"a": 1}
    assert cached_build(tmp_path, "k1", build, dict) == {"a": 1}
    assert calls == [1]  # replaced by the rebuild, then read
    calls, build = _counting(7)  # an entry of another type under the key: rebuilt
    assert cached_build(tmp_path, "k1", build, int) == 7
    assert calls == [1]


def test_an_unwritable_directory_still_gives_the_table(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be")
    calls, build = _counting({"a": 1})
    assert cached_build(blocked / "tables", "k1", build, dict) == {"a": 1}
    assert cached_build(None, "k1", build, dict) == {"a": 1}  # no cache: built each time
    assert calls == [1, 1]


def test_old_entries_are_removed_past_the_limit(tmp_path: Path) -> None:
    for i in range(table_cache.MAX_ENTRIES + 3):
        cached_build(tmp_path, f"k{i}", lambda i=i: i, int)
        os.utime(tmp_path / f"table-k{i}.pkl", (i, i))  # strictly increasing ages
    names = {p.name for p in tmp_path.glob("table-*.pkl")}
    assert len(names) == table_cache.MAX_ENTRIES
    assert "table-k0.pkl" not in names
    assert f"table-k{table_cache.MAX_ENTRIES + 2}.pkl" in names


def test_the_key_follows_file_contents_and_inputs(tmp_path: Path) -> None:
    path = tmp_path / "vllm_gemm.csv"
    path.write_text("m,n,k\n1,2,3\n")
    key = table_key([path], {"engine": "vllm"})
    assert table_key([path], {"engine": "vllm"}) == key
    assert table_key([path], {"engine": "sglang"}) != key
    path.write_text("m,n,k\n1,2,4\n")
    assert table_key([path], {"engine": "vllm"}) != key


def test_a_cached_table_equals_the_built_one(tmp_path: Path) -> None:
    h100 = shipped_catalog().gpu("h100_sxm")
    built = table_kernels(h100, engine="sglang", warn_range=False).table
    _shared_table.cache_clear()  # a fresh process: the next call reads what the first stored
    stored = table_kernels(h100, engine="sglang", warn_range=False, cache_dir=tmp_path).table
    _shared_table.cache_clear()
    loaded = table_kernels(h100, engine="sglang", warn_range=False, cache_dir=tmp_path).table
    assert len(list(tmp_path.glob("table-*.pkl"))) == 1
    assert isinstance(loaded, ProfileTable)
    assert loaded is not stored
    for table in (stored, loaded):
        assert table.gemm.keys() == built.gemm.keys()
        for dtype, grid in built.gemm.items():
            assert np.array_equal(table.gemm[dtype].seconds, grid.seconds)
            assert table.gemm[dtype].axes == grid.axes
        assert table.decode.keys() == built.decode.keys()
    kernels = table_kernels(h100, engine="sglang", warn_range=False, cache_dir=tmp_path)
    assert kernels.gemm(300, 8192, 4096, "fp8") == table_kernels(
        h100, engine="sglang", warn_range=False
    ).gemm(300, 8192, 4096, "fp8")


def test_simulate_keeps_its_tables_in_the_user_cache() -> None:
    # tests/conftest.py points $XDG_CACHE_HOME at an empty directory for the session.
    args = ["simulate", "--model", "Qwen/Qwen3-8B", "--gpu", "h200_sxm", "--max-requests", "30"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    tables = Path(os.environ["XDG_CACHE_HOME"]) / "kvplan" / "tables"
    assert len(list(tables.glob("table-*.pkl"))) >= 1
