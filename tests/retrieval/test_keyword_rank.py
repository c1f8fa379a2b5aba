"""The keyword index is exact: the keyword top 50 the harness computes from its keyword
index equals, ids and float4 scores, ties included, the RAG system's own SQL
(``ORDER BY ts_rank(to_tsvector(language, content), q, 1) DESC, id``) on every query.

Documents: SciFact abstracts plus the hard cases (a document past 16,383 words, whose late
positions the tsvector folds together; a word repeated past tsvector's 256 positions;
identical documents, so tied scores; non-ASCII words, whose byte order decides the order
of accumulation; empty and NULL text; a matching document without an embedding, which is
no candidate). Queries: SciFact queries plus stop words only, no match, repeated words,
one word, non-ASCII words.

It needs no pgvector: the keyword index reads only whether the embedding is NULL, so the
relation's embedding is a ``real[]`` here, and the harness's keyword tables are made from
their migration alone. It runs on the test server (PostgreSQL 18) and, when
``EVAL_HARNESS_PG15_URL`` names one, on PostgreSQL 15.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from psycopg import sql

import second_server
from eval_harness.datasets import keyword_index
from eval_harness.datasets.corpus import Corpus
from eval_harness.retrieval.keyword_cost import or_tsquery_text
from eval_harness.retrieval.keyword_rank import LEXEME_TERMS, query_items, rank_query
from scratch_databases import scratch_database

ROOT = Path(__file__).resolve().parents[2]
SCIFACT = ROOT / "datasets" / "scifact"
# the keyword index's own tables (the server may have no pgvector for the full migrations)
MIGRATIONS = [ROOT / "eval_harness" / "store" / "migrations" / name
              for name in ("0021_keyword_index.sql", "0024_keyword_index_configuration.sql")]
DOCUMENTS = 700
QUERIES = 120
DEPTH = 50
BIG_ID = 2**40 + 1  # one of the identical documents: ids past int4 are kept as int8


def _texts() -> tuple[list[str | None], list[bool], list[str]]:
    docs, has_embedding = [], []
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as lines:
        for line, _ in zip(lines, range(DOCUMENTS)):
            row = json.loads(line)
            docs.append(f"{row['title']}\n{row['text']}")
            has_embedding.append(True)
    rng = np.random.default_rng(25)
    words = " ".join(d for d in docs[:40] if d).split()
    hard = [
        " ".join(rng.choice(words, size=16_500)) + " insulin",   # positions past 16383
        "protein " * 300 + "cell",                               # past 256 positions
        docs[3], docs[3], docs[3],                               # ties
        "naïve café über straße résumé façade ångström insulin",  # byte order
        "", None, "the and of which",                            # nothing to match
        "insulin protein cell",                                  # matches, but no embedding
    ]
    docs += hard
    has_embedding += [True] * (len(hard) - 1) + [False]
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as lines:
        queries = [json.loads(line)["text"] for line, _ in zip(lines, range(QUERIES))]
    queries += ["the of and which", "zzqxv wqrtz", "protein protein protein", "insulin",
                "über café straße résumé", "cell insulin naïve ångström façade"]
    return docs, has_embedding, queries


@pytest.fixture(scope="module", params=second_server.servers(needs_vector=False))
def keyword_store(request, server_url):
    """(connection, corpus, queries): the relation ``rag.docs`` and its keyword index."""
    url = second_server.url(request.param, server_url)
    docs, has_embedding, queries = _texts()
    with scratch_database(url, "eh_kwrank") as location, location.connection() as conn:
        conn.execute("CREATE SCHEMA eh_kw")
        conn.execute("SET search_path = eh_kw")
        for migration in MIGRATIONS:
            conn.execute(migration.read_text())
        conn.execute("CREATE SCHEMA rag")
        conn.execute("CREATE TABLE rag.docs (id bigint PRIMARY KEY, content text, "
                     "embedding real[])")
        with conn.cursor().copy("COPY rag.docs (id, content, embedding) FROM STDIN") as copy:
            for i, (text, embedded) in enumerate(zip(docs, has_embedding)):
                copy.write_row((BIG_ID if i == DOCUMENTS + 4 else 3 * i + 7, text,
                                [1.0, 0.0] if embedded else None))
        # the RAG system's tsvectors, parsed once: ranking them is ranking the expression
        # (to_tsvector is immutable; the last test checks a few queries both ways)
        conn.execute("CREATE TABLE rag.parsed AS SELECT id, embedding, "
                     "to_tsvector('english', content) AS tsv FROM rag.docs")
        conn.commit()
        corpus = Corpus.live("kw", "english", 2, {
            "schema": "rag", "relation": "docs", "id": "id", "content": "content",
            "embedding": "embedding", "tsvector": None, "typed": True})
        refresh = keyword_index.refresh_keyword_index(conn, corpus)
        assert refresh.rebuilt == "first build" and refresh.documents == len(docs)
        yield conn, corpus, queries


def _own_sql_top(conn, tsquery: str | None, *, parsed: bool = True) -> list[tuple[int, float]]:
    """The RAG system's keyword ranking, as its own SQL writes it (over the tsvectors parsed
    once, or parsing every document again: ``parsed=False``)."""
    if tsquery is None:
        return []
    tsv = sql.SQL("tsv" if parsed else "to_tsvector('english', content)")
    return conn.execute(sql.SQL(
        "SELECT id, ts_rank({tsv}, q, 1)::float8 FROM {rel}, (SELECT %s::tsquery AS q) x "
        "WHERE {tsv} @@ q AND embedding IS NOT NULL "
        "ORDER BY ts_rank({tsv}, q, 1) DESC, id LIMIT {depth}").format(
        tsv=tsv, rel=sql.SQL("rag.parsed" if parsed else "rag.docs"),
        depth=sql.Literal(DEPTH)), (tsquery,)).fetchall()


def _harness_top(conn, corpus: Corpus, text: str) -> list[tuple[int, float]]:
    source = keyword_index.current_source(conn, corpus)
    lexemes = conn.execute("SELECT tsvector_to_array(to_tsvector('english', %s))",
                           (text,)).fetchone()[0]
    items = query_items(lexemes)
    scores = rank_query(keyword_index.indexed_documents(conn, source), items,
                        keyword_index.postings(conn, source, items))
    top = scores.top(DEPTH)
    return list(zip(top.tolist(), scores.score_of(top).tolist()))


def test_the_keyword_top_50_is_the_rag_systems_own_on_every_query(keyword_store):
    conn, corpus, queries = keyword_store
    tied = long_matched = big_matched = 0
    for text in queries:
        expected = _own_sql_top(conn, or_tsquery_text(conn, "english", text))
        got = _harness_top(conn, corpus, text)
        assert got == expected, f"query {text!r}"
        scores = [s for _, s in expected]
        tied += len(scores) != len(set(scores))
        long_matched += any(i == 3 * DOCUMENTS + 7 for i, _ in expected)
        big_matched += any(i == BIG_ID for i, _ in expected)
    assert tied and long_matched and big_matched  # the hard cases took part


def test_a_document_without_an_embedding_is_no_candidate_and_empty_queries_match_nothing(
        keyword_store):
    conn, corpus, _ = keyword_store
    no_embedding = 3 * (DOCUMENTS + 9) + 7
    assert no_embedding not in [i for i, _ in _harness_top(conn, corpus, "insulin protein cell")]
    assert _harness_top(conn, corpus, "the of and which") == []
    assert _harness_top(conn, corpus, "zzqxv wqrtz") == []


@pytest.mark.unit
def test_the_per_lexeme_term_is_tsrank_s_for_one_and_two_positions():
    # tsrank.c calc_rank_or with w = 0.1f: one position: resj = 0.1f, inner = (0.1f + 0.1f)
    # - 0.1f = 0.1f in float32; two: resj = 0.1f + 0.025f (= 0.125f after rounding),
    # inner = (0.1f + 0.125f) - 0.1f; each divided by 1.64493406685 in double.
    one = np.float32(np.float32(np.float32(0.1) + np.float32(0.1)) - np.float32(0.1))
    resj = np.float32(np.float32(0.1) + np.float32(0.025))
    two = np.float32(np.float32(np.float32(0.1) + resj) - np.float32(0.1))
    assert LEXEME_TERMS[1] == float(one) / 1.64493406685
    assert LEXEME_TERMS[2] == float(two) / 1.64493406685
    assert LEXEME_TERMS[0] == 0.0


def test_ranking_the_expression_is_ranking_its_parsed_tsvectors(keyword_store):
    conn, corpus, queries = keyword_store
    for text in queries[:3] + queries[-2:]:
        tsquery = or_tsquery_text(conn, "english", text)
        assert _own_sql_top(conn, tsquery, parsed=False) == _own_sql_top(conn, tsquery)
