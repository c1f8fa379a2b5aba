"""The merge-gate workflow (.github/workflows/compare.yml) does what its comments say, run here
step by step with bash as the runner runs them, the installed ``eval-harness`` on a real store:
a pull request on a store without a record of main records main from its base commit, records
itself and fails when its retrieval is worse (the Markdown comment says so); a push to main
records main, and the next pull request compares with that record. Only the GitHub CLI (which
posts the comment) is a stand-in that writes down what it was asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "compare.yml"
CONFIG = """\
default_dataset: scifact-beir
datasets:
  scifact-beir:
    path: datasets/scifact
    language: english
hybrid_search:
  semantic: {semantic}
  keyword: {keyword}
  candidate_depth: 50
dagster:
  home: dagster-home
"""
PULL_REQUEST_STEPS = ("Prepare the store", "Record main from the base commit (a store without it)",
                      "Record this pull request", "Compare with main",
                      "Step summary and pull-request comment")


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def steps(workflow: dict) -> dict[str, dict]:
    return {s["name"]: s for s in workflow["jobs"]["compare"]["steps"] if "name" in s}


@pytest.mark.unit
def test_it_records_main_on_pushes_and_compares_pull_requests(workflow):
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert on["push"]["branches"] == ["main"] and "pull_request" in on
    named = steps(workflow)
    assert named["Record main"]["if"] == "env.EVENT == 'push'"
    assert all(named[name]["if"].endswith("env.EVENT == 'pull_request'")
               for name in PULL_REQUEST_STEPS[1:])
    assert workflow["permissions"]["pull-requests"] == "write"


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True,
                          text=True).stdout.strip()


class Runner:
    """A checkout of a team's repository and the job's environment, running steps."""

    def __init__(self, workflow: dict, checkout: Path, store_url: str, tmp_path: Path):
        self.workflow, self.checkout = workflow, checkout
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        self.comments = tmp_path / "gh-calls"
        (bin_dir / "gh").write_text(f'#!/bin/sh\necho "$@" >> {self.comments}\n')
        (bin_dir / "gh").chmod(0o755)
        self.summary = tmp_path / "step-summary.md"
        job_env = workflow["jobs"]["compare"]["env"]
        self.env = {
            "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(tmp_path), "DATABASE_URL": store_url, "HAS_STORE_SECRET": "false",
            "DATASET": "scifact-beir", "GITHUB_STEP_SUMMARY": str(self.summary),
            "GIT_CONFIG_GLOBAL": "/dev/null", "LANG": "C.UTF-8"}
        assert set(job_env) >= {"DATABASE_URL", "HAS_STORE_SECRET", "DATASET", "EVENT",
                                "PR_NUMBER", "BASE_SHA"}

    def run(self, name: str, **env: str) -> subprocess.CompletedProcess:
        script = steps(self.workflow)[name]["run"]
        assert "${{" not in script, f"step {name!r}: expressions belong in env, not in the script"
        return subprocess.run(["bash", "-e", "-c", script], cwd=self.checkout,
                              env={**self.env, **env}, capture_output=True, text=True,
                              timeout=600)


def commit_config(checkout: Path, semantic: float, keyword: float, message: str) -> str:
    (checkout / "config.yaml").write_text(CONFIG.format(semantic=semantic, keyword=keyword),
                                          encoding="utf-8")
    git(checkout, "add", "config.yaml")
    git(checkout, "commit", "-q", "--allow-empty", "-m", message)
    return git(checkout, "rev-parse", "HEAD")


@pytest.mark.slow
def test_the_steps_gate_a_pull_request_against_main(workflow, fresh, tmp_path):
    checkout = tmp_path / "rag-system"
    (checkout / "datasets").mkdir(parents=True)
    os.symlink(REPO / "datasets" / "scifact", checkout / "datasets" / "scifact")
    git(checkout, "init", "-q", "-b", "main")
    git(checkout, "config", "user.email", "ci@example.org")
    git(checkout, "config", "user.name", "ci")
    base = commit_config(checkout, 0.7, 0.3, "main: the shipped weights")
    git(checkout, "checkout", "-q", "-b", "keyword-heavy")
    commit_config(checkout, 0.1, 0.9, "try keyword-heavy weights")
    runner = Runner(workflow, checkout, fresh.url, tmp_path)

    pull = {"EVENT": "pull_request", "PR_NUMBER": "7", "BASE_SHA": base}
    done = runner.run("Prepare the store", **pull)
    assert done.returncode == 0, done.stderr
    done = runner.run("Record main from the base commit (a store without it)", **pull)
    assert done.returncode == 0 and "recorded 'main'" in done.stderr, done.stderr
    done = runner.run("Record this pull request", **pull)
    assert done.returncode == 0 and "recorded 'pr-7'" in done.stderr, done.stderr
    done = runner.run("Compare with main", **pull)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.startswith("WORSE: 'pr-7' against 'main': P@5")
    comment = (checkout / "reports" / "compare.md").read_text(encoding="utf-8")
    assert comment.startswith("### Compared with `main`: WORSE")
    assert (checkout / "reports" / "compare.xml").is_file()
    done = runner.run("Step summary and pull-request comment", **pull)
    assert done.returncode == 0, done.stderr
    assert runner.summary.read_text(encoding="utf-8") == comment
    assert runner.comments.read_text().startswith("pr comment 7 --body-file reports/compare.md")

    # the pull request is reverted and merged: a push to main records main in the store ...
    git(checkout, "checkout", "-q", "main")
    merged = commit_config(checkout, 0.7, 0.3, "main: the shipped weights again")
    done = runner.run("Record main", EVENT="push", BASE_SHA="", PR_NUMBER="")
    assert done.returncode == 0 and "recorded 'main'" in done.stderr, done.stderr
    # ... which the next pull request, with the same weights, compares with: no difference
    git(checkout, "checkout", "-q", "-b", "same-weights")
    commit_config(checkout, 0.7, 0.3, "a change elsewhere")
    pull = {"EVENT": "pull_request", "PR_NUMBER": "8", "BASE_SHA": merged}
    done = runner.run("Record main from the base commit (a store without it)", **pull)
    assert done.returncode == 0 and "record of main in the store" in done.stdout, done.stderr
    assert runner.run("Record this pull request", **pull).returncode == 0
    done = runner.run("Compare with main", **pull)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith("No evidence of worse: 'pr-8' against 'main'")
