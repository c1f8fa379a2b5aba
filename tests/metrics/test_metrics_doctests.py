"""The metrics' doctests: every public metric and estimator shows a hand-worked example that
runs, and ``eval_harness.metrics`` stays the bottom layer (it imports nothing of the harness).

Modules are found by walking the package, so a new module is covered without listing it here,
and a new public function without an ``Examples`` doctest fails
:func:`test_every_public_function_has_an_example`.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import eval_harness.metrics as metrics

pytestmark = pytest.mark.unit

MODULE_NAMES = sorted([metrics.__name__] + [
    info.name for info in pkgutil.walk_packages(metrics.__path__, metrics.__name__ + ".")])


def _public_functions(module: ModuleType) -> list:
    """Functions whose name has no leading underscore and that the module itself defines; in
    a subpackage whose ``__init__`` exports names (metrics/agreement/), only those it exports:
    the modules of such a package share their helpers, and its face is what callers use."""
    package = module.__name__.rpartition(".")[0]
    face = None
    if package != metrics.__name__ and not hasattr(module, "__path__"):
        exported = vars(importlib.import_module(package))
        face = {name for name, obj in exported.items() if inspect.isfunction(obj)}
    return [obj for name, obj in vars(module).items()
            if not name.startswith("_") and inspect.isfunction(obj)
            and obj.__module__ == module.__name__ and (face is None or name in face)]


def test_walk_finds_the_metric_modules():
    assert {"eval_harness.metrics.agreement.kappa", "eval_harness.metrics.calibration",
            "eval_harness.metrics.ppi", "eval_harness.metrics.proportions",
            "eval_harness.metrics.ranking"} <= set(MODULE_NAMES)


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_doctests_pass(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, verbose=False)  # failures are printed (captured output)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed"


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_every_public_function_has_an_example(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(recurse=False)
    missing = [function.__name__ for function in _public_functions(module)
               if not any(test.examples for test in finder.find(function, module=module))]
    assert missing == [], (f"{module_name}: public functions without a doctest example "
                           f"(add an 'Examples' section with a hand-worked value): {missing}")


@pytest.mark.parametrize("module_name", MODULE_NAMES)
def test_metrics_import_nothing_of_the_harness(module_name):
    """The lowest layer: only the standard library, numpy and scipy (also inside functions
    and ``TYPE_CHECKING`` blocks), and other modules of ``eval_harness.metrics``."""
    module = importlib.import_module(module_name)
    path = Path(module.__file__)
    package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
    imported = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported.append(importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                        package))
    harness = [name for name in imported
               if name.split(".")[0] in ("eval_harness", "eval_harness_pipelines")
               and not (name + ".").startswith(metrics.__name__ + ".")]
    assert harness == [], f"{path.name} imports {harness}; metrics must stay the bottom layer"
