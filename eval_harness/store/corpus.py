"""Where a dataset's documents are, and the SQL to read them: one code path for both kinds.

An *ingested* dataset's documents are rows of the harness's ``l2_insights`` (filtered by
``dataset``; untyped ``embedding`` compared as ``embedding::vector(dim)``, which its partial
HNSW index covers; a stored ``tsv``). A *live* dataset's documents are the RAG system's own
relation, read in place through the mapping recorded when it was attached
(:mod:`eval_harness.store.live`). Every statement that reads documents (hybrid search, the
calibration candidates, judging, review, TREC files) composes its ``FROM`` and column
expressions from a :class:`Corpus`, so both kinds run the same statements; the search's
candidate subqueries (:func:`candidate_ids`) are here too, next to the corpus they read, so
the index check (:mod:`eval_harness.store.indexes`) explains the very SQL the search runs.

Identifiers are always composed with :class:`psycopg.sql.Identifier` (quoted), values with
:class:`psycopg.sql.Literal`; nothing from a config is spliced into SQL text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Mapping

import psycopg
from psycopg import sql

from eval_harness.settings.datasets import sql_name

INGESTED_TABLE = "l2_insights"  # in the harness schema (first on the search path)


@dataclass(frozen=True)
class Corpus:
    dataset: str
    language: str                       # text-search configuration
    dim: int                            # embedding dimensions
    relation: tuple[str, ...] = (INGESTED_TABLE,)  # (schema, name) for a live relation
    id: str = "id"
    content: str = "content"
    embedding: str = "embedding"
    tsvector: str | None = "tsv"        # None: to_tsvector(language, content)
    cast_embedding: bool = True         # the column's type has no dimensions: cast it
    external_id: str | None = "external_id"  # None: the id as text is the dataset's own id
    dataset_column: str | None = "dataset"    # ingested rows are those of this dataset

    # -------------------------------------------------------------------- construction

    @classmethod
    def ingested(cls, dataset: str, language: str, dim: int) -> "Corpus":
        return cls(dataset, language, dim)

    @classmethod
    def live(cls, dataset: str, language: str, dim: int,
             mapping: Mapping[str, Any]) -> "Corpus":
        """From a recorded corpus mapping (:meth:`mapping_record`)."""
        return cls(dataset, language, dim, relation=(mapping["schema"], mapping["relation"]),
                   id=mapping["id"], content=mapping["content"],
                   embedding=mapping["embedding"], tsvector=mapping.get("tsvector"),
                   cast_embedding=not mapping.get("typed", False), external_id=None,
                   dataset_column=None)

    @staticmethod
    def mapping_record(schema: str, relation: str, id: str, content: str, embedding: str,
                       tsvector: str | None, typed: bool) -> dict[str, Any]:
        """What ``datasets.corpus_mapping`` holds for a live dataset."""
        return {"schema": schema, "relation": relation, "id": id, "content": content,
                "embedding": embedding, "tsvector": tsvector, "typed": typed}

    @property
    def is_live(self) -> bool:
        return self.dataset_column is None

    @property
    def relation_name(self) -> str:
        """The relation as SQL writes it (``public.l2_insights``, ``"My Schema"."Docs"``)."""
        return sql_name(*self.relation)

    # -------------------------------------------------------------------- SQL pieces

    def table(self, alias: str) -> sql.Composed:
        """``<relation> AS <alias>`` for a FROM clause."""
        return sql.SQL("{} AS {}").format(sql.Identifier(*self.relation), sql.Identifier(alias))

    def rows_of_dataset(self, alias: str) -> sql.Composable:
        """The condition that selects this dataset's rows (TRUE for a live relation)."""
        if self.dataset_column is None:
            return sql.SQL("TRUE")
        return sql.SQL("{} = {}").format(sql.Identifier(alias, self.dataset_column),
                                         sql.Literal(self.dataset))

    def id_of(self, alias: str) -> sql.Composed:
        return sql.SQL("{}").format(sql.Identifier(alias, self.id))

    def content_of(self, alias: str) -> sql.Composed:
        """The document's text; a live row without one (NULL) reads as empty."""
        if self.is_live:
            return sql.SQL("coalesce({}, '')").format(sql.Identifier(alias, self.content))
        return sql.SQL("{}").format(sql.Identifier(alias, self.content))

    def embedding_of(self, alias: str) -> sql.Composed:
        """The embedding as the search compares it (what a vector index must be built on)."""
        column = sql.Identifier(alias, self.embedding)
        if self.cast_embedding:
            return sql.SQL("({}::vector({}))").format(column, sql.Literal(self.dim))
        return sql.SQL("{}").format(column)

    def embedding_column(self, alias: str) -> sql.Composed:
        return sql.SQL("{}").format(sql.Identifier(alias, self.embedding))

    def tsvector_of(self, alias: str) -> sql.Composed:
        """The document's tsvector: the mapped column, else to_tsvector(language, content)
        (the expression a GIN index must be built on to serve the search)."""
        if self.tsvector is not None:
            return sql.SQL("{}").format(sql.Identifier(alias, self.tsvector))
        return sql.SQL("to_tsvector({}::regconfig, {})").format(
            sql.Literal(self.language), sql.Identifier(alias, self.content))

    def external_id_of(self, alias: str) -> sql.Composed:
        """The dataset's own id of a document, as text."""
        if self.external_id is None:
            return sql.SQL("({}::text)").format(sql.Identifier(alias, self.id))
        return sql.SQL("{}").format(sql.Identifier(alias, self.external_id))


