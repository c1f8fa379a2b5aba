"""Hybrid search over a dataset's corpus (:class:`~eval_harness.datasets.corpus.Corpus`: the
ingested copy in ``l2_insights`` or the RAG system's own relation): pgvector cosine
similarity + Postgres full-text rank.

Candidates for a query are the union of
  * the ``candidate_depth`` nearest documents by cosine distance (an HNSW index on the
    embedding serves it: the ingested dataset's partial index on ``embedding::vector(dim)``,
    the RAG system's own on a live corpus; ``hnsw.ef_search`` is raised to at least the depth),
  * the ``candidate_depth`` best documents by ``ts_rank(tsv, q, 1)`` (rank divided by
    1 + log(document length)) where ``q`` is the OR of the query's lexemes
    (:sql:`eh_or_tsquery`) under the dataset's text-search language.
Both lists break ties by document id ascending (``ORDER BY distance, id``; with an HNSW index
the planner sorts the index scan's equal distances by id, an Incremental Sort), so documents
tied at the cut-off are kept or left by id, never by the order rows lie in the relation. The
id is the one every ranking of the harness uses: a live corpus's own integer id column, an
ingested copy's ``l2_insights.id``, numbered in the corpus file's order
(:mod:`eval_harness.datasets.ingest`) as a store loaded from that file in order numbers its rows
(:mod:`eval_harness.datasets.demo_store`), so a live store and its ingested copy keep the same
candidates.
Every candidate gets both raw scores: semantic = 1 - cosine distance, keyword = ts_rank (0 when
no term matches). Fusion and tie-breaking are defined in :mod:`eval_harness.retrieval.fusion`;
:func:`hybrid_search` evaluates that rule in SQL, :func:`candidate_scores` returns the raw
candidate scores of many ground-truth queries at once so calibration can sweep weights in numpy.
A document without an embedding is on neither list, so it is never a candidate: an ingested
empty document (no text: NULL embedding, empty tsvector), or a live row whose embedding is
NULL (it has no semantic score, so no fused score; attach counts them). A document with a
title and no text is an ordinary one.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import psycopg

from eval_harness.datasets import ground_truth, register
from eval_harness.datasets.corpus import (
    Corpus,
    count_documents,
    document_external_ids,
    document_rows,
    on_this_server,
)
from eval_harness.errors import InvalidInput, UnknownName
from eval_harness.retrieval import candidate_cache, sql
from eval_harness.retrieval.fusion import NonFiniteScores, fuse_scores
from eval_harness.retrieval.keyword_candidates import (
    indexed_candidate_rows,
    indexed_search_candidates,
)

MAX_CANDIDATE_DEPTH = 1000  # pgvector caps hnsw.ef_search at 1000


def known_datasets(conn: psycopg.Connection, *, most: int = 8) -> str:
    """The store's dataset names for a message saying a name is not one of them: at most
    ``most``, quoted, then how many more (a store of many datasets must not turn one
    sentence into a page)."""
    names = register.dataset_names(conn)
    shown = ", ".join(f"'{name}'" for name in names[:most]) or "none"
    more = len(names) - most
    return shown if more <= 0 else f"{shown} and {more} more"


class UnknownDataset(UnknownName):
    """A dataset the store does not hold; ``dataset`` names it, so a caller that knows the
    config can say what to run (:func:`eval_harness.datasets.prepare.missing_dataset_message`)."""

    def __init__(self, message: str, dataset: str | None = None) -> None:
        super().__init__(message)
        self.dataset = dataset


def as_vector(value) -> np.ndarray:
    """A pgvector value (``Vector``, list or array) as a float32 numpy array."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    language: str
    embedding_model: str
    embedding_dim: int
    documents: int      # -1 unless counted
    queries: int        # -1 unless counted
    corpus: Corpus

    @property
    def is_live(self) -> bool:
        return self.corpus.is_live


@dataclass(frozen=True)
class SearchHit:
    id: int
    external_id: str
    score: float
    semantic: float
    keyword: float
    content: str


