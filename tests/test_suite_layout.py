"""The shape of the test suite and of the code it tests.

Shared test helpers live in tests/support/ (on pytest's pythonpath, see pyproject.toml) and
shared fixtures in the root conftest or a support module it loads as a plugin: no test file
imports another test file or a conftest. The tests mirror the code: a test of
``eval_harness/<pkg>/[<sub>/]<module>.py`` is ``tests/<pkg>/[<sub>/]test_<module>[_<aspect>].py``,
of ``pipelines/``, ``assets/`` and ``tools/`` the same under ``tests/pipelines/`` and so on, of a
top-level module (``eval_harness/progress.py``) ``tests/test_progress.py``; only the
project-wide checks sit at the top besides. There is no line cap: a module is as long as its
one job (a cap split cohesive modules into cycles).
"""

from __future__ import annotations

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"
# The project-wide checks: the only test files at tests/ that test no module of the harness.
PROJECT_CHECKS = ("test_layers.py", "test_suite_layout.py", "test_docs*.py",
                  "test_wheel_contents.py", "test_ci_workflow*.py", "test_scripts.py")
# tests/<first folder>/... mirrors <code folder>/...; any other first folder is eval_harness's.
CODE_FOLDERS = {"pipelines": "pipelines", "assets": "assets", "tools": "tools"}
# A package its tests name by a shorter word: tools/ui_check -> tests/tools/test_ui_<aspect>.py.
SHORT_NAMES = {"tools/ui_check": "ui"}


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


def module_names(package: Path, root: Path) -> set[str]:
    """The names a test file under the mirror of ``package`` may start with (after ``test_``):
    its modules and its subpackages (and their short names), never ``__init__``/``__main__``,
    and the package's own name for tests of the package as a whole (its ``__init__``, or
    every module at once: tests/metrics/test_metrics_doctests.py)."""
    names = {path.stem for path in package.glob("*.py") if not path.stem.startswith("__")}
    names.add(package.name)
    for sub in package.iterdir():
        if (sub / "__init__.py").is_file():
            names.add(sub.name)
            short = SHORT_NAMES.get(sub.relative_to(root).as_posix())
            if short:
                names.add(short)
    return names


def misplaced_test_files(root: Path) -> list[str]:
    """``path: why`` for every ``tests/**/test_*.py`` (tests/support aside) that is neither a
    project-wide check at the top nor in the mirror of an existing package with the name of one
    of its modules: ``test_<module>.py`` or ``test_<module>_<aspect>.py``."""
    tests, found = root / "tests", []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests).parts
        if folder[:1] == ("support",):
            continue
        shown = path.relative_to(root).as_posix()
        if not folder:
            if any(fnmatch(path.name, check) for check in PROJECT_CHECKS):
                continue
            package = root / "eval_harness"
            names = {name for name in module_names(package, root)
                     if (package / f"{name}.py").is_file()}  # packages have their folder
        else:
            package = root / CODE_FOLDERS.get(folder[0], f"eval_harness/{folder[0]}")
            package = package.joinpath(*folder[1:])
            if not (package / "__init__.py").is_file():
                found.append(f"{shown}: no package {package.relative_to(root).as_posix()}/ "
                             "to mirror")
                continue
            names = module_names(package, root)
        stem = path.stem.removeprefix("test_")
        if not any(stem == name or stem.startswith(f"{name}_") for name in names):
            found.append(f"{shown}: names no module of "
                         f"{package.relative_to(root).as_posix()}/ (test_<module>[_<aspect>])")
    return found


def test_no_test_file_imports_another_test_file_or_a_conftest():
    assert imports_of_test_files(TESTS) == [], (
        "move what is shared into tests/support/ (fixtures: a plugin of the root conftest)")


@pytest.mark.unit
def test_helper_modules_live_only_in_tests_support():
    assert helpers_outside_support(TESTS) == []


