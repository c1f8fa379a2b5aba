"""Which test files share a worker (pytest-xdist), and in what order they start: each file in
one process, as ``--dist loadfile`` does, except that the files using ranx all go to the same
one; and the files with a test marked ``slow`` start first.

ranx is the tests' reference for the ranking metrics; its numba kernels take tens of seconds
to compile or load in each process that first evaluates with them, so one process pays it
rather than every worker. A file uses ranx when it imports it, at any depth.

xdist hands out the files with the most tests first, so a file holding one test of three
minutes (four judge processes sharing a rate for over a minute, a Dagster backfill) started
last and ran alone at the end while the other worker had nothing left. The slow files go
first (among them, and among the rest, xdist's order stays), so the many quick files fill the
end of the run on both workers.
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

RANX_SCOPE = "ranx users"


def imports_ranx(path: Path) -> bool:
    """Whether the Python file ``path`` imports ranx anywhere (a module or a function)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(
                alias.name.split(".")[0] == "ranx" for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ranx":
            return True
    return False


def ranx_files(root: Path) -> frozenset[str]:
    """The test files under ``root``/tests that import ranx, as nodeid paths."""
    return frozenset(path.relative_to(root).as_posix()
                     for path in (root / "tests").rglob("test_*.py") if imports_ranx(path))


def slow_files(root: Path) -> frozenset[str]:
    """The test files under ``root``/tests with a test (or the module) marked slow."""
    return frozenset(path.relative_to(root).as_posix()
                     for path in (root / "tests").rglob("test_*.py")
                     if "mark.slow" in path.read_text(encoding="utf-8"))


def slow_first(workqueue: dict[str, dict[str, bool]],
               slow: AbstractSet[str]) -> OrderedDict[str, dict[str, bool]]:
    """xdist's work queue (scope -> its tests) with the slow scopes first, each part in the
    order it had."""
    order = sorted(workqueue, key=lambda scope: scope not in slow)
    return OrderedDict((scope, workqueue[scope]) for scope in order)


class RanxUsersTogether(LoadFileScheduling):
    """``--dist loadfile`` with the ranx users as one file, the slow files first."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.ranx_files = ranx_files(config.rootpath)
        slow = slow_files(config.rootpath)
        self.slow_scopes = slow | ({RANX_SCOPE} if slow & self.ranx_files else set())
        self._slow_first = False

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return RANX_SCOPE if path in self.ranx_files else path

    def _assign_work_unit(self, node) -> None:
        if not self._slow_first:  # the queue is complete before the first file is handed out
            self._slow_first = True
            self.workqueue = slow_first(self.workqueue, self.slow_scopes)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """The scheduler for ``--dist loadfile`` (scripts/test.sh's); other modes as xdist has them."""
    if config.getoption("dist") != "loadfile":
        return None
    return RanxUsersTogether(config, log)
