"""The shape of the test suite and of the code it tests.

Shared test helpers live in tests/support/ (on pytest's pythonpath, see pyproject.toml) and
shared fixtures in the root conftest or a support module it loads as a plugin: no test file
imports another test file or a conftest. No module of the harness, its Dagster folders or
the test helpers grows past 450 lines (the test files themselves follow in a later round).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"
MAX_LINES = 450
SIZED_FOLDERS = ("eval_harness", "pipelines", "assets", "tests/support")


def imports(source: str) -> list[tuple[int, list[str]]]:
    """(line, module names) of every ``import`` and ``from ... import`` statement, at any
    depth (also inside functions and conditionals). ``from a.b import c`` names ``a.b`` and
    ``a.b.c``, since ``c`` may be a module; relative imports count by their names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.append((node.lineno, [alias.name for alias in node.names]))
        elif isinstance(node, ast.ImportFrom):
            prefix = f"{node.module}." if node.module else ""
            found.append((node.lineno, [node.module] * bool(node.module)
                          + [f"{prefix}{alias.name}" for alias in node.names]))
    return sorted(found)


def is_test_or_conftest(module: str) -> bool:
    return any(part.startswith("test_") or part == "conftest" for part in module.split("."))


def imports_of_test_files(folder: Path) -> list[str]:
    """``path:line: module`` for every statement under ``folder`` that imports a test_*
    module or a conftest."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for line, modules in imports(path.read_text(encoding="utf-8")):
            named = [m for m in modules if is_test_or_conftest(m)]
            if named:
                found.append(f"{path.relative_to(folder)}:{line}: {named[0]}")
    return found


def helpers_outside_support(folder: Path) -> list[str]:
    """Python files under ``folder`` that are neither test files nor conftests nor in
    ``folder``/support."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*.py")
                  if not path.name.startswith("test_") and path.name != "conftest.py"
                  and (folder / "support") not in path.parents
                  and "__pycache__" not in path.parts)


def modules_over(limit: int, root: Path, folders) -> list[str]:
    """``path: lines`` of every .py file under ``folders`` (paths relative to ``root``) with
    more than ``limit`` lines."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append(f"{path.relative_to(root)}: {lines}")
    return found


def test_no_test_file_imports_another_test_file_or_a_conftest():
    assert imports_of_test_files(TESTS) == [], (
        "move what is shared into tests/support/ (fixtures: a plugin of the root conftest)")


def test_helper_modules_live_only_in_tests_support():
    assert helpers_outside_support(TESTS) == []


def test_no_module_is_over_450_lines():
    assert modules_over(MAX_LINES, ROOT, SIZED_FOLDERS) == [], "split it by what it does"


# ------------------------------------------------------------------------- the checks fail


@pytest.mark.parametrize("statement", [
    "import test_live_dataset",
    "from test_live_dataset import WORDS",
    "from conftest import scratch_database",
    "import conftest as root",
    "def helper():\n    from test_agreement_store import db\n",
    "if True:\n    import tests.test_judge_dual\n",
    "from tests import test_judge_dual\n",
    "from .test_judge_dual import DOCS\n",
])
def test_an_import_of_a_test_file_is_caught(tmp_path, statement):
    (tmp_path / "test_planted.py").write_text(f"import os\n{statement}\n", encoding="utf-8")
    assert len(imports_of_test_files(tmp_path)) == 1


def test_imports_of_helpers_and_the_harness_pass(tmp_path):
    (tmp_path / "test_fine.py").write_text(
        "import pytest\nfrom beir_factory import write_beir\nfrom . import sibling\n"
        "from eval_harness.store.testing import x\nimport contest_rules\n", encoding="utf-8")
    assert imports_of_test_files(tmp_path) == []


def test_a_helper_outside_support_is_caught(tmp_path):
    (tmp_path / "support").mkdir()
    for name in ("conftest.py", "test_a.py", "support/helper.py", "stray_helper.py"):
        (tmp_path / name).write_text("", encoding="utf-8")
    assert helpers_outside_support(tmp_path) == ["stray_helper.py"]


def test_a_long_module_is_caught(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert modules_over(MAX_LINES, tmp_path, ["pkg"]) == [f"pkg/long.py: {MAX_LINES + 1}"]
