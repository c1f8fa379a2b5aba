"""The owner of the ``candidate_cache`` table: a rerun on an unchanged corpus and unchanged
queries answers the candidate fetch from what the last fetch returned.

:func:`eval_harness.retrieval.hybrid.candidate_scores` fetches through
:func:`fetch_through_cache`. An entry holds what the bulk candidate statement returned for
one ground-truth query of a dataset at one depth (the candidate ids with both raw scores) and
is used only while three things are as they were when it was fetched:

* the **query**: its key is md5 of its text and of its embedding
  (:func:`eval_harness.datasets.ground_truth.query_keys`); a changed query misses its own entry
  and no other;
* the **search**: ``search_key`` is a hash of the candidate statement itself (language, corpus
  mapping, depth, embedding dimensions: a change of any of them changes its text), of
  ``hnsw.ef_search``, of the server's and pgvector's versions, and of the text-search
  configuration's definition (:func:`eval_harness.store.text_search.configuration_definition`:
  an ``ALTER TEXT SEARCH CONFIGURATION`` keeps the name and changes the lexemes of every
  query, and of every document whose tsvector the harness parses);
* the **corpus**: ``corpus_version`` (:func:`eval_harness.datasets.corpus.corpus_version`:
  rows' ids and xmin, the relation's indexes); **any** changed, added or removed document
  invalidates every entry of the dataset.

Why every entry and not only those a changed document was in or could now enter: the keyword
side alone would allow that (``ts_rank`` with normalisation 1 depends on the document only),
but the semantic side is an HNSW index scan, which is approximate: a document added, changed
or removed changes the graph the scan walks, so a query whose candidates never held the
document can get other neighbours than before. Invalidating only the entries a changed document
could enter would then return candidates a fresh fetch does not, and the figures must be those
of a fresh fetch. A RAG store that changes between runs costs one full fetch per change, as
without the cache; an unchanged one costs the fingerprint (one pass over the relation's rows
without their text) and one read of this table.

Works the same for an ingested copy (its rows in the harness's ``l2_insights``) and a live
relation; a live view or foreign table has no xmin, so its fetch is never cached. Writing an
entry runs in a savepoint: a role that may not write the table, or a read-only transaction,
fetches from the relation and caches nothing; so does a fetch while another transaction that has not
committed yet is writing entries of the same dataset (a try-lock, never a wait). Each
function runs in the caller's transaction, so the entries are kept when the caller commits:
``report``, ``calibrate`` and ``judge`` (and their Dagster assets) do; ``calibrate --no-write``
and ``judge --dry-run`` read the cache and keep nothing
(tests/retrieval/test_candidate_cache_reruns.py counts the statements a CLI rerun sends).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import psycopg

from eval_harness.datasets import ground_truth
from eval_harness.datasets.corpus import Corpus, corpus_version
from eval_harness.store.text_search import configuration_definition, definition_digest

LOCK_PREFIX = "eval_harness.candidate_cache:"
Row = tuple  # (query id, doc_ids, semantic, keyword), as retrieval.sql.candidate_rows returns


def search_key(conn: psycopg.Connection, search: tuple[str, int], language: str) -> str:
    """The hash an entry must match besides the corpus: ``search`` is the candidate
    statement's text and its ``hnsw.ef_search``; the server's and pgvector's versions and
    the definition of text-search configuration ``language`` too."""
    statement, ef = search
    server, vector = conn.execute(
        "SELECT current_setting('server_version_num'),"
        " (SELECT extversion FROM pg_extension WHERE extname = 'vector')").fetchone()
    configuration = definition_digest(configuration_definition(conn, language))
    return hashlib.sha256("\x1f".join([statement, str(ef), server, str(vector),
                                       configuration]).encode()).hexdigest()


def _table_exists(conn: psycopg.Connection) -> bool:
    return conn.execute("SELECT to_regclass('candidate_cache') IS NOT NULL").fetchone()[0]


def fetch_through_cache(conn: psycopg.Connection, corpus: Corpus, depth: int,
                        statement: tuple[str, int], query_ids: Sequence[int] | None,
                        fetch: Callable[[list[int] | None], list[Row]]) -> list[Row]:
    """The candidate rows of ``query_ids`` (None: every query of the dataset), rows by query
    id: cached entries where they are current, ``fetch(ids)`` for the others (then cached).
    ``statement`` is the candidate statement as text and its ef_search (the entries' key)."""
    if not _table_exists(conn):
        return fetch(None if query_ids is None else list(query_ids))
    version = corpus_version(conn, corpus)
    if version is None:
        return fetch(None if query_ids is None else list(query_ids))
    keys = ground_truth.query_keys(conn, corpus.dataset)
    wanted = sorted(keys) if query_ids is None else sorted({int(i) for i in query_ids} & set(keys))
    search = search_key(conn, statement, corpus.language)
    cached = _read(conn, corpus.dataset, depth, search, version, {keys[i] for i in wanted})
    missing = [i for i in wanted if keys[i] not in cached]
    fetched = {int(row[0]): row for row in fetch(missing)} if missing else {}
    if fetched:
        _write(conn, corpus.dataset, depth, search, version,
               {keys[i]: row for i, row in fetched.items()}, set(keys.values()))
    return [fetched[i] if i in fetched else (i, *cached[keys[i]]) for i in wanted]


def _read(conn: psycopg.Connection, dataset: str, depth: int, search: str, version: str,
          keys: set[str]) -> dict[str, tuple]:
    if not keys:
        return {}
    return {key: (doc_ids, semantic, keyword) for key, doc_ids, semantic, keyword in conn.execute(
        "SELECT query_key, doc_ids, semantic, keyword FROM candidate_cache WHERE dataset = %s "
        "AND depth = %s AND search_key = %s AND corpus_version = %s AND query_key = ANY(%s)",
        (dataset, depth, search, version, list(keys)))}


def _write(conn: psycopg.Connection, dataset: str, depth: int, search: str, version: str,
           rows: dict[str, Row], current_keys: set[str]) -> None:
    """Keep ``rows`` ({query key: row}) and drop the dataset's entries no current query or
    corpus can use (another corpus version, or a query that changed or is gone); in a
    savepoint, so a refused write leaves the caller's transaction as it was."""
    try:
        with conn.transaction():
            # One writer per dataset at a time, never waiting: the rows a writer inserts stay
            # locked until its caller commits, and a second connection of the same process
            # (or another run) writing the same entries would wait for it, possibly forever.
            # A fetch that finds another writer busy caches nothing this time.
            if not conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))",
                                (LOCK_PREFIX + dataset,)).fetchone()[0]:
                return
            conn.execute("DELETE FROM candidate_cache WHERE dataset = %s AND "
                         "(corpus_version <> %s OR NOT query_key = ANY(%s))",
                         (dataset, version, list(current_keys)))
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO candidate_cache (dataset, depth, query_key, search_key, "
                    "corpus_version, doc_ids, semantic, keyword) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (dataset, depth, query_key) DO UPDATE SET "
                    "search_key = excluded.search_key, corpus_version = excluded.corpus_version,"
                    " doc_ids = excluded.doc_ids, semantic = excluded.semantic, "
                    "keyword = excluded.keyword, fetched_at = now()",
                    [(dataset, depth, key, search, version, _ints(row[1]), _floats(row[2]),
                      _floats(row[3])) for key, row in sorted(rows.items())])
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction):
        pass  # nothing cached; the fetch itself stands


def _ints(values) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def _floats(values) -> list[float]:
    """Python floats (a numpy float64 array or a list of them): float8 text keeps every bit.
    A query without an embedding (a generated one the embedder could not reach) has no
    semantic side: its candidates' semantic scores are NULL, stored as 0."""
    return [] if values is None else [0.0 if v is None else float(v) for v in values]


def cached_count(conn: psycopg.Connection, corpus: Corpus, depth: int,
                 statement: tuple[str, int]) -> tuple[int, int]:
    """``(cached, total)``: the dataset's ground-truth queries whose entry is current, of all
    of them (0 cached when the corpus cannot be fingerprinted or the table is not there)."""
    keys = set(ground_truth.query_keys(conn, corpus.dataset).values())
    version = corpus_version(conn, corpus) if _table_exists(conn) else None
    if version is None:
        return 0, len(keys)
    search = search_key(conn, statement, corpus.language)
    return len(_read(conn, corpus.dataset, depth, search, version, keys)), len(keys)


def clear(conn: psycopg.Connection, dataset: str) -> int:
    """Drop every entry of ``dataset``; how many there were."""
    return conn.execute("DELETE FROM candidate_cache WHERE dataset = %s",
                        (dataset,)).rowcount
