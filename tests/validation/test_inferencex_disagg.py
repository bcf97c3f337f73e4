"""``simulator.validation.inferencex_disagg``: InferenceX's Dynamo TensorRT-LLM recipes give the
decode workers' running cap that the exported disaggregated rows do not record."""

from __future__ import annotations

import pytest

from hardware.catalog import shipped_catalog
from simulator.config import ServingConfig
from simulator.validation import inferencex_disagg
from simulator.validation.inferencex_disagg import RECIPES, DisaggRecipe, decode_cap
from simulator.validation.silicon.disagg import DisaggRow, PoolLayout
from simulator.validation.validate import row_config

#: As the DeepSeek-V3 rows of the H100 file write their source (a db-dump of InferenceX).
IX_DYNAMO = (
    "db-dump/2026-04-27; config_id=494; silicon_concurrency=6; "
    "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post3"
)


def _v3_row(
    users: int = 6, isl: int = 1024, decode_workers: int = 3, source: str = IX_DYNAMO
) -> DisaggRow:
    """A row shaped like the H100 file's DeepSeek-V3 rows: one prefill worker of TP1 x DP16,
    ``decode_workers`` of TP16, and the even split users / workers as the decode batch."""
    prefill = PoolLayout(workers=1, tp=1, pp=1, attention_dp=16, moe_tp=1, moe_ep=16,
                         batch_size=1)  # fmt: skip
    decode = PoolLayout(workers=decode_workers, tp=16, pp=1, attention_dp=1, moe_tp=1,
                        moe_ep=16, batch_size=users // decode_workers)  # fmt: skip
    return DisaggRow(
        line=2, id="dsv3", model="deepseek-ai/DeepSeek-V3", backend="trtllm", system="h100_sxm",
        isl=isl, osl=1024, concurrency=users, concurrency_from="silicon_concurrency",
        precision="fp8", measured_ttft_ms=12345.0, measured_tpot_ms=14.0, source=source,
        prefill=prefill, decode=decode,
    )  # fmt: skip


def _decode_cap_in_config(row: DisaggRow) -> int:
    cfg = row_config(row, shipped_catalog(), latency_model="roofline")
    assert isinstance(cfg, ServingConfig), cfg
    assert cfg.decode is not None
    cap = cfg.decode.max_running_requests
    assert cap is not None
    return cap


@pytest.mark.parametrize(
    ("users", "isl", "workers", "cap"),
    [(6, 1024, 3, 1), (9, 1024, 3, 2), (30, 1024, 3, 8), (60, 1024, 3, 16), (6, 8192, 3, 1),
     (30, 8192, 3, 8), (154, 8192, 2, 64)],
)  # fmt: skip
def test_the_recipes_decode_cap_replaces_the_recorded_even_split(
    users: int, isl: int, workers: int, cap: int
) -> None:
    row = _v3_row(users, isl, workers)
    assert row.decode.batch_size == users // workers  # what the export records
    recipe = decode_cap(row)
    assert recipe is not None
    assert recipe.decode_batch == cap
    assert "dsr1-fp8-h100-dynamo-trt" in recipe.source
    assert _decode_cap_in_config(row) == cap


def test_a_row_whose_workers_match_no_recipe_keeps_its_recorded_batch() -> None:
    row = _v3_row(users=8, decode_workers=4)  # no search-space point ran 8 users on 4 workers
    assert decode_cap(row) is None
    assert _decode_cap_in_config(row) == 2


def test_the_worker_counts_pick_the_recipe_at_a_point_run_twice() -> None:
    # 154 users at 8k/1k: the plain recipe has 2 TEP16 decode workers of 64, the MTP one a
    # single DEP16 worker of 8 per rank; the row's recorded 2 workers decide.
    assert decode_cap(_v3_row(154, 8192, 2)) == next(
        r for r in RECIPES if (r.isl, r.users, r.spec) == (8192, 154, "stp")
    )
    assert decode_cap(_v3_row(154, 8192, 1)) is None  # recorded TP16, not the MTP's DEP16


def test_rows_of_other_harnesses_are_not_matched() -> None:
    aiconfigurator = "source_file=/x/aic-auto-gap-analysis/data/h100_sxm/trtllm/1.0/x.csv"
    assert decode_cap(_v3_row(source=aiconfigurator)) is None


def test_recipes_that_disagree_on_the_cap_leave_the_row_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = RECIPES[0]
    other = DisaggRecipe(**{**{f: getattr(plain, f) for f in plain.__slots__},
                            "spec": "stp", "decode_batch": plain.decode_batch + 1})  # fmt: skip
    row = _v3_row(plain.users, plain.isl, plain.decode_workers)
    assert decode_cap(row) is not None
    monkeypatch.setattr(inferencex_disagg, "RECIPES", (plain, other))
    assert decode_cap(row) is None


def test_the_table_is_the_search_space_as_written() -> None:
    assert sorted({(r.isl, r.spec) for r in RECIPES}) == [
        (1024, "mtp"), (1024, "stp"), (8192, "mtp"), (8192, "stp"),
    ]  # fmt: skip
    stp_1k = [r.users for r in RECIPES if (r.isl, r.spec) == (1024, "stp")]
    assert stp_1k == [6, 9, 30, 60, 231, 462, 924, 1845, 4916]
    assert len({(r.isl, r.spec, r.users) for r in RECIPES}) == len(RECIPES)
