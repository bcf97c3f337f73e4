"""Routed experts priced from measured fused-MoE layers (``moe_table.py``), else composed."""

from __future__ import annotations

import gzip
import itertools
import math
from pathlib import Path

import pandas as pd
import pytest

from hardware.catalog import shipped_catalog
from simulator.latency.deployment import Deployment
from simulator.latency.model import ComposedLatencyModel
from simulator.latency.moe_table import (
    MoeShape,
    MoeTable,
    Mxfp4Activation,
    load_moe_table,
    read_moe_profile,
)
from simulator.latency.profile_files import (
    MOE_KIND,
    MOE_LENDERS,
    MoeLender,
    lent_moe_kind,
    resolve_profile_files,
)
from simulator.latency.registry import LatencyContext, make_latency_model
from simulator.presets import load_preset
from slo.inputfile import InputError

from .specs import H100

pytestmark = pytest.mark.filterwarnings("ignore::simulator.latency.table.TableFallbackWarning")

#: MiniMax-M2.5's routed experts at expert TP 4 (its router balanced: ``expert_routing``), a
#: shape vLLM's H100 table measured (block FP8, Triton).
_MINIMAX_TP4 = MoeShape(
    256, 8, 3072, 1536, moe_tp=4, moe_ep=1, dtype="fp8", balanced=True, expert_format="fp8_block"
)


def _shipped_moe(engine: str, gpu: str = "h100_sxm") -> Path:
    located = resolve_profile_files(gpu, engine)
    assert located is not None
    return located.files[MOE_KIND]


def _r1_model(engine: str = "sglang", tp: int = 16, ep: int = 1):  # type: ignore[no-untyped-def]
    r1 = shipped_catalog().model("DeepSeek-R1")
    d = Deployment(r1, H100, tp=tp, ep=ep, weight_precision="fp8", allow_multi_node=True)
    return make_latency_model("table", d, context=LatencyContext.of(engine)), r1


def _minimax_model():  # type: ignore[no-untyped-def]
    minimax = shipped_catalog().model("MiniMaxAI/MiniMax-M2.5")
    d = Deployment(minimax, H100, tp=4, ep=1, weight_precision="fp8")
    return make_latency_model("table", d, context=LatencyContext.of("vllm")), minimax


def test_measured_shape_is_priced_from_the_fused_moe_table() -> None:
    """MiniMax-M2.5 at expert TP 4 under vLLM: the H100 table measured this exact layer, so
    the routed experts cost the measured time × MoE layers, and no composed permutation."""
    model, minimax = _minimax_model()
    table = MoeTable(read_moe_profile(_shipped_moe("vllm")))
    for tokens in (1, 16, 100, 512, 4096):
        hit = table.lookup(tokens, _MINIMAX_TP4)
        assert hit is not None
        assert hit[1] == tokens
        seconds = model.breakdown([(1000, 1)] * tokens).seconds
        layers = minimax.num_moe_layers
        assert seconds["moe_experts"] == pytest.approx(hit[0] * layers, rel=1e-12)
        assert "moe_permute" not in seconds
        step = model.step_seconds([(1000, 1)] * tokens)
        assert sum(seconds.values()) == pytest.approx(step, rel=1e-9)


def test_measured_grid_points_are_returned_verbatim() -> None:
    """``read`` answers a measured token count with its row; ``lookup`` too once the picks of
    a batch touch every expert (a prefill: no even-pick correction left)."""
    frame = read_moe_profile(_shipped_moe("vllm"))
    rows = frame[
        (frame["hidden"] == 3072)
        & (frame["experts"] == 256)  # MiniMax-M2.5's layer
        & (frame["moe_tp"] == 4)
        & (frame["moe_ep"] == 1)
        & (frame["dtype"] == "fp8_block")
    ]
    assert len(rows) > 10
    table = MoeTable(frame, monotone=False)
    grid = table.grid(_MINIMAX_TP4)
    assert grid is not None
    for tokens, seconds in zip(rows["tokens"], rows["seconds"], strict=True):
        assert table.read(grid, int(tokens)) == (seconds, int(tokens))
        if tokens >= 512:  # 4,096+ uniform picks of 256 experts: every one touched
            hit = table.lookup(int(tokens), _MINIMAX_TP4)
            assert hit is not None
            assert hit[0] == pytest.approx(seconds, rel=1e-6)


def test_held_out_token_counts_interpolate_within_ten_percent() -> None:
    """Every other interior token count held out of every measured shape of the H100 SGLang
    table: log-log interpolation between the neighbours predicts them (measured: 3-4% MAPE)."""
    frame = read_moe_profile(_shipped_moe("sglang"))
    counts = sorted(frame["tokens"].unique())
    held = set(counts[1:-1:2])
    table = MoeTable(frame[~frame["tokens"].isin(held)], monotone=False)
    errors = []
    for row in frame[frame["tokens"].isin(held)].to_dict("records"):
        sizes = (int(row[c]) for c in ("experts", "top_k", "hidden", "inter", "moe_tp", "moe_ep"))
        shape = MoeShape(*sizes, dtype=str(row["dtype"]))
        grid = table.grid(shape)
        assert grid is not None
        hit = table.read(grid, int(row["tokens"]))
        assert hit is not None
        errors.append(abs(hit[0] / float(row["seconds"]) - 1))
    assert len(errors) > 500
    assert sum(errors) / len(errors) < 0.10


