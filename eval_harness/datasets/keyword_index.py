"""The keyword index of a live dataset mapped with ``tsvector: null``: what the harness
derives from the RAG system's rows, in its own schema, so that the keyword side of the
search is ranked exactly as ``ts_rank(to_tsvector(language, content), q, 1)`` without
parsing every matching document again for every query.

Owner of ``keyword_sources``, ``keyword_documents`` and ``keyword_postings`` (migrations
0021 and 0024). What is kept, per dataset (one *source*, keyed by the dataset's language,
the definition of that text-search configuration as the catalog holds it
(:func:`eval_harness.store.text_search.configuration_definition`: parser, token type ->
dictionaries, each dictionary's template and options) and the corpus mapping; a change of
any drops it and builds it again at the next attach, which says why in its line; until then
no command ranks from it, :func:`current_source`):

* per document: what it was derived from (``marker``: the row version's ``xmin`` for a
  table, which is read without reading the text; md5 of the text and whether it has an
  embedding for a view or any relation without ``xmin``), the segment holding its postings,
  and ts_rank's length normalisation ``ln(length + 1) / ln(2)`` (length = the number of
  positions in its tsvector), computed by the server;
* postings: per lexeme and segment, the documents that hold it (int4, or int8 when a
  segment's ids do not fit; in no particular order, aligned with the counts) and how many
  positions the lexeme has in each (what ts_rank's per-lexeme term depends on when every position has
  weight D, as ``to_tsvector`` makes them). A document without an embedding gets no
  postings: it is never a keyword candidate (:func:`eval_harness.datasets.corpus.candidate_ids`).

:func:`refresh_keyword_index` brings it up to date at attach: the markers of every row are
compared with the stored ones in one pass; only changed and added rows are parsed again,
in batches of :data:`BATCH_DOCUMENTS`, each batch a new segment written in its own
transaction (an interrupted refresh keeps the finished batches; the next one does the rest);
removed rows are dropped. A posting counts only while its document's current segment is
the posting's, so nothing has to be rewritten in older segments; past
:data:`MAX_SEGMENTS` segments the index is built again from scratch. The RAG relation is only
read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from eval_harness.datasets.corpus import Corpus
from eval_harness.store.text_search import configuration_definition, definition_change

BATCH_DOCUMENTS = 50_000   # documents parsed per segment (bounds the server's sort and temp)
MAX_SEGMENTS = 40          # more segments than this: build again from scratch
LOCK_PREFIX = "eval_harness.keyword_index:"
INT4_MIN, INT4_MAX = -2**31, 2**31 - 1  # a segment whose ids fit stores them in 4 bytes


@dataclass(frozen=True)
class KeywordRefresh:
    """What :func:`refresh_keyword_index` did."""

    documents: int          # rows of the relation
    added: int
    changed: int
    removed: int
    rebuilt: str | None     # why everything was derived again (None: incremental)
    seconds: float

    def __str__(self) -> str:
        if self.rebuilt:
            return (f"keyword index: {self.documents:,} documents derived in "
                    f"{self.seconds:.1f} s ({self.rebuilt})")
        if not (self.added or self.changed or self.removed):
            return (f"keyword index: unchanged ({self.documents:,} documents checked in "
                    f"{self.seconds:.2f} s)")
        return (f"keyword index: {self.added:,} added, {self.changed:,} changed, "
                f"{self.removed:,} removed of {self.documents:,} documents, refreshed in "
                f"{self.seconds:.1f} s")


def mapping_key(corpus: Corpus) -> dict[str, Any]:
    """What the derived data depends on besides the language: relation and columns."""
    key = {"relation": list(corpus.relation), "id": corpus.id, "content": corpus.content,
           "embedding": corpus.embedding}
    if corpus.has_own_ids:  # its documents' ids are the harness's (store.document_ids)
        key["own_ids"] = corpus.own_ids
    if corpus.subset is not None:  # another LangChain collection is another corpus
        key["subset"] = [corpus.subset.column, corpus.subset.value]
    return key


def serves(corpus: Corpus) -> bool:
    """Whether a keyword index can stand for the keyword side of ``corpus``'s search: a live
    corpus whose tsvector is ``to_tsvector(language, content)``."""
    return corpus.is_live and corpus.tsvector is None


def current_source(conn: psycopg.Connection, corpus: Corpus) -> int | None:
    """The id of the keyword index derived for ``corpus`` with its language, mapping and
    the text-search configuration as it is defined now; None when there is none (never
    attached since, attached with another mapping, or the configuration was altered since
    the last attach: the caller then ranks with the server's own ``to_tsvector``)."""
    row = conn.execute("SELECT id, language, mapping, definition FROM keyword_sources "
                       "WHERE dataset = %s AND refreshed_at IS NOT NULL",
                       (corpus.dataset,)).fetchone()
    if row is None or row[1] != corpus.language or row[2] != mapping_key(corpus):
        return None
    if row[3] != configuration_definition(conn, corpus.language):
        return None
    return row[0]


def stale_configuration(conn: psycopg.Connection, corpus: Corpus) -> str | None:
    """What changed in ``corpus``'s text-search configuration since its keyword index was
    derived (:func:`eval_harness.store.text_search.definition_change`); None when nothing
    did or there is no index."""
    row = conn.execute("SELECT language, definition FROM keyword_sources WHERE dataset = %s "
                       "AND refreshed_at IS NOT NULL", (corpus.dataset,)).fetchone()
    if row is None or row[0] != corpus.language:
        return None
    now = configuration_definition(conn, corpus.language)
    return None if row[1] == now else definition_change(row[1], now)


# ------------------------------------------------------------------------------ refresh

def _marker_kind(conn: psycopg.Connection, corpus: Corpus) -> str:
    relkind = conn.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)",
                           (corpus.relation_name,)).fetchone()
    return "xmin" if relkind and relkind[0] in ("r", "p", "m") else "md5"


