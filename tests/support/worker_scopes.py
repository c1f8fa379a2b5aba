"""Which test files share a worker (pytest-xdist): each file in one process, as
``--dist loadfile`` does, except that the files using ranx all go to the same one.

ranx is the tests' reference for the ranking metrics; its numba kernels take tens of seconds
to compile or load in each process that first evaluates with them, so one process pays it
rather than every worker. A file uses ranx when it imports it, at any depth.
"""

from __future__ import annotations

import ast
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


class RanxUsersTogether(LoadFileScheduling):
    """``--dist loadfile`` with the ranx users as one file."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self.ranx_files = ranx_files(config.rootpath)

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return RANX_SCOPE if path in self.ranx_files else path


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """The scheduler for ``--dist loadfile`` (scripts/test.sh's); other modes as xdist has them."""
    if config.getoption("dist") != "loadfile":
        return None
    return RanxUsersTogether(config, log)
