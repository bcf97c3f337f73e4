"""Per-request records and the summary metrics of a simulation.

The engine appends one ``RequestRecord`` per finished request to a ``Recorder``
(``simulator.records``) together with inter-token gaps, rejections and the number of requests in
the system over time; ``summarize`` turns that into a ``Summary`` (latency percentiles in
milliseconds, throughput, per-tier hit ratios, utilisation, cost). ``metrics_for_slo``
flattens a summary into the names the ``slo`` package reads (``ttft_ms.p90``,
``output_tokens_per_s``, ``usd_per_hour``, …) and ``per_request_ms`` gives the per-request
arrays ``slo.attainment`` needs. The simulator does not import ``slo``: the optimizer joins
the two.

Definitions (all times in seconds inside, milliseconds in the summary):

- TTFT = first token − arrival; E2E = finish − arrival; queue = time in the prefetch, waiting
  and swapped queues; TPOT = (finish − first token) / (output tokens − 1), NaN for one-token
  outputs (excluded from TPOT statistics); ITL = every gap between consecutive output tokens of
  a request, pooled over all requests (each gap weighs one token).
- Throughput is over the *duration*: first arrival to last finish.
- Hit ratio of a tier = prompt tokens served from that tier at a request's first admission /
  all prompt tokens; ``prefill_tokens_saved_ratio`` is their sum.
- Percentiles of per-request metrics use numpy's linear interpolation; ITL percentiles are
  weighted nearest-rank (inverted CDF).
- Load imbalance of a pool = ∫ max_i L_i(t) dt / ∫ mean_i L_i(t) dt, where L_i is the number of
  requests outstanding on instance i (queued, running, or a PD prefill holding KV to send),
  integrated exactly over the run: the time-averaged ratio of the busiest instance to the
  average one, weighted by load (idle periods count for nothing). 1 = perfectly balanced, N =
  all work on one of N instances. With PD disaggregation each pool is measured on its own and
  the summary reports the worse; 1 when nothing was outstanding.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from simulator.records import Recorder, RequestRecord

__all__ = [
    "Cost",
    "Stats",
    "Summary",
    "metrics_for_slo",
    "per_request_ms",
    "stable_argsort",
    "summarize",
]

#: Statistics every latency metric carries in the summary.
SUMMARY_STATS: tuple[str, ...] = ("mean", "p50", "p90", "p99")
#: Latency metrics of the summary, by flat name prefix.
LATENCY_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms")


@dataclass(frozen=True, slots=True)
class Stats:
    """Mean and percentiles of one metric, in the metric's unit (ms for latencies)."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: NDArray[np.float64]) -> Stats:
        """Statistics of ``values`` ignoring NaN; all NaN when there are none."""
        values = values[~np.isnan(values)]
        if not len(values):
            return cls(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = np.percentile(values, (50, 90, 99))
        return cls(float(values.mean()), float(p50), float(p90), float(p99))


@dataclass(frozen=True, slots=True)
class Cost:
    """Price of the deployment per hour, from the catalog."""

    gpus: int
    """GPUs in the deployment (instances × tensor parallelism)."""
    gpu_usd_per_hour: float
    dram_usd_per_hour: float
    l3_usd_per_hour: float

    @property
    def usd_per_hour(self) -> float:
        """Total price per hour."""
        return self.gpu_usd_per_hour + self.dram_usd_per_hour + self.l3_usd_per_hour


@dataclass(frozen=True, slots=True)
class Summary:
    """Summary metrics of one simulation (see the module docstring for definitions)."""

    n_requests: int
    n_rejected: int
    duration_s: float
    ttft_ms: Stats
    tpot_ms: Stats
    itl_ms: Stats
    e2e_ms: Stats
    queue_ms: Stats
    requests_per_s: float
    output_tokens_per_s: float
    input_tokens_per_s: float
    hit_ratio: dict[str, float]
    """Share of prompt tokens served from each tier: keys ``l1``, ``l2``, ``l3``."""
    prefill_tokens_saved_ratio: float
    gpu_busy_fraction: float
    kv_utilization: float
    """Time-averaged share of L1 held by in-flight requests, mean over instances."""
    mean_queue_lengths: dict[str, float]
    """Time-averaged queue lengths summed over instances (from the samples)."""
    preemptions: int
    cost: Cost
    usd_per_million_output_tokens: float
    load_imbalance: float = 1.0
    """Busiest instance's outstanding requests over the mean, time-averaged (module
    docstring); the worse pool's under PD disaggregation."""
    extra: dict[str, float] = field(default_factory=dict)
    """Diagnostics (events, steps, blocks moved, …)."""
    rejections: dict[str, int] = field(default_factory=dict)
    """Rejected requests by reason (they sum to ``n_rejected``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready nested dict (NaN/inf become None)."""
        data = asdict(self)
        data["cost"]["usd_per_hour"] = self.cost.usd_per_hour
        jsonable: dict[str, Any] = _jsonable(data)
        return jsonable


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def stable_argsort(values: NDArray[np.float64]) -> NDArray[np.intp]:
    """``np.argsort(values, kind="stable")``, index for index, in far less time on the pooled
    inter-token gaps: they come in runs of equal consecutive values (every decode of one step
    waited the same step), so only the first value of each run is sorted and the runs are
    expanded back into index ranges. Equal values keep their index order either way (runs are
    disjoint ranges, sorted stably by their first index), NaNs last.
    """
    n = len(values)
    if n < 2:
        return np.arange(n, dtype=np.intp)
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    if len(starts) * 4 > n:  # few runs: sorting them saves nothing
        return np.argsort(values, kind="stable")
    lengths = np.diff(np.append(starts, n))
    by_value = np.argsort(values[starts], kind="stable")
    first, size = starts[by_value], lengths[by_value]
    # Index k of the output lies in run r = the sorted run covering it: first[r] + offset.
    offsets = np.arange(n, dtype=np.intp) - np.repeat(np.cumsum(size) - size, size)
    order: NDArray[np.intp] = np.repeat(first, size) + offsets
    return order


#: Pooled gaps past which the weighted quantiles select instead of sorting everything.
_SELECT_MIN = 4096
#: Low bits of a value's IEEE-754 pattern dropped to name its selection bucket: 8 mantissa bits
#: are kept, so a bucket spans 1/256 of an octave (and a bucket index fits 20 bits).
_BUCKET_SHIFT = 44


def _weighted_picks(
    values: NDArray[np.float64],
    weights: NDArray[np.float64],
    qs: Sequence[float],
    *,
    whole: bool = False,
) -> list[float]:
    """Nearest-rank weighted quantiles of ``values`` for each ``q`` in [0, 1]: the value at
    the first position whose cumulative weight, in ascending order of value, reaches
    ``q`` × the total weight (NaN when there is none).

    Exact without a full sort when the weights are whole numbers (every pooled gap stands for
    1 or ``n`` requests) and no value is NaN or negative (``_bucketed_picks``: one pass buckets
    the values, their weight sums say which bucket holds each quantile, and only that bucket
    is sorted). Otherwise every value is sorted (``stable_argsort``). ``whole``: the caller
    knows the weights are whole numbers (the recorder's pooled gaps), so they are not checked
    (a pass and a temporary as large as the weights: millions of gaps at 3× load).
    """
    n = len(values)
    if not n or weights.sum() <= 0:
        return [math.nan] * len(qs)
    if (
        n >= _SELECT_MIN
        and not np.isnan(values).any()
        and (whole or np.array_equal(weights, np.floor(weights)))
    ):
        picks = _bucketed_picks(values, weights, qs)
        if picks is not None:
            return picks
    order = stable_argsort(values)
    cum = np.cumsum(weights[order])
    picked = values[order]
    return [float(picked[min(n - 1, int(np.searchsorted(cum, q * cum[-1])))]) for q in qs]


def _bucketed_picks(
    values: NDArray[np.float64], weights: NDArray[np.float64], qs: Sequence[float]
) -> list[float] | None:
    """``_weighted_picks`` of non-NaN ``values`` with whole-number ``weights`` by selection;
    None when a value's sign bit is set (a negative value or -0.0).

    The bit pattern of a non-negative double, read as an integer, increases with the value,
    so its top bits (``_BUCKET_SHIFT``) cut the values into buckets of ascending value ranges
    in one pass, with no sort and no index array. The weight sums of the buckets are exact
    (integers below 2**53), so the bucket where the cumulative weight reaches a quantile's
    target is found exactly and holds the answer: only its values are sorted. Ties cannot
    change the answer: any ascending order has the same cumulative weight at the ends of each
    run of equal values. The chosen buckets' values are taken out in one pass for all the
    quantiles (boolean indexing keeps their order), then each bucket's from those.
    """
    keys = values.view(np.int64)
    lowest = int(keys.min())
    if lowest < 0:
        return None
    buckets = keys >> _BUCKET_SHIFT
    buckets -= lowest >> _BUCKET_SHIFT  # the lowest bucket (the shift keeps the order)
    cum = np.cumsum(np.bincount(buckets, weights=weights))
    total = float(cum[-1])
    targets = [q * total for q in qs]
    chosen = [min(len(cum) - 1, int(np.searchsorted(cum, target))) for target in targets]
    wanted = np.zeros(len(cum), dtype=bool)
    wanted[chosen] = True
    taken = wanted[buckets]
    taken_buckets, taken_values, taken_weights = buckets[taken], values[taken], weights[taken]
    picks = []
    for target, j in zip(targets, chosen, strict=True):
        before = float(cum[j - 1]) if j else 0.0
        inside_j = taken_buckets == j
        bucket_values = taken_values[inside_j]
        order = np.argsort(bucket_values, kind="stable")
        inside = before + np.cumsum(taken_weights[inside_j][order])
        k = min(len(bucket_values) - 1, int(np.searchsorted(inside, target)))
        picks.append(float(bucket_values[order[k]]))
    return picks


def _weighted_quantile(
    values: NDArray[np.float64], weights: NDArray[np.float64], q: float
) -> float:
    """Nearest-rank quantile ``q`` in [0, 1] of weighted ``values``; NaN when empty."""
    return _weighted_picks(values, weights, (q,))[0]


def _weighted_stats(
    values: NDArray[np.float64], weights: NDArray[np.float64], *, whole: bool = False
) -> Stats:
    """Mean and p50/p90/p99 of weighted ``values`` (``whole``: see ``_weighted_picks``)."""
    if not len(values) or weights.sum() <= 0:
        return Stats(math.nan, math.nan, math.nan, math.nan)
    p50, p90, p99 = _weighted_picks(values, weights, (0.5, 0.9, 0.99), whole=whole)
    # Not ``np.dot``: OpenBLAS splits a long dot product over its threads (so the sum can
    # depend on the machine's core count) and leaves them spinning after it, seconds of CPU
    # per optimize run taken from the other workers.
    mean = float(np.einsum("i,i->", values, weights) / weights.sum())  # numpy's own loop
    return Stats(mean, p50, p90, p99)


def per_request_ms(
    records: Sequence[RequestRecord], n_rejected: int = 0
) -> dict[str, NDArray[np.float64]]:
    """Per-request arrays in ms for ``slo.attainment``: ``ttft_ms``, ``tpot_ms`` (NaN for one
    token), ``itl_ms`` (each request's worst gap), ``e2e_ms``, ``queue_ms``; record order,
    then ``n_rejected`` rows of ``inf`` (a rejected request never gets a token, so it misses
    every target)."""
    # One pass reads the fields; the record's properties (``ttft_s``, ``tpot_s``, ``e2e_s``,
    # ``queue_s``) are then the same IEEE operations done elementwise (an output length is
    # exact as a double).
    fields = np.array(
        [
            (
                r.arrival_s,
                r.first_token_s,
                r.finish_s,
                r.output_tokens,
                r.max_itl_s,
                r.prefetch_queue_s,
                r.waiting_queue_s,
                r.swapped_queue_s,
            )
            for r in records
        ],
        dtype=np.float64,
    ).reshape(-1, 8)
    arrival, first, finish, output, itl, prefetch, waiting, swapped = fields.T
    # ``tpot_s``: NaN for one output token (its division is by 1 there, then dropped).
    tpot = np.where(output > 1, (finish - first) / np.maximum(output - 1.0, 1.0), math.nan)
    tail = np.full(n_rejected, math.inf)
    return {
        "ttft_ms": np.concatenate([(first - arrival) * 1e3, tail]),
        "tpot_ms": np.concatenate([tpot * 1e3, tail]),
        "itl_ms": np.concatenate([itl * 1e3, tail]),
        "e2e_ms": np.concatenate([(finish - arrival) * 1e3, tail]),
        "queue_ms": np.concatenate([(prefetch + waiting + swapped) * 1e3, tail]),
    }


def summarize(
    recorder: Recorder,
    *,
    busy_s: float,
    kv_utilization: float,
    n_gpu_engines: int,
    preemptions: int,
    cost: Cost,
    sample_interval_s: float,
    extra: Mapping[str, float] | None = None,
) -> Summary:
    """Summary of a finished run; ``busy_s`` is the GPU step time summed over instances."""
    records = recorder.records
    arrays = per_request_ms(records)
    start = recorder.first_arrival_s if records else 0.0
    end = max((r.finish_s for r in records), default=start)
    duration = max(end - start, 0.0)
    rate = (lambda x: x / duration) if duration > 0 else (lambda _x: 0.0)
    prompt = sum(r.input_tokens for r in records)
    tiers = {
        "l1": sum(r.cached_l1_tokens for r in records),
        "l2": sum(r.cached_l2_tokens for r in records),
        "l3": sum(r.cached_l3_tokens for r in records),
    }
    hit = {k: (v / prompt if prompt else 0.0) for k, v in tiers.items()}
    output = sum(r.output_tokens for r in records)
    out_rate = rate(output)
    queues = recorder.queue_samples(sample_interval_s)
    mean_queues = {
        name: queues.mean(getattr(queues, name))
        for name in ("waiting", "prefetch", "running", "swapped")
    }
    itl_values, itl_weights = recorder.itl_values()
    usd_per_mtok = cost.usd_per_hour / (out_rate * 3600.0) * 1e6 if out_rate > 0 else math.inf
    return Summary(
        n_requests=len(records),
        n_rejected=recorder.n_rejected,
        rejections=dict(recorder.rejections),
        duration_s=duration,
        ttft_ms=Stats.of(arrays["ttft_ms"]),
        tpot_ms=Stats.of(arrays["tpot_ms"]),
        # The recorder's weights are whole numbers (``Recorder.itl_values``).
        itl_ms=_weighted_stats(itl_values * 1e3, itl_weights, whole=True),
        e2e_ms=Stats.of(arrays["e2e_ms"]),
        queue_ms=Stats.of(arrays["queue_ms"]),
        requests_per_s=rate(len(records)),
        output_tokens_per_s=out_rate,
        input_tokens_per_s=rate(prompt),
        hit_ratio=hit,
        prefill_tokens_saved_ratio=sum(hit.values()),
        gpu_busy_fraction=busy_s / (n_gpu_engines * duration) if duration > 0 else 0.0,
        kv_utilization=kv_utilization,
        mean_queue_lengths=mean_queues,
        preemptions=preemptions,
        cost=cost,
        usd_per_million_output_tokens=usd_per_mtok,
        load_imbalance=recorder.load_imbalance(end),
        extra=dict(extra or {}) | {"sample_interval_s": sample_interval_s},
    )


_PERCENTILE = re.compile(r"p(\d+(?:\.\d+)?)")


def _percentile(values: NDArray[np.float64], q: float) -> float:
    """Linear-interpolation percentile ignoring NaN; ``inf`` where the rank reaches infinite
    values (numpy would give NaN between two of them)."""
    clean = values[~np.isnan(values)]
    if not len(clean):
        return math.nan
    with np.errstate(invalid="ignore"):  # inf - inf while interpolating between two infs
        value = float(np.percentile(clean, q))
    return math.inf if math.isnan(value) else value


def metrics_for_slo(
    summary: Summary,
    records: Sequence[RequestRecord] = (),
    stats: Iterable[str] = (),
    itl: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
) -> dict[str, float]:
    """Flat metric names → values, as ``slo.evaluate`` reads them.

    Always: ``<metric>.<stat>`` for the latency metrics and ``mean/p50/p90/p99``, plus
    ``requests_per_s``, ``output_tokens_per_s``, ``input_tokens_per_s``, ``usd_per_hour``,
    ``usd_per_million_output_tokens``, ``gpus``, ``load_imbalance``, hit ratios and counts.
    Further ``stats``
    (e.g. ``"p99.9"``) are computed from ``records`` for the per-request metrics and from
    ``itl`` (pooled gaps in seconds and their weights, ``Recorder.itl_values``) for ``itl_ms``.

    Unlike ``Summary`` (which describes the finished requests and counts rejections apart),
    the per-request latency statistics here count each rejected request as infinitely late,
    so a configuration cannot meet an SLO by refusing requests (``records`` must then be
    given).
    """
    flat: dict[str, float] = {}
    for name in LATENCY_METRICS:
        st: Stats = getattr(summary, name)
        for stat in SUMMARY_STATS:
            flat[f"{name}.{stat}"] = getattr(st, stat)
    extra = [s for s in dict.fromkeys(stats) if s not in SUMMARY_STATS]
    rejected = summary.n_rejected if records or not summary.n_requests else 0
    recompute = [s for s in SUMMARY_STATS if rejected] + extra
    arrays = per_request_ms(records, rejected) if recompute else {}
    for stat in recompute:
        match = _PERCENTILE.fullmatch(stat)
        if stat != "mean" and match is None:
            raise ValueError(f"statistic must be 'mean' or 'pNN', got {stat!r}")
        for name, values in arrays.items():
            if name == "itl_ms" and stat in SUMMARY_STATS:
                continue  # pooled gaps: a rejected request has none
            if stat == "mean":
                clean = values[~np.isnan(values)]
                flat[f"{name}.mean"] = float(clean.mean()) if len(clean) else math.nan
            else:
                assert match is not None
                flat[f"{name}.{stat}"] = _percentile(values, float(match.group(1)))
        if match is not None and itl is not None:
            flat[f"itl_ms.{stat}"] = _weighted_quantile(
                itl[0] * 1e3, itl[1], float(match.group(1)) / 100
            )
    if rejected and not summary.n_requests:
        flat.update({f"itl_ms.{stat}": math.inf for stat in (*SUMMARY_STATS, *extra)})
    flat.update(
        requests_per_s=summary.requests_per_s,
        output_tokens_per_s=summary.output_tokens_per_s,
        input_tokens_per_s=summary.input_tokens_per_s,
        usd_per_hour=summary.cost.usd_per_hour,
        usd_per_million_output_tokens=summary.usd_per_million_output_tokens,
        gpus=float(summary.cost.gpus),
        prefill_tokens_saved_ratio=summary.prefill_tokens_saved_ratio,
        gpu_busy_fraction=summary.gpu_busy_fraction,
        kv_utilization=summary.kv_utilization,
        n_requests=float(summary.n_requests),
        n_rejected=float(summary.n_rejected),
        load_imbalance=summary.load_imbalance,
    )
    for tier, ratio in summary.hit_ratio.items():
        flat[f"hit_ratio.{tier}"] = ratio
    return flat
