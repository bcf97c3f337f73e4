"""``kvplan validate`` on rows naming the models InferenceX benchmarks use: H100 rows relabelled
(Kimi-K2.5 moved to H200, where its INT4 experts fit on eight GPUs; GLM-5 and DeepSeek-V3.2, the
DeepSeek Sparse Attention models, on B200 and H200) simulate; a model left out of the catalog
(GLM-5.2: its shared indexers are not modelled) is skipped with its reason, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from optimizer.cli.main import app

HEADER = (
    "id,backend,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,"
    "batch_size,tp_size,pp_size,moe_tp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms"
)
ROWS = [
    # aiconfigurator spells InferenceX's int4 as weight-only int4 ("int4_wo")
    "kimi,trtllm,moonshotai/Kimi-K2.5,h200_sxm,int4,agg,1024,128,int4_wo,int4_wo,4,8,1,1,8,"
    "300.0,30.0",
    "kimi_nvfp4,vllm,nvidia/Kimi-K2.5-NVFP4,b200_sxm,fp4,agg,1024,128,nvfp4,nvfp4,4,8,1,1,8,"
    "300.0,30.0",
    "llama,vllm,meta-llama/Meta-Llama-3.1-70B,h100_sxm,fp8,agg,1024,1024,fp8,fp8,16,4,1,4,1,"
    "500.0,20.0",
    "qwen35,sglang,Qwen/Qwen3.5-397B-A17B-FP8,h100_sxm,fp8,agg,1024,128,fp8_block,fp8_block,"
    "4,8,1,1,8,300.0,20.0",
    "glm5,sglang,nvidia/GLM-5-NVFP4,b200_sxm,fp4,agg,1024,128,nvfp4,nvfp4,4,8,1,1,8,300.0,20.0",
    "glm5_fp8,sglang,zai-org/GLM-5-FP8,h200_sxm,fp8,agg,8192,1024,fp8_block,fp8_block,"
    "16,8,1,1,8,900.0,30.0",
    "dsv32,vllm,deepseek-ai/DeepSeek-V3.2,h200_sxm,fp8,agg,8192,1024,fp8_block,fp8_block,"
    "16,8,1,1,8,900.0,30.0",
    "glm52,sglang,nvidia/GLM-5.2-NVFP4,b200_sxm,fp4,agg,1024,128,nvfp4,nvfp4,4,8,1,1,8,300.0,20.0",
]


def test_rows_naming_new_models_simulate(tmp_path: Path) -> None:
    path = tmp_path / "silicon.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n")
    result = CliRunner().invoke(
        app, ["validate", "--silicon", str(path), "--json", "--rounds", "2"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {row["id"]: row for row in data["rows"]}
    assert set(rows) == {"kimi", "kimi_nvfp4", "llama", "qwen35", "glm5", "glm5_fp8", "dsv32"}
    for row in rows.values():
        assert row["predicted_ttft_ms"] > 0
        assert row["predicted_tpot_ms"] > 0
    assert [(s["id"], s["reason"]) for s in data["skipped"]] == [
        ("glm52", "unknown model 'nvidia/GLM-5.2-NVFP4'")
    ]
