"""Launch lines carry the picked configuration's values as real engine flags."""

from __future__ import annotations

import json
import shlex
from typing import Any

from optimizer.launch import launch_commands


def test_vllm_and_sglang_flags() -> None:
    params = {
        "model": "Qwen/Qwen3-32B",
        "tp": 4,
        "precision": "fp8",
        "hbm_utilisation": 0.85,
        "scheduler": "chunked",
        "chunk_tokens": 2048,
        "l2_dram_gib": 512,
        "instances": 3,
    }
    out = launch_commands(params)
    vllm = shlex.split(out["vllm"]["command"])
    assert vllm[:3] == ["vllm", "serve", "Qwen/Qwen3-32B"]
    assert vllm[vllm.index("--tensor-parallel-size") + 1] == "4"
    assert vllm[vllm.index("--max-num-batched-tokens") + 1] == "2048"
    assert vllm[vllm.index("--kv-offloading-size") + 1] == "512"
    assert "--enable-prefix-caching" in vllm
    sglang = shlex.split(out["sglang"]["command"])
    assert sglang[sglang.index("--tp-size") + 1] == "4"
    assert sglang[sglang.index("--hicache-size") + 1] == "512"
    assert sglang[sglang.index("--mem-fraction-static") + 1] == "0.85"
    assert out["vllm"]["notes"][0].startswith("run 3 instances")


def test_no_offload_flags_without_l2() -> None:
    out = launch_commands({"model": "m", "tp": 1})
    assert "offloading" not in out["vllm"]["command"]
    assert "hierarchical" not in out["sglang"]["command"]


def test_trtllm_flags_and_its_options_file() -> None:
    params = {
        "model": "Qwen/Qwen3-32B",
        "backend": "trtllm",
        "tp": 2,
        "kv_precision": "fp8",
        "hbm_utilisation": 0.9,
        "scheduler": "chunked",
        "chunk_tokens": 4096,
        "l2_dram_gib": 64,
        "kv_admission": "on_demand",
    }
    out = launch_commands(params)
    assert next(iter(out)) == "trtllm"
    assert out["trtllm"]["simulated"]
    trt = shlex.split(out["trtllm"]["command"])
    assert trt[:2] == ["trtllm-serve", "Qwen/Qwen3-32B"]
    assert trt[trt.index("--tp_size") + 1] == "2"
    assert trt[trt.index("--max_num_tokens") + 1] == "4096"
    assert trt[trt.index("--kv_cache_free_gpu_memory_fraction") + 1] == "0.90"
    options = json.loads(out["trtllm"]["notes"][0].split(": ", 1)[1])
    assert options == {
        "enable_chunked_prefill": True,
        "kv_cache_config": {
            "enable_block_reuse": True,
            "dtype": "fp8",
            "host_cache_size": 64 * 2**30,
        },
        "scheduler_config": {"capacity_scheduler_policy": "MAX_UTILIZATION"},
    }


def test_the_simulated_engine_comes_first_and_the_others_say_so() -> None:
    out = launch_commands({"model": "m", "tp": 1, "backend": "sglang"})
    assert list(out) == ["sglang", "vllm", "trtllm"]  # then the builders' order
    assert out["sglang"]["simulated"]
    assert not out["vllm"]["simulated"]
    assert out["vllm"]["notes"][0] == "not simulated: the figures above are for sglang"
    assert next(iter(launch_commands({"model": "m"}))) == "vllm"  # the default backend


def test_sglang_schedule_conservativeness_flag() -> None:
    out = launch_commands({"model": "m", "backend": "sglang", "schedule_conservativeness": 0.3})
    sglang = shlex.split(out["sglang"]["command"])
    assert sglang[sglang.index("--schedule-conservativeness") + 1] == "0.3"
    assert "--schedule-conservativeness" not in launch_commands({"model": "m"})["sglang"]["command"]


def test_speculative_decoding_is_a_note_naming_each_engines_option() -> None:
    out = launch_commands({"model": "m", "spec_tokens": 3})
    assert any("--speculative-config" in note for note in out["vllm"]["notes"])
    assert any("--speculative-algorithm" in note for note in out["sglang"]["notes"])
    assert any("speculative_config" in note for note in out["trtllm"]["notes"])
    assert not any("speculative" in n for n in launch_commands({"model": "m"})["vllm"]["notes"])


def test_attention_dp_and_expert_parallel_flags() -> None:
    params = {"model": "deepseek-ai/DeepSeek-V3", "tp": 16, "attention_dp": 16, "ep": 16}
    out = launch_commands(params)

    def values(engine: str, *flags: str) -> list[str]:
        args = shlex.split(out[engine]["command"])
        return [args[args.index(flag) + 1] for flag in flags]

    # vLLM: DP ranks of TP GPUs each; --enable-expert-parallel spreads experts over DP x TP.
    assert values("vllm", "--tensor-parallel-size", "--data-parallel-size") == ["1", "16"]
    assert "--enable-expert-parallel" in out["vllm"]["command"]
    assert values("sglang", "--tp-size", "--dp-size", "--ep-size") == ["16", "16", "16"]
    assert "--enable-dp-attention" in out["sglang"]["command"]
    options = json.loads(out["trtllm"]["notes"][1].split(": ", 1)[1])
    assert options["enable_attention_dp"] is True
    assert options["moe_expert_parallel_size"] == 16


