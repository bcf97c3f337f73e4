"""Deployable artifacts for a pick: a container command and a Kubernetes Deployment manifest.

Built from ``optimizer.launch``'s engine command lines (vLLM ``vllm serve``, SGLang
``python -m sglang.launch_server``), so the artifacts and the launch lines never disagree:

- **container**: ``docker run`` of the engine's published image (``vllm/vllm-openai``, whose
  entrypoint is ``vllm serve`` and takes the model as its first argument; ``lmsysorg/sglang``,
  which runs the launch command given), with the GPUs of one instance (``tp``), host IPC (both
  engines need shared memory for tensor parallelism) and the engine's port published;
- **Kubernetes**: one ``apps/v1`` Deployment with ``replicas`` = the pick's instance count,
  ``nvidia.com/gpu`` = ``tp`` per pod, a memory-backed ``/dev/shm``, and a readiness probe on
  the engine's ``/health`` endpoint. A PD (disaggregated) pick gets one Deployment per pool.

What this is not: it does not pick image versions (``latest``: pin one), storage classes or
node selectors — a cluster's own; nor does it deploy anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from optimizer.configs import pd_pools
from optimizer.launch import launch_commands

__all__ = ["IMAGES", "deploy_artifacts"]

#: Engine -> (container image, port its server listens on by default).
IMAGES: dict[str, tuple[str, int]] = {
    "vllm": ("vllm/vllm-openai:latest", 8000),
    "sglang": ("lmsysorg/sglang:latest", 30000),
}


def _engine_args(engine: str, command: str) -> list[str]:
    """The container's arguments: the launch line minus what the image's entrypoint is."""
    args = shlex.split(command)
    if engine == "vllm":
        return args[2:]  # the image's entrypoint is ``vllm serve``
    return [*args, "--host", "0.0.0.0"]  # SGLang binds to localhost unless told


def _name(params: Mapping[str, Any], engine: str) -> str:
    """A DNS-1123 name: ``qwen3-32b-vllm``."""
    model = str(params.get("model", "model")).rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9-]+", "-", f"{model}-{engine}").strip("-")[:63]


def _deployment(
    name: str, image: str, args: list[str], *, port: int, gpus: int, replicas: int
) -> str:
    container = {
        "name": "engine",
        "image": image,
        "args": args,
        "ports": [{"containerPort": port}],
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
        "readinessProbe": {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 10},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [container],
                    "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
                },
            },
        },
    }
    return yaml.safe_dump(manifest, sort_keys=False)


def _groups(params: Mapping[str, Any], launch: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """``(name suffix, launch command, the group's parameters)`` per instance group: the one
    group, or the prefill and decode pools of a PD pick (each with its own command, GPUs and
    replica count, as simulated)."""
    pools = pd_pools(params)
    if pools is None:
        return [("", str(launch["command"]), params)]
    return [(f"-{role}", str(launch["pools"][role]["command"]), pool)
            for role, pool in pools.items()]  # fmt: skip


def _gpus(params: Mapping[str, Any]) -> int:
    """GPUs of one instance: tp x pp (pipeline stages of tp GPUs each)."""
    return int(params.get("tp", 1)) * int(params.get("pp") or 1)


def _docker(image: str, port: int, gpus: int, args: list[str]) -> str:
    head = ["docker", "run", "--gpus", f'"device={",".join(map(str, range(gpus)))}"']
    return " ".join(head) + " " + shlex.join(["--ipc=host", "-p", f"{port}:{port}", image, *args])


def deploy_artifacts(params: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``{engine: {"container": docker run line, "kubernetes": manifest YAML}}`` per engine
    that has a published serving image (vLLM, SGLang), the simulated one first. A PD pick
    gets one container line (under a ``# prefill pool`` comment) and one Deployment per
    pool."""
    out: dict[str, dict[str, str]] = {}
    for engine, launch in launch_commands(params).items():
        if engine not in IMAGES:
            continue
        image, port = IMAGES[engine]
        lines, manifests = [], []
        groups = _groups(params, launch)
        for suffix, command, group in groups:
            args = _engine_args(engine, command)
            gpus = _gpus(group)
            docker = _docker(image, port, gpus, args)
            lines.append(f"# {suffix[1:]} pool\n{docker}" if suffix else docker)
            manifests.append(
                _deployment(
                    _name(params, engine) + suffix, image, args, port=port, gpus=gpus,
                    replicas=int(group.get("instances", 1)),
                )
            )  # fmt: skip
        out[engine] = {"container": "\n".join(lines), "kubernetes": "---\n".join(manifests)}
    return out
