"""The hardware and model catalog: GPUs, KV-cache storage tiers and transformer shapes.

``shipped_catalog()`` is the catalog that ships with kvplan (``hardware/data/*.yaml``, every
number with its source); ``load_catalog(path)`` merges a user's YAML file over it. Lookups are
case-insensitive and raise ``InputError`` (one line, naming the known entries) for unknown names::

    from hardware import load_catalog
    catalog = load_catalog()                 # or load_catalog("my_prices.yaml")
    gpu = catalog.gpu("h100_sxm")
    model = catalog.model("Qwen3-32B")       # the part after '/' is enough
    model.kv_bytes_per_token("bf16")         # 262144.0

``InputError`` is re-exported so that the simulator can raise it without importing ``slo``.
"""

from __future__ import annotations

from hardware.catalog import load_catalog, shipped_catalog
from hardware.schema import (
    BYTES_PER_ELEMENT,
    HOURS_PER_MONTH,
    Catalog,
    GpuSpec,
    ModelSpec,
    Precision,
    StorageTierSpec,
    closest_key,
)
from slo.inputfile import InputError

__all__ = [
    "BYTES_PER_ELEMENT",
    "HOURS_PER_MONTH",
    "Catalog",
    "GpuSpec",
    "InputError",
    "ModelSpec",
    "Precision",
    "StorageTierSpec",
    "closest_key",
    "load_catalog",
    "shipped_catalog",
]
