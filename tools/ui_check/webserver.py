"""``dagster dev`` on a free port, and the GraphQL questions the UI check asks it.

Every wait polls with a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tools.ui_check.environment import ROOT, WORKSPACE, UICheckUnavailable


class GraphQLError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], Any], timeout: float, what: str,
               interval: float = 0.25) -> Any:
    """Poll ``condition`` until it returns something truthy; TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s")
        time.sleep(interval)


def stop_with_parent() -> None:
    """In a child before exec: SIGTERM it when we die, so a killed test run leaves no server."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process_group(process: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM the group ``process`` leads (started with start_new_session), then SIGKILL."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        except ProcessLookupError:
            pass
    try:  # children that outlived the leader (the daemon's run workers, say)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def log_tail(path: Path, lines: int = 5) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return " | ".join(text.strip().splitlines()[-lines:]) or "no output"


def graphql(base_url: str, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{base_url}/graphql", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        answer = json.loads(reply.read())
    if answer.get("errors"):
        raise GraphQLError(f"GraphQL error: {answer['errors'][0].get('message')}")
    return answer["data"]


def _location_loaded(base_url: str) -> bool:
    data = graphql(base_url, "{ workspaceOrError { ... on Workspace { locationEntries "
                             "{ loadStatus locationOrLoadError { __typename "
                             "... on PythonError { message } } } } } }")
    entries = data["workspaceOrError"]["locationEntries"]
    if not entries or any(e["loadStatus"] != "LOADED" for e in entries):
        return False
    for entry in entries:
        loaded = entry["locationOrLoadError"]
        if loaded["__typename"] == "PythonError":
            raise UICheckUnavailable("The code location failed to load in the webserver: "
                                     f"{loaded['message'].strip().splitlines()[-1]}")
    return True


@contextmanager
def dagster_dev(env: dict[str, str], log_path: Path, timeout: float = 120.0) -> Iterator[str]:
    """``dagster dev`` (webserver + daemon) on a free port; yields its base URL once loaded."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "dagster", "dev", "-w", str(WORKSPACE), "-h", "127.0.0.1",
             "-p", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=stop_with_parent)
        try:
            def ready() -> bool:
                if process.poll() is not None:
                    raise UICheckUnavailable(f"dagster dev exited with code {process.returncode}: "
                                             f"{log_tail(log_path)}")
                try:
                    return _location_loaded(base_url)
                except (OSError, ValueError, GraphQLError):
                    return False  # not listening yet
            try:
                wait_until(ready, timeout, "the webserver did not load the code location",
                           interval=0.5)
            except TimeoutError as exc:
                raise UICheckUnavailable(f"{exc} (log: {log_tail(log_path)}).") from None
            yield base_url
        finally:
            stop_process_group(process)


TERMINAL_RUN_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}


def run_ids(base_url: str, job: str) -> set[str]:
    """The ids of every run of ``job`` the instance knows."""
    data = graphql(base_url, "query($job: String) { runsOrError(filter: {pipelineName: $job}) "
                             "{ ... on Runs { results { runId } } } }", {"job": job})
    return {run["runId"] for run in data["runsOrError"].get("results", [])}


def status_if_done(base_url: str, run_id: str) -> str | None:
    """The run's status once it is terminal (SUCCESS, FAILURE, CANCELED), else None."""
    data = graphql(base_url, "query($id: ID!) { runOrError(runId: $id) "
                             "{ ... on Run { status } } }", {"id": run_id})
    status = data["runOrError"].get("status")
    return status if status in TERMINAL_RUN_STATUSES else None


def run_error(base_url: str, run_id: str) -> str:
    """The first step failure (or run failure) of a run: its innermost cause, one line."""
    data = graphql(base_url, """query($id: ID!) { logsForRun(runId: $id) {
        ... on EventConnection { events { __typename
          ... on ExecutionStepFailureEvent { stepKey error { message causes { message } } }
          ... on RunFailureEvent { message } } } } }""", {"id": run_id})
    events = data["logsForRun"].get("events", [])
    for event in events:
        if event.get("error"):
            error = event["error"]
            innermost = (error["causes"] or [error])[-1]["message"].strip().splitlines()
            return f"step {event['stepKey']}: {innermost[0] if innermost else 'no message'}"
    for event in events:
        if event["__typename"] == "RunFailureEvent":
            return event["message"].strip().splitlines()[0]
    return "no failure event was recorded."
