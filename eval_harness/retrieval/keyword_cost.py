"""What the keyword side of the search costs on a live corpus mapped with ``tsvector: null``,
measured on its own ground-truth queries, and what a stored tsvector column would cost.

With ``tsvector: null`` the search ranks keyword matches by ``ts_rank(to_tsvector(language,
content), q)``: a GIN index on that expression finds the matches, but nothing stores their
tsvectors, so every matching document is parsed again for every query it matches. On a
store of 1,400 documents that made ``calibrate`` spend 39 of its 43 s fetching candidates,
while every index was in place (issue #20). The doctor runs :func:`measure_keyword_cost` to
put a figure on it:

* **as the search runs it**: the search's own keyword candidate subquery
  (:func:`eval_harness.datasets.corpus.candidate_ids`) for a few ground-truth queries,
  timed one by one (the median is reported), each under a statement timeout;
* **over stored tsvectors**: the same ranking over a temporary copy of the matching
  documents' tsvectors (what a stored generated column holds), timed the same way.

Everything runs in one transaction that is rolled back, READ WRITE only for the temporary
table (in the session's temporary schema, never the RAG system's), so nothing is written to
the store. A role without the TEMP privilege gets the first figure only.
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import psycopg
from psycopg import sql

from eval_harness.retrieval.hybrid import candidate_scores
from eval_harness.retrieval.keyword_rank import query_items, rank_query
from eval_harness.datasets import ground_truth, keyword_index
from eval_harness.datasets.corpus import Corpus, candidate_ids

MEASURED_QUERIES = 5           # ground-truth queries timed at most
FETCH_SAMPLE = 40              # ground-truth queries of the candidate fetch timed at most
MEASURING_BUDGET_SECONDS = 5.0  # stop timing further queries after this long
STATEMENT_TIMEOUT_MS = 10_000   # one keyword query taking longer is reported as "over 10 s"
PROBE_TABLE = "eh_keyword_cost_probe"


@dataclass(frozen=True)
class KeywordCost:
    """The keyword side's cost per query, in milliseconds (medians over ``queries``)."""

    queries: int                 # ground-truth queries timed
    per_query_ms: float | None   # as the search runs it; None: the first one timed out
    matched: float | None        # median documents each query matches (each one parsed again)
    stored_ms: float | None      # the same ranking over stored tsvectors; None: not measured
    timeout_ms: int = STATEMENT_TIMEOUT_MS


def or_tsquery_text(conn: psycopg.Connection, language: str, text: str) -> str | None:
    """The search's OR-of-lexemes tsquery of ``text`` (``eh_or_tsquery``), as tsquery text;
    the same expression inline when the harness schema (its function) is not there yet."""
    return conn.execute("""
        SELECT nullif(string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''')
                                 || '''', ' | '), '')::tsquery::text
        FROM unnest(tsvector_to_array(to_tsvector(%s::regconfig, %s))) AS lexeme""",
                        (language, text)).fetchone()[0]


def _ranking(corpus: Corpus, depth: int, table: sql.Composable | None = None) -> sql.Composed:
    """The keyword candidate subquery for one tsquery parameter: the search's own over the
    corpus, or the same ranking over the stored tsvectors of ``table``."""
    if table is None:
        candidates = candidate_ids(corpus, depth, semantic=False)
    else:
        candidates = sql.SQL("SELECT k.id FROM {} k WHERE k.tsv @@ q.tsq ORDER BY "
                             "ts_rank(k.tsv, q.tsq, 1) DESC, k.id LIMIT {}").format(
            table, sql.Literal(depth))
    return sql.SQL("WITH q AS MATERIALIZED (SELECT %s::tsquery AS tsq) "
                   "SELECT count(*) FROM q CROSS JOIN LATERAL ({}) c").format(candidates)


@contextmanager
def _savepoint(conn: psycopg.Connection) -> Iterator[None]:
    """A savepoint inside the measuring transaction: a statement that fails (a cancelled
    query, a refused temporary table) is rolled back alone and the rest stays usable."""
    conn.execute("SAVEPOINT eh_keyword_cost")
    try:
        yield
    except psycopg.Error:
        if not conn.closed:
            conn.execute("ROLLBACK TO SAVEPOINT eh_keyword_cost")
        raise
    conn.execute("RELEASE SAVEPOINT eh_keyword_cost")


def _timed(conn: psycopg.Connection, statement: sql.Composed, tsquery: str) -> float:
    started = time.perf_counter()
    conn.execute(statement, (tsquery,)).fetchall()
    return (time.perf_counter() - started) * 1000.0


def _time_search(conn: psycopg.Connection, corpus: Corpus, depth: int,
                 tsqueries: Sequence[str]) -> list[float]:
    """Milliseconds of the search's keyword side per query, until the budget is spent; a
    query past the statement timeout ends the list (the caller reports it as such)."""
    statement, times = _ranking(corpus, depth), []
    started = time.perf_counter()
    for tsquery in tsqueries:
        try:
            with _savepoint(conn):
                times.append(_timed(conn, statement, tsquery))
        except psycopg.errors.QueryCanceled:
            break
        if time.perf_counter() - started > MEASURING_BUDGET_SECONDS:
            break
    return times


