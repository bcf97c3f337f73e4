"""Shared test setup: deterministic hypothesis runs, and a real PostgreSQL server for the
distributed-storage tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a failure reproduces; CI is not a lottery).
settings.register_profile("kvplan", derandomize=True, database=None)
settings.load_profile("kvplan")


@pytest.fixture(autouse=True, scope="session")
def _empty_profile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Kernel profiles a user imported (``kvplan profiles import``) must not change what the
    tests simulate: the CLI reads ``$XDG_CACHE_HOME/kvplan/profiles``, so point it at an empty
    directory for the whole run (subprocesses inherit it)."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _pg_bin() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _start_server(tmp: Path) -> str:
    """initdb + pg_ctl start on loopback (as the 'postgres' user when running as root)."""
    pg_bin = _pg_bin()
    if pg_bin is None:
        raise RuntimeError("PostgreSQL is not installed (no initdb)")
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            raise RuntimeError("running as root without runuser to drop privileges")
        prefix = ["runuser", "-u", "postgres", "--"]
        shutil.chown(tmp, "postgres")
    data = tmp / "data"
    run = lambda *args: subprocess.run(  # noqa: E731
        [*prefix, *args], check=True, capture_output=True, text=True, timeout=120
    )
    run(str(pg_bin / "initdb"), "-D", str(data), "-U", "kvplan", "--auth=trust")
    port = _free_port()
    options = f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1"
    run(
        str(pg_bin / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(tmp / "log"),
        "-w",
        "-o",
        options,
        "start",
    )
    run(str(pg_bin / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "kvplan", "t")
    return f"postgresql://kvplan@127.0.0.1:{port}/t"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a real PostgreSQL database: ``KVPLAN_TEST_POSTGRES_URL`` (set by .ci/run) or a
    throwaway server started here; skips with the reason when neither is possible."""
    # Without the driver every PostgreSQL test would fail at connect: skip them, with why.
    pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg (pip install psycopg)")
    url = os.environ.get("KVPLAN_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    tmp = Path(tempfile.mkdtemp(prefix="kvplan-pg-"))
    try:
        url = _start_server(tmp)
    except (RuntimeError, subprocess.SubprocessError, OSError) as err:
        pytest.skip(f"no PostgreSQL server available: {err}")
    try:
        yield url
    finally:
        pg_bin = _pg_bin()
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*prefix, str(pg_bin / "pg_ctl"), "-D", str(tmp / "data"), "-m", "fast", "stop"],
            check=False,
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(tmp, ignore_errors=True)
