"""The Dagster webserver loads workspace.yaml and serves the asset graph over GraphQL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from paths import REPO as ROOT

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


@pytest.fixture(scope="module")
def webserver(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster-home")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = free_port()
    env = dict(os.environ, DAGSTER_HOME=str(home))
    log = (home / "webserver.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "dagster_webserver", "-w", str(ROOT / "workspace.yaml"),
         "-h", "127.0.0.1", "-p", str(port)], cwd=ROOT, env=env, stdout=log,
        stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the webserver did not start: "
                                + (home / "webserver.log").read_text()[-2000:])
                time.sleep(0.5)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_graphql_lists_assets_checks_and_jobs(webserver):
    # the code location loads in the background: wait until it reports loaded
    deadline = time.monotonic() + 120
    while True:
        reply = graphql(webserver, "{ workspaceOrError { ... on Workspace { locationEntries "
                                   "{ name loadStatus locationOrLoadError { __typename } } } } }")
        entries = reply["data"]["workspaceOrError"]["locationEntries"]
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            break
        assert time.monotonic() < deadline, reply
        time.sleep(0.5)
    assert entries[0]["locationOrLoadError"]["__typename"] == "RepositoryLocation", entries
    nodes = graphql(webserver, "{ assetNodes { assetKey { path } groupName jobNames "
                               "assetChecksOrError { ... on AssetChecks { checks { name } } } } }")
    assets = {"/".join(n["assetKey"]["path"]): n for n in nodes["data"]["assetNodes"]}
    assert {"corpus", "ground_truth", "retrieval_report"} <= set(assets)
    assert assets["corpus"]["groupName"] == "ground_truth"
    assert "main_job" in assets["retrieval_report"]["jobNames"]
    checks = {c["name"] for n in assets.values()
              for c in (n["assetChecksOrError"] or {}).get("checks", [])}
    assert "kappa_lower_bound_above_floor" in checks