@dataclass(frozen=True)
class QueryCandidates:
    """Raw scores of one ground-truth query's candidate union, ordered by document id."""
    query_id: int
    doc_ids: np.ndarray   # int64
    semantic: np.ndarray  # float64, cosine similarity
    keyword: np.ndarray   # float64, ts_rank (0 = no term matched)


def dataset_info(conn: psycopg.Connection, name: str, *, with_counts: bool = True) -> DatasetInfo:
    """The dataset's language, embedding model and corpus; document/query counts unless told
    not to."""
    row = register.dataset_row(conn, name)
    if row is None:
        shown = " ".join(name.split())  # it may come from a file: one line, cut
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        raise UnknownDataset(
            f"Dataset '{shown}' is not in the store (known: {known_datasets(conn)}); "
            f"run `eval-harness ingest PATH --name {shown}` for a BEIR folder, or "
            f"`eval-harness attach --dataset {shown}` for a live dataset in config.yaml.",
            name)
    name, language, model, dim, kind, mapping = row
    corpus = (Corpus.live(name, language, dim, mapping) if kind == "live"
              else Corpus.ingested(name, language, dim))
    corpus = on_this_server(conn, corpus)
    documents = count_documents(conn, corpus) if with_counts else -1
    count = ground_truth.count_queries(conn, name) if with_counts else -1
    return DatasetInfo(name, language, model, dim, documents, count, corpus)


def _check_depth(depth: int) -> None:
    if not 1 <= depth <= MAX_CANDIDATE_DEPTH:
        raise ValueError(f"candidate_depth must be between 1 and {MAX_CANDIDATE_DEPTH}, "
                         f"got {depth}")


def ef_search_for(depth: int) -> int:
    """``hnsw.ef_search`` for a candidate depth: it bounds how many neighbours an HNSW scan
    can return; twice the depth keeps the approximate top-`depth` close to exact at little
    cost."""
    return min(MAX_CANDIDATE_DEPTH, max(100, 2 * depth))


def _set_ef_search(conn: psycopg.Connection, depth: int) -> None:
    sql.set_hnsw_ef_search(conn, ef_search_for(depth))


