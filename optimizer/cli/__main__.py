"""``python -m optimizer.cli``: the ``kvplan`` command, with its exit codes (user errors exit 2)."""

from __future__ import annotations

from optimizer.cli.main import run

if __name__ == "__main__":
    run()
