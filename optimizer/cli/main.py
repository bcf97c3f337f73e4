"""The ``kvplan`` command line: one typer app, one module per command group.

Each ``optimizer/cli/*_cmd.py`` module exposes ``register(app)``; this module only assembles them
and turns user-input errors into one line on stderr with exit status 2 (never a traceback).
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import typer

from optimizer.cli import (
    analyze_cmd,
    calibrate_cmd,
    catalog_cmd,
    convert_cmd,
    optimize_cmd,
    profiles_cmd,
    replay_cmd,
    simulate_cmd,
    slo_cmd,
    validate_cmd,
)
from optimizer.cli._output import err_console
from optimizer.run import WorkerError
from slo.inputfile import InputError

__all__ = ["app", "run"]

app = typer.Typer(
    name="kvplan",
    help="Plan LLM serving deployments with multi-tier KV caches: simulate, replay, optimize.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
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


for _module in (
    catalog_cmd,
    slo_cmd,
    replay_cmd,
    analyze_cmd,
    calibrate_cmd,
    convert_cmd,
    optimize_cmd,
    profiles_cmd,
    simulate_cmd,
    validate_cmd,
):
    _module.register(app)


def run() -> None:
    """Console-script entry point: run the app, mapping ``InputError`` to one line and exit 2."""
    try:
        # Without standalone mode click returns (not raises) the code of ``typer.Exit(code)``.
        # prog_name: ``python -m kvplan`` would name itself "python -m kvplan", which no shell
        # completion script can hold (--show-completion wrote a broken one).
        code = app(standalone_mode=False, prog_name="kvplan")
        if isinstance(code, int) and code:
            sys.exit(code)
    except (InputError, WorkerError) as err:
        # One line whatever the input held (a key or a name with a line break in it).
        message = str(err).replace("\r", "\\r").replace("\n", "\\n")
        err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        err_console.print("aborted", markup=False)
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        # Usage errors (unknown option, missing argument) come from click — bundled inside
        # typer in recent releases, a separate package in older ones — so match by shape.
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            _usage_error(exc, show)
            sys.exit(code)
        raise


def _usage_error(exc: Exception, show: Any) -> None:
    """A usage error as one line (``error: ... (see kvplan CMD --help)``), like every other
    bad input; click's own three-line form where the exception has no message to format."""
    message = getattr(exc, "format_message", None)
    if not callable(message):
        show()
        return
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "kvplan"
    err_console.print(
        f"error: {message()} (see {command} --help)", markup=False, highlight=False, soft_wrap=True
    )