# ------------------------------------------------------------------------------ reads

def document_rows(conn: psycopg.Connection, corpus: Corpus, doc_ids: Sequence[int], *,
                  with_embeddings: bool) -> list[tuple]:
    """``(id, content, embedding)`` of the documents ``doc_ids`` found in ``corpus``; the
    embedding is None unless ``with_embeddings``."""
    return conn.execute(sql.SQL("SELECT {}, {}, {} FROM {} WHERE {} AND {} = ANY(%s)").format(
        corpus.id_of("d"), corpus.content_of("d"),
        corpus.embedding_column("d") if with_embeddings else sql.SQL("NULL"),
        corpus.table("d"), corpus.rows_of_dataset("d"), corpus.id_of("d")),
        ([int(i) for i in doc_ids],)).fetchall()


def document_external_ids(conn: psycopg.Connection, corpus: Corpus,
                          doc_ids: Sequence[int]) -> dict[int, str]:
    """The dataset's own ids of the documents ``doc_ids`` found in ``corpus``: {id: own id}."""
    return dict(conn.execute(sql.SQL("SELECT {}, {} FROM {} WHERE {} AND {} = ANY(%s)").format(
        corpus.id_of("d"), corpus.external_id_of("d"), corpus.table("d"),
        corpus.rows_of_dataset("d"), corpus.id_of("d")),
        ([int(i) for i in doc_ids],)).fetchall())


def document_ids_by_external_id(conn: psycopg.Connection, corpus: Corpus,
                                external_ids: Sequence[str]) -> dict[str, int]:
    """The ids of the documents whose own ids are ``external_ids``: {own id: id}."""
    return {own: int(i) for i, own in conn.execute(
        sql.SQL("SELECT {}, {} FROM {} WHERE {} AND {} = ANY(%s::text[])").format(
            corpus.id_of("d"), corpus.external_id_of("d"), corpus.table("d"),
            corpus.rows_of_dataset("d"), corpus.external_id_of("d")),
        (list(external_ids),))}


def count_documents(conn: psycopg.Connection, corpus: Corpus) -> int:
    """The documents of ``corpus``."""
    return conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
        corpus.table("d"), corpus.rows_of_dataset("d"))).fetchone()[0]


