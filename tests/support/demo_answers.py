"""The demo store's answers as the shipped config maps them (``rag.answers``, citing
``rag.l2_insights`` ids), over a small BEIR folder of the SciFact abstracts the bundled
sample cites (verbatim), so the layout takes a second rather than the full SciFact's."""

from __future__ import annotations

import json
from pathlib import Path

from answer_files import SAMPLE
from beir_factory import write_beir
from eval_harness.datasets.demo_store import build_rag_answers, build_rag_store
from paths import REPO


def demo_answers_store(location, tmp_path: Path) -> dict:
    """Lay out ``rag.l2_insights`` and ``rag.answers`` (the 30 sample answers) in
    ``location``: {"store", "rows" (the sample's lines), "docs", "folder" (the BEIR folder)}."""
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    cited = {str(s["id"]) for row in rows for s in row["sources"]}
    docs = {}
    with open(REPO / "datasets" / "scifact" / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            if doc["_id"] in cited or len(docs) < 5:  # a few uncited ones first: ids shift
                docs[doc["_id"]] = doc["text"]
    folder = write_beir(tmp_path / "mini", docs, {"q1": "apoptosis"},
                        [("q1", next(iter(docs)), 1)], dim=8)
    with location.connection() as conn:
        build_rag_store(conn, folder, schema="rag", tsvector="tsv")
        assert build_rag_answers(conn, SAMPLE, schema="rag") == 30
    return {"store": location, "rows": rows, "docs": docs, "folder": folder}
