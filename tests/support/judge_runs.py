"""What the judge-run tests share: the two LLM judges they configure and a small BEIR dataset
ingested under a fresh name."""

from __future__ import annotations

import uuid
from pathlib import Path

from colliding_processes import beir
from eval_harness.datasets.ingest import ingest_beir

LLM = {"judge1": "openai:gpt-4o", "judge2": "anthropic:claude-haiku-4-5"}


def small_dataset(conn, root: Path, prefix: str, *, queries: int, n_docs: int = 30,
                  tag: str | None = None) -> str:
    """A BEIR folder of ``n_docs`` documents and ``queries`` queries ingested as
    ``<prefix>_<tag>`` (a random tag unless given: the tag is part of every text, so a fixed
    one makes a fake judge's seeded noise the same from run to run); returns the name."""
    tag = tag or uuid.uuid4().hex[:8]
    name = f"{prefix}_{tag}"
    ingest_beir(conn, beir(root / name, n_docs=n_docs, n_queries=queries, tag=tag), name=name)
    return name
