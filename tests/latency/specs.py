"""Real model shapes and GPUs for the latency tests, built inline.

The specs are typed here (not read from ``hardware/data``) so the tests pin the numbers they
hand-compute against. Sources: the models' Hugging Face ``config.json``; GPU datasheets
(dense tensor TFLOPS, HBM, NVLink per direction).
"""

from __future__ import annotations

from hardware.schema import GpuSpec, ModelSpec
from simulator.latency import Deployment

H100 = GpuSpec(
    name="h100_sxm",
    vendor="nvidia",
    dense_tflops={"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9},
    hbm_gib=79.2,
    hbm_tb_per_s=3.35,
    gpu_link="nvlink",
    gpu_link_gb_per_s=450.0,
    pcie_gb_per_s=64.0,
    nic_gb_per_s=50.0,
    gpus_per_node=8,
    usd_per_gpu_hour=3.0,
)
B200 = GpuSpec(
    name="b200",
    vendor="nvidia",
    dense_tflops={"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "fp4": 9000.0},
    hbm_gib=178.4,
    hbm_tb_per_s=8.0,
    gpu_link="nvlink",
    gpu_link_gb_per_s=900.0,
    pcie_gb_per_s=64.0,
    nic_gb_per_s=50.0,
    gpus_per_node=8,
    usd_per_gpu_hour=6.0,
)
LLAMA_8B = ModelSpec(
    name="meta-llama/Llama-3.1-8B",
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    head_dim=128,
    ffn_size=14336,
    vocab_size=128256,
    max_context_tokens=131072,
)
LLAMA_70B = LLAMA_8B.model_copy(
    update={
        "name": "meta-llama/Llama-3.1-70B",
        "num_layers": 80,
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "ffn_size": 28672,
    }
)
QWEN3_MOE = ModelSpec(
    name="Qwen/Qwen3-30B-A3B",
    num_layers=48,
    hidden_size=2048,
    num_attention_heads=32,
    num_kv_heads=4,
    head_dim=128,
    ffn_size=6144,
    vocab_size=151936,
    qk_norm=True,
    max_context_tokens=40960,
    num_experts=128,
    experts_per_token=8,
    expert_ffn_size=768,
)
DEEPSEEK_V3 = ModelSpec(
    name="deepseek-ai/DeepSeek-V3",
    num_layers=61,
    hidden_size=7168,
    num_attention_heads=128,
    num_kv_heads=128,
    head_dim=128,
    ffn_size=18432,
    vocab_size=129280,
    attention="mla",
    max_context_tokens=163840,
    num_experts=256,
    experts_per_token=8,
    expert_ffn_size=2048,
    num_shared_experts=1,
    first_dense_layers=3,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
)


#: Deployments every latency model must handle (dense, TP, MoE with EP, MLA, fp8 KV).
DEPLOYMENTS: dict[str, Deployment] = {
    "llama8b-tp1": Deployment(LLAMA_8B, H100),
    "llama70b-tp4-fp8": Deployment(
        LLAMA_70B, H100, tp=4, weight_precision="fp8", kv_precision="fp8"
    ),
    "qwen3moe-tp2": Deployment(QWEN3_MOE, H100, tp=2),
    "deepseekv3-tp8-fp8": Deployment(DEEPSEEK_V3, B200, tp=8, weight_precision="fp8"),
    # Pipeline parallelism (latency/pipeline.py): two TP2 stages on one node.
    "llama70b-tp2-pp2-fp8": Deployment(LLAMA_70B, H100, tp=2, pp=2, weight_precision="fp8"),
}
