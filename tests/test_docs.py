"""The manual cannot rot: the README stays a front page, every page of docs/ is in the site's
navigation, the generated reference pages (every configuration key, every command and option,
every table and its owner) are what scripts/docs_reference.py makes from the code today, every
block a page marks as a walkthrough is run by the test it names, and the site builds with
``mkdocs build --strict`` (a broken link, anchor or API reference fails it) into a search index
that finds what people search for."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from table_owners import TABLE_OWNERS
from walkthroughs import marked_blocks, markers

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
REBUILD = ".venv/bin/python scripts/docs_reference.py"


def nav_pages(entries: list) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


@pytest.mark.unit
def test_the_readme_is_a_front_page_with_the_two_commands():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme.count("\n") <= 250
    assert ("./scripts/run.sh     # set up .venv (first time) and run the main job on the bundled "
            "SciFact data\n./scripts/test.sh    # set up .venv with test extras, lint and "
            "type-check, run the test suite\n") in readme
    assert "mkdocs serve" in readme and '".[docs]"' in readme
    # every attribution of the bundled data is kept
    assert "SciFact (claims CC BY 4.0, abstracts ODC-By 1.0)" in readme


@pytest.mark.unit
def test_every_page_is_in_the_navigation_and_the_manual_names_no_issue():
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    listed = nav_pages(config["nav"])
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(listed) == pages
    assert len(pages) >= 12
    numbered = [f"{page}: {line.strip()}" for page in pages
                for line in (DOCS / page).read_text(encoding="utf-8").splitlines()
                if re.search(r"\b(issues?|stor(y|ies)) #?\d", line, re.I)]
    assert not numbered, "the manual says what is true now, not which issue changed it"


@pytest.mark.unit
def test_the_tables_page_names_every_table_and_the_owner_the_layer_check_enforces():
    created = set()
    for migration in (REPO / "eval_harness" / "store" / "migrations").glob("*.sql"):
        created |= {name.rsplit(".", 1)[-1].strip('"') for name in re.findall(
            r"CREATE TABLE (?:IF NOT EXISTS )?([\w.\"]+)", migration.read_text(encoding="utf-8"),
            re.I)}
    page = (DOCS / "reference" / "tables.md").read_text(encoding="utf-8")
    owners = {}
    for row in page.splitlines():
        cells = [cell.strip().strip("`") for cell in row.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].endswith(".sql"):
            owners[cells[0]] = cells[2]
    assert sorted(owners) == sorted(created)
    assert owners == TABLE_OWNERS
    assert "reference/tables.md" in (DOCS / "architecture.md").read_text(encoding="utf-8")


@pytest.mark.unit
def test_every_walkthrough_block_is_run_by_the_test_it_names():
    marked = 0
    problems = []
    for page in sorted(DOCS.rglob("*.md")):
        name = page.relative_to(DOCS).as_posix()
        blocks = marked_blocks(page)
        if len(blocks) != len(markers(page)):
            problems.append(f"docs/{name}: a walkthrough marker with no fenced block after it")
        for test, language, _ in blocks:
            marked += 1
            path = REPO / test
            if not (test.startswith("tests/") and path.is_file()):
                problems.append(f"docs/{name}: marks a {language} block for {test}, no such test")
                continue
            source = path.read_text(encoding="utf-8")
            if not ("walkthrough_block(" in source and f'"{name}"' in source):
                problems.append(f"docs/{name}: {test} does not read its blocks with "
                                f'walkthrough_block("{name}", ...)')
    assert not problems, "\n".join(problems)
    assert marked >= 2  # the own-store walkthrough: its config.yaml and its commands


def test_the_reference_pages_are_rebuilt_from_the_code(tmp_path):
    subprocess.run([sys.executable, "scripts/docs_reference.py", "--out", str(tmp_path)],
                   cwd=REPO, check=True, capture_output=True, text=True)
    for name in ("configuration.md", "cli.md", "tables.md"):
        committed = (DOCS / "reference" / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == committed, (
            f"docs/reference/{name} is out of date with the code: run `{REBUILD}` and commit it")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: install the docs extra "
                                         "(pip install -c requirements.lock -e '.[docs]')")
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                            str(folder)], cwd=REPO, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-4000:]
    return folder


@pytest.mark.slow
def test_the_site_builds_strict_with_the_api_reference(site):
    assert (site / "index.html").is_file()
    api = (site / "reference" / "python-api.html").read_text(encoding="utf-8")
    assert "load_settings" in api  # mkdocstrings rendered eval_harness.settings
    page = (site / "reference" / "configuration.html").read_text(encoding="utf-8")
    assert "hybrid_search.candidate_depth" in page


@pytest.mark.slow
@pytest.mark.parametrize("term", ["kappa", "tsvector", "budget"])
def test_the_search_index_finds(site, term):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    found = [doc["location"] for doc in index["docs"]
             if re.search(rf"\b{term}\b", f"{doc['title']} {doc['text']}", re.I)]
    assert found, f"the search index finds no page for {term!r}"
