"""RAG stores whose ids are text or uuid, as LangChain, LlamaIndex and many teams keep them.

:func:`build_own_id_store` lays out, in a schema of its own, the documents and queries of a
seed-layout store (:func:`eval_harness.datasets.demo_store.build_rag_store`) with their ids made
text (``varchar``: ``doc-007``, ``q-3``) or ``uuid``: ``docs`` (id, content, embedding, an
HNSW and a GIN index, as the seed store has), ``questions`` (id, query, expected_ids of the
matching array type, the seed's judge columns) and ``answers`` (sources citing own ids).
The documents are the same, so every figure must equal the integer store's.
"""

from __future__ import annotations

import uuid

from psycopg import sql

KINDS = {
    # kind: (id type, array type, own id of integer document n, own id of integer query n)
    "text": ("varchar(64)", "varchar(64)[]", "'doc-' || lpad({n}::text, 3, '0')",
             "'q-' || {n}::text"),
    "uuid": ("uuid", "uuid[]", "md5('doc' || {n}::text)::uuid", "md5('q' || {n}::text)::uuid"),
}


def own_doc_id(kind: str, n: int) -> str:
    """The own id (as text) of the seed store's document ``n``."""
    return f"doc-{n:03d}" if kind == "text" else str(uuid.UUID(_md5(f"doc{n}")))


def own_query_id(kind: str, n: int) -> str:
    return f"q-{n}" if kind == "text" else str(uuid.UUID(_md5(f"q{n}")))


def _md5(text: str) -> str:
    import hashlib
    return hashlib.md5(text.encode()).hexdigest()


def build_own_id_store(conn, kind: str, *, schema: str, source: str = "rag") -> None:
    """``schema.docs`` / ``schema.questions`` / ``schema.answers`` from the seed-layout
    store in ``source``, with ``kind`` ids (module docstring). One transaction."""
    id_type, array_type, doc, query = KINDS[kind]
    s, src = sql.Identifier(schema), sql.Identifier(source)
    own_doc = sql.SQL(doc).format(n=sql.SQL("d.id"))
    own_expected = sql.SQL(doc).format(n=sql.SQL("u.e"))
    own_query = sql.SQL(query).format(n=sql.SQL("g.id"))
    with conn.transaction():
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(s))
        conn.execute(sql.SQL("""
            CREATE TABLE {s}.docs (id {id} PRIMARY KEY, content text, embedding vector(8),
                                   cmetadata jsonb);
            INSERT INTO {s}.docs SELECT {own_doc}, d.content, d.embedding, d.metadata
                FROM {src}.l2_insights d;
            CREATE INDEX ON {s}.docs USING hnsw (embedding vector_cosine_ops);
            CREATE INDEX ON {s}.docs USING gin (to_tsvector('english'::regconfig, content));
            CREATE TABLE {s}.questions (id {id} PRIMARY KEY, query text NOT NULL,
                                        expected_ids {arr} NOT NULL, judge1_score float8[],
                                        judge2_score float8[], judge1_model varchar(100),
                                        judge2_model varchar(100), kappa float8);
            INSERT INTO {s}.questions (id, query, expected_ids)
                SELECT {own_query}, g.query,
                       ARRAY(SELECT {own_expected} FROM unnest(g.expected_docs)
                             WITH ORDINALITY AS u(e, n) ORDER BY u.n)
                FROM {src}.ground_truth g;
            CREATE TABLE {s}.answers (id text PRIMARY KEY, query text NOT NULL,
                                      answer text NOT NULL, sources {arr} NOT NULL,
                                      created_at timestamptz NOT NULL);
            ANALYZE {s}.docs; ANALYZE {s}.questions""").format(
            s=s, src=src, id=sql.SQL(id_type), arr=sql.SQL(array_type), own_doc=own_doc,
            own_expected=own_expected, own_query=own_query))


def own_store_checksum(conn, schema: str) -> str:
    """md5 over every row of the store's relations, in id order."""
    return ":".join(conn.execute(sql.SQL(
        "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) FROM {}.{} t").format(
        sql.Identifier(schema), sql.Identifier(table))).fetchone()[0]
        for table in ("docs", "questions", "answers"))


def own_store_config(name: str, schema: str, **extra: str) -> str:
    """The YAML of a live dataset ``name`` mapped onto ``schema``'s tables."""
    lines = [f"  {name}:", "    language: english", "    embedder: local:test-random",
             "    live:",
             f"      corpus: {{relation: {schema}.docs, id: id, content: content, "
             "embedding: embedding, tsvector: null}",
             f"      ground_truth: {{relation: {schema}.questions, id: id, query: query, "
             "expected_docs: expected_ids}"]
    lines += [f"      {key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"
