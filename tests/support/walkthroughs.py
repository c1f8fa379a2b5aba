"""The command and config blocks of the manual that a test runs as written.

A page marks such a block with ``<!-- walkthrough: tests/FILE.py -->`` on the line before its
fence; :func:`walkthrough_block` gives a test the marked block (its list-item indent removed),
and fails when the page no longer marks one for it, so a test cannot quietly go on running a
copy of a block the page changed. ``tests/test_docs.py`` checks that every marker names a test
file that exists and reads its page through this module."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
MARKED = re.compile(r"^[ \t]*<!-- walkthrough: (?P<test>\S+) -->\n"
                    r"(?P<indent>[ \t]*)```(?P<language>\w*)\n(?P<body>.*?)\n(?P=indent)```",
                    re.M | re.S)


def marked_blocks(page: Path) -> list[tuple[str, str, str]]:
    """``(test file, language, text)`` of every block the page marks, in page order."""
    text = page.read_text(encoding="utf-8")
    return [(match["test"], match["language"], textwrap.dedent(match["body"]))
            for match in MARKED.finditer(text)]


def markers(page: Path) -> list[str]:
    """Every marker line of the page (a line of its own, not one quoted in the text), whether
    or not a fenced block follows it."""
    return re.findall(r"^[ \t]*<!-- walkthrough: (\S+) -->", page.read_text(encoding="utf-8"),
                      re.M)


def walkthrough_block(page: str, test: str, language: str) -> str:
    """The one block in ``language`` that ``docs/<page>`` marks as run by ``test`` (a path
    from the checkout, ``tests/....py``)."""
    found = [body for marked_test, marked_language, body in marked_blocks(DOCS / page)
             if marked_test == test and marked_language == language]
    assert len(found) == 1, (f"docs/{page} marks {len(found)} {language} blocks as run by "
                             f"{test} (expected one `<!-- walkthrough: {test} -->` line before "
                             "the block's fence)")
    return found[0]
