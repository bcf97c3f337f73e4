"""``simulator.validation.inferencex_disagg``: InferenceX's Dynamo TensorRT-LLM recipes give the
decode workers' running cap that the exported disaggregated rows do not record."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from hardware.catalog import shipped_catalog
from simulator.config import ServingConfig
from simulator.validation import inferencex_disagg
from simulator.validation.inferencex_disagg import DisaggRecipe, decode_cap, prefill_limits, recipes
from simulator.validation.silicon.disagg import DisaggRow, PoolLayout
from simulator.validation.validate import row_config

#: As the DeepSeek-V3 rows of the H100 file write their source (a db-dump of InferenceX).
IX_DYNAMO = (
    "db-dump/2026-04-27; config_id=494; silicon_concurrency=6; "
    "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post3"
)


def _pool(workers: int, gpus: int, dp_attn: bool, batch: int | None) -> PoolLayout:
    """A pool as the exports record it: a ``dp-attn`` worker of N GPUs is TP1 × DP N."""
    tp, dp = (1, gpus) if dp_attn else (gpus, 1)
    return PoolLayout(workers=workers, tp=tp, pp=1, attention_dp=dp, moe_tp=1, moe_ep=gpus,
                      batch_size=batch)  # fmt: skip


def _row(
    *,
    model: str,
    system: str,
    precision: str,
    isl: int,
    osl: int,
    users: int,
    prefill: tuple[int, int],
    decode: tuple[int, int, bool],
    source: str = IX_DYNAMO,
) -> DisaggRow:
    """A row shaped like the exports': prefill workers of TP1 × DP N, the decode pool of the
    point, and the even split users / decode workers as the decode batch."""
    workers, gpus, dp_attn = decode
    return DisaggRow(
        line=2, id="x", model=model, backend="trtllm", system=system, isl=isl, osl=osl,
        concurrency=users, concurrency_from="silicon_concurrency", precision=precision,
        measured_ttft_ms=12345.0, measured_tpot_ms=14.0, source=source,
        prefill=_pool(prefill[0], prefill[1], True, 1),
        decode=_pool(workers, gpus, dp_attn, users // workers),
    )  # fmt: skip


def _v3_row(
    users: int = 6, isl: int = 1024, decode_workers: int = 3, source: str = IX_DYNAMO
) -> DisaggRow:
    """A row shaped like the H100 file's DeepSeek-V3 rows: one prefill worker of TP1 x DP16,
    ``decode_workers`` of TP16."""
    return _row(model="deepseek-ai/DeepSeek-V3", system="h100_sxm", precision="fp8", isl=isl,
                osl=1024, users=users, prefill=(1, 16), decode=(decode_workers, 16, False),
                source=source)  # fmt: skip


def _decode_cap_in_config(row: DisaggRow) -> int:
    cfg = row_config(row, shipped_catalog(), latency_model="roofline")
    assert isinstance(cfg, ServingConfig), cfg
    assert cfg.decode is not None
    cap = cfg.decode.max_running_requests
    assert cap is not None
    return cap


def _point(key: str, isl: int, osl: int, users: int, spec: str) -> list[DisaggRecipe]:
    wanted = (key, isl, osl, users, spec)
    return [r for r in recipes() if (r.key, r.isl, r.osl, r.users, r.spec) == wanted]


# --- the table -----------------------------------------------------------------------------


def test_the_table_holds_every_dynamo_trt_key_of_the_master_file() -> None:
    table = recipes()
    assert recipes() is table  # read once
    assert len(table) == 416
    assert len({r.key for r in table}) == 11
    assert {r.gpu for r in table} == {"b200_sxm", "b300_sxm", "gb200", "gb300", "h100_sxm",
                                      "h200_sxm"}  # fmt: skip
    assert {r.family for r in table} == {"dsr1", "gptoss"}
    assert all(r.key.endswith("-dynamo-trt") for r in table)


def test_every_row_is_valid() -> None:
    catalog = shipped_catalog()
    name = re.compile(r"ctx(\d+)_gen(\d+)_(tep|dep|tp|dp)(\d+)_batch(\d+)_")
    for r in recipes():
        counts = (r.isl, r.osl, r.users, r.prefill_workers, r.prefill_tp, r.prefill_ep,
                  r.decode_workers, r.decode_tp, r.decode_ep, r.decode_batch)  # fmt: skip
        assert all(isinstance(n, int) and n > 0 for n in counts), r
        assert catalog.gpu(r.gpu).name.lower() == r.gpu, r
        assert r.spec in ("stp", "mtp"), r
        assert r.weights == r.key.split("-")[1], r
        assert r.weights in ("fp4", "fp8"), r
        assert r.key.startswith(r.family + "-"), r
        assert r.backend == "trtllm", r
        if not r.config_file:  # gpt-oss: the master file sets DECODE_MAX_BATCH_SIZE itself
            assert r.decode_batch_from == "DECODE_MAX_BATCH_SIZE", r
            assert r.name_batch is None, r
            continue
        m = name.search(r.config_file)
        assert m, r.config_file
        assert (int(m[1]), int(m[2]), int(m[4])) == (r.prefill_workers, r.decode_workers,
                                                     r.decode_tp), r  # fmt: skip
        assert r.name_batch == int(m[5]), r
        assert f"/{r.spec}/" in r.config_file, r
        if r.decode_batch_from == "name":
            assert r.decode_batch == r.name_batch, r
        else:
            assert r.decode_batch_from.startswith("recipe_file "), r


def test_points_are_as_written() -> None:
    # dsr1-fp4-gb200 1k/1k STP: ctx1_gen1_dep32_batch16 at [666], ctx1_gen4_tep8_batch32 at
    # [12, 24, 48, 96, 192].
    (dep32,) = _point("dsr1-fp4-gb200-dynamo-trt", 1024, 1024, 666, "stp")
    assert (dep32.decode_workers, dep32.decode_tp, dep32.decode_dp_attn) == (1, 32, True)
    assert dep32.decode_batch == 16
    tep8 = [r.users for r in recipes() if r.config_file.endswith(
        "gb200-fp4/1k1k/stp/ctx1_gen4_tep8_batch32_eplb0_mtp0.yaml")]  # fmt: skip
    assert tep8 == [12, 24, 48, 96, 192]
    (b200,) = _point("dsr1-fp4-b200-dynamo-trt", 1024, 1024, 4096, "stp")
    assert (b200.prefill_workers, b200.prefill_tp, b200.decode_batch) == (1, 4, 512)
    # The H100 search space of the earlier hand-written table.
    stp_1k = [r.users for r in recipes()
              if (r.key, r.isl, r.spec) == ("dsr1-fp8-h100-dynamo-trt", 1024, "stp")]  # fmt: skip
    assert stp_1k == [6, 9, 30, 60, 231, 462, 924, 1845, 4916]


def test_a_recipe_file_read_overrides_its_name() -> None:
    # b200-fp8 ctx1_gen7_dep8_batch128_..._896: decode max_batch_size 16 per rank (8 ranks).
    (r,) = _point("dsr1-fp8-b200-dynamo-trt", 1024, 1024, 896, "mtp")
    assert (r.name_batch, r.decode_batch) == (128, 16)
    assert r.decode_batch_from.startswith("recipe_file ishandhanani/srt-slurm@")


# --- matching rows -------------------------------------------------------------------------


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


def _applied_cap(row: DisaggRow, key: str) -> int:
    """The decode cap of the point of ``key`` that matches ``row``, checked to reach the
    deployment ``validate`` simulates."""
    recipe = decode_cap(row)
    assert recipe is not None
    assert recipe.key == key
    assert _decode_cap_in_config(row) == recipe.decode_batch
    return recipe.decode_batch


def test_a_b200_point_resolves() -> None:
    # dsr1-fp4-b200 8k/1k STP [837]: 4 prefill workers of DEP4, 3 decode workers of DEP8,
    # ctx4_gen3_dep8_batch32 (32 per rank); the export's even split would be 279.
    row = _row(model="nvidia/DeepSeek-R1-0528-NVFP4-v2", system="b200_sxm", precision="fp4",
               isl=8192, osl=1024, users=837, prefill=(4, 4), decode=(3, 8, True))  # fmt: skip
    assert _applied_cap(row, "dsr1-fp4-b200-dynamo-trt") == 32
    # The same shape with FP8 weights is another key, which has no such point.
    assert decode_cap(replace(row, precision="fp8")) is None
    # Prefill EP4 and decode EP8: each pool splits its experts its own way.
    cfg = row_config(row, shipped_catalog(), latency_model="roofline")
    assert isinstance(cfg, ServingConfig), cfg
    assert (cfg.pool_ep("prefill"), cfg.pool_ep("decode")) == (4, 8)
    # dsr1-fp8-b200 1k/1k STP [5152]: ctx2_gen5_dep8_batch128, 128 per rank as the recipe file
    # says.
    fp8 = _row(model="deepseek-ai/DeepSeek-R1-0528", system="b200_sxm", precision="fp8",
               isl=1024, osl=1024, users=5152, prefill=(2, 8), decode=(5, 8, True))  # fmt: skip
    assert _applied_cap(fp8, "dsr1-fp8-b200-dynamo-trt") == 128


def test_a_gb200_point_resolves() -> None:
    # dsr1-fp8-gb200 1k/1k STP [27]: ctx1_gen3_tep8_batch8, 27 users on 3 workers of 8 slots.
    row = _row(model="deepseek-ai/DeepSeek-R1-0528", system="gb200", precision="fp8",
               isl=1024, osl=1024, users=27, prefill=(1, 8), decode=(3, 8, False))  # fmt: skip
    assert _applied_cap(row, "dsr1-fp8-gb200-dynamo-trt") == 8
    # A decode worker written TP8 × DP8 (GPUs as tp, the ranks as dp) is read as DEP8.
    dep = _row(model="deepseek-ai/DeepSeek-R1-0528", system="gb200", precision="fp8",
               isl=1024, osl=1024, users=4301, prefill=(1, 8), decode=(1, 8, True))  # fmt: skip
    assert decode_cap(dep) is not None
    wide = replace(dep, decode=replace(dep.decode, tp=8, attention_dp=8))
    assert decode_cap(wide) == decode_cap(dep)


def test_a_gptoss_point_takes_the_master_files_decode_max_batch_size() -> None:
    # gptoss-fp4-gb200 1k/1k [16]: 1 prefill TP1, 4 decode workers of TP2, DECODE_MAX_BATCH_SIZE=32.
    row = _row(model="openai/gpt-oss-120b", system="gb200", precision="fp4", isl=1024,
               osl=1024, users=16, prefill=(1, 1), decode=(4, 2, False))  # fmt: skip
    recipe = decode_cap(row)
    assert recipe is not None
    assert recipe.decode_batch == 32
    assert recipe.decode_batch_from == "DECODE_MAX_BATCH_SIZE"


def test_an_stp_and_an_mtp_point_that_disagree_leave_the_row_alone() -> None:
    # dsr1-fp4-gb200 1k/1k at 12 users: 4 TEP8 workers of 8 (MTP) or of 32 (STP).
    row = _row(model="nvidia/DeepSeek-R1-0528-NVFP4-v2", system="gb200", precision="fp4",
               isl=1024, osl=1024, users=12, prefill=(1, 4), decode=(4, 8, False))  # fmt: skip
    assert {r.decode_batch for r in inferencex_disagg._candidates(row)} == {8, 32}
    assert decode_cap(row) is None


def test_a_row_whose_workers_match_no_recipe_keeps_its_recorded_batch() -> None:
    row = _v3_row(users=8, decode_workers=4)  # no search-space point ran 8 users on 4 workers
    assert decode_cap(row) is None
    assert _decode_cap_in_config(row) == 2


def test_the_worker_counts_pick_the_recipe_at_a_point_run_twice() -> None:
    # 154 users at 8k/1k: the plain recipe has 2 TEP16 decode workers of 64, the MTP one a
    # single DEP16 worker of 8 per rank; the row's recorded 2 workers decide.
    (stp,) = _point("dsr1-fp8-h100-dynamo-trt", 8192, 1024, 154, "stp")
    assert decode_cap(_v3_row(154, 8192, 2)) == stp
    assert decode_cap(_v3_row(154, 8192, 1)) is None  # recorded TP16, not the MTP's DEP16


def test_rows_of_other_harnesses_are_not_matched() -> None:
    aiconfigurator = "source_file=/x/aic-auto-gap-analysis/data/h100_sxm/trtllm/1.0/x.csv"
    assert decode_cap(_v3_row(source=aiconfigurator)) is None


def test_recipes_that_disagree_on_the_cap_leave_the_row_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = _v3_row()
    plain = decode_cap(row)
    assert plain is not None
    other = replace(plain, spec="mtp", decode_batch=plain.decode_batch + 1)
    monkeypatch.setattr(inferencex_disagg, "recipes", lambda: (plain, other))
    assert decode_cap(row) is None


@pytest.mark.parametrize(
    ("users", "isl", "workers", "limits"),
    [
        (6, 1024, 3, (2, 2048)),
        (9, 8192, 3, (1, 8224)),
        (30, 1024, 3, (2, 2048)),
        (8, 1024, 4, None),
    ],
)
def test_a_read_recipe_file_gives_the_prefill_workers_their_limits(
    users: int, isl: int, workers: int, limits: tuple[int, int] | None
) -> None:
    # The H100 batch-1 and batch-2 recipe files (read) set prefill max_batch_size 2 and
    # max_num_tokens 2048 at 1k/1k, 1 and 8224 at 8k/1k; the batch-8 one (30 users) was not
    # read and takes its group's; 8 users on 4 workers match no point.
    row = _v3_row(users, isl, workers)
    assert prefill_limits(row) == limits
    cfg = row_config(row, shipped_catalog(), latency_model="roofline")
    assert isinstance(cfg, ServingConfig), cfg
    assert cfg.prefill is not None
    recorded = (row.prefill.batch_size, isl + 1500)  # the benchmark rules otherwise
    got = (cfg.prefill.max_running_requests, cfg.prefill.max_batched_tokens)
    assert got == (limits or recorded)


def test_a_gb200_max_throughput_point_gets_the_recipes_prefill_batches() -> None:
    # dsr1-fp4-gb200 1k/1k STP [4301]: ctx1 DEP4 prefill of 16 prompts / 16,384 tokens per rank
    # (read), one DEP8 decode worker of 512 per rank.
    row = _row(model="deepseek-ai/DeepSeek-R1", system="gb200", precision="fp4", isl=1024,
               osl=1024, users=4301, prefill=(1, 4), decode=(1, 8, True))  # fmt: skip
    recipe = decode_cap(row)
    assert recipe is not None
    assert (recipe.decode_batch, recipe.prefill_from) == (
        512,
        "recipe_file connorcarpenter15/srt-slurm@5a156f6",
    )
    assert prefill_limits(row) == (16, 16384)
    cfg = row_config(row, shipped_catalog(), latency_model="roofline")
    assert isinstance(cfg, ServingConfig), cfg
    assert cfg.prefill is not None
    assert (cfg.prefill.max_running_requests, cfg.prefill.max_batched_tokens) == (16, 16384)


def test_a_recipe_file_overrides_the_batch_its_name_says() -> None:
    # b200-fp8 1k/1k ctx1_gen3_tp8_batch1024_…_32: the file's decode max_batch_size is 12.
    row = _row(model="deepseek-ai/DeepSeek-R1", system="b200_sxm", precision="fp8", isl=1024,
               osl=1024, users=32, prefill=(1, 8), decode=(3, 8, False))  # fmt: skip
    recipe = decode_cap(row)
    assert recipe is not None
    assert (recipe.name_batch, recipe.decode_batch) == (1024, 12)
    assert _decode_cap_in_config(row) == 12


def test_every_prefill_limit_names_where_it_was_read() -> None:
    known = [r for r in recipes() if r.prefill_batch is not None]
    assert len(known) > 150
    assert all(r.prefill_tokens is not None and r.prefill_from for r in known)
    assert all(r.prefill_from.startswith(("recipe_file ", "group ")) for r in known)
    assert {r.spec for r in known} == {"stp", "mtp"}
