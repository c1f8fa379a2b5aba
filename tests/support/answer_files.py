"""Answers files for the quality gates: the bundled sample, and JSONL files a test writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from paths import REPO

SAMPLE = REPO / "datasets" / "answers" / "sample_answers.jsonl"
SOURCES = [{"id": "d1", "text": "first source"}, {"id": "d2", "text": "second source"}]


def element_line(text: str, number: int) -> int:
    """The line on which element ``number`` (from 1) of the JSON array ``text`` starts, found
    with the standard decoder: what an importer names a record of a JSON document by."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    for _ in range(number):
        while text[pos] in " \t\r\n,":
            pos += 1
        start = pos
        _, pos = decoder.raw_decode(text, start)
    return text.count("\n", 0, start) + 1


def stored_answers(location) -> int:
    """How many answers the harness's ``answers`` table of ``location`` holds."""
    with location.connection() as conn:
        return conn.execute("SELECT count(*) FROM answers").fetchone()[0]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n"
                            for row in rows), encoding="utf-8")
    return path


def answer_row(answer_id, text, created_at, *, sources=SOURCES, query="What does it show?"):
    row = {"id": answer_id, "query": query, "answer": text, "sources": sources}
    if created_at is not None:
        row["created_at"] = created_at
    return row


def harness_answers_config_text() -> str:
    """The shipped config.yaml with the gates reading the harness's own ``answers`` table
    (``answers_relation``) and the sample as ``answers_file``, instead of the demo store's
    ``rag.answers`` the shipped config maps in place: the test store has no demo store.
    Relative paths stay relative (to the repository)."""
    text = (REPO / "config.yaml").read_text(encoding="utf-8")
    text, mapped = re.subn(r"(?m)^  answers:\n(?:    .*\n)+", "  answers_relation: answers\n",
                           text)
    text, filed = re.subn(r"(?m)^  answers_file: null ", "  answers_file: "
                          "datasets/answers/sample_answers.jsonl ", text)
    assert (mapped, filed) == (1, 1), "config.yaml's quality_gates section changed"
    return text


def harness_answers_config(folder: Path) -> Path:
    """:func:`harness_answers_config_text` written to ``folder/config.yaml``, its dataset paths
    absolute (the other relative paths, Dagster home and history, land in ``folder``)."""
    path = folder / "config.yaml"
    path.write_text(harness_answers_config_text().replace("datasets/", f"{REPO}/datasets/"),
                    encoding="utf-8")
    return path
