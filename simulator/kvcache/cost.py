"""Cost models: how much prefill compute a block at a given position costs.

A cost model maps the 0-based position ``p`` of a block inside its request to a positive weight.
Phase 1 of the serve loop sums it over every probed block (``total_cost``) and over the hits
(``saved_cost``); ``compute_saving_ratio = saved_cost / total_cost``. Position only: the cost does
not depend on the block id, the trace or the policy, and it is never stored in traces.

Specs (``parse_cost_model``):

==========================  ==================  ==========================================
spec                        cost(p)             note
==========================  ==================  ==========================================
``uniform`` (default)       1                   compute saving == block hit ratio, exactly
``position``                p + 1               the ``compute`` field of old ``.lcsllm``
``linear:A,B``              A + B·p             A > 0, B ≥ 0
``table:FILE``              FILE's row p        the last row repeats past the end
``qwen3coder30b_blksz_16``  865 + 2p            measured Qwen3-Coder-30B prefill, 16-token
``qwen3coder30b_blksz_64``  3472 + 32p          the same model re-expressed at 64 tokens
``model:NAME,BLOCK``        GFLOP of block p    a catalog model's prefill FLOPs per block of
                                                BLOCK tokens (``model_cost.py``): windows
                                                and linear layers cap what depth costs
==========================  ==================  ==========================================

``table:FILE`` reads a text or CSV file: one row per position, starting at 0, each row either a
cost or ``position,cost`` (positions then must be 0, 1, 2, … in order); blank lines and lines
starting with ``#`` are ignored, and a non-numeric first row is taken as a header. Beyond the
last row the last cost repeats (a long prompt's tail costs what the table's last block costs),
which keeps a short measured table usable for any request length.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hardware.catalog import shipped_catalog
from simulator.kvcache.model_cost import model_block_cost
from slo.inputfile import InputError

__all__ = ["COST_MODEL_NAMES", "UNIFORM", "CostModel", "parse_cost_model"]


@dataclass(frozen=True, slots=True, eq=False)
class CostModel:
    """A position -> cost function with a memoised table (what the serve loop reads).

    ``spec`` is the canonical spec string (shown in RESULT lines); ``uniform`` is true only for
    the all-ones model, which lets the loop count hits instead of summing costs.
    """

    spec: str
    """The spec this model was parsed from, e.g. ``"linear:1,2"``."""
    cost_fn: Callable[[int], float]
    """cost(p) for a 0-based position p; positive and finite."""
    uniform: bool = False
    """True for the all-ones model only."""
    _table: list[float] = field(default_factory=list, repr=False)
    _cumulative: list[float] = field(default_factory=lambda: [0.0], repr=False)

    def cost(self, position: int) -> float:
        """The cost of the block at 0-based ``position``."""
        return self.cost_fn(position)

    def table(self, n: int) -> list[float]:
        """A list whose first ``n`` entries are cost(0..n-1) (it may be longer; do not mutate).

        The list is shared and grows on demand, so the serve loop pays for each position once.
        """
        table = self._table
        if len(table) < n:
            self._grow(n)
        return table

    def total(self, n: int) -> float:
        """cost(0) + … + cost(n-1), the cost of recomputing a whole n-block request."""
        if len(self._cumulative) <= n:
            self._grow(n)
        return self._cumulative[n]

    def _grow(self, n: int) -> None:
        # Grow geometrically so a trace of slowly increasing lengths costs O(max length) overall.
        target = max(n, 2 * len(self._table), 64)
        table, cumulative = self._table, self._cumulative
        for p in range(len(table), target):
            value = self.cost_fn(p)
            table.append(value)
            cumulative.append(cumulative[-1] + value)


def _uniform(_: int) -> float:
    return 1.0


def _position(p: int) -> float:
    return float(p + 1)


def _qwen3coder30b_blksz_16(p: int) -> float:
    # Measured prefill cost per 16-token block (vLLM logs: position 0 -> 865, 100 -> 1065).
    return float(865 + 2 * p)


def _qwen3coder30b_blksz_64(p: int) -> float:
    # Four 16-token blocks of the model above: sum over j=0..3 of 865 + 2(4p + j).
    return float(3472 + 32 * p)


_NAMED: dict[str, Callable[[int], float]] = {
    "uniform": _uniform,
    "position": _position,
    "qwen3coder30b_blksz_16": _qwen3coder30b_blksz_16,
    "qwen3coder30b_blksz_64": _qwen3coder30b_blksz_64,
}

#: Every accepted spec form, for help texts and error messages.
COST_MODEL_NAMES: tuple[str, ...] = (*_NAMED, "linear:A,B", "table:FILE", "model:NAME,BLOCK")

#: The default model: every block costs 1.
UNIFORM = CostModel("uniform", _uniform, uniform=True)


def parse_cost_model(spec: str) -> CostModel:
    """Build the cost model named by ``spec``; a bad spec raises a one-line ``InputError``."""
    spec = spec.strip()
    if spec == "uniform":
        return CostModel("uniform", _uniform, uniform=True)
    if spec in _NAMED:
        return CostModel(spec, _NAMED[spec])
    kind, sep, arg = spec.partition(":")
    if sep and kind == "linear":
        return _parse_linear(spec, arg)
    if sep and kind == "table":
        return _load_table(spec, Path(arg))
    if sep and kind == "model":
        return _parse_model(spec, arg)
    raise InputError(f"cost model {spec!r}: unknown; expected one of {', '.join(COST_MODEL_NAMES)}")


def _parse_linear(spec: str, arg: str) -> CostModel:
    parts = arg.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        a, b = float(parts[0]), float(parts[1])
    except ValueError:
        raise InputError(
            f"cost model {spec!r}: expected linear:A,B with two numbers, e.g. linear:865,2"
        ) from None
    if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b >= 0):
        raise InputError(f"cost model {spec!r}: need A > 0 and B >= 0 (finite) in A + B*p")

    def linear(p: int) -> float:
        return a + b * p

    return CostModel(spec, linear)


def _parse_model(spec: str, arg: str) -> CostModel:
    name, _, block = arg.rpartition(",")
    if not name or not block.strip().isdigit() or int(block) < 1:
        raise InputError(
            f"cost model {spec!r}: expected model:NAME,BLOCK_TOKENS with a catalog model and "
            "a positive block size, e.g. model:openai/gpt-oss-120b,512"
        )
    try:
        model = shipped_catalog().model(name.strip())
    except InputError as err:
        raise InputError(f"cost model {spec!r}: {err}") from None
    return CostModel(spec, model_block_cost(model, int(block)))


def _load_table(spec: str, path: Path) -> CostModel:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"cost model {spec!r}: {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cost model {spec!r}: {path}: cannot read: {err}") from None
    costs: list[float] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [cell.strip() for cell in line.split(",")]
        try:
            values = [float(cell) for cell in cells]
        except ValueError:
            if not costs and lineno == _first_content_line(lines):
                continue  # a header row such as "position,cost"
            raise InputError(f"{path}:{lineno}: expected a cost or position,cost") from None
        costs.append(_table_row(path, lineno, values, len(costs)))
    if not costs:
        raise InputError(f"{path}: cost table has no rows")
    last = costs[-1]
    frozen = tuple(costs)

    def table(p: int) -> float:
        return frozen[p] if p < len(frozen) else last

    return CostModel(spec, table)


def _first_content_line(lines: list[str]) -> int:
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            return lineno
    return 0


def _table_row(path: Path, lineno: int, values: list[float], position: int) -> float:
    if len(values) == 2:
        if values[0] != position:
            raise InputError(f"{path}:{lineno}: expected position {position}, got {values[0]:g}")
        values = values[1:]
    if len(values) != 1:
        raise InputError(f"{path}:{lineno}: expected a cost or position,cost")
    cost = values[0]
    if not (math.isfinite(cost) and cost > 0):
        raise InputError(f"{path}:{lineno}: cost must be a positive number, got {cost:g}")
    return cost