def test_shape_the_table_lacks_is_composed_from_gemms() -> None:
    """TensorRT-LLM's H100 MoE profile holds no DeepSeek shape (only 512-expert top-22 ones), so
    its routed experts stay the grouped-GEMM composition; SGLang at an unmeasured split too."""
    located = resolve_profile_files("h100_sxm", "trtllm")
    assert located is not None
    assert MOE_KIND not in located.files
    model, _ = _r1_model("trtllm", tp=16, ep=16)
    seconds = model.breakdown([(1000, 1)] * 64).seconds
    assert seconds["moe_experts"] > 0
    assert seconds["moe_permute"] > 0
    table = MoeTable(read_moe_profile(_shipped_moe("sglang")))
    assert table.lookup(64, MoeShape(256, 8, 7168, 2048, 3, 1, "fp8")) is None
    assert table.lookup(64, MoeShape(256, 8, 7000, 2048, 16, 1, "fp8")) is None


def test_beyond_the_measured_tokens_the_composition_carries_the_edge() -> None:
    model, minimax = _minimax_model()
    table = MoeTable(read_moe_profile(_shipped_moe("vllm")))
    edge = 16384
    at_edge = table.lookup(edge, _MINIMAX_TP4)
    beyond = table.lookup(3 * edge, _MINIMAX_TP4)
    assert at_edge is not None
    assert beyond == (at_edge[0], edge)
    priced = model.breakdown([(0, 3 * edge)]).seconds["moe_experts"]
    measured_edge = model.breakdown([(0, edge)]).seconds["moe_experts"]
    assert measured_edge == pytest.approx(at_edge[0] * minimax.num_moe_layers, rel=1e-12)
    assert 2.0 < priced / measured_edge < 3.5  # grows with the composition, ~linearly in tokens
    step = [model.step_seconds([(0, t)]) for t in (edge - 1, edge, edge + 1)]
    assert step[0] <= step[1] <= step[2] < step[1] * 1.001  # continuous at the edge


def test_fp8_weights_read_block_fp8_rows_where_no_per_tensor_rows() -> None:
    # SGLang measures only block FP8 on Hopper: a per-tensor checkpoint's layer reads those.
    table = MoeTable(read_moe_profile(_shipped_moe("sglang")))
    per_tensor = MoeShape(128, 8, 4096, 1536, 4, 1, "fp8")
    block = MoeShape(128, 8, 4096, 1536, 4, 1, "fp8_block")
    assert table.lookup(64, per_tensor) is not None
    assert table.lookup(64, per_tensor) == table.lookup(64, block)


def test_group_routed_deepseek_rows_are_dropped_and_composed() -> None:
    """vLLM's and SGLang's collectors route DeepSeek-V3's layer with its grouped top-k over even
    logits: every token lands in the same four of eight groups, so an EP split's rank 0 is
    overloaded (vLLM at 16,384 tokens: EP 64 / 128 / 256 take 4 : 2 : 1, the rows 4T / 2T / T
    where even routing gives 8T / EP). Those rows are dropped when read; the layer composes."""
    raw = pd.read_csv(_shipped_moe("vllm"))
    deepseek = raw[
        (raw["hidden_size"] == 7168) & (raw["num_experts"] == 256)
        & (raw["distribution"] == "balanced") & (raw["num_tokens"] == 16384)
        & (raw["moe_tp_size"] == 1)
    ].set_index("moe_ep_size")["latency"]  # fmt: skip
    assert deepseek[64] / deepseek[256] == pytest.approx(4, rel=0.1)
    assert deepseek[128] / deepseek[256] == pytest.approx(2, rel=0.1)
    for engine in ("vllm", "sglang"):
        frame = read_moe_profile(_shipped_moe(engine))
        assert not ((frame["hidden"] == 7168) & (frame["experts"] == 256)).any()
        model, _ = _r1_model(engine, tp=8, ep=8)
        seconds = model.breakdown([(0, 4096)]).seconds
        assert seconds["moe_permute"] > 0  # composed