def _marker_of(corpus: Corpus, kind: str, alias: str) -> sql.Composable:
    if kind == "xmin":
        return sql.SQL("{}::text").format(sql.Identifier(alias, "xmin"))
    return sql.SQL("md5({}) || CASE WHEN {} IS NULL THEN '-' ELSE '+' END").format(
        corpus.content_of(alias), corpus.embedding_column(alias))


def _source(conn: psycopg.Connection, corpus: Corpus, kind: str) -> tuple[int, str | None]:
    """The source row of ``corpus`` (created, or replaced when its language, the
    configuration's definition, mapping or marker changed) and why it is built from scratch
    (None: it is refreshed; so is an interrupted first build, whose finished batches are
    kept)."""
    row = conn.execute("SELECT id, language, mapping, marker, next_segment, definition "
                       "FROM keyword_sources WHERE dataset = %s", (corpus.dataset,)).fetchone()
    definition = configuration_definition(conn, corpus.language)
    reason = None
    if row is None:
        reason = "first build"
    elif row[1] != corpus.language:
        reason = f"the language changed from {row[1]} to {corpus.language}"
    elif row[5] != definition:
        reason = definition_change(row[5], definition)
    elif row[2] != mapping_key(corpus) or row[3] != kind:
        reason = "the corpus mapping changed"
    elif row[4] > MAX_SEGMENTS:
        reason = f"compacted after {row[4]} segments"
    if reason is None:
        return row[0], None
    conn.execute("DELETE FROM keyword_sources WHERE dataset = %s", (corpus.dataset,))
    source = conn.execute(
        "INSERT INTO keyword_sources (dataset, language, mapping, marker, definition) "
        "VALUES (%s, %s, %s, %s, %s) RETURNING id",
        (corpus.dataset, corpus.language, Jsonb(mapping_key(corpus)), kind,
         Jsonb(definition))).fetchone()[0]
    return source, reason


def _stale_documents(conn: psycopg.Connection, corpus: Corpus, source: int,
                     kind: str) -> tuple[np.ndarray, int, int, int, int]:
    """Ids of the rows to derive again (added or changed), the counts of added, changed
    and (after deleting them) removed documents, and the relation's row count."""
    conn.execute(sql.SQL(
        "CREATE TEMP TABLE _kw_now ON COMMIT DROP AS SELECT {id}::bigint AS doc_id, "
        "{marker} AS marker FROM {rel} WHERE {rows}").format(
        id=corpus.id_of("d"), marker=_marker_of(corpus, kind, "d"), rel=corpus.table("d"),
        rows=corpus.rows_of_dataset("d")))
    conn.execute("CREATE INDEX ON _kw_now (doc_id)")
    conn.execute("ANALYZE _kw_now")
    rows = conn.execute("""
        SELECT n.doc_id, k.doc_id IS NULL FROM _kw_now n
        LEFT JOIN keyword_documents k ON k.source = %s AND k.doc_id = n.doc_id
        WHERE k.doc_id IS NULL OR k.marker <> n.marker ORDER BY n.doc_id""",
                        (source,)).fetchall()
    removed = conn.execute("""
        DELETE FROM keyword_documents k WHERE k.source = %s
        AND NOT EXISTS (SELECT 1 FROM _kw_now n WHERE n.doc_id = k.doc_id)""",
                           (source,)).rowcount
    if removed:
        conn.execute("UPDATE keyword_sources SET generation = generation + 1 WHERE id = %s",
                     (source,))
    total = conn.execute("SELECT count(*) FROM _kw_now").fetchone()[0]
    conn.execute("DROP TABLE _kw_now")
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    added = sum(1 for r in rows if r[1])
    return ids, added, len(rows) - added, removed, total


