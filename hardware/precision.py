"""Precisions the catalog names and the bytes of one element at each (no pydantic: pure data,
imported by the checkpoint recipes as well as the catalog models)."""

from __future__ import annotations

from typing import Literal

__all__ = ["BYTES_PER_ELEMENT", "Precision"]

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]

#: Bytes one element occupies at each precision (fp4/int4 pack two elements per byte).
BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}