@pytest.mark.unit
def test_every_test_file_mirrors_the_module_it_tests():
    assert misplaced_test_files(ROOT) == [], (
        "eval_harness/<pkg>/[<sub>/]<module>.py: tests/<pkg>/[<sub>/]test_<module>[_<aspect>].py")


# ------------------------------------------------------------------------- the checks fail


@pytest.mark.unit
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


@pytest.mark.unit
def test_imports_of_helpers_and_the_harness_pass(tmp_path):
    (tmp_path / "test_fine.py").write_text(
        "import pytest\nfrom beir_factory import write_beir\nfrom . import sibling\n"
        "from eval_harness.store.testing import x\nimport contest_rules\n", encoding="utf-8")
    assert imports_of_test_files(tmp_path) == []


@pytest.mark.unit
def test_a_helper_outside_support_is_caught(tmp_path):
    (tmp_path / "support").mkdir()
    for name in ("conftest.py", "test_a.py", "support/helper.py", "stray_helper.py"):
        (tmp_path / name).write_text("", encoding="utf-8")
    assert helpers_outside_support(tmp_path) == ["stray_helper.py"]


@pytest.mark.unit
def test_a_test_file_outside_the_mirror_is_caught(tmp_path):
    for name in ("eval_harness/__init__.py", "eval_harness/progress.py",
                 "eval_harness/store/__init__.py", "eval_harness/store/ingest.py",
                 "eval_harness/judges/__init__.py", "eval_harness/judges/client/__init__.py",
                 "eval_harness/judges/client/providers/__init__.py", "pipelines/__init__.py",
                 "pipelines/run.py", "tools/__init__.py", "tools/ui_check/__init__.py",
                 "tests/test_progress.py", "tests/test_progress_terminal.py",
                 "tests/test_layers.py", "tests/test_docs_own_store.py",
                 "tests/store/test_ingest.py", "tests/store/test_ingest_faults.py",
                 "tests/judges/client/test_providers_registry.py", "tests/pipelines/test_run.py",
                 "tests/tools/test_ui_browser.py", "tests/support/test_like_helper.py",
                 "tests/test_store.py", "tests/test_judges.py", "tests/store/test_ingestion.py",
                 "tests/store/test_beir.py", "tests/retrieval/test_hybrid.py",
                 "tests/judges/test_client.py", "tests/judges/client/test_store.py",
                 "eval_harness/metrics/__init__.py", "tests/metrics/test_metrics_doctests.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    assert misplaced_test_files(tmp_path) == [
        "tests/judges/client/test_store.py: names no module of eval_harness/judges/client/ "
        "(test_<module>[_<aspect>])",
        "tests/retrieval/test_hybrid.py: no package eval_harness/retrieval/ to mirror",
        "tests/store/test_beir.py: names no module of eval_harness/store/ "
        "(test_<module>[_<aspect>])",
        "tests/store/test_ingestion.py: names no module of eval_harness/store/ "
        "(test_<module>[_<aspect>])",
        "tests/test_judges.py: names no module of eval_harness/ (test_<module>[_<aspect>])",
        "tests/test_store.py: names no module of eval_harness/ (test_<module>[_<aspect>])",
    ]



@pytest.mark.unit
def test_the_slow_files_are_handed_out_first():
    from worker_scopes import RANX_SCOPE, slow_files, slow_first

    assert "tests/judges/client/test_quota_processes.py" in slow_files(ROOT)
    assert "tests/test_suite_layout.py" not in slow_files(ROOT)
    queue = {scope: {} for scope in  # xdist's order: most tests first
             ["tests/a/test_many.py", RANX_SCOPE, "tests/c/test_few.py", "tests/b/test_slow.py"]}
    assert list(slow_first(queue, {"tests/b/test_slow.py", RANX_SCOPE})) == [
        RANX_SCOPE, "tests/b/test_slow.py", "tests/a/test_many.py", "tests/c/test_few.py"]
