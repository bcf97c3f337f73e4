"""Run the ``kvplan`` command line on hostile input and classify what happened.

Shared by the fuzz tests (``tests/fuzz/``) and the longer campaign (``bench/fuzz.py``).

Each case runs the real entry point (``optimizer.cli.main.run``, which maps ``InputError`` to one
line and exit 2) in a forked child of this process: the child inherits every module already
imported, so a case costs milliseconds instead of an interpreter start, and a case that hangs is
killed at its time limit without taking the runner with it. The child's stdout and stderr go to
one file, read back after it exits.

Outcomes (``classify``):

- ``clean``: exit 2, at most ``MAX_LINES`` lines of output, no traceback — what every bad input
  must produce;
- ``traceback``: a Python traceback, or any exit status other than 0 and 2, or exit 2 with more
  than ``MAX_LINES`` lines;
- ``hang``: still running at the time limit (killed);
- ``accepted``: exit 0 — nonsense taken as valid input.

The corpus (``tests/data/bad/cases.yaml``) lists one case per defect of issue #12; a case's
``argv`` may name ``{bad}`` (the corpus directory) and ``{tmp}`` (a scratch directory where
``materialize`` writes the generated inputs: files too large, or too odd, to keep in git).
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

BAD_DIR = Path(__file__).resolve().parents[1] / "data" / "bad"
MAX_LINES = 3
#: Address-space limit of a case's process (a runaway allocation becomes a MemoryError).
MEMORY_LIMIT_BYTES = 6 * 2**30
OUTCOMES = ("clean", "traceback", "hang", "accepted")
#: Flags that keep an optimize case cheap if it is (wrongly) accepted.
QUICK_OPTIMIZE = "--trials 1 --no-plan --max-requests 10 --json"


@dataclass(frozen=True, slots=True)
class Case:
    """One hostile input: the command line, and a substring its error must contain."""

    id: str
    argv: tuple[str, ...]
    expect: str
    timeout_s: float
    slow: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What running a case produced."""

    kind: str
    exit_code: int | None
    output: str
    seconds: float

    @property
    def lines(self) -> list[str]:
        """The non-blank output lines."""
        return [line for line in self.output.splitlines() if line.strip()]


def load_cases(tmp: Path, *, include_slow: bool = True) -> list[Case]:
    """The corpus cases with ``{bad}``/``{tmp}`` filled in (generated files written to ``tmp``)."""
    materialize(tmp)
    raw = yaml.safe_load((BAD_DIR / "cases.yaml").read_text(encoding="utf-8"))
    cases = []
    for entry in raw:
        text = str(entry["argv"]).format(bad=BAD_DIR, tmp=tmp, quick=QUICK_OPTIMIZE)
        case = Case(
            id=str(entry["id"]),
            argv=tuple(shlex.split(text)),
            expect=str(entry.get("expect", "")),
            timeout_s=float(entry.get("timeout_s", 20)),
            slow=bool(entry.get("slow", False)),
        )
        if include_slow or not case.slow:
            cases.append(case)
    return cases


def materialize(tmp: Path) -> None:
    """Write the generated hostile inputs into ``tmp`` (idempotent)."""
    tmp.mkdir(parents=True, exist_ok=True)
    deep = tmp / "slo_deep.yaml"
    if not deep.exists():
        # 30,000 nested flow sequences: PyYAML's composer recurses once per level.
        deep.write_text("name: deep\ntargets: " + "[" * 30_000 + "]" * 30_000 + "\n")
    deep_json = tmp / "slo_deep.json"
    if not deep_json.exists():
        deep_json.write_text('{"name": "deep", "description": ' + "[" * 30_000 + "]" * 30_000 + "}")
    big = tmp / "slo_big.yaml"
    if not big.exists():
        # About 50 MB of SLO file: a valid head, then a huge mapping of descriptions.
        with big.open("w", encoding="utf-8") as out:
            out.write("name: big\ntargets: {ttft_ms: {p90: 2000}}\nbudget: {usd_per_hour: 100}\n")
            out.write("notes:\n")
            line = "  k{:07d}: " + "x" * 60 + "\n"
            for i in range(700_000):
                out.write(line.format(i))
    # Copied afresh: a run that wrongly accepts the journal would append to it.
    journal = tmp / "garbage_journal.log"
    journal.write_bytes((BAD_DIR / "garbage_journal.log").read_bytes())
    out_file = tmp / "existing_file"
    if not out_file.exists():
        out_file.write_text("not a directory\n")


