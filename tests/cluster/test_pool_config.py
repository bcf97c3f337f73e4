"""PD pools as a nested ``PoolConfig``: today's flat keys still read, with a note; one truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hardware.catalog import shipped_catalog
from optimizer.configs import known_names
from optimizer.simconfig import merge_config
from optimizer.space_check import check_setting
from simulator.config import ServingConfig
from simulator.pool_config import FLAT_POOL_KEYS, PoolConfig, fold_pool_keys
from slo.inputfile import InputError, validate

BASE: dict[str, Any] = {"model": "Qwen/Qwen3-8B", "gpu": "h100_sxm", "pd_mode": "disaggregated"}
FLAT: dict[str, Any] = {
    "prefill_instances": 2,
    "prefill_tp": 2,
    "prefill_max_batched_tokens": 16384,
    "decode_instances": 3,
    "decode_gpu": "a100_sxm",
    "decode_max_running_requests": 64,
    "decode_router": "least_load",
}
NESTED: dict[str, Any] = {
    "prefill": {"instances": 2, "tp": 2, "max_batched_tokens": 16384},
    "decode": {
        "instances": 3,
        "gpu": "a100_sxm",
        "max_running_requests": 64,
        "router": "least_load",
    },
}


def test_flat_keys_and_the_nested_form_give_the_same_deployment() -> None:
    flat = ServingConfig(**BASE, **FLAT)
    nested = ServingConfig(**BASE, **NESTED)
    assert flat == nested
    assert nested.pool_shape("prefill") == ("h100_sxm", 2, 2)
    assert nested.pool_shape("decode") == ("a100_sxm", 1, 3)
    assert nested.pool_limits("prefill") == (16384, None)
    assert nested.pool_limits("decode") == (None, 64)
    assert nested.decode_router() == "least_load"
    assert ServingConfig(**BASE, prefill={"instances": 1}, decode={"instances": 1}).decode_router()
    # A dump round-trips in the nested form (what results files and stored studies hold).
    assert ServingConfig.model_validate(nested.model_dump()) == nested
    assert "prefill_tp" not in nested.model_dump()


def test_every_flat_key_folds_into_its_pool_field() -> None:
    data, flat = fold_pool_keys({"model": "m", **FLAT})
    assert flat == list(FLAT)
    assert data == {"model": "m", **NESTED}
    assert set(FLAT_POOL_KEYS) >= set(FLAT)
    assert "prefill_router" not in FLAT_POOL_KEYS  # the entry router picks the prefill instance


def test_a_field_given_both_ways_differently_is_a_one_line_error() -> None:
    with pytest.raises(InputError, match=r"prefill_tp \(4\) and prefill.tp \(2\) are both given"):
        validate(ServingConfig, {**BASE, **NESTED, "prefill_tp": 4}, "deploy.yaml")
    same = validate(ServingConfig, {**BASE, **NESTED, "prefill_tp": 2}, "deploy.yaml")
    assert same.pool("prefill").tp == 2


def test_a_prefill_router_is_refused_with_the_reason() -> None:
    data = {**BASE, **NESTED, "prefill": {**NESTED["prefill"], "router": "least_load"}}
    with pytest.raises(InputError, match=r"prefill.router: the prefill instance is picked by"):
        validate(ServingConfig, data, "deploy.yaml")


def test_pool_fields_are_checked_where_they_sit() -> None:
    with pytest.raises(InputError, match="tp"):
        validate(ServingConfig, {**BASE, "prefill": {"instances": 1, "tp": 0}}, "deploy.yaml")
    with pytest.raises(InputError, match="unknown router"):
        validate(ServingConfig, {**BASE, "decode": {"router": "nope"}}, "deploy.yaml")
    with pytest.raises(InputError, match=r"decode.instance: unknown key"):
        validate(ServingConfig, {**BASE, "decode": {"instance": 1}}, "deploy.yaml")
    with pytest.raises(InputError, match=r"decode.gpu is set but pd_mode is 'aggregated'"):
        validate(ServingConfig, {"model": "m", "gpu": "g", "decode": {"gpu": "x"}}, "deploy.yaml")


def test_a_file_with_flat_keys_still_loads_and_says_they_are_deprecated(tmp_path: Path) -> None:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump({**BASE, **FLAT}))
    new.write_text(yaml.safe_dump({**BASE, **NESTED}))
    notes: list[str] = []
    from_old = merge_config(old, {}, on_note=notes.append)
    assert len(notes) == 1
    assert str(old) in notes[0]
    assert "prefill_instances" in notes[0]
    assert "deprecated" in notes[0]
    assert "\n" not in notes[0]
    assert from_old == merge_config(new, {}, on_note=notes.append)
    assert len(notes) == 1  # the nested file gets no note


def test_search_spaces_keep_the_flat_pool_names() -> None:
    names = known_names()
    assert {"prefill_tp", "decode_instances", "decode_router"} <= set(names)
    assert "prefill" not in names
    assert "decode" not in names
    catalog = shipped_catalog()
    check_setting("prefill_tp", 2, catalog, "space.yaml")
    with pytest.raises(InputError, match=r"space.yaml: prefill_tp"):
        check_setting("prefill_tp", 0, catalog, "space.yaml")
    with pytest.raises(InputError, match=r"space.yaml: decode_gpu"):
        check_setting("decode_gpu", "no_such_gpu", catalog, "space.yaml")


def test_an_empty_pool_config_means_every_default() -> None:
    assert PoolConfig().given() == []
    assert PoolConfig(tp=2, router="least_load").given() == ["tp", "router"]


def test_the_shipped_pd_example_is_written_in_the_nested_form() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "simulate_pd.yaml"
    notes: list[str] = []
    config = merge_config(example, {}, shipped_catalog(), on_note=notes.append)
    assert notes == []
    assert config.pool_shape("prefill") == ("h100_sxm", 2, 2)
    assert config.pool_shape("decode") == ("h100_sxm", 4, 2)
    assert config.decode_router() == "least_load"
