"""Load a BEIR dataset into the live store: corpus -> l2_insights, queries -> ground_truth.

The owner of the ``l2_insights`` table (the harness's own copy of an ingested dataset's
documents): every statement that names it is here, the count of each dataset's documents
(:func:`documents_per_dataset`) included; statements that only read documents compose the
table from :class:`eval_harness.datasets.corpus.Corpus` (tests/test_layers.py checks it). The
register row goes through :mod:`eval_harness.datasets.register`, the queries through
:mod:`eval_harness.datasets.ground_truth`, the review-queue rows of removed documents through
:mod:`eval_harness.datasets.judge_review`.

The dataset is read and validated in full first; then one transaction bulk-loads it with
binary COPY into staging tables and merges: new rows are inserted, changed rows updated, rows
no longer in the folder deleted, identical rows left untouched. Re-ingesting the same folder
therefore changes nothing, and a failure anywhere (a killed process included) leaves the store
exactly as it was. New documents get their ids (``l2_insights.id``, the id search breaks ties
by) in the corpus file's order, as a RAG store loaded from the same file in order numbers
them (:mod:`eval_harness.datasets.demo_store`), so the copy and that store rank ties alike.

Ingests take turns: the transaction first takes :data:`INGEST_LOCK`, one advisory lock for
every dataset. Per dataset would not do: each ingest inserts into ``l2_insights`` and then
builds its dataset's HNSW index, which needs a SHARE lock on the whole table, so two ingests of
different datasets at once would each wait for the other's uncommitted rows (a deadlock).
A second ingest of the same folder waits, then finds every row unchanged. Readers (search,
judges, gates) are not blocked.

Without ``embeddings.npz`` the vectors are computed by the configured embedder (a paid call
for ``openai``), inside the transaction (other ingests wait meanwhile), for new and changed
texts only: a document or query whose id and text are already stored, embedded by the same
model, keeps its stored vector. A rerun of an unchanged folder, or an ingest that waited for an
identical one, embeds nothing; a killed ingest stored nothing, so its rerun embeds everything.

An empty document (no title, no text; see :mod:`eval_harness.datasets.beir`) is stored with a NULL
embedding, whatever ``embeddings.npz`` holds for it, and an empty tsvector: ground truth
points at it and it is findable by id, but neither side of hybrid search can return it. The
report counts such documents. A dataset in another language than English embedded with the
English-only local model gets one warning (:func:`eval_harness.datasets.embeddings.warn_if_english_only`).

A vector cosine similarity cannot use (NaN or infinite values, an overflowing length, or all
zeros), read from ``embeddings.npz`` or computed by the embedder, stops the ingest with one
sentence naming the document or query id and the file, before anything is stored
(:func:`eval_harness.datasets.embeddings.check_vectors`): one such vector would make every fused
score of the queries it is a candidate for NaN.
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

from eval_harness.datasets import ground_truth, judge_review, register
from eval_harness.datasets.beir import BeirDataset, DatasetError, read_beir
from eval_harness.datasets.corpus import Corpus
from eval_harness.datasets.embeddings import (EMBEDDINGS_FILE, Embedder, InvalidEmbedding,
                                           PrecomputedEmbeddings, check_vectors,
                                           embed_in_batches, load_precomputed,
                                           warn_if_english_only)
from eval_harness.progress import ProgressCallback

_DATASET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
INGEST_LOCK = "eval_harness.ingest"  # advisory lock key (hashtext) held by every ingest
TSVECTOR_PROBES = 50  # longest documents tried when Postgres finds one too long for a tsvector


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
    empty_documents: tuple[str, ...] = ()  # ids of documents with no title and no text
    notices: tuple[str, ...] = ()  # what the reader accepted but said (BeirDataset.notices)

    @property
    def changed(self) -> bool:
        return self.documents.changed or self.queries.changed

    @property
    def empty_documents_note(self) -> str | None:
        """One line for the user about the empty documents, None when there are none."""
        count = len(self.empty_documents)
        if not count:
            return None
        shown = ", ".join(self.empty_documents[:5]) + (", ..." if count > 5 else "")
        subject = "1 document has" if count == 1 else f"{count} documents have"
        return (f"{subject} no text ({shown}); kept, findable by id, never retrieved by text")


def validate_dataset_name(name: str) -> str:
    if not _DATASET_NAME.match(name):
        raise DatasetError(f"Dataset name '{name}' is not allowed: use 1-64 letters, digits, "
                           "'_', '.' or '-', starting with a letter or digit.")
    return name


def hnsw_index_name(dataset: str, dim: int) -> str:
    digest = hashlib.sha1(dataset.encode()).hexdigest()[:12]
    return f"l2_insights_hnsw_{digest}_{dim}"


@dataclass
class _Vectors:
    """Vectors aligned with the dataset's documents and queries; None: keep the stored one."""

    docs: list[np.ndarray | None]
    queries: list[np.ndarray | None]
    model: str
    dim: int
    source: str  # where the vectors came from, for the report