def candidate_ids(corpus: Corpus, depth: int, *, semantic: bool,
                  keyword: bool = True) -> sql.Composed:
    """The candidate union for the lateral query row ``q`` (``emb``, ``tsq``): a subquery of
    ``id``s, joined to the corpus by id. ``keyword=False``: the semantic side only (the
    keyword side then comes from the keyword index, :mod:`eval_harness.store.keyword_index`).
    Each side breaks ties by id ascending, so a tie at the cut-off keeps the smaller ids
    whatever order the rows lie in (:mod:`eval_harness.retrieval.hybrid`).

    A join, not ``d.id IN (...)``: before PostgreSQL 17 the IN form referencing ``q`` is
    planned as a correlated SubPlan, one vector-index scan per document of the corpus
    (tests/retrieval/test_sql_plans.py checks the plan shape)."""
    parts = []
    if semantic:
        # An empty document has no embedding: the index leaves it out, but a plan that sorts
        # would put its NULL distance last and make it a candidate with no semantic score.
        parts.append(sql.SQL(
            "(SELECT {sid} AS id FROM {s} WHERE {s_rows} AND {s_emb_col} IS NOT NULL "
            "ORDER BY {s_emb} <=> q.emb, {sid} LIMIT {depth})"))
    # A document without an embedding has no semantic score, so no fused score: it is no
    # keyword candidate either (an ingested one is empty and matches nothing anyway).
    if keyword:
        parts.append(sql.SQL(
            "(SELECT {kid} AS id FROM {k} WHERE {k_rows} AND {k_tsv} @@ q.tsq "
            "AND {k_emb_col} IS NOT NULL "
            "ORDER BY ts_rank({k_tsv}, q.tsq, 1) DESC, {kid} LIMIT {depth})"))
    values = {"sid": corpus.id_of("s"), "s": corpus.table("s"),
              "s_rows": corpus.rows_of_dataset("s"), "s_emb_col": corpus.embedding_column("s"),
              "s_emb": corpus.embedding_of("s"), "kid": corpus.id_of("k"),
              "k": corpus.table("k"), "k_rows": corpus.rows_of_dataset("k"),
              "k_emb_col": corpus.embedding_column("k"),
              "k_tsv": corpus.tsvector_of("k"), "depth": sql.Literal(depth)}
    return sql.SQL(" UNION ").join(part.format(**values) for part in parts)


# ------------------------------------------------------------------------------ change detection

# Relation kinds whose rows carry xmin (tables, partitioned tables, materialized views).
_VERSIONED_KINDS = ("r", "p", "m")


def corpus_version(conn: psycopg.Connection, corpus: Corpus) -> str | None:
    """A fingerprint of the corpus that changes whenever a document is added, removed or
    changed, or an index of its relation is built, dropped or rebuilt; None when it cannot be
    had (a view or a foreign table: its rows have no xmin).

    The rows part is the number of rows and the sum of a 64-bit hash of each row's id and
    xmin (the transaction that wrote the row's current version: an UPDATE always writes a
    new one), read in one pass over the relation without reading its text (on 500,000 rows
    it is a scan of the heap, about a second). The index part is each index's relfilenode
    (REINDEX and a new index change it). This is the one place the harness decides "the
    corpus changed" for the candidate cache; derived change markers can replace it here.
    A change of the text-search configuration (same name, other lexemes) is no change of the
    corpus: the cache keys its entries on the configuration's definition besides this
    (:func:`eval_harness.retrieval.candidate_cache.search_key`)."""
    kind, indexes = conn.execute(
        "SELECT c.relkind::text, (SELECT string_agg(i.indexrelid::text || ':' "
        "|| pg_relation_filenode(i.indexrelid)::text, ',' ORDER BY i.indexrelid) "
        "FROM pg_index i WHERE i.indrelid = c.oid) "
        "FROM pg_class c WHERE c.oid = to_regclass(%s)", (corpus.relation_name,)).fetchone() \
        or (None, None)
    if kind not in _VERSIONED_KINDS:
        return None
    count, total = conn.execute(sql.SQL(
        "SELECT count(*), coalesce(sum(hashtextextended({}::text || ':' || d.xmin::text, 0)"
        "::numeric), 0) FROM {} WHERE {}").format(
        corpus.id_of("d"), corpus.table("d"), corpus.rows_of_dataset("d"))).fetchone()
    return f"{count}:{total}:{indexes or ''}"
