"""The assembled CLI: version, help, and the one-line error contract (exit 2, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from optimizer.cli.main import app, quiet_interrupt_reports
from optimizer.cli.notes import NotePrinter

runner = CliRunner()


def test_version_prints_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("kvplan ")


def test_help_lists_command_groups() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for group in ("hardware", "models", "slo"):
        assert group in result.stdout


def test_input_error_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets: [unclosed\n")
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "slo", "check", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "bad.yaml" in lines[0]


def test_help_promises_only_what_slo_does() -> None:
    """Issue #12: the help said ``slo`` evaluates measured metrics; it evaluates a metrics file."""
    root = runner.invoke(app, ["--help"], terminal_width=200)
    assert "measured metrics" not in root.stdout
    assert "slo check --metrics" in root.stdout
    check = runner.invoke(app, ["slo", "check", "--help"], terminal_width=200)
    assert "--metrics" in check.stdout


def test_a_group_without_a_command_shows_its_help_and_no_empty_error_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "hardware"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2  # click's status for a group called without a command
    assert "list" in proc.stderr + proc.stdout
    assert "error:" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_usage_error_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "simulate", "--tp", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert lines[0].startswith("error: Invalid value for '--tp'")
    assert lines[0].endswith("simulate --help)")


def test_a_command_imports_only_its_own_module() -> None:
    """Commands are imported when looked up (``main._LazyCommands``): ``replay`` must not pay
    for optuna, pandas or the other commands' modules, and ``--help`` still lists them all."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from optimizer.cli.main import app\n"
        "result = CliRunner().invoke(app, ['replay', '--list-policies', '--json'])\n"
        "assert result.exit_code == 0, result.output\n"
        "heavy = [m for m in ('optuna', 'pandas', 'optimizer.run', 'optimizer.cli.simulate_cmd',"
        " 'optimizer.cli._preflight') if m in sys.modules]\n"
        "print(','.join(heavy) or 'none')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "none"
    listed = runner.invoke(app, ["--help"], terminal_width=200)
    for name in ("replay", "simulate", "optimize", "report", "validate", "profiles"):
        assert name in listed.stdout


def test_replay_loads_numpy_with_one_blas_thread() -> None:
    """``kvplan replay`` never calls BLAS: numpy is loaded with OpenBLAS on the calling thread
    only (``main._NO_BLAS_THREADS``), unless the user asked for something else."""
    code = (
        "import os, sys\n"
        "from typer.testing import CliRunner\n"
        "from optimizer.cli.main import app\n"
        "assert 'numpy' not in sys.modules\n"
        "result = CliRunner().invoke(app, ['replay', '--list-policies', '--json'])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for given, expected in ((None, "1"), ("3", "3")):
        if given is not None:
            env["OPENBLAS_NUM_THREADS"] = given
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == expected


def test_a_warning_is_one_note_line_without_python_source(tmp_path: Path) -> None:
    # DeepSeek-V3's MLA attention shapes are not in the H200 kernel table: the table model
    # falls back to a scaled roofline and says so once, as a note (not file:line + source).
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "kind: closed_loop\nusers: 2\nrequests: 4\ninput_tokens: 256\noutput_tokens: 4\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "kvplan", "simulate", "--config",
         str(Path(__file__).resolve().parents[2] / "examples" / "simulate_dp.yaml"),
         "--workload", str(workload)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: profile table")]
    assert notes, proc.stderr
    assert "Warning" not in proc.stderr
    assert ".py:" not in proc.stderr


def test_table_fallback_notes_are_said_once_per_gpu_and_kernel(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An optimisation over layouts meets many head shapes of one kernel on one GPU: the first
    is said, the rest are not; another kernel, GPU or warning is said again."""
    note = NotePrinter()
    tail = "using the roofline scaled to agree with the nearest measurement (said once per model)"
    for text in (
        f"profile table (h200_sxm) timing h200_sxm: context attention (heads 64, KV heads 64, "
        f"head dim 160, KV bf16) not profiled (nearest: (heads 64)); {tail}",
        f"profile table (h200_sxm) timing h200_sxm: context attention (heads 16, KV heads 16, "
        f"head dim 160, KV bf16) not profiled (nearest: (heads 16)); {tail}",
        f"profile table (h200_sxm) timing h200_sxm: generation attention (heads 16) not "
        f"profiled (nearest: (heads 16)); {tail}",
        f"profile table (b200_sxm) timing b200_sxm: context attention (heads 16) not profiled "
        f"(nearest: (heads 16)); {tail}",
        f"profile table (h200_sxm) timing h200_sxm: all-reduce over 16 GPUs not profiled "
        f"(nearest: over 8 GPUs); {tail}",
        "something else",
        "something else",
    ):
        note(UserWarning(text), UserWarning, "x.py", 1)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 5, lines
    assert all(line.startswith("note: ") for line in lines)
    assert "heads 64" in lines[0]
    assert not any("heads 16, KV heads 16" in line for line in lines)
    assert "(said once per GPU and kernel)" in lines[0]
    assert lines[-1] == "note: something else"


def _leaf_commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """Every runnable command under ``command`` as ``("hardware list", click command)``."""
    commands = getattr(command, "commands", None)
    if commands is None:
        yield " ".join(path), command
        return
    for name in list(commands):
        yield from _leaf_commands(commands[name], (*path, name))


def test_every_command_takes_json() -> None:
    """Issue 15: ``--json`` on every command (``convert`` lacked it)."""
    leaves = dict(_leaf_commands(typer.main.get_command(app)))
    assert {"convert", "optimize", "report", "simulate", "hardware list"} <= set(leaves)
    lacking = [
        name
        for name, command in leaves.items()
        if "--json" not in {opt for param in command.params for opt in param.opts}
    ]
    assert lacking == []


def test_a_lost_ctrl_c_is_not_reported_as_a_traceback() -> None:
    """A KeyboardInterrupt raised inside a GC/weakref callback reaches ``sys.unraisablehook``
    ("Exception ignored in …" and a traceback): the CLI's hook drops that report (the run says
    "interrupted" in one line) and passes every other one on."""
    seen: list[object] = []
    hook = quiet_interrupt_reports(lambda info: seen.append(info.exc_value))

    class Info:
        def __init__(self, exc: BaseException) -> None:
            self.exc_value = exc

    hook(Info(KeyboardInterrupt()))
    assert seen == []
    error = ValueError("kept")
    hook(Info(error))
    assert seen == [error]
