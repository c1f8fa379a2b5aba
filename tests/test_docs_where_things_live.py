"""The architecture page's "Where things live" table (docs/architecture.md) names files that exist:
a newcomer who looks up the reply cache, the calibration decision, the citation gate, the
keyword index or the drift check by its name in the table finds the file it names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a newcomer looks for first (issue-independent: the places the harness's decisions and
# caches live), each a row of the table.
MUST_BE_LISTED = ("reply cache", "calibration decision", "citation gate", "keyword index",
                  "drift check")


def _rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where things live", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].startswith("`"):
            rows[cells[0].lower()] = re.findall(r"`([^`]+)`", cells[1])
    return rows


def test_the_table_lists_the_places_a_newcomer_looks_for():
    rows = _rows()
    missing = [thing for thing in MUST_BE_LISTED if not any(thing in name for name in rows)]
    assert not missing, f"docs/architecture.md 'Where things live' lacks a row for {missing}"


def test_every_file_the_table_names_exists():
    named = [path for paths in _rows().values() for path in paths]
    assert named, "docs/architecture.md 'Where things live' names no file"
    absent = [path for path in named if not (ROOT / path).exists()]
    assert not absent, ("docs/architecture.md 'Where things live' names files that do not "
                        f"exist: {absent}")