def _derive_batch(conn: psycopg.Connection, corpus: Corpus, source: int, kind: str,
                  ids: np.ndarray) -> None:
    """Parse the rows ``ids`` once: their postings into a new segment, their markers,
    segment and length normalisation into keyword_documents. One transaction."""
    narrow = bool(ids.size) and INT4_MIN <= int(ids[0]) and int(ids[-1]) <= INT4_MAX
    with conn.transaction():
        segment = conn.execute(
            "UPDATE keyword_sources SET next_segment = next_segment + 1, "
            "generation = generation + 1 WHERE id = %s RETURNING next_segment - 1",
            (source,)).fetchone()[0]
        conn.execute(sql.SQL("""
            WITH t AS MATERIALIZED (
                SELECT {id}::bigint AS doc_id, {marker} AS marker,
                       {emb} IS NOT NULL AS ranked, {tsv} AS tsv
                FROM {rel}
                WHERE {rows} AND {id} BETWEEN %(low)s AND %(high)s AND {id} = ANY(%(ids)s::bigint[])),
            p AS MATERIALIZED (
                SELECT t.doc_id, u.lexeme, coalesce(cardinality(u.positions), 1) AS n
                FROM t CROSS JOIN LATERAL unnest(t.tsv) AS u WHERE t.ranked),
            postings AS (
                INSERT INTO keyword_postings (source, lexeme, segment, doc_ids, counts)
                SELECT %(source)s, lexeme, %(segment)s,
                       -- no ORDER BY: both aggregates see the group's rows in the same
                       -- order, which keeps ids and counts aligned, and no reader needs
                       -- them sorted (a per-group sort each made the build 2-3x slower)
                       string_agg({send}, ''), string_agg(int2send(n::int2), '')
                FROM p GROUP BY lexeme),
            lengths AS (SELECT doc_id, sum(n) AS length FROM p GROUP BY doc_id)
            INSERT INTO keyword_documents AS k (source, doc_id, marker, segment, norm)
            SELECT %(source)s, t.doc_id, t.marker,
                   CASE WHEN l.length IS NULL THEN NULL ELSE %(segment)s END,
                   ln((l.length + 1)::float8) / ln(2::float8)
            FROM t LEFT JOIN lengths l ON l.doc_id = t.doc_id
            ON CONFLICT (source, doc_id) DO UPDATE
                SET marker = excluded.marker, segment = excluded.segment, norm = excluded.norm
            """).format(id=corpus.id_of("d"), marker=_marker_of(corpus, kind, "d"),
                        emb=corpus.embedding_column("d"), tsv=corpus.tsvector_of("d"),
                        rel=corpus.table("d"), rows=corpus.rows_of_dataset("d"),
                        send=sql.SQL(
                            "int4send(doc_id::int4)" if narrow else "int8send(doc_id)")),
            # the range lets the id index find a batch without reading the whole relation
            {"ids": ids.tolist(), "low": int(ids[0]), "high": int(ids[-1]), "source": source,
             "segment": segment})


