"""Precisions the catalog names and the bytes of one element at each (no pydantic: pure data,
imported by the checkpoint recipes as well as the catalog models)."""

from __future__ import annotations

from typing import Literal

__all__ = ["BYTES_PER_ELEMENT", "WEIGHT_ONLY", "Precision", "gemm_compute_precision"]

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int8_wo", "fp4", "int4"]

#: Bytes one element occupies at each precision (fp4/int4 pack two elements per byte).
BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int8_wo": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}

#: Weight precisions the catalog serves weight-only (AWQ / GPTQ int4, W4A16; ``int8_wo``,
#: W8A16, TensorRT-LLM's weight-only int8 — ``int8`` is W8A8 SmoothQuant): the weights are
#: dequantised into 16-bit GEMMs, so they run on any GPU and a GPU's listed tensor peak at that
#: width (A100's INT4 1,248 TOPS, which is W4A4) never applies to them.
WEIGHT_ONLY: frozenset[str] = frozenset({"int4", "int8_wo"})


def gemm_compute_precision(weight_precision: str) -> str:
    """The precision whose tensor peak a GEMM of ``weight_precision`` weights computes at:
    bf16 for a weight-only precision (``WEIGHT_ONLY``), the precision itself otherwise."""
    return "bf16" if weight_precision in WEIGHT_ONLY else weight_precision
