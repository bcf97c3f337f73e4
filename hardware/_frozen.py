"""What every catalog model shares: frozen pydantic models, and the bytes of each precision."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["BYTES_PER_ELEMENT", "Frozen", "Precision"]

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


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