def _time_stored(conn: psycopg.Connection, corpus: Corpus, depth: int,
                 tsqueries: Sequence[str]) -> tuple[list[float], list[int]] | None:
    """The same ranking over a temporary table of the matching documents' tsvectors, and how
    many documents each query matches; None when this role may not create one."""
    table = sql.Identifier(PROBE_TABLE)
    try:
        with _savepoint(conn):
            # one OR of every query's lexemes: one pass over the matches, through the index
            conn.execute(sql.SQL("CREATE TEMP TABLE {} ON COMMIT DROP AS SELECT {} AS id, "
                                 "{} AS tsv FROM {} WHERE {} AND {} @@ %s::tsquery").format(
                table, corpus.id_of("k"), corpus.tsvector_of("k"), corpus.table("k"),
                corpus.rows_of_dataset("k"), corpus.tsvector_of("k")),
                (" | ".join(f"({q})" for q in tsqueries),))
            conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (tsv)").format(table))
            conn.execute(sql.SQL("ANALYZE {}").format(table))
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.QueryCanceled):
        return None
    matched = [conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE tsv @@ %s::tsquery")
                            .format(table), (q,)).fetchone()[0] for q in tsqueries]
    statement = _ranking(corpus, depth, table)
    return [_timed(conn, statement, q) for q in tsqueries], matched


def measure_keyword_cost(conn: psycopg.Connection, corpus: Corpus, texts: Sequence[str], *,
                         depth: int) -> KeywordCost:
    """Time the keyword side of the search on ``texts`` (ground-truth queries) as it runs
    over ``corpus``, and over stored tsvectors of the same documents (module docstring).

    ``conn`` must be in autocommit mode; everything happens in one transaction that is
    rolled back. Queries with no lexeme (stop words only) are skipped."""
    tsqueries = [q for q in (or_tsquery_text(conn, corpus.language, t)
                             for t in texts[:MEASURED_QUERIES]) if q]
    if not tsqueries:
        return KeywordCost(0, None, None, None)
    conn.execute("BEGIN READ WRITE")  # READ WRITE: the temporary table only; rolled back
    try:
        conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(
            sql.Literal(STATEMENT_TIMEOUT_MS)))
        search = _time_search(conn, corpus, depth, tsqueries)
        if not search:
            return KeywordCost(1, None, None, None)
        stored = _time_stored(conn, corpus, depth, tsqueries[:len(search)])
    finally:
        if not conn.closed:
            conn.execute("ROLLBACK")
    return KeywordCost(len(search), statistics.median(search),
                       statistics.median(stored[1]) if stored else None,
                       statistics.median(stored[0]) if stored else None)


def measure_index_cost(conn: psycopg.Connection, corpus: Corpus, texts: Sequence[str], *,
                       depth: int) -> float | None:
    """Median milliseconds per query of the same keyword top ``depth`` from the harness's
    keyword index (:mod:`eval_harness.retrieval.keyword_rank`: postings read and ranked),
    as report, judge and calibrate compute it; None when the dataset has no current index
    (never attached with ``tsvector: null``, or attached with another mapping)."""
    source = keyword_index.current_source(conn, corpus) if keyword_index.serves(corpus) else None
    if source is None:
        return None
    documents = keyword_index.indexed_documents(conn, source)
    times = []
    for text in texts[:MEASURED_QUERIES]:
        started = time.perf_counter()
        lexemes = conn.execute("SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))",
                               (corpus.language, text)).fetchone()[0]
        items = query_items(lexemes or [])
        rank_query(documents, items, keyword_index.postings(conn, source, items)).top(depth)
        times.append((time.perf_counter() - started) * 1000.0)
    if not conn.autocommit:
        conn.rollback()
    return statistics.median(times) if times else None


@dataclass(frozen=True)
class FetchCost:
    """What the candidate fetch of every ground-truth query costs an attached dataset, as
    report, judge and calibrate run it, from two timed fetches of a few of its queries."""

    queries: int          # ground-truth queries of the dataset (what a command fetches)
    sampled: int          # of those, fetched to time it
    fixed_ms: float       # the part that does not grow with the queries (fingerprint, keys)
    per_query_ms: float   # what each further query adds

    @property
    def predicted_seconds(self) -> float:
        """The fetch of all :attr:`queries`: ``fixed + queries * per query``."""
        return (self.fixed_ms + self.queries * self.per_query_ms) / 1000.0


def measure_fetch_cost(conn: psycopg.Connection, dataset: str, *, depth: int,
                       sample: int = FETCH_SAMPLE) -> FetchCost | None:
    """Time the commands' own candidate fetch
    (:func:`eval_harness.retrieval.hybrid.candidate_scores`: the keyword index, the
    candidate cache, the semantic side) on the first query of ``dataset`` alone and on its
    next ``sample``, and split the time into a fixed part and a part per query; None when
    the dataset has no ground-truth query. The fetches run in one transaction that is rolled
    back (READ WRITE, so the candidate cache is written as a command writes it, and then
    not kept): timing changes nothing in the store."""
    ids = sorted(ground_truth.query_keys(conn, dataset))
    if not ids:
        return None
    many = ids[1:1 + max(1, sample)] or ids[:1]

    def timed(query_ids: list[int]) -> float:
        started = time.perf_counter()
        candidate_scores(conn, dataset, query_ids=query_ids, candidate_depth=depth)
        return (time.perf_counter() - started) * 1000.0

    began = conn.autocommit
    if began:  # READ WRITE: the cache is written as a command writes it, then rolled back
        conn.execute("BEGIN READ WRITE")
    try:
        timed(ids[-1:])  # warm the server's caches, as a command's first statements do
        one, all_sampled = timed(ids[:1]), timed(many)
    finally:
        if not conn.closed:
            conn.execute("ROLLBACK") if began else conn.rollback()
    per_query = (max(0.0, (all_sampled - one) / (len(many) - 1)) if len(many) > 1
                 else all_sampled)
    return FetchCost(len(ids), len(many), max(0.0, one - per_query), per_query)
