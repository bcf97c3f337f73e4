"""``simulator.validation.silicon.versions``: the engine release a row that names none can have
run, from the rows of its dated export, and the release rules that read it."""

from __future__ import annotations

from pathlib import Path

from hardware.catalog import shipped_catalog
from simulator.validation.rules import kv_precision
from simulator.validation.silicon.read import read_silicon
from simulator.validation.silicon.versions import source_fields, with_release_bounds
from simulator.validation.validate import SiliconRow


def _source(day: str, export: str = "2026-04-06.csv") -> str:
    return f"source_file={export}; model=Llama-3.1-70B; measured={day}T00:00:00.000Z; wip=False"


def _row(day: str, version: str = "", **fields: object) -> SiliconRow:
    base: dict[str, object] = {
        "line": 2, "id": f"r{day}{version}", "model": "meta-llama/Llama-3.1-70B",
        "backend": "vllm", "system": "h100_sxm", "isl": 1024, "osl": 1024, "concurrency": 64,
        "tp": 2, "pp": 1, "attention_dp": 1, "moe_tp": 2, "moe_ep": 1, "precision": "fp8",
        "measured_ttft_ms": 30.0, "measured_tpot_ms": 7.0, "source": _source(day),
        "backend_version": version,
    }  # fmt: skip
    base.update(fields)
    return SiliconRow(**base)  # type: ignore[arg-type]


def test_a_row_without_a_version_is_bounded_by_the_later_rows_of_its_export() -> None:
    rows = [
        _row("2025-10-29"),  # before both stated versions: at most the older one
        _row("2025-12-08", "0.11.2"),
        _row("2026-03-27", "0.18.0"),
        _row("2026-01-05"),  # between them: at most 0.18.0
        _row("2026-04-01"),  # after every stated version: nothing says
        _row("2025-10-29", backend="sglang"),  # another backend's rows say nothing of vLLM
        _row("2025-10-29", source=_source("2025-10-29", "2026-03-25.csv")),  # another export
        _row("2025-10-29", source="source_file=/x/aic-auto-gap-analysis/m.csv"),  # undated
    ]
    bounded = with_release_bounds(rows)
    assert [r.release_at_most for r in bounded] == ["0.11.2", "", "", "0.18.0", "", "", "", ""]
    assert [r.release for r in bounded][:4] == ["0.11.2", "0.11.2", "0.18.0", "0.18.0"]
    assert [r.id for r in bounded] == [r.id for r in rows]


def test_vllm_before_013_keeps_bf16_kv_for_a_modelopt_fp8_checkpoint() -> None:
    # vLLM's auto honours the checkpoint's FP8 KV scheme from 0.13 (PR #29980): a row measured
    # while its export still ran 0.11.2 gets a bf16 KV cache, half the capacity in tokens.
    catalog = shipped_catalog()
    early, later = with_release_bounds([_row("2025-10-29"), _row("2025-12-08", "0.11.2")])
    assert kv_precision(early, catalog) == "bf16"
    assert kv_precision(later, catalog) == "bf16"
    assert kv_precision(_row("2025-10-29"), catalog) == "fp8"  # no bound: the current rule
    assert kv_precision(_row("2026-03-27", "0.18.0"), catalog) == "fp8"


def test_the_reader_sets_the_bounds(tmp_path: Path) -> None:
    header = (
        "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,"
        "osl,gemm_quant_mode,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms"
    )
    lines = [header]
    for i, (day, version) in enumerate([("2025-10-29", ""), ("2025-12-08", "0.11.2")]):
        lines.append(
            f'r{i},"{_source(day)}",vllm,{version},meta-llama/Llama-3.1-70B,h100_sxm,fp8,agg,'
            "1024,1024,fp8,64,2,300,30"
        )
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows, skipped = read_silicon(path)
    assert not skipped
    assert [r.release for r in rows] == ["0.11.2", "0.11.2"]
    assert [r.backend_version for r in rows] == ["", "0.11.2"]


def test_source_fields_split_on_semicolons() -> None:
    fields = source_fields("source_file=a.csv; measured=2025-10-29T00:00; image=v:1")
    assert fields == {"source_file": "a.csv", "measured": "2025-10-29T00:00", "image": "v:1"}
