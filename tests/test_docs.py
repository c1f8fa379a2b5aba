"""The manual cannot rot: the README stays a front page, every page of docs/ is in the site's
navigation, the architecture page names the owner of every table, and the generated reference
pages (every configuration key, every command and option) are what scripts/docs_reference.py
makes from the code today."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
def test_the_architecture_page_names_the_owner_of_every_table_the_migrations_create():
    created = set()
    for migration in (REPO / "eval_harness" / "store" / "migrations").glob("*.sql"):
        created |= {name.rsplit(".", 1)[-1].strip('"') for name in re.findall(
            r"CREATE TABLE (?:IF NOT EXISTS )?([\w.\"]+)", migration.read_text(encoding="utf-8"),
            re.I)}
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = page.split("## Each table has one owner", 1)[1].split("\n## ", 1)[0]
    owners = {}
    for row in table.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].startswith("`"):
            owner = cells[1].strip("`")
            assert (REPO / "eval_harness" / owner).is_file(), owner
            owners |= {name: owner for name in re.findall(r"`(\w+)`", cells[0])}
    assert sorted(created - owners.keys()) == []


def test_the_reference_pages_are_rebuilt_from_the_code(tmp_path):
    subprocess.run([sys.executable, "scripts/docs_reference.py", "--out", str(tmp_path)],
                   cwd=REPO, check=True, capture_output=True, text=True)
    for name in ("configuration.md", "cli.md"):
        committed = (DOCS / "reference" / name).read_text(encoding="utf-8")
        assert (tmp_path / name).read_text(encoding="utf-8") == committed, (
            f"docs/reference/{name} is out of date with the code: run `{REBUILD}` and commit it")