def _precomputed_row(vectors: np.ndarray, index: dict[str, int], item_id: str, what: str,
                     file: Path) -> np.ndarray:
    if item_id not in index:
        raise DatasetError(f"{file}: no embedding for {what} '{item_id}'")
    row = vectors[index[item_id]]
    if not row.any():  # cosine similarity with a zero vector is NaN
        raise DatasetError(f"{file}: the embedding of {what} '{item_id}' is all zeros; "
                           "recompute the file (an empty document needs no row)")
    return row


def _precomputed_vectors(data: BeirDataset, precomputed: PrecomputedEmbeddings,
                         file: Path) -> _Vectors:
    """The file's vectors in dataset order; None for an empty document (never embedded)."""
    doc_index = {doc_id: i for i, doc_id in enumerate(precomputed.doc_ids)}
    query_index = {qid: i for i, qid in enumerate(precomputed.query_ids)}
    docs = [None if d.is_empty else
            _precomputed_row(precomputed.docs, doc_index, d.external_id, "document", file)
            for d in data.documents]
    queries = [_precomputed_row(precomputed.queries, query_index, q.external_id, "query", file)
               for q in data.queries]
    return _Vectors(docs, queries, precomputed.model, precomputed.dim,
                    f"precomputed ({file.name}, {precomputed.model})")


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def _computed_vectors(conn: psycopg.Connection, name: str, data: BeirDataset,
                      embedder: Embedder, progress: ProgressCallback | None) -> _Vectors:
    """Embed the texts the store does not hold yet with ``embedder.model`` (module docstring).

    Runs under the ingest lock, so what is stored cannot change before the merge."""
    stored = register.embedding_dim_by_model(conn, name, embedder.model)
    stored_docs: dict[str, str] = {}
    stored_queries: dict[str, str] = {}
    if stored is not None:  # compared by hash: the corpus text need not travel
        stored_docs = dict(conn.execute("SELECT external_id, md5(content) FROM l2_insights "
                                        "WHERE dataset = %s", (name,)).fetchall())
        stored_queries = ground_truth.stored_query_hashes(conn, name)
    new_docs = [i for i, d in enumerate(data.documents)
                if not d.is_empty and stored_docs.get(d.external_id) != _md5(d.content)]
    new_queries = [i for i, q in enumerate(data.queries)
                   if stored_queries.get(q.external_id) != _md5(q.text)]
    texts = ([data.documents[i].content for i in new_docs]
             + [data.queries[i].text for i in new_queries])
    docs: list[np.ndarray | None] = [None] * len(data.documents)
    queries: list[np.ndarray | None] = [None] * len(data.queries)
    if texts:
        vectors = embed_in_batches(embedder, texts, progress=progress)
        _check_computed(vectors, data, new_docs, new_queries, embedder.model)
        for row, i in enumerate(new_docs):
            docs[i] = vectors[row]
        for row, i in enumerate(new_queries, start=len(new_docs)):
            queries[i] = vectors[row]
        dim = int(vectors.shape[1])
    elif stored is not None:
        dim = int(stored)
    else:
        raise DatasetError(f"{data.path}: the dataset has no documents or queries to embed")
    embeddable = len(data.documents) - len(data.empty_documents) + len(data.queries)
    reused = embeddable - len(texts)
    source = f"computed by {embedder.model} for {len(texts)} texts"
    if reused:
        source += f", {reused} unchanged texts keep their stored vectors"
    return _Vectors(docs, queries, embedder.model, dim, source)


def _check_computed(vectors: np.ndarray, data: BeirDataset, new_docs: list[int],
                    new_queries: list[int], model: str) -> None:
    """Refuse a computed vector cosine similarity cannot use, naming its document or query
    (the transaction is rolled back: nothing is stored)."""
    fix = "nothing was stored; check that text and the embedder"
    try:
        check_vectors(vectors[:len(new_docs)], [data.documents[i].external_id for i in new_docs],
                      what="document", source=str(data.path / "corpus.jsonl"), model=model,
                      fix=fix)
        check_vectors(vectors[len(new_docs):], [data.queries[i].external_id for i in new_queries],
                      what="query", source=str(data.path / "queries.jsonl"), model=model,
                      fix=fix)
    except InvalidEmbedding as exc:
        raise DatasetError(str(exc)) from None


