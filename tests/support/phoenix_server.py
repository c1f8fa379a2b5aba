"""A real Phoenix server on loopback for the Phoenix round trip (``phoenix serve``).

Phoenix runs in a subprocess of this interpreter (the test extra installs ``arize-phoenix``)
with its own working directory (SQLite database inside), a free HTTP port and a free gRPC
port, bound to 127.0.0.1, and every outward call switched off: product telemetry, web
analytics, external fonts and scripts in the UI, the agent assistant and the MCP server.
:func:`phoenix_server` yields the base URL once ``/healthz`` answers and stops the server
(SIGTERM, then SIGKILL) at the end, or when this process dies; a server that does not come
up fails with its log's tail.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

START_TIMEOUT_SECONDS = 90.0  # a cold import of Phoenix's server takes 10-30 s on a busy box


def phoenix_installed() -> bool:
    """Whether the Phoenix server and client are installed (the test extra installs them).

    Only a missing package counts: a Phoenix that is installed but fails to import (a
    version that does not run on this Python) fails the test instead of skipping it."""
    try:
        import phoenix.client  # noqa: F401
        from phoenix.server import main  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def require_phoenix() -> None:
    """Skip the calling test, saying why, when the Phoenix extra is not installed."""
    if not phoenix_installed():
        pytest.skip("arize-phoenix is not installed (it comes with the test extra: "
                    "./scripts/test.sh installs it)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_environment(working_dir: Path, port: int, grpc_port: int) -> dict[str, str]:
    """The environment ``phoenix serve`` runs with: loopback, SQLite, nothing outward."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PHOENIX_", "OTEL_"))}
    env.update({
        "PHOENIX_WORKING_DIR": str(working_dir),
        "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{working_dir / 'phoenix.db'}",
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
        "PHOENIX_ENABLE_MCP_SERVER": "false",
        "PHOENIX_ENABLE_AUTH": "false",
        "PHOENIX_ENABLE_PROMETHEUS": "false",
        "PHOENIX_FULLSTORY_ORG": "",
        "PHOENIX_SCARF_SH_PIXEL_ID": "",
        "NO_PROXY": "127.0.0.1,localhost",
    })
    return env


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextmanager
def phoenix_server(working_dir: Path) -> Iterator[str]:
    """Start ``phoenix serve`` in ``working_dir``; yield its base URL; stop it."""
    working_dir.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = working_dir / "phoenix.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "phoenix.server.main", "serve"],
            cwd=working_dir, env=server_environment(working_dir, port, grpc_port),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    # Killed ourselves (SIGKILL, or a SIGTERM that skips finally blocks), we would leave the
    # server running: this shell reads its stdin until we close it, which the kernel does
    # when we end however we end, and then kills the server's process group.
    reaper = subprocess.Popen(["bash", "-c", 'read -r _; kill -KILL -- "-$1" 2>/dev/null',
                               "reaper", str(process.pid)], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not _healthy(url):
            if process.poll() is not None:
                pytest.fail(f"phoenix serve exited with {process.returncode}:\n"
                            f"{_tail(log_path)}")
            if time.monotonic() > deadline:
                pytest.fail(f"phoenix serve did not answer {url}/healthz within "
                            f"{START_TIMEOUT_SECONDS:.0f} s:\n{_tail(log_path)}")
            time.sleep(0.25)
        yield url
    finally:
        _stop(process)
        reaper.stdin.close()
        reaper.wait(timeout=10)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


if __name__ == "__main__":  # start one by hand: python tests/support/phoenix_server.py DIR
    with phoenix_server(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/phoenix-dev")) as base:
        print(base, flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
