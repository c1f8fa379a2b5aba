"""A stand-in for a RAG system's own store: a BEIR folder laid out like the reference seeds.

The embedded default has no RAG system to evaluate, so it plays one: with
``store.demo_rag_schema: rag`` (embedded store only) the bundled SciFact is written once into
that schema in the seeds' layout, and the main job evaluates it as a *live* dataset, exactly
as it would a team's production tables::

    rag.l2_insights  (id integer PRIMARY KEY, content text, embedding vector(dim),
                      metadata jsonb, created_at[, tsv tsvector generated from content])
                     + HNSW (cosine) and GIN (on tsv, else on to_tsvector(language, content))
    rag.ground_truth (id serial PRIMARY KEY, query text, expected_docs integer[],
                      judge1_score float8[], judge2_score float8[], judge1_model varchar(100),
                      judge2_model varchar(100), kappa float8, created_at)   (story 1.11)
    rag.api_cost_log (the seeds' cost log of the RAG system itself)
    rag.answers      (id text PRIMARY KEY, query text, answer text, sources integer[],
                      created_at timestamptz)   the answers it served, citing l2_insights
                     ids (the seeds' ``sources: List[int]``; :func:`build_rag_answers`)

Documents get ids 1..n in corpus-file order; metadata keeps the BEIR id and title. The query
vectors of ``embeddings.npz`` (made by the same model as the document vectors) are put into
the harness's query-embedding cache, so evaluating the store needs no embedder. Tests use the
same function to build seed-layout stores.

Writing here is the one place the harness creates tables outside its own schema, and only
because the config names this schema for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from eval_harness.datasets.beir import read_beir
from eval_harness.datasets.embeddings import EMBEDDINGS_FILE, load_precomputed
from eval_harness.datasets.live_rows import LiveMappingError
from eval_harness.datasets.query_embeddings import cache_query_embeddings


@dataclass(frozen=True)
class DemoStore:
    schema: str
    documents: int
    queries: int
    created: bool  # False: it existed already and was left as it is
    answers: int = 0  # rows of schema.answers (build_rag_answers), 0: none laid out


def build_rag_store(conn: psycopg.Connection, folder: Path | str, *, schema: str = "rag",
                    split: str = "test", language: str = "english",
                    cache_query_vectors: bool = True, tsvector: str | None = None) -> DemoStore:
    """Lay out the BEIR ``folder`` (with its ``embeddings.npz``) in ``schema`` as described
    in the module docstring, once: an existing ``schema.l2_insights`` is left untouched.

    ``tsvector`` names a stored generated ``to_tsvector(language, content)`` column to add
    (its GIN index then covers the column); None: no such column, the GIN index covers the
    expression (a mapping then says ``tsvector: null``, and every keyword match is parsed
    again when ranked)."""
    folder = Path(folder)
    ident = sql.Identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"demo_rag:{schema}",))
        if conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                        (sql.Identifier(schema, "l2_insights").as_string(conn),)).fetchone()[0]:
            counts = conn.execute(sql.SQL(
                "SELECT (SELECT count(*) FROM {}.l2_insights), "
                "(SELECT count(*) FROM {}.ground_truth)").format(ident, ident)).fetchone()
            return DemoStore(schema, counts[0], counts[1], created=False)
        data = read_beir(folder, split=split)
        vectors = load_precomputed(folder / EMBEDDINGS_FILE)
        dim = vectors.dim
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        conn.execute(sql.SQL("""
            CREATE TABLE {s}.l2_insights (
                id         integer PRIMARY KEY,
                content    text NOT NULL,
                embedding  vector({dim}),
                metadata   jsonb NOT NULL DEFAULT '{{}}'::jsonb,
                created_at timestamptz NOT NULL DEFAULT now(){tsv});
            CREATE TABLE {s}.ground_truth (
                id            serial PRIMARY KEY,
                query         text NOT NULL,
                expected_docs integer[] NOT NULL,
                judge1_score  float8[],
                judge2_score  float8[],
                judge1_model  varchar(100),
                judge2_model  varchar(100),
                kappa         float8,
                created_at    timestamptz DEFAULT now());
            CREATE TABLE {s}.api_cost_log (
                id             serial PRIMARY KEY,
                timestamp      timestamptz DEFAULT now(),
                api_name       varchar(100) NOT NULL,
                operation      varchar(100) NOT NULL,
                token_count    integer,
                estimated_cost float8,
                query_id       integer REFERENCES {s}.ground_truth (id))""").format(
            s=ident, dim=sql.Literal(dim),
            tsv=sql.SQL(",\n                {} tsvector GENERATED ALWAYS AS "
                        "(to_tsvector({}::regconfig, content)) STORED").format(
                sql.Identifier(tsvector), sql.Literal(language)) if tsvector else sql.SQL("")))
        row_of = {doc_id: i for i, doc_id in enumerate(vectors.doc_ids)}
        ids = {}
        with conn.cursor().copy(sql.SQL(
                "COPY {}.l2_insights (id, content, embedding, metadata) FROM STDIN "
                "WITH (FORMAT BINARY)").format(ident)) as copy:
            copy.set_types(["int4", "text", "vector", "jsonb"])
            for number, doc in enumerate(data.documents, start=1):
                ids[doc.external_id] = number
                vector = (vectors.docs[row_of[doc.external_id]]
                          if not doc.is_empty and doc.external_id in row_of else None)
                copy.write_row((number, doc.content, vector,
                                Jsonb({"beir_id": doc.external_id, "title": doc.title})))
        with conn.cursor() as cur:
            cur.executemany(sql.SQL("INSERT INTO {}.ground_truth (query, expected_docs) "
                                    "VALUES (%s, %s)").format(ident),
                            [(q.text, [ids[d] for d in q.relevant_docs]) for q in data.queries])
        conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        text_side = (sql.Identifier(tsvector) if tsvector else
                     sql.SQL("to_tsvector({}::regconfig, content)").format(sql.Literal(language)))
        conn.execute(sql.SQL(
            "CREATE INDEX ON {s}.l2_insights USING hnsw (embedding vector_cosine_ops); "
            "CREATE INDEX ON {s}.l2_insights USING gin ({text}); "
            "ANALYZE {s}.l2_insights; ANALYZE {s}.ground_truth").format(s=ident, text=text_side))
        if cache_query_vectors:
            row_of_query = {q: i for i, q in enumerate(vectors.query_ids)}
            cache_query_embeddings(conn, vectors.model, {
                q.text: vectors.queries[row_of_query[q.external_id]]
                for q in data.queries if q.external_id in row_of_query})
    return DemoStore(schema, len(data.documents), len(data.queries), created=True)


def build_rag_answers(conn: psycopg.Connection, path: Path | str, *,
                      schema: str = "rag") -> int:
    """Lay out ``schema.answers`` once from an answers file in the answers contract (the
    bundled ``datasets/answers/sample_answers.jsonl``), as the RAG system would keep them:
    each source becomes the ``schema.l2_insights`` id of its document (found by its BEIR id,
    ``metadata->>'beir_id'``), in citation order, and the text is left to the corpus. An
    existing table is left untouched. Needs :func:`build_rag_store`'s layout; returns the
    rows of the table."""
    ident = sql.Identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"demo_rag:{schema}",))
        if conn.execute("SELECT to_regclass(%s) IS NULL",
                        (sql.Identifier(schema, "answers").as_string(conn),)).fetchone()[0]:
            conn.execute(sql.SQL("""
                CREATE TABLE {s}.answers (
                    id         text PRIMARY KEY,
                    query      text NOT NULL,
                    answer     text NOT NULL,
                    sources    integer[] NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now())""").format(s=ident))
            rows = [json.loads(line) for line in
                    Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
            beir_ids = sorted({str(src["id"]) for row in rows for src in row["sources"]})
            l2_id = dict(conn.execute(sql.SQL(
                "SELECT metadata->>'beir_id', id FROM {}.l2_insights "
                "WHERE metadata->>'beir_id' = ANY(%s)").format(ident), (beir_ids,)).fetchall())
            unknown = sorted(set(beir_ids) - set(l2_id))
            if unknown:
                raise LiveMappingError(f"'store.demo_rag_answers': {path} cites {len(unknown)} "
                                 f"documents that are not in the demo corpus (e.g. "
                                 f"{unknown[0]}); name answers over store.demo_rag_source, "
                                 "or set it to null.")
            with conn.cursor() as cur:
                cur.executemany(sql.SQL(
                    "INSERT INTO {}.answers (id, query, answer, sources, created_at) "
                    "VALUES (%s, %s, %s, %s, %s)").format(ident), [
                    (row["id"], row["query"], row["answer"],
                     [l2_id[str(src["id"])] for src in row["sources"]],
                     datetime.fromisoformat(row["created_at"])) for row in rows])
        return conn.execute(sql.SQL("SELECT count(*) FROM {}.answers").format(ident)
                            ).fetchone()[0]
