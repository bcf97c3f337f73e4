"""A randomized bad-input campaign against the ``kvplan`` command line.

    python bench/fuzz.py                          # corpus + 120 random mutations, seed 0
    python bench/fuzz.py --mutations 400 --seed 3 --list
    python bench/fuzz.py --corpus-only --json results.json

Two parts, each case run through the real entry point in a forked child with a time limit
(``tests/fuzz/harness.py``):

1. the hostile corpus (``tests/data/bad/cases.yaml``): one case per defect of issue #12;
2. random mutations of the valid example files (a space, an SLO, workload files, a simulate
   config, a catalog): one leaf value is replaced by a hostile value (NaN, ±inf, -1, a huge
   number, an unknown name, a list, a mapping), a key is duplicated, or the file is truncated
   at a random byte; then the command that reads that file runs.

It prints the counts per outcome — clean (exit 2, ≤ 3 lines, no traceback) / traceback / hang
(killed at the limit) / accepted (exit 0) — and, with ``--list``, every case that was not clean.
A mutation can land on a value that is still valid (truncating at a line end, say), so a few
"accepted" mutations are expected; the listing shows which.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import harness  # noqa: E402  (lives beside the fuzz tests; the path is set just above)

#: Hostile leaf values: none is a valid setting for any numeric or name field of the examples.
HOSTILE: tuple[Any, ...] = (
    float("nan"),
    float("inf"),
    float("-inf"),
    -1,
    1e300,
    "no_such_thing",
    [],
    {"surprise": 1},
)
#: Keys whose values are free text (any string is valid there).
FREE_TEXT = {"name", "description", "notes"}

#: Valid example files and the command line that reads each ({file} = the mutated copy).
TARGETS: tuple[tuple[str, str], ...] = (
    ("examples/space.yaml", "optimize --space {file} " + harness.QUICK_OPTIMIZE),
    ("examples/slo/chat.yaml", "slo check {file}"),
    (
        "examples/workloads/chat_sessions.yaml",
        "simulate --model Qwen/Qwen3-32B --gpu h100_sxm --workload {file} --json",
    ),
    (
        "examples/workloads/closed_loop.yaml",
        "simulate --model Qwen/Qwen3-32B --gpu h100_sxm --workload {file} --json",
    ),
    ("examples/simulate.yaml", "simulate --config {file} --max-requests 5 --json"),
    ("examples/catalog_override.yaml", "hardware list --catalog {file}"),
    ("examples/simulate_pd.yaml", "simulate --config {file} --max-requests 5 --json"),
    (
        "examples/simulate_dp.yaml",
        "simulate --config {file} --workload examples/workloads/closed_loop.yaml --json",
    ),
    ("examples/simulate_autoscale.yaml", "simulate --config {file} --workload {day} --json"),
    ("examples/simulate_pd_autoscale.yaml", "simulate --config {file} --workload {day} --json"),
    (
        "examples/workloads/diurnal_day.yaml",
        "simulate --config examples/simulate_autoscale.yaml --workload {file} --json",
    ),
    (
        "examples/workloads/mooncake_2x.yaml",
        "simulate --config examples/simulate.yaml --workload {file} --max-requests 5 --json",
    ),
    ("examples/slo/strict.json", "slo check {file}"),
)

#: Example files shrunk before they are mutated or used, so that an accepted mutation simulates
#: in seconds: the day-long workload keeps its rate profile but not its 259,200 requests.
SHRINK: dict[str, tuple[str, str]] = {
    "examples/workloads/diurnal_day.yaml": ("requests: 259200", "requests: 300"),
}


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(data, dict):
        return [p for k, v in data.items() if k not in FREE_TEXT for p in _leaves(v, (*path, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _leaves(v, (*path, i))]
    return [path] if path else []


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def mutate(text: str, rng: random.Random, as_json: bool = False) -> tuple[str, str]:
    """A hostile variant of a YAML (or, ``as_json``, JSON) document and a short description of
    the change."""
    kind = rng.random()
    if kind < 0.15:
        cut = rng.randrange(1, len(text))
        return text[:cut], f"truncated at byte {cut}"
    data = yaml.safe_load(text)
    if kind < 0.25 and isinstance(data, dict) and data:
        key = rng.choice(list(data))
        if as_json:  # a JSON object with the key twice: the last one wins in most parsers
            head = text.rstrip().removesuffix("}").rstrip()
            again = f"{json.dumps(key)}: {json.dumps(data[key])}"
            return f"{head}, {again}}}", f"duplicated key {key!r}"
        dumped = yaml.safe_dump({key: data[key]}, sort_keys=False)
        return text + "\n" + dumped, f"duplicated key {key!r}"
    leaves = _leaves(data)
    path = rng.choice(leaves)
    value = rng.choice(HOSTILE)
    _set(data, path, value)
    where = ".".join(map(str, path))
    dumped = json.dumps(data, indent=2) if as_json else yaml.safe_dump(data, sort_keys=False)
    return dumped, f"{where} = {value!r}"


def _example(source: str) -> str:
    """An example file's text, shrunk as ``SHRINK`` says, with its trace paths made absolute."""
    text = (ROOT / source).read_text(encoding="utf-8")
    if source in SHRINK:
        old, new = SHRINK[source]
        assert old in text, f"{source} no longer holds {old!r}"
        text = text.replace(old, new)
    return text.replace("../../simulator", str(ROOT / "simulator"))


