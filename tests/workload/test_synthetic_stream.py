"""The open-loop generator streams in chunks and gives, for a seed, exactly the workload the
eager generator (all draws at once) gave."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest

from simulator.workload import synthetic
from simulator.workload.request import TraceRequest
from simulator.workload.synthetic import (
    BlockIds,
    Distribution,
    Empirical,
    Exponential,
    Fixed,
    GammaArrivals,
    LogNormal,
    PoissonArrivals,
    SystemPrompts,
    TokenSequence,
    Uniform,
    open_loop,
)


def _eager(
    *,
    n_requests: int,
    arrivals: PoissonArrivals | GammaArrivals,
    input_tokens: Distribution,
    output_tokens: Distribution,
    block_tokens: int,
    rng: np.random.Generator,
    system_prompts: tuple[int, int] | None = None,
) -> Iterator[TraceRequest]:
    """The generator as it was: every gap, input and output drawn up front."""
    ids = BlockIds()
    prompts = SystemPrompts(*system_prompts, block_tokens, ids) if system_prompts else None
    times = np.cumsum(arrivals.gaps(rng, n_requests))
    count = lambda d: [int(x) for x in np.maximum(1, np.rint(d.sample(rng, n_requests)))]  # noqa: E731
    inputs, outputs = count(input_tokens), count(output_tokens)
    for index in range(n_requests):
        seq = prompts.pick(rng) if prompts else TokenSequence(block_tokens)
        seq.extend(inputs[index], ids)
        yield TraceRequest(
            index, float(times[index]), seq.tokens, outputs[index], seq.prompt_blocks(ids)
        )


@pytest.mark.parametrize(
    ("arrivals", "inputs", "outputs", "prompts"),
    [
        (PoissonArrivals(3.0), LogNormal(800, 1.1, 1, 30000), Exponential(120), None),
        (GammaArrivals(2.0, 2.5), Uniform(10, 4000), Fixed(64), (3, 700)),
        (PoissonArrivals(0.5), Empirical((17.0, 900.0, 3000.0)), Empirical((1.0, 50.0)), (2, 40)),
    ],
)
def test_streamed_open_loop_equals_the_eager_one(
    monkeypatch: pytest.MonkeyPatch,
    arrivals: PoissonArrivals | GammaArrivals,
    inputs: Distribution,
    outputs: Distribution,
    prompts: tuple[int, int] | None,
) -> None:
    monkeypatch.setattr(synthetic, "STREAM_CHUNK", 7)  # many chunks, one ragged
    kwargs = {
        "n_requests": 101,
        "arrivals": arrivals,
        "input_tokens": inputs,
        "output_tokens": outputs,
        "block_tokens": 16,
        "system_prompts": prompts,
    }
    streamed_rng, eager_rng = np.random.default_rng(11), np.random.default_rng(11)
    streamed = list(open_loop(rng=streamed_rng, **kwargs))  # type: ignore[arg-type]
    eager = list(_eager(rng=eager_rng, **kwargs))  # type: ignore[arg-type]
    assert streamed == eager
    # The caller's generator is left where the eager draws left it.
    assert streamed_rng.bit_generator.state == eager_rng.bit_generator.state


def test_a_large_open_loop_holds_a_chunk_not_the_workload() -> None:
    """10^7 requests: the eager generator held three 10^7-value arrays and two 10^7-int lists
    (about 0.8 GB) before the first request; the stream's peak is a few chunks."""
    stream = open_loop(
        n_requests=10**7,
        arrivals=PoissonArrivals(1.0),
        input_tokens=Uniform(10, 1000),
        output_tokens=Fixed(10),
        block_tokens=16,
        rng=np.random.default_rng(0),
    )
    tracemalloc.start()
    try:
        first = [next(stream) for _ in range(3)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.index for r in first] == [0, 1, 2]
    assert first[0].timestamp_s < first[1].timestamp_s < first[2].timestamp_s
    assert peak < 32 * 2**20