def refresh_keyword_index(conn: psycopg.Connection, corpus: Corpus,
                          progress=None) -> KeywordRefresh:
    """Bring the keyword index of live ``corpus`` up to date (module docstring): added and
    changed rows derived again, removed ones dropped; a changed language, text-search
    configuration definition or mapping builds it again. Holds a session advisory lock on
    the dataset's index meanwhile."""
    started = time.perf_counter()
    lock = LOCK_PREFIX + corpus.dataset
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.commit()
    conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (lock,))
    if not conn.autocommit:
        conn.commit()  # the lock is the session's; every step below commits on its own
    try:
        with conn.transaction():
            kind = _marker_kind(conn, corpus)
            source, rebuilt = _source(conn, corpus, kind)
            ids, added, changed, removed, total = _stale_documents(conn, corpus, source, kind)
        for start in range(0, ids.size, BATCH_DOCUMENTS):
            _derive_batch(conn, corpus, source, kind, ids[start:start + BATCH_DOCUMENTS])
            if progress is not None:
                progress(min(start + BATCH_DOCUMENTS, ids.size), ids.size)
        with conn.transaction():
            conn.execute("UPDATE keyword_sources SET refreshed_at = now() WHERE id = %s",
                         (source,))
    finally:
        if not conn.closed:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.rollback()
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (lock,))
            if not conn.autocommit:
                conn.commit()
    return KeywordRefresh(total, added, changed, removed, rebuilt,
                          time.perf_counter() - started)


def drop_keyword_index(conn: psycopg.Connection, dataset: str) -> None:
    """Forget what was derived for ``dataset`` (its postings and documents go with it)."""
    conn.execute("DELETE FROM keyword_sources WHERE dataset = %s", (dataset,))


# ------------------------------------------------------------------------------ reads

@dataclass(frozen=True)
class IndexedDocuments:
    """The documents that can be keyword candidates: ids ascending, each one's current
    segment and length normalisation."""

    ids: np.ndarray       # int64, ascending
    segments: np.ndarray  # int32
    norms: np.ndarray     # float64


_read_documents: dict[tuple, IndexedDocuments] = {}  # (source's token, generation)
CACHED_SOURCES = 4


def indexed_documents(conn: psycopg.Connection, source: int) -> IndexedDocuments:
    """Every document of the index with a current segment, as arrays; read once per
    process and index generation (500,000 documents are 10 MB and a third of a second)."""
    key = conn.execute("SELECT token, generation FROM keyword_sources WHERE id = %s",
                       (source,)).fetchone()
    if key is None:
        return _read_indexed_documents(conn, source)
    key = tuple(key)
    if key not in _read_documents:
        if len(_read_documents) >= CACHED_SOURCES:
            _read_documents.pop(next(iter(_read_documents)))
        _read_documents[key] = _read_indexed_documents(conn, source)
    return _read_documents[key]


def _read_indexed_documents(conn: psycopg.Connection, source: int) -> IndexedDocuments:
    ids, segments, norms = conn.execute(
        "SELECT string_agg(int8send(doc_id), ''), string_agg(int4send(segment), ''), "
        "string_agg(float8send(norm), '') FROM keyword_documents "
        "WHERE source = %s AND segment IS NOT NULL", (source,), binary=True).fetchone()
    ids = np.frombuffer(ids or b"", dtype=">i8").astype(np.int64)
    segments = np.frombuffer(segments or b"", dtype=">i4").astype(np.int32)
    norms = np.frombuffer(norms or b"", dtype=">f8").astype(np.float64)
    order = np.argsort(ids, kind="stable")
    return IndexedDocuments(ids[order], segments[order], norms[order])


def postings(conn: psycopg.Connection, source: int, lexemes: list[str]
             ) -> dict[str, list[tuple[int, np.ndarray, np.ndarray]]]:
    """Per lexeme of ``lexemes``: its postings in every segment, ``(segment, doc ids
    int64, position counts int64)``."""
    found: dict[str, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    if not lexemes:
        return found
    for lexeme, segment, doc_ids, counts in conn.execute(
            "SELECT lexeme, segment, doc_ids, counts FROM keyword_postings "
            "WHERE source = %s AND lexeme = ANY(%s)", (source, lexemes), binary=True):
        # ids are int4 or int8 (per segment): their width is their bytes per count
        width = len(doc_ids) // (len(counts) // 2)
        found.setdefault(lexeme, []).append(
            (segment, np.frombuffer(doc_ids, dtype=f">i{width}").astype(np.int64),
             np.frombuffer(counts, dtype=">i2").astype(np.int64)))
    return found


def disk_bytes(conn: psycopg.Connection, source: int) -> int:
    """What the source's rows take on disk, roughly (their stored size)."""
    return conn.execute("""
        SELECT coalesce((SELECT sum(pg_column_size(p.*)) FROM keyword_postings p
                         WHERE p.source = %(s)s), 0)
             + coalesce((SELECT sum(pg_column_size(d.*)) FROM keyword_documents d
                         WHERE d.source = %(s)s), 0)""", {"s": source}).fetchone()[0]
