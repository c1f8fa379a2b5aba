"""The throwaway environment the UI check runs in, and what the definitions contain.

``dagster dev`` gets a throwaway DAGSTER_HOME (its own run history even with
DAGSTER_POSTGRES_URL set), embedded store (or DATABASE_URL's) and copy of the config file, so
nothing in the checkout changes (the calibration assets, for one, write weights into the config
file in use). What the definitions contain is read by a child Python process, so the check
imports no Dagster (the library stays orchestrator-free) and expects nothing hard-coded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ROOT / "workspace.yaml"
LAUNCH_JOB = "main_job"


class UICheckUnavailable(RuntimeError):
    """The check could not run (no browser, the webserver did not start); one sentence."""


@dataclass(frozen=True)
class DefinitionsSummary:
    """What the code location defines, read from ``eval_harness_pipelines.definitions`` itself."""

    assets: tuple[str, ...]
    checks: dict[str, tuple[str, ...]]  # asset -> its check names
    jobs: tuple[str, ...]
    schedules: tuple[str, ...]
    sensors: tuple[str, ...]
    launch_assets: tuple[str, ...] = field(default=())  # assets of LAUNCH_JOB


def throwaway_config(config: Path, folder: Path) -> Path:
    """A copy of ``config`` in ``folder`` that reads the same inputs and writes only there.

    Inputs (datasets, the demo RAG source and answers, the answers file) are kept by absolute path;
    outputs (the embedded store, the DuckDB history, Dagster's home, ``reports/`` next to the
    config) go to ``folder``. Comments are not kept: the copy is thrown away with the folder.
    """
    root = config.resolve().parent
    raw = yaml.safe_load(config.read_text(encoding="utf-8")) or {}

    def absolute(value: Any) -> str:
        return str((root / str(value)).resolve())

    for entry in (raw.get("datasets") or {}).values():
        for key in ("path", "embeddings"):
            if isinstance(entry, dict) and entry.get(key):
                entry[key] = absolute(entry[key])
    gates = raw.get("quality_gates") or {}
    if gates.get("answers_file"):
        gates["answers_file"] = absolute(gates["answers_file"])
    store = raw.get("store") or {}
    for key in ("demo_rag_source", "demo_rag_answers"):
        if store.get(key):
            store[key] = absolute(store[key])
    raw["store"] = {**store, "embedded_pgdata": str(folder / "pgdata")}
    raw["history"] = {**(raw.get("history") or {}), "duckdb_path": str(folder / "history.duckdb")}
    raw["dagster"] = {**(raw.get("dagster") or {}), "home": str(folder / "dagster")}
    copy = folder / "config.yaml"
    copy.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return copy


def throwaway_environment(config: Path, folder: Path) -> dict[str, str]:
    """Environment for ``dagster dev``: the config copy and a fresh DAGSTER_HOME in ``folder``."""
    from eval_harness.settings import load_settings
    from eval_harness_pipelines.dagster_home import instance_yaml

    env = dict(os.environ)
    env.pop("EVAL_HARNESS_PGDATA", None)  # the throwaway store, unless DATABASE_URL is set
    env.pop("DAGSTER_POSTGRES_URL", None)  # keep these runs out of a shared run history
    home = folder / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    env.update(EVAL_HARNESS_CONFIG=str(throwaway_config(config, folder)), DAGSTER_HOME=str(home))
    settings = load_settings(env["EVAL_HARNESS_CONFIG"], environ=env)
    (home / "dagster.yaml").write_text(instance_yaml(settings), encoding="utf-8")
    return env


def workspace_module() -> tuple[str, str]:
    """(module, attribute) of the one python_module entry of workspace.yaml."""
    raw = yaml.safe_load(WORKSPACE.read_text(encoding="utf-8")) or {}
    entries = [entry["python_module"] for entry in raw.get("load_from") or []
               if isinstance(entry, dict) and "python_module" in entry]
    if len(entries) != 1:
        raise UICheckUnavailable(f"{WORKSPACE} should load exactly one python_module.")
    entry = entries[0]
    if isinstance(entry, str):
        return entry, "defs"
    return entry["module_name"], entry.get("attribute", "defs")


# Runs in a child process: the only place where the definitions (and Dagster) are imported.
_SUMMARY_SCRIPT = """
import importlib, json, sys
defs = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
if not hasattr(defs, "resolve_asset_graph"):  # @dg.definitions: Dagster's loader calls it
    defs = defs()
graph = defs.resolve_asset_graph()
checks = {}
for key in sorted(graph.asset_check_keys, key=lambda k: k.name):
    checks.setdefault(key.asset_key.to_user_string(), []).append(key.name)
jobs = [job for job in defs.resolve_all_job_defs() if not job.name.startswith("__")]
launch = defs.resolve_job_def(sys.argv[3]).asset_layer.executable_asset_keys
print(json.dumps({
    "assets": sorted(key.to_user_string() for key in graph.get_all_asset_keys()),
    "checks": checks, "jobs": sorted(job.name for job in jobs),
    "schedules": sorted(s.name for s in defs.schedules or []),
    "sensors": sorted(s.name for s in defs.sensors or []),
    "launch_assets": sorted(key.to_user_string() for key in launch)}))
"""


def summarize_definitions(env: dict[str, str]) -> DefinitionsSummary:
    """Load the workspace's definitions (with ``env``'s config) in a child process."""
    module, attribute = workspace_module()
    done = subprocess.run([sys.executable, "-c", _SUMMARY_SCRIPT, module, attribute, LAUNCH_JOB],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UICheckUnavailable(f"The definitions in {module} did not load ({last}).")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    return DefinitionsSummary(
        assets=tuple(raw["assets"]),
        checks={asset: tuple(names) for asset, names in raw["checks"].items()},
        jobs=tuple(raw["jobs"]), schedules=tuple(raw["schedules"]),
        sensors=tuple(raw["sensors"]), launch_assets=tuple(raw["launch_assets"]))