def _child(argv: tuple[str, ...], out_path: str) -> None:
    """In the forked child: run the CLI with output to ``out_path``, exit with its status."""
    # A case that allocates without bound fails with MemoryError instead of swapping the host.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    # Fresh streams on the redirected descriptors: a test runner may have replaced sys.stdout
    # and sys.stderr with capture objects that do not write to file descriptors 1 and 2.
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    code = 0
    try:
        from optimizer.cli.main import run  # noqa: PLC0415  (imported once, before forking)

        sys.argv = ["kvplan", *argv]
        run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # an escaped exception is what we classify
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def run_case(argv: tuple[str, ...], timeout_s: float) -> Outcome:
    """Run ``kvplan ARGV`` in a forked child with a wall-clock limit, and classify it."""
    import optimizer.cli.main  # noqa: F401, PLC0415  (warm the import before forking)

    with tempfile.NamedTemporaryFile(prefix="kvplan-fuzz-", delete=False) as handle:
        out_path = handle.name
    started = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child never returns)
        _child(argv, out_path)
    exit_code: int | None = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            exit_code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() - started > timeout_s:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    seconds = time.monotonic() - started
    output = Path(out_path).read_text(encoding="utf-8", errors="replace")
    os.unlink(out_path)
    return Outcome(classify(exit_code, output), exit_code, output, seconds)


def classify(exit_code: int | None, output: str) -> str:
    """One of ``OUTCOMES`` (module docstring); ``exit_code`` None means killed at the limit."""
    if exit_code is None:
        return "hang"
    if "Traceback (most recent call last)" in output:
        return "traceback"
    if exit_code == 0:
        return "accepted"
    lines = [line for line in output.splitlines() if line.strip()]
    if exit_code == 2 and len(lines) <= MAX_LINES:
        return "clean"
    return "traceback"


def counts_table(outcomes: list[tuple[str, Outcome]], *, title: str) -> str:
    """The campaign table: counts of each outcome, then the cases that were not clean."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for _, outcome in outcomes:
        counts[outcome.kind] += 1
    header = f"| {title} | " + " | ".join(OUTCOMES) + " | total |"
    rule = "|---" * (len(OUTCOMES) + 2) + "|"
    row = f"| cases | {' | '.join(str(counts[k]) for k in OUTCOMES)} | {len(outcomes)} |"
    return "\n".join([header, rule, row])


def first_line(outcome: Outcome) -> str:
    """The most telling line of an outcome's output (for listings)."""
    lines = outcome.lines
    if not lines:
        return ""
    if outcome.kind == "traceback":
        return lines[-1][:160]
    return lines[0][:160]


def run_all(
    cases: list[tuple[str, tuple[str, ...], float]],
    on_result: Callable[[str, Outcome], None] | None = None,
) -> list[tuple[str, Outcome]]:
    """Run ``(id, argv, timeout_s)`` cases one after another; ``on_result`` sees each."""
    results = []
    for case_id, argv, timeout_s in cases:
        outcome = run_case(argv, timeout_s)
        results.append((case_id, outcome))
        if on_result is not None:
            on_result(case_id, outcome)
    return results


def as_json(results: list[tuple[str, Outcome]]) -> str:
    """Machine-readable results (for comparing campaigns)."""
    return json.dumps(
        [
            {"id": i, "kind": o.kind, "exit": o.exit_code, "s": round(o.seconds, 2)}
            for i, o in results
        ],
        indent=1,
    )
