"""Load a BEIR dataset into the live store: corpus -> l2_insights, queries -> ground_truth.

The dataset is read and validated in full first; then one transaction (holding an advisory
lock on the dataset name) bulk-loads it with binary COPY into staging tables and merges:
new rows are inserted, changed rows updated, rows no longer in the folder deleted, identical
rows left untouched. Re-ingesting the same folder therefore changes nothing, and a failure
anywhere leaves the store exactly as it was.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from eval_harness.datasets import BeirDataset, DatasetError, read_beir
from eval_harness.embeddings import (EMBEDDINGS_FILE, Embedder, PrecomputedEmbeddings,
                                     load_precomputed)

_DATASET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class MergeCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.updated or self.deleted)

    def __str__(self) -> str:
        return (f"{self.inserted} new, {self.updated} updated, {self.deleted} removed, "
                f"{self.unchanged} unchanged")


@dataclass(frozen=True)
class IngestReport:
    dataset: str
    documents: MergeCounts
    queries: MergeCounts
    skipped_queries: int
    embeddings: str  # where the vectors came from

    @property
    def changed(self) -> bool:
        return self.documents.changed or self.queries.changed


def validate_dataset_name(name: str) -> str:
    if not _DATASET_NAME.match(name):
        raise DatasetError(f"Dataset name '{name}' is not allowed: use 1-64 letters, digits, "
                           "'_', '.' or '-', starting with a letter or digit.")
    return name


def hnsw_index_name(dataset: str, dim: int) -> str:
    digest = hashlib.sha1(dataset.encode()).hexdigest()[:12]
    return f"l2_insights_hnsw_{digest}_{dim}"


def _vectors_for(data: BeirDataset, precomputed: PrecomputedEmbeddings | None,
                 embedder: Embedder | None,
                 file: Path) -> tuple[np.ndarray, np.ndarray, str, str]:
    """Document and query vectors aligned with the dataset, their model and their source."""
    if precomputed is not None:
        doc_index = {doc_id: i for i, doc_id in enumerate(precomputed.doc_ids)}
        query_index = {qid: i for i, qid in enumerate(precomputed.query_ids)}
        for doc in data.documents:
            if doc.external_id not in doc_index:
                raise DatasetError(f"{file}: no embedding for document '{doc.external_id}'")
        for query in data.queries:
            if query.external_id not in query_index:
                raise DatasetError(f"{file}: no embedding for query '{query.external_id}'")
        docs = precomputed.docs[[doc_index[d.external_id] for d in data.documents]]
        queries = precomputed.queries[[query_index[q.external_id] for q in data.queries]]
        return docs, queries, precomputed.model, f"precomputed ({file.name}, {precomputed.model})"
    if embedder is None:
        raise DatasetError(f"{data.path}: no {EMBEDDINGS_FILE} and no embedder was given")
    docs = embedder.embed([d.content for d in data.documents])
    queries = embedder.embed([q.text for q in data.queries])
    return docs, queries, embedder.model, f"computed by {embedder.model}"


def check_language(conn: psycopg.Connection, language: str) -> None:
    exists = conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname = %s", (language,)).fetchone()
    if not exists:
        raise DatasetError(f"Unknown text-search language '{language}': use english, german, "
                           "simple or another configuration listed by `\\dF` in psql.")


def ingest_beir(conn: psycopg.Connection, path: Path | str, *, name: str,
                language: str = "english", split: str = "test",
                embedder_factory=None, embeddings: Path | str | None = None) -> IngestReport:
    """Ingest the BEIR folder ``path`` as dataset ``name`` (idempotent, one transaction).

    ``embedder_factory`` is called (with the model name wanted, or None) only when the folder
    has no ``embeddings.npz``; it returns an :class:`~eval_harness.embeddings.Embedder`.
    ``embeddings`` names a precomputed file elsewhere (e.g. for a read-only dataset folder).
    """
    validate_dataset_name(name)
    data = read_beir(path, split=split)
    emb_file = Path(embeddings) if embeddings else Path(path) / EMBEDDINGS_FILE
    if embeddings and not emb_file.is_file():
        raise DatasetError(f"{emb_file}: embeddings file not found")
    if emb_file.is_file():
        try:
            precomputed = load_precomputed(emb_file)
        except (ValueError, OSError) as exc:
            raise DatasetError(f"{emb_file}: cannot read embeddings ({exc})") from None
        embedder = None
    else:
        precomputed = None
        if embedder_factory is None:
            raise DatasetError(f"{path}: no {EMBEDDINGS_FILE} and no embedder configured")
        embedder = embedder_factory()
    doc_vectors, query_vectors, model, source = _vectors_for(data, precomputed, embedder,
                                                             emb_file)
    dim = int(doc_vectors.shape[1])

    with conn.transaction():
        check_language(conn, language)
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('eval_harness.ingest:' || %s))", (name,))
        conn.execute("""
            INSERT INTO datasets (name, language, embedding_model, embedding_dim, source_path)
            VALUES (%(name)s, %(lang)s::regconfig, %(model)s, %(dim)s, %(path)s)
            ON CONFLICT (name) DO UPDATE SET
                language = EXCLUDED.language, embedding_model = EXCLUDED.embedding_model,
                embedding_dim = EXCLUDED.embedding_dim, source_path = EXCLUDED.source_path,
                updated_at = now()
            WHERE (datasets.language, datasets.embedding_model, datasets.embedding_dim,
                   datasets.source_path)
                  IS DISTINCT FROM (EXCLUDED.language, EXCLUDED.embedding_model,
                                    EXCLUDED.embedding_dim, EXCLUDED.source_path)""",
                     {"name": name, "lang": language, "model": model, "dim": dim,
                      "path": str(Path(path).resolve())})
        documents = _merge_documents(conn, name, language, data, doc_vectors)
        _ensure_hnsw_index(conn, name, dim)
        queries = _merge_queries(conn, name, data, query_vectors)
        if documents.changed or queries.changed:
            # Fresh statistics, or the planner misjudges the dataset's size and skips the
            # HNSW index in favour of sorting every row by distance.
            conn.execute("ANALYZE l2_insights, ground_truth")
    return IngestReport(name, documents, queries, data.skipped_queries, source)


def _merge_documents(conn: psycopg.Connection, name: str, language: str, data: BeirDataset,
                     vectors: np.ndarray) -> MergeCounts:
    conn.execute("""CREATE TEMP TABLE _ingest_docs (
                        external_id text PRIMARY KEY, content text, metadata jsonb,
                        embedding vector) ON COMMIT DROP""")
    with conn.cursor().copy("COPY _ingest_docs FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "text", "jsonb", "vector"])
        for doc, vector in zip(data.documents, vectors):
            metadata = dict(doc.metadata)
            if doc.title:
                metadata.setdefault("title", doc.title)
            copy.write_row((doc.external_id, doc.content, Jsonb(metadata), vector))
    rows = conn.execute("""
        INSERT INTO l2_insights AS d (dataset, external_id, content, metadata, embedding, language)
        SELECT %(name)s, s.external_id, s.content, s.metadata, s.embedding, %(lang)s::regconfig
        FROM _ingest_docs s
        ON CONFLICT (dataset, external_id) DO UPDATE SET
            content = EXCLUDED.content, metadata = EXCLUDED.metadata,
            embedding = EXCLUDED.embedding, language = EXCLUDED.language
        WHERE (d.content, d.metadata, d.embedding, d.language)
              IS DISTINCT FROM (EXCLUDED.content, EXCLUDED.metadata, EXCLUDED.embedding,
                                EXCLUDED.language)
        RETURNING (xmax = 0)""", {"name": name, "lang": language}).fetchall()
    inserted = sum(1 for (is_new,) in rows if is_new)
    deleted = conn.execute("""
        DELETE FROM l2_insights d WHERE d.dataset = %s
          AND NOT EXISTS (SELECT 1 FROM _ingest_docs s WHERE s.external_id = d.external_id)""",
                           (name,)).rowcount
    return MergeCounts(inserted, len(rows) - inserted, deleted,
                       len(data.documents) - len(rows))


def _ensure_hnsw_index(conn: psycopg.Connection, name: str, dim: int) -> None:
    """A partial HNSW index per dataset on embedding::vector(dim) (cosine distance)."""
    wanted = hnsw_index_name(name, dim)
    prefix = wanted.rsplit("_", 1)[0] + "_"
    stale = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'l2_insights' "
                         "AND indexname LIKE %s AND indexname <> %s",
                         (prefix + "%", wanted)).fetchall()
    for (index,) in stale:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index)))
    conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
    conn.execute(sql.SQL(
        "CREATE INDEX IF NOT EXISTS {index} ON l2_insights USING hnsw "
        "((embedding::vector({dim})) vector_cosine_ops) WHERE dataset = {name}").format(
            index=sql.Identifier(wanted), dim=sql.Literal(dim), name=sql.Literal(name)))


def _merge_queries(conn: psycopg.Connection, name: str, data: BeirDataset,
                   vectors: np.ndarray) -> MergeCounts:
    doc_ids = dict(conn.execute("SELECT external_id, id FROM l2_insights WHERE dataset = %s",
                                (name,)).fetchall())
    conn.execute("""CREATE TEMP TABLE _ingest_queries (
                        external_id text PRIMARY KEY, query text, query_embedding vector,
                        expected_docs integer[], relevance_grades integer[]) ON COMMIT DROP""")
    with conn.cursor().copy("COPY _ingest_queries FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "text", "vector", "int4[]", "int4[]"])
        for query, vector in zip(data.queries, vectors):
            relevant = query.relevant_docs
            copy.write_row((query.external_id, query.text, vector,
                            [doc_ids[d] for d in relevant],
                            [query.relevance[d] for d in relevant]))
    # A changed query or changed labels invalidate earlier judge scores for that query.
    rows = conn.execute("""
        INSERT INTO ground_truth AS g (dataset, external_id, query, query_embedding,
                                       expected_docs, relevance_grades)
        SELECT %(name)s, s.external_id, s.query, s.query_embedding, s.expected_docs,
               s.relevance_grades
        FROM _ingest_queries s
        ON CONFLICT (dataset, external_id) DO UPDATE SET
            query = EXCLUDED.query, query_embedding = EXCLUDED.query_embedding,
            expected_docs = EXCLUDED.expected_docs, relevance_grades = EXCLUDED.relevance_grades,
            judged_docs = NULL, judge1_score = NULL, judge2_score = NULL,
            judge1_model = NULL, judge2_model = NULL, kappa = NULL
        WHERE (g.query, g.query_embedding, g.expected_docs, g.relevance_grades)
              IS DISTINCT FROM (EXCLUDED.query, EXCLUDED.query_embedding,
                                EXCLUDED.expected_docs, EXCLUDED.relevance_grades)
        RETURNING (xmax = 0)""", {"name": name}).fetchall()
    inserted = sum(1 for (is_new,) in rows if is_new)
    deleted = conn.execute("""
        DELETE FROM ground_truth g WHERE g.dataset = %s
          AND NOT EXISTS (SELECT 1 FROM _ingest_queries s WHERE s.external_id = g.external_id)""",
                           (name,)).rowcount
    return MergeCounts(inserted, len(rows) - inserted, deleted, len(data.queries) - len(rows))
