"""The structure the code keeps: imports go only downward, every harness table has one owner
module, and pyproject.toml installs every package there is.

Read from the source (``ast``, ``tokenize``), nothing imported: a failure names the module and
line to change.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from table_owners import TABLE_OWNERS

ROOT = Path(__file__).resolve().parents[1]

# The folders scanned and the package each installs as (pyproject.toml's package-dir).
SOURCE_ROOTS = {"eval_harness": "eval_harness", "pipelines": "eval_harness_pipelines",
                "assets": "eval_harness_pipelines.assets"}

# Lowest first: a module may import from its own layer or a lower one only. A unit is a
# package of eval_harness (or one of its top-level modules), or eval_harness_pipelines
# (pipelines/ and assets/ together). Within a unit any order is allowed.
LAYERS = (
    ("eval_harness", "metrics", "errors", "files", "progress", "stopping", "escaping"),
    ("settings",),
    ("store",),
    ("datasets",),
    ("retrieval",),
    ("judges",),
    ("agreement",),
    ("calibration",),
    ("gates",),
    ("query_sources",),
    ("comparison",),
    ("reporting",),
    ("cli",),
    ("eval_harness_pipelines",),
)
LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}

# datasets/demo_store.py lays out a *user's* demo store (the seeds' tables, in another schema);
# migrations create the tables. Neither is a reader or writer of the harness's tables.
OWNER_EXEMPT = ("eval_harness/datasets/demo_store.py", "eval_harness/store/migrations/")

# SQL that names a table: the keyword (upper case, as all our SQL is written), then the table,
# bare or behind a schema (a name or a placeholder such as {s} or {schema}).
NAMES_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|DELETE FROM)\s+"
                         r"(?:(?:\{\w*\}|\w+)\.)?(" + "|".join(TABLE_OWNERS) + r")\b")


def _modules():
    """(path relative to the repository, dotted module name, is a package __init__)."""
    for folder, package in SOURCE_ROOTS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            is_init = parts[-1] == "__init__"
            if is_init:
                parts = parts[:-1]
            yield path, ".".join([package, *parts]), is_init


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] == "eval_harness_pipelines":
        folder = (Path("assets", *parts[2:]) if parts[1:2] == ["assets"]
                  else Path("pipelines", *parts[1:]))
    else:
        folder = Path(*parts)
    return (ROOT / folder).with_suffix(".py").is_file() or (ROOT / folder / "__init__.py").is_file()


def _unit(dotted: str) -> str:
    """The layer unit of a module: eval_harness_pipelines, or the first name under
    eval_harness (a package or a top-level module), or eval_harness for the root itself."""
    parts = dotted.split(".")
    if parts[0] == "eval_harness_pipelines":
        return "eval_harness_pipelines"
    return parts[1] if len(parts) > 1 else "eval_harness"


def _imports(path: Path, module: str, is_init: bool):
    """(line, imported module) for every import of the harness in the file, wherever it is
    (module level, inside a function, under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_init else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # ``from package import module`` imports the module, else a name of ``source``
            names = [f"{source}.{alias.name}" if _is_module(f"{source}.{alias.name}")
                     else source for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("eval_harness", "eval_harness_pipelines"):
                yield node.lineno, name


def _package_edges():
    """{(importing unit, imported unit): ["path:line imports module", ...]} between units."""
    edges = defaultdict(list)
    for path, module, is_init in _modules():
        for line, imported in _imports(path, module, is_init):
            here, there = _unit(module), _unit(imported)
            site = f"{path.relative_to(ROOT)}:{line} imports {imported}"
            if here != there and site not in edges[here, there]:
                edges[here, there].append(site)
    return edges


@pytest.mark.unit
def test_every_unit_has_a_layer():
    units = {_unit(module) for _, module, _ in _modules()}
    unknown = sorted(units - set(LAYER_OF))
    assert not unknown, (f"{unknown} is in no layer of tests/test_layers.py LAYERS: add it "
                         f"where it belongs (and to DESIGN.md's layer list).")


def test_imports_go_only_downward():
    upward = [f"{where} ({here}, layer {LAYER_OF[here]}) -> {there} (layer {LAYER_OF[there]})"
              for (here, there), sites in sorted(_package_edges().items())
              if here in LAYER_OF and there in LAYER_OF and LAYER_OF[there] > LAYER_OF[here]
              for where in sites]
    assert not upward, ("imports of a higher layer (a module may import its own layer or "
                        "lower ones only):\n" + "\n".join(upward))


def _cycles(edges) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan)."""
    graph = defaultdict(set)
    for here, there in edges:
        graph[here].add(there)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_packages():
    edges = _package_edges()
    problems = []
    for component in _cycles(edges):
        inside = {pair: sites for pair, sites in sorted(edges.items())
                  if pair[0] in component and pair[1] in component}
        # the imports against the layer order close the cycle: name those (all when none is)
        upward = {(here, there): sites for (here, there), sites in inside.items()
                  if LAYER_OF.get(there, -1) > LAYER_OF.get(here, -1)}
        problems.append(f"cycle between {', '.join(component)}, closed by:")
        problems += [f"  {where}" for sites in (upward or inside).values() for where in sites]
    assert not problems, "\n".join(problems)


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.add(first.lineno)
    return lines


def _table_mentions(path: Path):
    """(line, table) for every string literal of the file (docstrings aside) whose SQL names
    a harness table."""
    text = path.read_text(encoding="utf-8")
    docstrings = _docstring_lines(ast.parse(text))
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.STRING or token.start[0] in docstrings:
            continue
        for match in NAMES_TABLE.finditer(token.string):
            yield token.start[0] + token.string.count("\n", 0, match.start()), match.group(1)


def test_each_table_is_named_only_by_its_owner():
    misplaced = []
    for path, _, _ in _modules():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(OWNER_EXEMPT):
            continue
        for line, table in _table_mentions(path):
            if relative != TABLE_OWNERS[table]:
                misplaced.append(f"{relative}:{line} names {table} "
                                 f"(its owner is {TABLE_OWNERS[table]})")
    assert not misplaced, ("SQL naming a harness table outside the table's owner module "
                           "(move the statement into a function there):\n"
                           + "\n".join(misplaced))


@pytest.mark.unit
def test_the_owner_check_sees_sql_and_not_prose():
    mentions = {table for statement in (
        "SELECT count(*) FROM ground_truth WHERE dataset = %s",
        "DELETE FROM judge_review r USING ground_truth g",
        "INSERT INTO {s}.api_cost_log (model) VALUES (%s)",
        "UPDATE eval_harness.calibrated_weights SET verdict = NULL",
        "SELECT 1 FROM datasets d JOIN l2_insights i ON i.dataset = d.name")
        for table in NAMES_TABLE.findall(statement)}
    assert mentions == {"ground_truth", "judge_review", "api_cost_log", "calibrated_weights",
                        "datasets", "l2_insights"}
    assert not NAMES_TABLE.findall("the scores are read from ground_truth by the judges")
    assert not NAMES_TABLE.findall("SELECT 1 FROM ground_truths_of_another_kind")


@pytest.mark.unit
def test_pyproject_lists_every_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    options = config["tool"]["setuptools"]
    listed = set(options["packages"])
    folders = options.get("package-dir", {})
    on_disk = set()
    for folder, package in SOURCE_ROOTS.items():
        assert folder == package or folders.get(package) == folder, (
            f"pyproject.toml: package-dir must map {package} to {folder}/")
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            on_disk.add(".".join([package, *parts]))
    assert listed == on_disk, (
        "pyproject.toml [tool.setuptools] packages differs from the packages on disk: "
        f"missing {sorted(on_disk - listed)}, listed without a folder {sorted(listed - on_disk)}")



def _module_edges():
    """{(importing module, imported module): ["path:line", ...]} for every harness import.

    ``from package import name`` imports the package (its ``__init__``) unless ``name`` is a
    module of it; a module's imports of itself are left out."""
    edges = defaultdict(list)
    for path, module, is_init in _modules():
        for line, imported in _imports(path, module, is_init):
            while imported and not _is_module(imported):
                imported = imported.rpartition(".")[0]
            site = f"{path.relative_to(ROOT)}:{line}"
            if imported and imported != module and site not in edges[module, imported]:
                edges[module, imported].append(site)
    return edges


def test_no_import_cycle_between_modules():
    edges = _module_edges()
    problems = []
    for component in _cycles(edges):
        problems.append(f"cycle between the modules {', '.join(component)}:")
        problems += [f"  {where} imports {there}"
                     for (here, there), sites in sorted(edges.items())
                     if here in component and there in component for where in sites]
    assert not problems, ("two modules import each other (merge them, or move what both "
                          "need into one owner below them):\n" + "\n".join(problems))


def _private_uses(path: Path, module: str, is_init: bool):
    """(line, "module._name") for every private name of another harness module the file
    takes: ``from m import _name`` or ``m._name`` on an imported module ``m``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases = {}  # local name -> harness module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = module.split(".") if is_init else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            if source.split(".")[0] not in ("eval_harness", "eval_harness_pipelines"):
                continue
            for alias in node.names:
                if _is_module(f"{source}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif alias.name.startswith("_") and source != module:
                    yield node.lineno, f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name.split(".")[0] in ("eval_harness",
                                                                  "eval_harness_pipelines"):
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            yield node.lineno, f"{aliases[node.value.id]}.{node.attr}"


def test_no_module_takes_another_modules_private_names():
    taken = [f"{path.relative_to(ROOT)}:{line} takes {name}"
             for path, module, is_init in _modules()
             for line, name in _private_uses(path, module, is_init)]
    assert not taken, ("a module uses another module's private name (make it public in its "
                       "one owner, or merge the two):\n" + "\n".join(taken))


@pytest.mark.unit
def test_the_private_check_sees_both_forms(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("from eval_harness.settings.values import _hidden, mapping_of\n"
                      "from eval_harness.settings import values\n"
                      "values._other(mapping_of)\n"
                      "values.number_of(values.__name__)\n", encoding="utf-8")
    found = list(_private_uses(source, "eval_harness.example", False))
    assert found == [(1, "eval_harness.settings.values._hidden"),
                     (3, "eval_harness.settings.values._other")]


def test_re_exports_only_at_a_packages_face():
    shims = [f"{path.relative_to(ROOT)}:{number}"
             for path, _, is_init in _modules() if not is_init
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"noqa:\s*F401", line)]
    assert not shims, ("a module re-exports names it imports (import them from their owner; "
                       "a package's __init__ is the only public face):\n" + "\n".join(shims))