def mutation_cases(
    n: int, seed: int, tmp: Path
) -> tuple[list[tuple[str, tuple[str, ...], float]], dict[str, str]]:
    """``n`` mutated files written under ``tmp``, their cases, and what each changed."""
    rng = random.Random(seed)
    cases, changes = [], {}
    day = tmp / "day_short.yaml"
    day.write_text(_example("examples/workloads/diurnal_day.yaml"), encoding="utf-8")
    for i in range(n):
        source, command = TARGETS[i % len(TARGETS)]
        text, change = mutate(_example(source), rng, as_json=source.endswith(".json"))
        target = tmp / f"mut{i:04d}_{Path(source).name}"
        # A relative path inside a workload file is relative to the file: keep the examples'.
        text = text.replace("../../simulator", str(ROOT / "simulator"))
        target.write_text(text, encoding="utf-8")
        case_id = f"mut{i:04d}:{source}"
        argv = tuple(command.format(file=target, day=day).split())
        cases.append((case_id, argv, 30.0))
        changes[case_id] = change
    return cases, changes


def main() -> None:
    """Run the campaign and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutations", type=int, default=120, help="Random mutations to run.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the mutations.")
    parser.add_argument("--corpus-only", action="store_true", help="Only the hostile corpus.")
    parser.add_argument("--no-slow", action="store_true", help="Skip the corpus's slow cases.")
    parser.add_argument("--list", action="store_true", help="List every case not clean.")
    parser.add_argument("--json", type=Path, help="Also write per-case results here.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvplan-fuzz-") as scratch:
        tmp = Path(scratch)
        corpus = harness.load_cases(tmp / "corpus", include_slow=not args.no_slow)
        corpus_runs = [(c.id, c.argv, c.timeout_s) for c in corpus]
        mutations, changes = (
            ([], {}) if args.corpus_only else mutation_cases(args.mutations, args.seed, tmp)
        )
        corpus_results = harness.run_all(corpus_runs)
        mutation_results = harness.run_all(mutations)
    print(harness.counts_table(corpus_results, title="corpus"))
    if mutation_results:
        print()
        print(harness.counts_table(mutation_results, title=f"mutations (seed {args.seed})"))
    if args.list:
        for case_id, outcome in corpus_results + mutation_results:
            if outcome.kind != "clean":
                change = f" [{changes[case_id]}]" if case_id in changes else ""
                print(f"{outcome.kind:9} {case_id}{change}: {harness.first_line(outcome)}")
    if args.json is not None:
        args.json.write_text(harness.as_json(corpus_results + mutation_results), encoding="utf-8")


if __name__ == "__main__":
    main()
