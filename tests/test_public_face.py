"""``simulator``'s public face: every name in ``__all__`` resolves to its defining module, and
the docstring's example runs."""

from __future__ import annotations

import pytest

import simulator


@pytest.mark.parametrize("name", simulator.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(simulator, name) is not None
    assert name in dir(simulator)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        simulator.no_such_thing  # noqa: B018


def test_the_docstring_example_simulates() -> None:
    config = simulator.ServingConfig(model="Qwen/Qwen3-8B", gpu="h100_sxm", instances=2)
    workload = simulator.WorkloadSpec.model_validate(
        {
            "kind": "open_loop",
            "requests": 50,
            "arrival": {"process": "poisson", "rate_per_s": 4},
            "input_tokens": 1000,
            "output_tokens": 20,
        }
    )
    result = simulator.simulate(config, workload, seed=0)
    assert result.feasible
    assert result.summary is not None
    assert result.summary.n_requests == 50
