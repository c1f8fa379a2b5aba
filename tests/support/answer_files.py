"""Answers files for the quality gates: the bundled sample, and JSONL files a test writes."""

from __future__ import annotations

import json
from pathlib import Path

from paths import REPO

SAMPLE = REPO / "datasets" / "answers" / "sample_answers.jsonl"
SOURCES = [{"id": "d1", "text": "first source"}, {"id": "d2", "text": "second source"}]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n"
                            for row in rows), encoding="utf-8")
    return path


def answer_row(answer_id, text, created_at, *, sources=SOURCES, query="What does it show?"):
    row = {"id": answer_id, "query": query, "answer": text, "sources": sources}
    if created_at is not None:
        row["created_at"] = created_at
    return row