def check_language(conn: psycopg.Connection, language: str) -> None:
    """Refuse a ``language`` that names no text-search configuration (``english``, or
    schema-qualified as ``public.eng_custom``)."""
    schema, _, name = language.rpartition(".")
    exists = conn.execute("SELECT 1 FROM pg_ts_config c JOIN pg_namespace n ON n.oid = "
                          "c.cfgnamespace WHERE c.cfgname = %s AND (%s = '' OR n.nspname = %s)",
                          (name, schema, schema)).fetchone()
    if not exists:
        raise DatasetError(f"Unknown text-search language '{language}': use english, german, "
                           "simple or another configuration listed by `\\dF` in psql.")


def ingest_beir(conn: psycopg.Connection, path: Path | str, *, name: str,
                language: str = "english", split: str = "test",
                embedder_factory=None, embeddings: Path | str | None = None,
                progress: ProgressCallback | None = None) -> IngestReport:
    """Ingest the BEIR folder ``path`` as dataset ``name`` (idempotent, one transaction).

    ``embedder_factory`` is called (with the model name wanted, or None) only when the folder
    has no ``embeddings.npz``; it returns an :class:`~eval_harness.datasets.embeddings.Embedder`.
    ``embeddings`` names a precomputed file elsewhere (e.g. for a read-only dataset folder).
    ``progress(done, total)`` follows the texts being embedded, batch by batch (only when
    embeddings are computed; see :mod:`eval_harness.progress`).
    """
    validate_dataset_name(name)
    data = read_beir(path, split=split)
    emb_file = Path(embeddings) if embeddings else Path(path) / EMBEDDINGS_FILE
    if embeddings and not emb_file.is_file():
        raise DatasetError(f"{emb_file}: embeddings file not found")
    if emb_file.is_file():
        try:
            precomputed = load_precomputed(emb_file)
        except InvalidEmbedding as exc:  # already names the file and the item
            raise DatasetError(str(exc)) from None
        except (ValueError, OSError) as exc:
            raise DatasetError(f"{emb_file}: cannot read embeddings ({exc})") from None
        embedder = None
    else:
        precomputed = None
        if embedder_factory is None:
            raise DatasetError(f"{path}: no {EMBEDDINGS_FILE} and no embedder configured")
        embedder = embedder_factory()
    # before any embedding, so a wrong model can be stopped early
    warn_if_english_only(precomputed.model if precomputed is not None else embedder.model,
                         language, dataset=name)
    vectors = (_precomputed_vectors(data, precomputed, emb_file)
               if precomputed is not None else None)

    with conn.transaction():
        check_language(conn, language)
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (INGEST_LOCK,))
        if register.dataset_kind(conn, name) == "live":
            raise DatasetError(f"dataset '{name}' is attached as a live dataset in this store "
                               "(read in place, never copied); ingest the folder under "
                               "another name.")
        if vectors is None:
            vectors = _computed_vectors(conn, name, data, embedder, progress)
        register.record_ingested_dataset(
            conn, name, language=language, model=vectors.model, dim=vectors.dim,
            source_path=str(Path(path).resolve()))
        documents = _merge_documents(conn, Corpus.ingested(name, language, vectors.dim), data,
                                     vectors.docs)
        _ensure_hnsw_index(conn, name, vectors.dim)
        queries = _merge_queries(conn, name, data, vectors.queries)
        if documents.changed or queries.changed:
            # Fresh statistics, or the planner misjudges the dataset's size and skips the
            # HNSW index in favour of sorting every row by distance.
            conn.execute("ANALYZE l2_insights, ground_truth")
    return IngestReport(name, documents, queries, data.skipped_queries, vectors.source,
                        tuple(data.empty_documents), data.notices)


def documents_per_dataset(conn: psycopg.Connection) -> dict[str, int]:
    """Each dataset in the store, by name, with its number of ingested documents (0 for a
    live dataset)."""
    return dict(conn.execute(sql.SQL(
        "SELECT d.name, count(i.id) FROM {d} LEFT JOIN l2_insights i "
        "ON i.dataset = d.name GROUP BY d.name ORDER BY d.name").format(
        d=register.table("d"))))


