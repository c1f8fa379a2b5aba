"""One venv serves `scripts/run.sh` and `scripts/test.sh`: `scripts/_bootstrap.sh` installs
when the lock or pyproject changed, or an extra is asked for that is not installed, and never
drops an extra the venv has; and `scripts/test.sh` runs ruff and mypy (`scripts/lint.sh`)
before the tests, which a finding stops. Run with bash against a stand-in `.venv/bin/python`
(and ruff, mypy) that records the commands it is given (the real install is what every test
run does)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with the project's lock, pyproject and bootstrap script, and a venv whose
    python only records its arguments (one line per call)."""
    for name in ("requirements.lock", "pyproject.toml"):
        (tmp_path / name).write_bytes((REPO / name).read_bytes())
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "_bootstrap.sh").write_bytes(
        (REPO / "scripts" / "_bootstrap.sh").read_bytes())
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "$*" >> "$(dirname "$0")/../calls"\n')
    python.chmod(0o755)
    return tmp_path


def bootstrap(project: Path, extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f'source scripts/_bootstrap.sh && bootstrap "{extra}"'],
                          cwd=project, capture_output=True, text=True, check=True)


def installs(project: Path) -> list[str]:
    """The `-e` targets of the project installs made so far."""
    calls = project / ".venv" / "calls"
    lines = calls.read_text().splitlines() if calls.exists() else []
    return [line.split(" -e ", 1)[1] for line in lines if " -e " in line]


def test_run_after_test_reuses_the_test_venv(project):
    bootstrap(project, "test")
    done = bootstrap(project, "")
    assert installs(project) == [".[test]"]
    assert done.stderr == ""  # no "Installing dependencies ... first run" again


def test_test_after_run_installs_the_extra_once(project):
    bootstrap(project, "")
    bootstrap(project, "test")
    bootstrap(project, "test")
    bootstrap(project, "")
    assert installs(project) == [".", ".[test]"]


def test_a_comma_list_of_extras_installs_them_in_one_go_and_once(project):
    # test.sh asks for "test,docs": one install of both, and nothing again for either or both
    bootstrap(project, "test,docs")
    bootstrap(project, "test,docs")
    bootstrap(project, "test")
    bootstrap(project, "docs")
    bootstrap(project, "")
    assert installs(project) == [".[docs,test]"]
    assert (project / ".venv" / "calls").read_text().count("from ranx import") == 1


def test_an_extra_missing_from_a_list_installs_it_keeping_the_others(project):
    bootstrap(project, "test")
    bootstrap(project, "test,docs")
    assert installs(project) == [".[test]", ".[docs,test]"]


def test_a_changed_lock_reinstalls_keeping_the_extras_installed(project):
    bootstrap(project, "test")
    with open(project / "requirements.lock", "a") as lock:
        lock.write("six==1.16.0\n")
    bootstrap(project, "")
    assert installs(project) == [".[test]", ".[test]"]


def test_a_stamp_of_the_earlier_format_is_read(project):
    bootstrap(project, "test")
    stamp = project / ".venv" / ".eval-harness-installed"
    lock_hash = stamp.read_text().split()[0]
    stamp.write_text(f"{lock_hash} [test]\n")  # how scripts wrote it before
    bootstrap(project, "test")
    bootstrap(project, "")
    assert installs(project) == [".[test]"]


def test_the_install_asks_pip_to_say_errors_only(project):
    bootstrap(project, "test")
    calls = [call for call in (project / ".venv" / "calls").read_text().splitlines()
             if call.startswith("-m pip ")]
    assert len(calls) == 2 and all(" -qq " in f" {call} " for call in calls), calls


def test_a_test_install_compiles_the_ranx_kernels_once(project):
    # the tests' ranking reference compiles at install (its cache lives in the venv), not in
    # the first test run; an install without the test extra does not need it
    calls = project / ".venv" / "calls"
    bootstrap(project, "")
    assert "ranx" not in calls.read_text()
    bootstrap(project, "test")
    bootstrap(project, "test")
    assert calls.read_text().count("from ranx import") == 1
    assert "evaluate(" in calls.read_text()


@pytest.fixture
def suite(project: Path) -> Path:
    """``project`` with the test command (test.sh and lint.sh), and stand-ins for ruff and
    mypy that record their calls beside python's and exit with $RUFF_EXIT / $MYPY_EXIT."""
    for name in ("test.sh", "lint.sh"):
        script = project / "scripts" / name
        script.write_bytes((REPO / "scripts" / name).read_bytes())
        script.chmod(0o755)
    for tool in ("ruff", "mypy"):
        stub = project / ".venv" / "bin" / tool
        stub.write_text(f'#!/bin/sh\necho "{tool} $*" >> "$(dirname "$0")/../calls"\n'
                        f'exit "${{{tool.upper()}_EXIT:-0}}"\n')
        stub.chmod(0o755)
    return project


def run_test_command(project: Path, **env: str) -> tuple[int, list[str]]:
    """Exit code of ``scripts/test.sh -k x`` and its ruff, mypy and pytest calls in order."""
    done = subprocess.run(["bash", "scripts/test.sh", "-k", "x"], cwd=project,
                          env={**os.environ, **env}, capture_output=True, text=True)
    calls = (project / ".venv" / "calls").read_text().splitlines()
    return done.returncode, [call for call in calls
                             if call.startswith(("ruff ", "mypy", "-m pytest "))]


def test_the_test_command_lints_and_type_checks_before_the_tests(suite):
    code, calls = run_test_command(suite)
    assert code == 0
    assert calls[:2] == ["ruff check .", "mypy "]
    assert len(calls) == 3 and calls[2].startswith("-m pytest ") and calls[2].endswith(" -k x")


@pytest.mark.parametrize("tool", ["ruff", "mypy"])
def test_a_lint_or_type_finding_fails_the_test_command_before_any_test(suite, tool):
    code, calls = run_test_command(suite, **{f"{tool.upper()}_EXIT": "1"})
    assert code == 1
    assert not any(call.startswith("-m pytest ") for call in calls)


def test_the_test_command_installs_the_test_and_docs_extras(suite):
    # the docs extra: tests/test_docs.py builds the manual with mkdocs, in CI too
    code, _ = run_test_command(suite)
    assert code == 0
    assert installs(suite) == [".[docs,test]"]
