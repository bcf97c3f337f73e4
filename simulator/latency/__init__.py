"""Step latency, KV transfer times and memory fit of one serving instance.

- ``Batch``: a step's ``(cache_len, new_tokens)`` per request.
- ``Deployment``: model × GPU × TP/EP × precisions, validated.
- ``LatencyModel`` (protocol) and ``make_latency_model(spec, deployment)`` over the registry
  ``LATENCY_MODELS`` ('auto', 'roofline', 'table', 'calibrated'); ``latency_note``.
- ``KernelTimer`` (the kernel-cost seam), ``RooflineKernels``, ``OperatorPlanner``.
- ``transfer_seconds`` and ``Link`` builders; ``kv_bytes`` / ``kv_bytes_per_gpu``.
- ``memory_fit`` → ``MemoryFit`` (``simulator.presets`` holds the engines' parameters for it).
"""

from simulator.latency.base import LatencyModel, StepBreakdown
from simulator.latency.batch import Batch, BatchLike, as_batch
from simulator.latency.compose import ComposeParams, KernelCall, OperatorPlanner
from simulator.latency.deployment import Deployment
from simulator.latency.kernels import KERNEL_CLASSES, KernelClass, KernelTimer
from simulator.latency.memory import MemoryFit, MemoryParams, memory_fit, weight_bytes_per_gpu
from simulator.latency.model import ComposedLatencyModel, RooflineModel
from simulator.latency.registry import (
    LATENCY_MODELS,
    LatencyContext,
    LatencyModelFactory,
    latency_note,
    make_latency_model,
)
from simulator.latency.roofline import RooflineKernels, RooflineParams, Work
from simulator.latency.transfer import (
    Link,
    LinkParams,
    gpu_gpu_link,
    kv_bytes,
    kv_bytes_per_gpu,
    link_to_tier,
    storage_link,
    transfer_seconds,
)

__all__ = [
    "KERNEL_CLASSES",
    "LATENCY_MODELS",
    "Batch",
    "BatchLike",
    "ComposeParams",
    "ComposedLatencyModel",
    "Deployment",
    "KernelCall",
    "KernelClass",
    "KernelTimer",
    "LatencyContext",
    "LatencyModel",
    "LatencyModelFactory",
    "Link",
    "LinkParams",
    "MemoryFit",
    "MemoryParams",
    "OperatorPlanner",
    "RooflineKernels",
    "RooflineModel",
    "RooflineParams",
    "StepBreakdown",
    "Work",
    "as_batch",
    "gpu_gpu_link",
    "kv_bytes",
    "kv_bytes_per_gpu",
    "latency_note",
    "link_to_tier",
    "make_latency_model",
    "memory_fit",
    "storage_link",
    "transfer_seconds",
    "weight_bytes_per_gpu",
]