def _merge_documents(conn: psycopg.Connection, corpus: Corpus, data: BeirDataset,
                     vectors: list[np.ndarray | None]) -> MergeCounts:
    name, language = corpus.dataset, corpus.language
    # position: the corpus file's order, in which new documents are numbered
    conn.execute("""CREATE TEMP TABLE _ingest_docs (
                        external_id text PRIMARY KEY, content text, metadata jsonb,
                        embedding vector, position bigint GENERATED ALWAYS AS IDENTITY)
                    ON COMMIT DROP""")
    with conn.cursor().copy("COPY _ingest_docs (external_id, content, metadata, embedding) "
                            "FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "text", "jsonb", "vector"])
        for doc, vector in zip(data.documents, vectors):
            metadata = dict(doc.metadata)
            if doc.title:
                metadata.setdefault("title", doc.title)
            copy.write_row((doc.external_id, doc.content, Jsonb(metadata), vector))
    # A NULL staged vector means "unchanged text": the stored vector is taken over, except
    # for an empty document, which has none (not even one its text had before).
    try:
        with conn.transaction():  # a savepoint: the culprit can be looked for after a failure
            rows = _upsert_documents(conn, name, language)
    except psycopg.errors.ProgramLimitExceeded as exc:
        if "tsvector" not in str(exc):
            raise
        raise _too_long_for_full_text(conn, language, data, exc) from None
    inserted = sum(1 for (is_new,) in rows if is_new)
    deleted = conn.execute("""
        DELETE FROM l2_insights d WHERE d.dataset = %s
          AND NOT EXISTS (SELECT 1 FROM _ingest_docs s WHERE s.external_id = d.external_id)""",
                           (name,)).rowcount
    if deleted:  # judge_review keeps document ids without a foreign key (migration 0008)
        judge_review.delete_pairs_of_removed_documents(conn, corpus)
    return MergeCounts(inserted, len(rows) - inserted, deleted,
                       len(data.documents) - len(rows))


def _upsert_documents(conn: psycopg.Connection, name: str, language: str) -> list[tuple]:
    return conn.execute("""
        INSERT INTO l2_insights AS d (dataset, external_id, content, metadata, embedding, language)
        SELECT %(name)s, s.external_id, s.content, s.metadata,
               CASE WHEN s.content <> '' THEN coalesce(s.embedding, e.embedding) END,
               %(lang)s::regconfig
        FROM _ingest_docs s
        LEFT JOIN l2_insights e ON e.dataset = %(name)s AND e.external_id = s.external_id
        ORDER BY s.position
        ON CONFLICT (dataset, external_id) DO UPDATE SET
            content = EXCLUDED.content, metadata = EXCLUDED.metadata,
            embedding = EXCLUDED.embedding, language = EXCLUDED.language
        WHERE (d.content, d.metadata, d.embedding, d.language)
              IS DISTINCT FROM (EXCLUDED.content, EXCLUDED.metadata, EXCLUDED.embedding,
                                EXCLUDED.language)
        RETURNING (xmax = 0)""", {"name": name, "lang": language}).fetchall()


def _too_long_for_full_text(conn: psycopg.Connection, language: str, data: BeirDataset,
                            error: psycopg.Error) -> DatasetError:
    """The error for Postgres' "string is too long for tsvector", naming the document.

    A tsvector holds at most 1 MB of distinct lexemes, which a long text of many different
    words (or of hyphenated compounds and URLs, which add their parts) exceeds. Postgres does
    not say which row; the longest texts are tried one by one, each in a savepoint, until one
    fails (:data:`TSVECTOR_PROBES` at most).
    """
    reason = str(error).strip().splitlines()[0]
    corpus = data.path / "corpus.jsonl"
    longest = sorted((d for d in data.documents if not d.is_empty),
                     key=lambda d: len(d.content.encode("utf-8")), reverse=True)
    for document in longest[:TSVECTOR_PROBES]:
        try:
            with conn.transaction():
                conn.execute("SELECT to_tsvector(%s::regconfig, %s) IS NULL",
                             (language, document.content))
        except psycopg.errors.ProgramLimitExceeded as exc:
            reason = str(exc).strip().splitlines()[0]
            where = f"{corpus}:{document.line}" if document.line else str(corpus)
            return DatasetError(
                f"{where}: document '{document.external_id}' is too long for Postgres "
                f"full-text search ({reason}: its distinct words take more than a tsvector "
                f"holds); split it into smaller documents or shorten it; nothing was stored.")
    return DatasetError(f"{corpus}: a document is too long for Postgres full-text search "
                        f"({reason}); split long documents; nothing was stored.")


def _ensure_hnsw_index(conn: psycopg.Connection, name: str, dim: int) -> None:
    """A partial HNSW index per dataset on embedding::vector(dim) (cosine distance)."""
    wanted = hnsw_index_name(name, dim)
    prefix = wanted.rsplit("_", 1)[0] + "_"
    stale = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'l2_insights' "
                         "AND schemaname = current_schema() "
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
                   vectors: list[np.ndarray | None]) -> MergeCounts:
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
    rows = ground_truth.upsert_ingested_queries(conn, name)
    inserted = sum(1 for (is_new,) in rows if is_new)
    deleted = ground_truth.delete_queries_not_staged(conn, name, "_ingest_queries")
    return MergeCounts(inserted, len(rows) - inserted, deleted, len(data.queries) - len(rows))