def test_layouts_an_engine_cannot_launch_get_a_note() -> None:
    out = launch_commands({"model": "m", "tp": 8, "attention_dp": 2, "ep": 4, "backend": "trtllm"})
    assert any("one rank per GPU" in n for n in out["trtllm"]["notes"])
    assert any("spans all 8 GPUs or none" in n for n in out["vllm"]["notes"])
    vllm = shlex.split(out["vllm"]["command"])
    assert vllm[vllm.index("--tensor-parallel-size") + 1] == "4"
    assert "--enable-expert-parallel" not in vllm


def test_pipeline_parallel_flags_per_engine() -> None:
    out = launch_commands({"model": "meta-llama/Llama-3.1-70B", "tp": 4, "pp": 2})
    vllm = shlex.split(out["vllm"]["command"])
    assert vllm[vllm.index("--tensor-parallel-size") + 1] == "4"
    assert vllm[vllm.index("--pipeline-parallel-size") + 1] == "2"
    sglang = shlex.split(out["sglang"]["command"])
    assert sglang[sglang.index("--pp-size") + 1] == "2"
    trt = shlex.split(out["trtllm"]["command"])
    assert trt[trt.index("--pp_size") + 1] == "2"
    # pp = 1 adds no flag.
    plain = launch_commands({"model": "m", "tp": 8, "pp": 1})
    assert "pipeline" not in plain["vllm"]["command"]
    assert "--pp" not in plain["sglang"]["command"] + plain["trtllm"]["command"]


#: A disaggregated pick as a space samples it: 5 instances split by prefill_share, the
#: prefill pool on wider TP.
PD: dict[str, Any] = {"model": "Qwen/Qwen3-32B", "gpu": "h100_sxm", "tp": 2, "instances": 5,
                      "pd_mode": "disaggregated", "prefill_share": 0.3,
                      "prefill_tp": 4}  # fmt: skip


def test_a_pd_pick_gets_one_command_per_pool_with_the_role_flags() -> None:
    """The pools are the ones simulated (``to_config``'s split), each with its own TP and the
    engine's prefill/decode flags; the notes say how many of each and how to route them."""
    from optimizer.configs import to_config  # noqa: PLC0415

    config = to_config(PD["model"], {k: v for k, v in PD.items() if k != "model"})
    assert config.prefill is not None
    assert config.decode is not None
    out = launch_commands(PD)
    for engine in ("vllm", "sglang", "trtllm"):
        pools = out[engine]["pools"]
        assert list(pools) == ["prefill", "decode"]
        assert pools["prefill"]["instances"] == config.prefill.instances == 2
        assert pools["decode"]["instances"] == config.decode.instances == 3
        assert out[engine]["command"].startswith("# prefill pool: 2 instances\n")
        assert any(n.startswith("run 2 prefill and 3 decode instances") for n in
                   out[engine]["notes"])  # fmt: skip
    sglang = {role: shlex.split(p["command"]) for role, p in out["sglang"]["pools"].items()}
    for role, args in sglang.items():
        assert args[args.index("--disaggregation-mode") + 1] == role
    assert sglang["prefill"][sglang["prefill"].index("--tp-size") + 1] == "4"
    assert sglang["decode"][sglang["decode"].index("--tp-size") + 1] == "2"
    assert any("--pd-disaggregation" in n for n in out["sglang"]["notes"])
    for pool in out["vllm"]["pools"].values():
        args = shlex.split(pool["command"])
        connector = json.loads(args[args.index("--kv-transfer-config") + 1])
        assert connector == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    trtllm = out["trtllm"]
    assert "kvplan-trtllm-prefill.yaml" in trtllm["pools"]["prefill"]["command"]
    options = next(n for n in trtllm["notes"] if n.startswith("kvplan-trtllm-decode.yaml: "))
    assert json.loads(options.split(": ", 1)[1])["cache_transceiver_config"] == {
        "backend": "DEFAULT"
    }
    assert any("trtllm-serve disaggregated" in n for n in trtllm["notes"])


def test_an_aggregated_pick_has_no_pools_and_no_role_flags() -> None:
    out = launch_commands({**PD, "pd_mode": "aggregated"})
    for entry in out.values():
        assert "pools" not in entry
        assert "disaggregation" not in entry["command"]
        assert "kv-transfer-config" not in entry["command"]
        assert "cache_transceiver" not in " ".join(entry["notes"])
