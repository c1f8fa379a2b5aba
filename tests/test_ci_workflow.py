"""The GitHub Actions quality gate is a workflow a team can copy as it is: it runs
on pull requests, nightly and by hand, caches pip's downloads, and its one input means what
its description says. The step that picks the day is run here with bash, as the runner runs
it."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "quality-gate.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def triggers(workflow: dict) -> dict:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true


def steps(workflow: dict) -> list[dict]:
    return workflow["jobs"]["gate"]["steps"]


def step(workflow: dict, name: str) -> dict:
    (found,) = [s for s in steps(workflow) if s.get("name") == name]
    return found


@pytest.mark.unit
def test_it_runs_on_pull_requests_every_night_and_by_hand(workflow):
    on = triggers(workflow)
    assert "pull_request" in on and "workflow_dispatch" in on
    [nightly] = on["schedule"]
    assert len(nightly["cron"].split()) == 5


@pytest.mark.unit
def test_pip_downloads_are_cached_on_the_lock_file(workflow):
    [setup] = [s for s in steps(workflow) if s.get("uses", "").startswith("actions/setup-python")]
    assert setup["with"]["cache"] == "pip"
    paths = setup["with"]["cache-dependency-path"].split()
    assert "requirements.lock" in paths
    # a team's repository has no lock file: the workflow itself always matches
    assert ".github/workflows/quality-gate.yml" in paths


@pytest.mark.unit
def test_the_install_works_in_a_team_repository_through_one_variable(workflow):
    install = step(workflow, "Install eval-harness (locked versions)")
    assert install["env"]["PACKAGE"] == "${{ vars.EVAL_HARNESS_PACKAGE }}"
    assert "-c requirements.lock -e ." in install["run"]
    assert "EVAL_HARNESS_PACKAGE" in WORKFLOW.read_text(encoding="utf-8").split("name:")[0]


def choose(workflow: dict, tmp_path: Path, *, asked: str, secret: bool) -> str:
    """The day the 'Choose the day to gate' step picks, run by bash as on the runner."""
    script = step(workflow, "Choose the day to gate")["run"]
    output = tmp_path / "github_output"
    output.write_text("")
    env = {"PATH": "/usr/bin:/bin", "ASKED": asked, "GITHUB_OUTPUT": str(output),
           "HAS_STORE_SECRET": "true" if secret else "false",
           "SAMPLE_DAY": workflow["jobs"]["gate"]["env"]["SAMPLE_DAY"]}
    subprocess.run(["bash", "-e", "-c", script], env=env, check=True, capture_output=True)
    (line,) = output.read_text().splitlines()
    return line.removeprefix("partition=")


def test_the_input_does_what_its_description_says(workflow, tmp_path):
    partition = triggers(workflow)["workflow_dispatch"]["inputs"]["partition"]
    sample_day = workflow["jobs"]["gate"]["env"]["SAMPLE_DAY"]
    # its default is empty, and the description says what empty means, sample day included
    assert partition["default"] == ""
    assert "Empty: yesterday" in partition["description"]
    assert f"without a DATABASE_URL secret, the bundled sample's {sample_day}" in \
        partition["description"]
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    assert choose(workflow, tmp_path, asked="", secret=True) == yesterday
    assert choose(workflow, tmp_path, asked="", secret=False) == sample_day
    assert choose(workflow, tmp_path, asked="2025-03-04", secret=True) == "2025-03-04"
    # the sample really has answers that day, and the gate step gates the chosen day
    sample = (REPO / "datasets/answers/sample_answers.jsonl").read_text(encoding="utf-8")
    assert f'"created_at": "{sample_day}' in sample
    gate = step(workflow, "Run the quality gates")["run"]
    assert '--partition "${{ steps.day.outputs.partition }}"' in gate