def test_a_block_fp8_checkpoint_reads_the_block_scaled_rows_first() -> None:
    """vLLM's H100 table times Qwen3-235B's experts split EP4 both per-tensor (ModelOpt's
    FlashInfer CUTLASS path) and block-scaled; the vendor's block-FP8 checkpoint runs the
    block-scaled kernel, ~4x faster at decode sizes, so that is the measurement it takes."""
    frame = read_moe_profile(_shipped_moe("vllm"))
    table = MoeTable(frame)
    per_tensor = MoeShape(128, 8, 4096, 1536, moe_tp=1, moe_ep=4, dtype="fp8")
    block = MoeShape(128, 8, 4096, 1536, moe_tp=1, moe_ep=4, dtype="fp8", expert_format="fp8_block")
    rows = MoeShape(128, 8, 4096, 1536, moe_tp=1, moe_ep=4, dtype="fp8_block")
    assert table.covers(per_tensor)
    assert table.lookup(64, block) == table.lookup(64, rows)
    fast, slow = table.lookup(64, block), table.lookup(64, per_tensor)
    assert fast is not None
    assert slow is not None
    assert slow[0] > 3 * fast[0]
    # The checkpoint's recipe decides: Qwen3-235B-A22B-FP8 is block FP8; the bf16 checkpoint
    # re-quantised to fp8 is not, and keeps the per-tensor rows.
    catalog = shipped_catalog()
    experts = {}
    for name in ("Qwen3-235B-A22B-FP8", "Qwen3-235B-A22B"):
        d = Deployment(catalog.model(name), H100, tp=4, ep=4, weight_precision="fp8")
        model = make_latency_model("table", d, context=LatencyContext.of("vllm"))
        experts[name] = model.breakdown([(4096, 1)] * 64).seconds["moe_experts"]
    assert experts["Qwen3-235B-A22B"] > 3 * experts["Qwen3-235B-A22B-FP8"]


def _even_picks_table() -> MoeTable:
    """A balanced-row layer of 16 experts, top-2 (saturation at 8 tokens): 10 µs per token up
    to 8 tokens — exactly linear, as striding picks make it — then 80 µs plus 1 µs per token."""
    tokens = [1.0, 2.0, 4.0, 8.0, 16.0, 64.0]
    seconds = [t * 1e-5 if t <= 8 else 8e-5 + (t - 8) * 1e-6 for t in tokens]
    frame = pd.DataFrame(
        {"dtype": "bf16", "hidden": 256.0, "inter": 256.0, "top_k": 2.0, "experts": 16.0,
         "moe_tp": 1.0, "moe_ep": 1.0, "tokens": tokens, "seconds": seconds}
    )  # fmt: skip
    return MoeTable(frame)


_EVEN_BALANCED = MoeShape(16, 2, 256, 256, 1, 1, "bf16", balanced=True)
_EVEN_SKEWED = MoeShape(16, 2, 256, 256, 1, 1, "bf16")


def test_a_batch_reads_the_balanced_row_at_its_touched_experts_by_hand() -> None:
    """4 tokens x top-2 uniform picks of 16 experts touch 16·(1 - (15/16)^8) = 6.45 of them
    (the row's striding touches 8): priced at sqrt(6.45/2 · 4) = 3.59 tokens of the row."""
    table = _even_picks_table()
    touched = 16 * (1 - (15 / 16) ** 8)
    even = math.sqrt(touched / 2 * 4)
    hit = table.lookup(4, _EVEN_BALANCED)
    assert hit is not None
    assert hit[1] == 4
    assert hit[0] == pytest.approx(even * 1e-5, rel=1e-9)
    # Past saturation the row's own growth is added: 12 tokens touch 16·(1 - (15/16)^24),
    # read at sqrt(touched/2 · 8) tokens, plus the row's growth from 8 to 12 tokens (~4.6 µs
    # of log-log interpolation between 8 and 16).
    touched = 16 * (1 - (15 / 16) ** 24)
    even = math.sqrt(touched / 2 * 8)
    grid = table.grid(_EVEN_BALANCED)
    assert grid is not None
    growth = table.read(grid, 12)[0] - table.read(grid, 8)[0]  # type: ignore[index]
    assert 4e-6 < growth < 5e-6
    hit = table.lookup(12, _EVEN_BALANCED)
    assert hit is not None
    assert hit[1] == 12
    assert hit[0] == pytest.approx(even * 1e-5 + growth, rel=1e-9)


def test_a_prefill_keeps_the_row_and_skewed_picks_cost_less_at_decode_sizes() -> None:
    table = _even_picks_table()
    grid = table.grid(_EVEN_BALANCED)
    assert grid is not None
    prefill = table.lookup(64, _EVEN_BALANCED)
    assert prefill is not None
    assert prefill[0] == pytest.approx(table.read(grid, 64)[0], rel=1e-3)  # type: ignore[index]
    for tokens in (2, 4, 8):
        skewed, uniform = table.lookup(tokens, _EVEN_SKEWED), table.lookup(tokens, _EVEN_BALANCED)
        assert skewed is not None
        assert uniform is not None
        assert skewed[0] < uniform[0] < table.read(grid, tokens)[0]  # type: ignore[index]
    times = [table.lookup(t, shape)[0] for shape in (_EVEN_BALANCED, _EVEN_SKEWED)  # type: ignore[index]
             for t in range(1, 100)]  # fmt: skip
    for shape_times in (times[:99], times[99:]):
        assert all(b >= a for a, b in itertools.pairwise(shape_times))


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt") as stream:
        pd.DataFrame(rows).to_csv(stream, index=False)
    return path


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "kernel_source": "x_fused_moe_triton",
        "moe_dtype": "bfloat16",
        "num_tokens": 8,
        "hidden_size": 2048,
        "inter_size": 768,
        "topk": 8,
        "num_experts": 128,
        "moe_tp_size": 1,
        "moe_ep_size": 1,
        "distribution": "balanced",
        "latency": 0.1,
    }
    row.update(over)
    return row


