"""Deployable artifacts: the container line and Kubernetes Deployment of a pick are the launch
line's engine arguments, with one instance's GPUs and the pick's instance count (per pool for
a disaggregated pick)."""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from optimizer.deploy import IMAGES, deploy_artifacts
from optimizer.launch import launch_commands

AGG = {"model": "Qwen/Qwen3-32B", "backend": "vllm", "gpu": "h200_sxm", "tp": 4, "pp": 2,
       "instances": 3, "precision": "fp8", "l2_dram_gib": 128}  # fmt: skip
PD = {"model": "Qwen/Qwen3-32B", "backend": "sglang", "gpu": "h100_sxm", "tp": 2,
      "instances": 5, "pd_mode": "disaggregated", "prefill_share": 0.3,
      "prefill_tp": 4}  # fmt: skip


def _container(manifest: dict[str, Any]) -> dict[str, Any]:
    containers = manifest["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def test_aggregated_pick_one_deployment_with_the_launch_arguments() -> None:
    artifacts = deploy_artifacts(AGG)
    assert list(artifacts) == ["vllm", "sglang"]  # the simulated engine first; no TRT image
    launch = launch_commands(AGG)
    for engine, art in artifacts.items():
        (manifest,) = list(yaml.safe_load_all(art["kubernetes"]))
        assert manifest["kind"] == "Deployment"
        assert manifest["apiVersion"] == "apps/v1"
        assert manifest["spec"]["replicas"] == 3
        name = manifest["metadata"]["name"]
        assert name == f"qwen3-32b-{engine}"
        assert manifest["spec"]["selector"]["matchLabels"] == {"app": name}
        container = _container(manifest)
        image, port = IMAGES[engine]
        assert container["image"] == image
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 8  # tp 4 x pp 2
        assert container["ports"] == [{"containerPort": port}]
        line = shlex.split(str(launch[engine]["command"]))
        # vLLM's image runs ``vllm serve`` itself; SGLang's is told to listen beyond localhost.
        expected = line[2:] if engine == "vllm" else [*line, "--host", "0.0.0.0"]
        assert container["args"] == expected
        docker = shlex.split(art["container"])
        assert docker[:4] == ["docker", "run", "--gpus", "device=0,1,2,3,4,5,6,7"]
        assert docker[docker.index(image) + 1 :] == expected


def test_pd_pick_one_deployment_per_pool_as_simulated() -> None:
    art = deploy_artifacts(PD)["sglang"]
    manifests = {m["metadata"]["name"]: m for m in yaml.safe_load_all(art["kubernetes"])}
    assert list(manifests) == ["qwen3-32b-sglang-prefill", "qwen3-32b-sglang-decode"]
    prefill, decode = manifests.values()
    assert (prefill["spec"]["replicas"], decode["spec"]["replicas"]) == (2, 3)
    assert _container(prefill)["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert _container(decode)["resources"]["limits"]["nvidia.com/gpu"] == 2
    for role, manifest in (("prefill", prefill), ("decode", decode)):
        args = _container(manifest)["args"]
        assert args[args.index("--disaggregation-mode") + 1] == role
    lines = art["container"].splitlines()
    assert lines[0] == "# prefill pool"
    assert lines[2] == "# decode pool"
    assert '--gpus "device=0,1,2,3"' in lines[1]
    assert '--gpus "device=0,1"' in lines[3]
