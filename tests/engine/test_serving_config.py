"""``ServingConfig``: every field described, cross-field checks, one-line file errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from simulator.config import ServingConfig
from simulator.workload.spec import WorkloadSpec
from slo.inputfile import InputError

MINIMAL = {"model": "toy/Toy-1B", "gpu": "toy_gpu"}


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []
    stack = [root]
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.append(cls)
        for info in cls.model_fields.values():
            for arg in _walk(info.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    stack.append(arg)
    return seen


def _walk(annotation: object) -> list[object]:
    args = getattr(annotation, "__args__", ())
    out = [annotation]
    for arg in args:
        out.extend(_walk(arg))
    meta = getattr(annotation, "__metadata__", ())
    return out + list(meta)


_SHAPES: tuple[type[BaseModel], ...] = getattr(
    WorkloadSpec.model_fields["root"].annotation, "__args__", ()
)


@pytest.mark.parametrize("root", [ServingConfig, *_SHAPES])
def test_every_field_has_a_description(root: type[BaseModel]) -> None:
    for cls in _models(root):
        for name, info in cls.model_fields.items():
            assert info.description, f"{cls.__name__}.{name} has no description"


def test_defaults_validate_and_are_frozen() -> None:
    config = ServingConfig.model_validate(MINIMAL)
    assert config.tp == 1
    assert config.l2_dram_gib == 0
    assert config.scheduler is None
    with pytest.raises(ValidationError):
        config.tp = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"l3_tier": "ssd"}, "an L3 tier needs an L2 tier"),
        ({"preemption": "swap"}, "preemption 'swap' needs an L2 tier"),
        ({"l3_capacity_gib": 10}, "l3_capacity_gib is set but l3_tier is not"),
        ({"chunk_tokens": 4096, "max_batched_tokens": 2048}, "must not exceed max_batched_tokens"),
        ({"max_batched_tokens": 64, "max_running_requests": 128}, "must be at least"),
        ({"scheduler": "fcfs"}, "unknown scheduler 'fcfs'"),
        ({"router": "magic"}, "unknown router 'magic'"),
        ({"l1_policy": "nope"}, "unknown eviction policy 'nope'"),
        ({"tp": 4, "ep": 3}, "ep (3) must divide tp (4)"),
        ({"hbm_utilization": 1.5}, "less than or equal to 1"),
        # Beyond 1 PiB a capacity's bytes overflow to inf and its block count to NaN.
        ({"l2_dram_gib": "1e+300"}, "l2_dram_gib: Input should be less than or equal to 1048576"),
        (
            {"l2_dram_gib": 64, "l3_tier": "nvme_4tib", "l3_capacity_gib": "1e+300"},
            "l3_capacity_gib: Input should be less than or equal to 1048576",
        ),
        # Past ~1e290 s a CPU cost puts events where a step no longer moves the clock: a hang.
        ({"tokenize_us_per_prompt_token": "1e+300"}, "less than or equal to 10000000"),
        ({"frontend_us": "[1.0e+300, 0, 0]"}, "frontend_us.0: Input should be less than"),
        ({"frontend_us": "[0, -2, 0]"}, "frontend_us.1: Input should be greater than"),
        ({"spec_tokens": 4, "spec_draft_layers": "1e+300"}, "spec_draft_layers: Input should"),
        ({"colour": "blue"}, "unknown key"),
    ],
)
def test_bad_configs_fail_with_one_clear_line(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    path = tmp_path / "serve.yaml"
    lines = [f"{k}: {v}" for k, v in {**MINIMAL, **fields}.items()]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        ServingConfig.from_yaml(path)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(str(path))
    assert message in text


def test_from_yaml_reads_a_good_file(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(
        "model: toy/Toy-1B\ngpu: toy_gpu\ntp: 2\nl2_dram_gib: 64\nl3_tier: ssd\n"
        "prefetch_policy: timeout\nscheduler: decode_first\nrouter: least_load\n"
    )
    config = ServingConfig.from_yaml(path)
    assert (config.tp, config.l3_tier, config.scheduler) == (2, "ssd", "decode_first")