def test_one_kernel_per_shape_and_balanced_routing_only(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "vllm_moe.csv.gz",
        [
            _row(kernel_source="vllm_flashinfer_cutlass_experts", latency=0.05),
            _row(latency=0.1),
            _row(latency=0.3),
            _row(distribution="power_law_1.2", latency=9.0),
        ],
    )
    frame = read_moe_profile(path)
    assert len(frame) == 1
    assert math.isclose(float(frame["seconds"].iloc[0]), 0.2e-3)  # median of the Triton rows


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"latency": 0}, "line 2: column 'latency': expected a positive number"),
        ({"latency": "inf"}, "line 2: column 'latency': expected a positive number"),
        # 1e300 ms once made a step that no longer moved the simulated clock.
        ({"latency": 1e300}, r"line 2: column 'latency': expected at most 1e\+12"),
        ({"num_tokens": "many"}, "line 2: column 'num_tokens'"),
        ({"moe_dtype": "fp7"}, "line 2: column 'moe_dtype': unknown dtype 'fp7'"),
    ],
)
def test_bad_moe_profile_is_one_line_naming_file_line_and_column(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = _write(tmp_path / "sglang_moe.csv.gz", [_row(**change), _row(num_tokens=16)])
    with pytest.raises(InputError, match=message) as err:
        read_moe_profile(path)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_column_is_named(tmp_path: Path) -> None:
    row = _row()
    del row["topk"]
    path = _write(tmp_path / "sglang_moe.csv.gz", [row])
    with pytest.raises(InputError, match="line 1: missing column 'topk'"):
        read_moe_profile(path)


def _marlin_reference(moe_tp: float = 1.0) -> MoeTable:
    """A Marlin MXFP4 layer measured at one small shape (8 experts, top-2, 256 × 256)."""
    frame = pd.DataFrame(
        {
            "dtype": "mxfp4",
            "hidden": 256.0,
            "inter": 256.0,
            "top_k": 2.0,
            "experts": 8.0,
            "moe_tp": moe_tp,
            "moe_ep": 1.0,
            "tokens": [1.0, 64.0, 4096.0],
            "seconds": [1e-5, 1e-4, 1e-3],
            "kernel": "vllm_gptossmxfp4moe_marlin_marlinexperts",
        }
    )
    return MoeTable(frame)


def test_a_marlin_layer_is_carried_at_equal_tokens_per_expert_by_the_expert_weights() -> None:
    """4,096 tokens × top-4 over 16 experts touch all of them, 1,024 assignments each; the
    reference's 8 experts get 1,024 each at 4,096 tokens × top-2 (a measured point, 1 ms). The
    layer then costs 1 ms × (16 · 512 · 128) / (8 · 256 · 256) = 2 ms by hand."""
    table = _marlin_reference()
    shape = MoeShape(16, 4, 512, 128, moe_tp=1, moe_ep=1, dtype="fp4")
    seconds = table.marlin_layer(4096, shape)
    assert seconds == pytest.approx(2e-3, rel=1e-3)
    # Beyond the measured tokens the edge grows in proportion (compute-bound there).
    assert table.marlin_layer(8192, shape) == pytest.approx(4e-3, rel=1e-3)


def test_a_marlin_layer_runs_the_weights_padded_to_its_tiles() -> None:
    """vLLM pads an MXFP4 layer for Marlin (hidden to 256, each GPU's share of the width to
    128; the memory padding of ``memory_rules.VLLM_MXFP4_ALIGNMENT``): gpt-oss's 2,880 × 2,880
    at TP2 runs as 3,072 × 2 · 1,536 — exactly what an aligned 3,072 × 3,072 layer costs, 13.8%
    more than its unpadded weights would."""
    table = _marlin_reference(moe_tp=2.0)
    padded = table.marlin_layer(4096, MoeShape(16, 4, 2880, 2880, moe_tp=2, moe_ep=1, dtype="fp4"))
    aligned = table.marlin_layer(4096, MoeShape(16, 4, 3072, 3072, moe_tp=2, moe_ep=1, dtype="fp4"))
    assert padded is not None
    assert aligned is not None
    assert padded == pytest.approx(aligned, rel=1e-12)
    # By hand against the reference (256 × 256 at TP2: a 128-wide share, already whole).
    assert padded == pytest.approx(2 * 1e-3 * (3072 * 3072) / (256 * 256), rel=1e-3)


def test_no_marlin_layer_for_another_precision_split_or_kernel() -> None:
    table = _marlin_reference()
    assert table.marlin_layer(64, MoeShape(16, 4, 512, 128, 1, 1, dtype="bf16")) is None
    assert table.marlin_layer(64, MoeShape(16, 4, 512, 128, 2, 1, dtype="fp4")) is None
    # The shipped H100 vLLM file times gpt-oss's own shape in OpenAI's Triton kernel only; its
    # Marlin reference is another shape. Without the Marlin rows there is nothing to carry.
    gpt_oss = MoeShape(128, 4, 2880, 2880, moe_tp=2, moe_ep=1, dtype="fp4")
    frame = read_moe_profile(_shipped_moe("vllm"))
    assert MoeTable(frame).marlin_layer(1024, gpt_oss) is not None
    own = frame[(frame["hidden"] == 2880) & (frame["dtype"] == "mxfp4")]
    assert not own["kernel"].str.contains("marlin").any()
    without = frame[~frame["kernel"].str.contains("marlin")]
    assert MoeTable(without).marlin_layer(1024, gpt_oss) is None


def _gpt_oss_routed(*, marlin: bool, tp: int = 2) -> tuple[float, float]:
    """gpt-oss-120b MXFP4 on H100 at TP ``tp`` (experts split by TP, vLLM's default): routed
    experts of 8,192 and of 16 tokens on vLLM's kernel tables, in Marlin or not."""
    model_spec = shipped_catalog().model("openai/gpt-oss-120b")
    d = Deployment(model_spec, H100, tp=tp, ep=1, weight_precision="fp4")
    params = load_preset("vllm").compose_params(marlin_moe=marlin)
    model = make_latency_model("table", d, params=params, context=LatencyContext.of("vllm"))
    assert isinstance(model, ComposedLatencyModel)
    return model.routed_expert_seconds(8192), model.routed_expert_seconds(16)


def test_gpt_oss_on_hopper_runs_openai_triton_by_default_and_marlin_when_told() -> None:
    """vLLM runs gpt-oss's MXFP4 experts on Hopper in OpenAI's Triton kernel by default (its
    preset: no Marlin), which the H100 table measured at gpt-oss's shape; under
    ``VLLM_MXFP4_USE_MARLIN=1`` (``marlin_moe``, what InferenceX's Hopper scripts set) the
    carried Marlin layer (≈ 4.2 ms a layer at TP2 at 8,192 tokens from the H100 profile's MXFP4
    Marlin reference: 3.7 ms at the checkpoint's 2,880 × 2,880, × 1.138 for the weights padded
    to Marlin's tiles) sets the price instead, whatever the table measured. At 16
    decode tokens Marlin's floor is below the composition, which prices the layer then (the
    measured Triton layer, with its launches, is slower there)."""
    assert not load_preset("vllm").compose_params().marlin_moe
    assert load_preset("vllm").compose_params(marlin_moe=True).marlin_moe
    prefill, decode = _gpt_oss_routed(marlin=True)
    triton_prefill, triton_decode = _gpt_oss_routed(marlin=False)
    assert prefill / 36 == pytest.approx(3.7e-3 * (3072 / 2880) * (1536 / 1440), rel=0.1)
    table = MoeTable(read_moe_profile(_shipped_moe("vllm")))
    shape = MoeShape(128, 4, 2880, 2880, moe_tp=2, moe_ep=1, dtype="fp4", expert_format="mxfp4")
    measured = table.lookup(8192, shape)
    assert measured is not None
    assert measured[1] == 8192
    assert triton_prefill == pytest.approx(36 * measured[0], rel=1e-9)
    assert prefill > 1.5 * triton_prefill
    assert triton_decode > decode > 0


def test_sglang_mxfp4_rows_of_its_own_triton_kernel_are_not_its_gpt_oss_path() -> None:
    """SGLang runs gpt-oss on Hopper in OpenAI's triton_kernels, not its own fused-MoE Triton
    kernel, whose MXFP4 rows its H100 profile holds: they are dropped (the layer is then read
    from vLLM's rows of triton_kernels, ``test_gpt_oss_experts_are_borrowed_...``)."""
    sglang = MoeTable(read_moe_profile(_shipped_moe("sglang")))
    shape = MoeShape(128, 4, 2880, 2880, moe_tp=2, moe_ep=1, dtype="fp4", expert_format="mxfp4")
    assert not sglang.covers(shape)
    raw = pd.read_csv(_shipped_moe("sglang"))
    assert (raw["kernel_source"] == "sglang_fused_moe_triton").any()
    assert raw["moe_dtype"].str.contains("mxfp4").any()


def test_gpt_oss_on_blackwell_reads_its_measured_mxfp4_layer() -> None:
    """B200 has fp4 tensor cores, so no Marlin: vLLM's measured MXFP4 layer at gpt-oss's shape
    (FlashInfer's TensorRT-LLM MXFP4 kernel) prices the routed experts, not a composition of
    NVFP4 GEMMs, which came out at a quarter of it at 8,192 tokens."""
    b200 = shipped_catalog().gpu("b200_sxm")
    model_spec = shipped_catalog().model("openai/gpt-oss-120b")
    d = Deployment(model_spec, b200, tp=2, ep=1, weight_precision="fp4")
    params = load_preset("vllm").compose_params()
    model = make_latency_model("table", d, params=params, context=LatencyContext.of("vllm"))
    assert isinstance(model, ComposedLatencyModel)
    located = resolve_profile_files("b200_sxm", "vllm")
    assert located is not None
    table = MoeTable(read_moe_profile(located.files[MOE_KIND]))
    shape = MoeShape(128, 4, 2880, 2880, moe_tp=2, moe_ep=1, dtype="fp4", expert_format="mxfp4")
    measured = table.lookup(8192, shape)
    assert measured is not None
    assert model.routed_expert_seconds(8192) == pytest.approx(36 * measured[0], rel=1e-9)
    # The NVFP4 rows are another kernel: the shape without its format finds none.
    assert table.lookup(8192, MoeShape(128, 4, 2880, 2880, 2, 1, dtype="fp4")) is None


def test_rerouted_ep_rows_are_read_as_one_rank_of_the_layer() -> None:
    """The A100 SGLang 0.5.10 collector gave an EP rank the layer's whole num_tokens × topk
    picks on its own experts (aiconfigurator before PR #753): its EP rows do not speed up with
    EP at 16,384 tokens as its TP rows do. Read at n × ep tokens, a rank of an EP4 layer of
    16,384 tokens is the row measured at 4,096, and does a quarter of the EP1 work or less."""
    path = _shipped_moe("sglang", "a100_sxm")
    raw = pd.read_csv(path)
    qwen = raw[
        (raw["hidden_size"] == 4096) & (raw["num_experts"] == 128) & (raw["topk"] == 8)
        & (raw["inter_size"] == 1536) & (raw["moe_tp_size"] == 1)
        & (raw["distribution"] == "balanced") & (raw["moe_dtype"] == "bfloat16")
    ].set_index(["moe_ep_size", "num_tokens"])["latency"]  # fmt: skip
    assert qwen[(1, 16384)] / qwen[(4, 16384)] < 1.2  # as measured: no EP speedup
    table = MoeTable(read_moe_profile(path))
    ep1 = MoeShape(128, 8, 4096, 1536, moe_tp=1, moe_ep=1, dtype="bf16", balanced=True)
    ep4 = MoeShape(128, 8, 4096, 1536, moe_tp=1, moe_ep=4, dtype="bf16", balanced=True)
    rank, whole = table.lookup(16384, ep4), table.lookup(16384, ep1)
    assert rank is not None
    assert whole is not None
    assert rank[0] == pytest.approx(qwen[(4, 4096)] / 1e3, rel=1e-9)
    assert rank[0] < whole[0] / 3
    # At EP16 a rank holds 8 experts, as many as a token picks: every pick local — dropped.
    assert (16, 4096) in qwen.index
    assert not table.covers(MoeShape(128, 8, 4096, 1536, moe_tp=1, moe_ep=16, dtype="bf16"))
    assert table.covers(MoeShape(128, 8, 4096, 1536, moe_tp=1, moe_ep=8, dtype="bf16"))


def _gpt_oss_experts(
    gpu: str, engine: str, tokens: int, tp: int = 2, activation: Mxfp4Activation | None = None
) -> float:
    """Seconds of gpt-oss-120b's routed experts (all 36 layers) at ``tokens`` on ``gpu`` under
    ``engine``'s kernel tables, experts split by TP, at the preset's activation precision or
    ``activation``."""
    model_spec = shipped_catalog().model("openai/gpt-oss-120b")
    d = Deployment(model_spec, shipped_catalog().gpu(gpu), tp=tp, ep=1, weight_precision="fp4")
    params = load_preset(engine).compose_params(mxfp4_moe_activation=activation)
    model = make_latency_model("table", d, params=params, context=LatencyContext.of(engine))
    assert isinstance(model, ComposedLatencyModel)
    return model.routed_expert_seconds(tokens)


def test_mxfp4_rows_of_each_activation_precision_price_that_precision_first() -> None:
    """SGLang's B200 profile times gpt-oss's layer in FlashInfer's trtllm-gen kernel twice, with
    bf16 and with MXFP8 activations (one kernel name): two layers, kept apart (the median of the
    two priced neither). A shape asking for MXFP8 activations reads those rows, one asking for
    bf16 the others; SGLang's preset runs MXFP8 (its default), vLLM's bf16 unless told."""
    path = _shipped_moe("sglang", "b200_sxm")
    raw = pd.read_csv(path)
    gpt_oss = raw[
        (raw["hidden_size"] == 2880) & (raw["num_experts"] == 128) & (raw["moe_tp_size"] == 2)
        & (raw["moe_ep_size"] == 1) & (raw["distribution"] == "balanced")
        & (raw["num_tokens"] == 8192)
    ].set_index("moe_dtype")["latency"]  # fmt: skip
    assert gpt_oss["w4a16_mxfp4"] > 1.5 * gpt_oss["w4a8_mxfp4_mxfp8"]  # two different layers
    table = MoeTable(read_moe_profile(path), monotone=False)
    for activation, dtype in (("mxfp8", "w4a8_mxfp4_mxfp8"), ("bf16", "w4a16_mxfp4")):
        shape = MoeShape(
            128, 4, 2880, 2880, 2, 1, dtype="fp4", expert_format="mxfp4", activation=activation
        )
        grid = table.grid(shape)
        assert grid is not None
        hit = MoeTable.read(grid, 8192)
        assert hit is not None
        assert hit[0] == pytest.approx(gpt_oss[dtype] / 1e3, rel=1e-9)
    assert load_preset("sglang").compose_params().mxfp4_moe_activation == "mxfp8"
    assert load_preset("trtllm").compose_params().mxfp4_moe_activation == "mxfp8"
    vllm = load_preset("vllm")
    assert vllm.compose_params().mxfp4_moe_activation == "bf16"
    assert vllm.compose_params(mxfp4_moe_activation="mxfp8").mxfp4_moe_activation == "mxfp8"
    # Told MXFP8 (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1), vLLM on B200 reads SGLang's rows' twin.
    vllm_mxfp8 = _gpt_oss_experts("b200_sxm", "vllm", 8192, activation="mxfp8")
    assert vllm_mxfp8 < 0.5 * _gpt_oss_experts("b200_sxm", "vllm", 8192)


def test_a_table_with_one_activation_precision_answers_the_other_with_it() -> None:
    """Where a profile timed an MXFP4 layer with one activation precision only, a deployment
    running the other reads those rows rather than composing the layer from NVFP4 GEMMs."""
    frame = pd.DataFrame(
        {"dtype": ["mxfp4_mxfp8"] * 2, "hidden": [2880.0] * 2, "inter": [2880.0] * 2,
         "top_k": [4.0] * 2, "experts": [128.0] * 2, "moe_tp": [1.0] * 2, "moe_ep": [1.0] * 2,
         "tokens": [64.0, 128.0], "seconds": [1e-4, 2e-4], "kernel": ["x"] * 2}
    )  # fmt: skip
    table = MoeTable(frame)
    bf16 = MoeShape(128, 4, 2880, 2880, 1, 1, dtype="fp4", expert_format="mxfp4")
    assert table.covers(bf16)
    assert not table.covers(MoeShape(128, 4, 2880, 2880, 1, 1, dtype="fp4"))


def test_another_engines_rows_price_only_the_shapes_the_engine_lacks(tmp_path: Path) -> None:
    """A lent file (``MOE_LENDERS``) adds its rows of the lent dtypes and kernel: kept for the
    shapes the engine's own file does not hold, an alternative a deployment names for the
    others (the own rows of a shape win otherwise); other kernels and dtypes of the lender are
    not taken, and a lender whose kernel is not the engine's default lends alternatives only."""
    own = _write(tmp_path / "trtllm_1.0_moe.csv.gz", [_row(hidden_size=1024, latency=0.5)])
    lender = _write(
        tmp_path / "sglang_0.5_moe.csv.gz",
        [
            _row(hidden_size=1024, kernel_source="sglang_flashinfer_trtllm_moe", latency=0.1),
            _row(hidden_size=2048, kernel_source="sglang_flashinfer_trtllm_moe", latency=0.2),
            _row(hidden_size=3072, kernel_source="sglang_fused_moe_triton", latency=0.3),
            _row(
                hidden_size=4096, kernel_source="sglang_flashinfer_trtllm_moe", latency=0.4,
                moe_dtype="fp8_block",
            ),
        ],
    )  # fmt: skip

    def seconds(table: MoeTable | None, hidden: int, kernel: str = "") -> float | None:
        assert table is not None
        shape = MoeShape(128, 8, hidden, 768, 1, 1, dtype="bf16", balanced=True, kernel=kernel)
        grid = table.grid(shape)
        hit = None if grid is None else MoeTable.read(grid, 8)
        return None if hit is None else hit[0]

    table = load_moe_table(
        own, lent=[(lender, MoeLender("sglang", ("bf16",), "flashinfer_trtllm"))]
    )
    assert seconds(table, 1024) == pytest.approx(0.5e-3)  # its own row, not the lender's
    assert seconds(table, 1024, "flashinfer_trtllm") == pytest.approx(0.1e-3)  # named: lent
    assert seconds(table, 1024, "cutlass") == pytest.approx(0.5e-3)  # unmeasured: the kept one
    assert seconds(table, 2048) == pytest.approx(0.2e-3)  # lent
    assert seconds(table, 3072) is None  # another kernel of the lender
    assert seconds(table, 3072, "fused_moe_triton") is None
    alternative = load_moe_table(
        own, lent=[(lender, MoeLender("sglang", ("bf16",), "flashinfer_trtllm", default=False))]
    )
    assert seconds(alternative, 2048) is None  # not the engine's default: not kept
    assert seconds(alternative, 2048, "flashinfer_trtllm") == pytest.approx(0.2e-3)
    assert (
        load_moe_table(None, lent=[(lender, MoeLender("sglang", ("bf16",), "flashinfer_trtllm"))])
        is not None
    )
    assert load_moe_table(None) is None


def test_vllm_int4_experts_in_flashinfer_when_the_deployment_says_so() -> None:
    """vLLM runs INT4 experts in Marlin by default (its B200 profile's rows at Kimi-K2's shape)
    and in FlashInfer's trtllm-gen MXINT4 kernel under ``VLLM_USE_FLASHINFER_MOE_INT4=1``
    (``moe_kernel``), which only SGLang's B200 profile times: lent as an alternative, ~1/3 of
    Marlin's time at prefill sizes."""
    located = resolve_profile_files("b200_sxm", "vllm")
    assert located is not None
    kimi = MoeShape(384, 8, 7168, 2048, 4, 1, dtype="int4")
    tables = {
        kernel: make_latency_model(
            "table",
            Deployment(
                shipped_catalog().model("moonshotai/Kimi-K2.5"), shipped_catalog().gpu("b200_sxm"),
                tp=4, ep=1, weight_precision="int4",
            ),
            params=load_preset("vllm").compose_params(moe_kernel=kernel),
            context=LatencyContext.of("vllm"),
        )
        for kernel in (None, "flashinfer_trtllm")
    }  # fmt: skip
    marlin, flashinfer = (tables[k] for k in (None, "flashinfer_trtllm"))
    assert isinstance(marlin, ComposedLatencyModel)
    assert isinstance(flashinfer, ComposedLatencyModel)
    assert flashinfer.routed_expert_seconds(8192) < 0.5 * marlin.routed_expert_seconds(8192)
    own = MoeTable(read_moe_profile(located.files[MOE_KIND]))
    assert own.covers(kimi)  # vLLM's own (Marlin) rows stay its default


def test_profile_directories_name_the_moe_files_lent_to_an_engine() -> None:
    """TensorRT-LLM borrows SGLang's and vLLM's MoE files, SGLang vLLM's, vLLM SGLang's."""
    for engine, lenders in (
        ("trtllm", {"sglang", "vllm"}),
        ("sglang", {"vllm"}),
        ("vllm", {"sglang"}),
    ):
        located = resolve_profile_files("b200_sxm", engine)
        assert located is not None
        lent = {kind.split("@", 1)[1] for kind in located.files if "@" in kind}
        assert lent == lenders
        assert {lender.engine for lender in MOE_LENDERS.get(engine, ())} == lenders
        for lender in lenders:
            assert located.files[lent_moe_kind(lender)].name.startswith(f"{lender}_")


def test_gpt_oss_experts_are_borrowed_where_the_engine_runs_anothers_measured_kernel() -> None:
    """TensorRT-LLM runs gpt-oss's experts in the trtllm-gen kernel on Blackwell (MXFP8
    activations) and in OpenAI's triton_kernels on Hopper, SGLang in triton_kernels on Hopper:
    none of their own profiles times those at gpt-oss's shape, so they read the rows that do —
    SGLang's B200 rows, vLLM's H100 rows — where TensorRT-LLM's layer was composed from NVFP4
    GEMMs at about twice the measured kernel's time at decode sizes on B200."""
    for tokens in (64, 1024, 8192):
        b200_trt = _gpt_oss_experts("b200_sxm", "trtllm", tokens)
        assert b200_trt == pytest.approx(_gpt_oss_experts("b200_sxm", "sglang", tokens), rel=1e-9)
        h100_trt = _gpt_oss_experts("h100_sxm", "trtllm", tokens)
        h100_vllm = _gpt_oss_experts("h100_sxm", "vllm", tokens)
        assert h100_trt == pytest.approx(h100_vllm, rel=1e-9)
        assert _gpt_oss_experts("h100_sxm", "sglang", tokens) == pytest.approx(h100_vllm, rel=1e-9)
    measured = MoeTable(read_moe_profile(_shipped_moe("sglang", "b200_sxm")), monotone=False)
    shape = MoeShape(
        128, 4, 2880, 2880, 2, 1, dtype="fp4", expert_format="mxfp4", activation="mxfp8"
    )
    grid = measured.grid(shape)
    assert grid is not None
    hit = MoeTable.read(grid, 256)
    assert hit is not None
    # At 256 tokens every expert is touched: the measured layer, well under the old composition.
    assert _gpt_oss_experts("b200_sxm", "trtllm", 256) == pytest.approx(36 * hit[0], rel=0.05)
