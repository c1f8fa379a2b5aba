"""MkDocs hook: pages include a file of the repository outside docs/ by a marker line,
``<!-- include: benchmarks/RESULTS.md -->``, so the benchmark record stays one file that the
benchmark scripts append to and the manual shows as it is (its title dropped, its headings one
level down, under the page's own)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- include: (\S+) -->$", re.M)


def included(relative: str) -> str:
    """The file's Markdown without its first-level title, headings demoted by one level
    (fenced code left alone)."""
    lines = (ROOT / relative).read_text(encoding="utf-8").splitlines()
    out, fence = [], False
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("# "):
            continue
        if not fence and line.startswith("#"):
            line = "#" + line
        out.append(line)
    return "\n".join(out).strip("\n")


def on_page_markdown(markdown: str, **_: Any) -> str:
    return MARKER.sub(lambda m: included(m.group(1)), markdown)