def hybrid_search(conn: psycopg.Connection, dataset: str, *, query_text: str,
                  query_embedding: np.ndarray | None, k: int = 5,
                  semantic_weight: float = 0.7, keyword_weight: float | None = None,
                  candidate_depth: int = 50) -> list[SearchHit]:
    """Top ``k`` documents by fused score (see module docstring), ties by id ascending.

    ``query_embedding`` may be None only with ``semantic_weight == 0``: keyword-only search.
    ``k`` must be at least 1; at most ``candidate_depth`` documents per retriever are
    candidates, so fewer than ``k`` can come back when ``k`` exceeds the depth.
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    _check_depth(candidate_depth)
    if keyword_weight is None:
        keyword_weight = 1.0 - semantic_weight
    info = dataset_info(conn, dataset, with_counts=False)
    semantic = query_embedding is not None
    if semantic:
        query_embedding = as_vector(query_embedding)
    if not semantic and semantic_weight != 0:
        raise ValueError("A query embedding is needed unless semantic_weight is 0.")
    if semantic and len(query_embedding) != info.embedding_dim:
        raise InvalidInput(f"The query embedding has {len(query_embedding)} dimensions; dataset "
                           f"'{dataset}' uses {info.embedding_dim} ({info.embedding_model}).")
    _set_ef_search(conn, candidate_depth)
    rows = _indexed_search_rows(conn, info.corpus, candidate_depth, query_text=query_text,
                                query_embedding=query_embedding,
                                semantic_weight=semantic_weight,
                                keyword_weight=keyword_weight, k=k)
    if rows is None:  # an ingested copy, a stored tsvector column, or no keyword index yet
        rows = sql.search_rows(conn, info.corpus, candidate_depth, query_text=query_text,
                               query_embedding=query_embedding,
                               semantic_weight=semantic_weight, keyword_weight=keyword_weight,
                               k=k)
    ids = [r[0] for r in rows]
    if len(set(ids)) < len(ids):  # a live corpus whose ids repeat since it was attached
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidInput(f"dataset '{dataset}': {info.corpus.relation_name} holds document id "
                           f"{_shown_ids(repeated)} in more than one row: its {info.corpus.id} "
                           "column is not unique any more; make it unique (one row per "
                           "document) and attach again.")
    return [SearchHit(int(r[0]), r[1], float(r[2]), float(r[3]), float(r[4]), r[5]) for r in rows]


def _indexed_search_rows(conn: psycopg.Connection, corpus: Corpus, depth: int, *,
                         query_text: str, query_embedding: np.ndarray | None,
                         semantic_weight: float, keyword_weight: float,
                         k: int) -> list[tuple] | None:
    """:func:`sql.search_rows`'s rows, the keyword side from the keyword index
    (:func:`eval_harness.retrieval.keyword_candidates.indexed_search_candidates`) and the
    fusion in numpy (:mod:`eval_harness.retrieval.fusion`: the same floats as the SQL), so
    ``search`` ranks as ``report``, ``calibrate`` and ``judge`` do; None without an index."""
    found = indexed_search_candidates(conn, corpus, depth, text=query_text,
                                      embedding=query_embedding)
    if found is None:
        return None
    doc_ids, semantic, keyword = found
    if not doc_ids.size:
        return []
    fused = fuse_scores(semantic, keyword, semantic_weight, keyword_weight)
    order = np.lexsort((doc_ids, -fused))[:k]
    texts = {int(i): content for i, content, _ in
             document_rows(conn, corpus, doc_ids[order].tolist(), with_embeddings=False)}
    own = document_external_ids(conn, corpus, doc_ids[order].tolist())
    return [(int(doc_ids[j]), own[int(doc_ids[j])], float(fused[j]), float(semantic[j]),
             float(keyword[j]), texts[int(doc_ids[j])]) for j in order]


def cached_candidate_queries(conn: psycopg.Connection, dataset: str, *,
                             candidate_depth: int = 50) -> tuple[int, int]:
    """``(cached, total)``: how many of the dataset's ground-truth queries a candidate fetch
    at ``candidate_depth`` would read from the candidate cache now (the doctor's line)."""
    info = dataset_info(conn, dataset, with_counts=False)
    statement = sql.candidate_statement(info.corpus, candidate_depth).as_string(conn)
    return candidate_cache.cached_count(conn, info.corpus, candidate_depth,
                                        (statement, ef_search_for(candidate_depth)))


def candidate_scores(conn: psycopg.Connection, dataset: str, *,
                     query_ids: list[int] | None = None,
                     candidate_depth: int = 50) -> list[QueryCandidates]:
    """Candidate unions with both raw scores for many ground-truth queries in one statement
    (a live corpus with ``tsvector: null`` and a keyword index: its keyword side from the
    index, :mod:`eval_harness.retrieval.keyword_candidates`; the same values); what an
    unchanged corpus and query already had comes from the candidate cache
    (:mod:`eval_harness.retrieval.candidate_cache`), identical to a fresh fetch.

    Refuses, in one sentence naming the query by its own id, candidates no metric can use
    (:func:`refuse_unusable_candidates`)."""
    _check_depth(candidate_depth)
    info = dataset_info(conn, dataset, with_counts=False)
    _set_ef_search(conn, candidate_depth)
    statement = sql.candidate_statement(info.corpus, candidate_depth).as_string(conn)
    rows = candidate_cache.fetch_through_cache(
        conn, info.corpus, candidate_depth, (statement, ef_search_for(candidate_depth)),
        query_ids, lambda ids: _fetch_candidate_rows(conn, info.corpus, candidate_depth, ids))
    result = []
    for query_id, doc_ids, sem, kw in rows:
        result.append(QueryCandidates(  # an empty union: NULL arrays from the statement
            int(query_id), np.asarray([] if doc_ids is None else doc_ids, dtype=np.int64),
            _semantic_scores(sem), np.asarray([] if kw is None else kw, dtype=np.float64)))
    refuse_unusable_candidates(conn, info.corpus, result)
    return result


def _semantic_scores(values) -> np.ndarray:
    """The semantic scores of one query's candidates. SQL NULL (a query stored without an
    embedding: a generated or users' query no embedder could reach) is no semantic side, 0
    for every candidate, so such a query ranks by keywords; NaN (a vector cosine similarity
    cannot use) stays NaN and is refused (:func:`refuse_unusable_candidates`)."""
    if values is None:
        return np.asarray([], dtype=np.float64)
    scores = np.asarray(values, dtype=np.float64)  # None reads as NaN: tell them apart
    if np.isnan(scores).any() and None in values:  # only then: the sweep's hot path
        scores = np.asarray([0.0 if v is None else v for v in values], dtype=np.float64)
    return scores


def _fetch_candidate_rows(conn: psycopg.Connection, corpus: Corpus, depth: int,
                          query_ids: list[int] | None) -> list[tuple]:
    """The candidate rows, searched: the keyword side from the keyword index when the corpus
    has one, else the search's own statement."""
    rows = indexed_candidate_rows(conn, corpus, depth, query_ids=query_ids)
    if rows is None:  # an ingested copy, a stored tsvector column, or no keyword index yet
        rows = sql.candidate_rows(conn, corpus, depth, query_ids=query_ids)
    return rows


def refuse_unusable_candidates(conn: psycopg.Connection, corpus: Corpus,
                               fetched: list[QueryCandidates]) -> None:
    """Raise for the first query whose candidates no metric can use, naming it by the
    dataset's own id (the harness's row id means nothing to the user):

    * a document listed twice: a live corpus whose id column repeats an id (attach refuses
      one; the RAG system may have added a row since) -> ``ValueError``;
    * a NaN semantic score (the keyword score is ts_rank or 0, never NaN): an all-zero or
      non-finite embedding of the query (all its candidates are NaN) or of the documents
      whose scores are NaN -> :class:`NonFiniteScores`. Ingest refuses such vectors; a live
      corpus or a store written otherwise may hold them.
    """
    for found in fetched:
        repeated = found.doc_ids[1:][found.doc_ids[1:] == found.doc_ids[:-1]]  # sorted by id
        undefined = np.isnan(found.semantic)
        if not repeated.size and not undefined.any():
            continue
        query = ground_truth.query_external_ids(conn, [found.query_id])[found.query_id]
        where = f"dataset '{corpus.dataset}': query '{query}'"
        if repeated.size:
            shown = _shown_ids(sorted(set(repeated.tolist())))
            raise InvalidInput(
                f"{where} finds document id {shown} in more than one row of "
                f"{corpus.relation_name}, so no metric is computed: its {corpus.id} column is "
                f"not unique any more; make it unique (one row per document) and attach "
                f"again.")
        if undefined.all() and undefined.size > 1:
            blame = "the query's own embedding is"
        else:
            names = document_external_ids(conn, corpus, found.doc_ids[undefined].tolist())
            ids = [f"'{names[i]}'" for i in sorted(names)]
            blame = (f"the embedding of document {ids[0]} is" if len(ids) == 1 else
                     f"the embeddings of documents {_shown_ids(ids)} are")
        fix = (f"fix these rows of {corpus.relation_name}" if corpus.is_live
               else "re-ingest the dataset with valid embeddings")
        raise NonFiniteScores(
            f"{where} has {int(undefined.sum())} candidates whose semantic score is NaN, so no "
            f"metric is computed; {blame} all zeros or not finite (cosine similarity is "
            f"undefined): {fix}.")


def _shown_ids(ids: list, limit: int = 5) -> str:
    return ", ".join(str(i) for i in ids[:limit]) + (", ..." if len(ids) > limit else "")
