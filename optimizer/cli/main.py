"""The ``kvplan`` command line: one typer app, one module per command group.

Each ``optimizer/cli/*_cmd.py`` module exposes ``register(app)``; this module only assembles them
and turns user-input errors into one line on stderr with exit status 2 (never a traceback).

A command's module is imported only when the command is looked up (``_LazyCommands``): the
modules pull in optuna, pandas, numba, the catalog's pydantic models, and importing all of them
cost every invocation ~2.5 s of CPU before any work (``kvplan replay`` from ``.lcp.zst`` spent
half its time there). ``kvplan --help`` and completing a command name still load every module
whose name they list, since each shows its command's help.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import typer
import typer.core
import typer.main

from optimizer.cli._output import err_console
from optimizer.cli.notes import NotePrinter
from slo.inputfile import InputError

__all__ = ["app", "run"]

#: Command name -> the module under ``optimizer.cli`` that registers it, in ``--help`` order.
_COMMANDS: dict[str, str] = {
    "hardware": "catalog_cmd",
    "models": "catalog_cmd",
    "slo": "slo_cmd",
    "replay": "replay_cmd",
    "analyze": "analyze_cmd",
    "calibrate": "calibrate_cmd",
    "convert": "convert_cmd",
    "optimize": "optimize_cmd",
    "report": "optimize_cmd",
    "profiles": "profiles_cmd",
    "simulate": "simulate_cmd",
    "validate": "validate_cmd",
}

#: Commands that never call BLAS (numpy's linear algebra), whose numpy is loaded with OpenBLAS
#: kept to the calling thread. As it loads, OpenBLAS starts one worker thread per further core,
#: and each spins, waiting for work, for a while before it sleeps: 0.05-0.08 s of CPU per
#: worker on a two-core machine, in every run, for work that never comes (a warm `kvplan
#: replay` of 10 M blocks from lcp spends about 0.8 s CPU in all). Results do not change:
#: BLAS is not called, and would be deterministic on one thread anyway. A value the user set
#: is kept.
_NO_BLAS_THREADS = frozenset({"replay"})


class _LazyCommands(MutableMapping[str, Any]):
    """The root group's ``commands``: every name in ``_COMMANDS`` is a key from the start (usage
    errors suggest close names from the keys), and a value is built on first access by
    importing its module and converting what its ``register`` adds to click commands."""

    def __init__(self) -> None:
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            module = _COMMANDS[name]  # KeyError for unknown names, as a dict would
            if name in _NO_BLAS_THREADS and "numpy" not in sys.modules:  # read as numpy loads
                os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
            holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            importlib.import_module(f"optimizer.cli.{module}").register(holder)
            group = typer.main.get_group(holder)
            for sub, command in group.commands.items():
                if _COMMANDS.get(sub) != module:  # the table must name every command
                    raise RuntimeError(f"optimizer.cli.{module} registers {sub!r}")
                self._loaded[sub] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("kvplan's commands cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return iter(_COMMANDS)

    def __len__(self) -> int:
        return len(_COMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in _COMMANDS or name in self._loaded


class _LazyGroup(typer.core.TyperGroup):
    """The root group over ``_LazyCommands``; lists names without importing their modules
    (``get_command`` of the base class looks a name up in ``commands``, which imports it)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands()

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command's name in ``--help`` order (the base class reads every value)."""
        del ctx  # the names do not depend on the invocation
        return list(self.commands)


app = typer.Typer(
    cls=_LazyGroup,
    name="kvplan",
    help="Plan LLM serving deployments with multi-tier KV caches: simulate, replay, optimize.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        # Imported here: importlib.metadata costs ~20 ms of start-up that no other command needs.
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            typer.echo(f"kvplan {version('kvplan')}")
        except PackageNotFoundError:  # running from a source tree that was never installed
            typer.echo("kvplan (not installed)")
        raise typer.Exit


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit.",
        callback=_version_callback,
        is_eager=True,
    ),
) -> None:
    """kvplan: which hardware, cache and scheduling configuration meets my SLOs at least cost."""


def quiet_interrupt_reports(previous: Callable[[Any], None]) -> Callable[[Any], None]:
    """An ``sys.unraisablehook`` that drops the report of a ``KeyboardInterrupt`` raised where
    Python cannot propagate it (a garbage-collection or weakref callback: "Exception ignored
    in …" and a traceback) and hands every other report to ``previous``. A Ctrl-C is reported
    once, as one line (``run``); while a study runs ``optimizer.run.InterruptLatch`` also
    records such a lost one and raises it again."""

    def hook(info: Any) -> None:
        if isinstance(info.exc_value, KeyboardInterrupt):
            return
        previous(info)

    return hook


def run() -> None:
    """Console-script entry point: run the app, mapping ``InputError`` to one line and exit 2."""
    warnings.showwarning = NotePrinter()
    sys.unraisablehook = quiet_interrupt_reports(sys.unraisablehook)
    try:
        # Without standalone mode click returns (not raises) the code of ``typer.Exit(code)``.
        # prog_name: ``python -m kvplan`` would name itself "python -m kvplan", which no shell
        # completion script can hold (--show-completion wrote a broken one).
        code = app(standalone_mode=False, prog_name="kvplan")
        if isinstance(code, int) and code:
            sys.exit(code)
    except InputError as err:
        _one_line_error(err)
    except typer.Abort:
        err_console.print("aborted", markup=False)
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        # A WorkerError can only exist once ``optimizer.run`` (optuna and all) is imported, so
        # it is looked up there instead of importing that module for every command.
        run_module = sys.modules.get("optimizer.run")
        if run_module is not None and isinstance(exc, run_module.WorkerError):
            _one_line_error(exc)
        # Usage errors (unknown option, missing argument) come from click — bundled inside
        # typer in recent releases, a separate package in older ones — so match by shape.
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            _usage_error(exc, show)
            sys.exit(code)
        raise


def _one_line_error(err: Exception) -> None:
    """Print ``err`` as ``error: ...`` on one line of stderr and exit with status 2."""
    # One line whatever the input held (a key or a name with a line break in it).
    message = str(err).replace("\r", "\\r").replace("\n", "\\n")
    err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(2)


def _usage_error(exc: Exception, show: Any) -> None:
    """A usage error as one line (``error: ... (see kvplan CMD --help)``), like every other
    bad input; click's own three-line form where the exception has no message to format."""
    message = getattr(exc, "format_message", None)
    if not callable(message):
        show()
        return
    if not message():  # a group called without a command: its help is already printed
        return
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "kvplan"
    err_console.print(
        f"error: {message()} (see {command} --help)", markup=False, highlight=False, soft_wrap=True
    )
