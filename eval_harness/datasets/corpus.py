"""Where a dataset's documents are, and the SQL to read them: one code path for both kinds.

An *ingested* dataset's documents are rows of the harness's ``l2_insights`` (filtered by
``dataset``; untyped ``embedding`` compared as ``embedding::vector(dim)``, which its partial
HNSW index covers; a stored ``tsv``). A *live* dataset's documents are the RAG system's own
relation, read in place through the mapping recorded when it was attached
(:mod:`eval_harness.datasets.live`); a live corpus may be only some rows of its relation (a
LangChain collection: ``collection_id = <its uuid>``, :class:`Subset`), which
:meth:`Corpus.rows_of_dataset` selects as it selects an ingested dataset's rows. Every
statement that reads documents (hybrid search, the
calibration candidates, judging, review, TREC files) composes its ``FROM`` and column
expressions from a :class:`Corpus`, so both kinds run the same statements; the search's
candidate subqueries (:func:`candidate_ids`) are here too, next to the corpus they read, so
the index check (:mod:`eval_harness.datasets.live_indexes`) explains the very SQL the search runs.

Identifiers are always composed with :class:`psycopg.sql.Identifier` (quoted), values with
:class:`psycopg.sql.Literal`; nothing from a config is spliced into SQL text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg import sql

from eval_harness.datasets import document_ids
from eval_harness.settings.datasets import sql_name

INGESTED_TABLE = "l2_insights"  # in the harness schema (first on the search path)


@dataclass(frozen=True)
class Subset:
    """The rows of a live relation that are the corpus: ``column = value`` (LangChain's
    ``collection_id`` and the collection's uuid, resolved from its name at attach); ``label``
    names them in messages (``collection 'docs'``)."""

    column: str
    value: str
    label: str


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
    subset: Subset | None = None        # a live corpus of only some of its relation's rows
    own_ids: str | None = None          # a live corpus's text/char/uuid ids: read through
                                        # the harness's integer ids (store.document_ids)
    versioned: bool = True              # a live relation whose rows have xmin (a table)
    semantic_ties_by_id: bool = True    # the semantic top breaks ties by id (not on an
                                        # old server whose vector index would then go
                                        # unused: on_this_server)

    # -------------------------------------------------------------------- construction

    @classmethod
    def ingested(cls, dataset: str, language: str, dim: int) -> Corpus:
        return cls(dataset, language, dim)

    @classmethod
    def live(cls, dataset: str, language: str, dim: int,
             mapping: Mapping[str, Any]) -> Corpus:
        """From a recorded corpus mapping (:meth:`mapping_record`)."""
        own_ids = mapping.get("own_ids")
        return cls(dataset, language, dim, relation=(mapping["schema"], mapping["relation"]),
                   id=mapping["id"], content=mapping["content"],
                   embedding=mapping["embedding"], tsvector=mapping.get("tsvector"),
                   cast_embedding=not mapping.get("typed", False),
                   external_id=None if own_ids is None else document_ids.OWN_ID_COLUMN,
                   dataset_column=None, own_ids=own_ids,
                   versioned=mapping.get("versioned", True),
                   subset=Subset(**mapping["subset"]) if mapping.get("subset") else None)

    @staticmethod
    def mapping_record(schema: str, relation: str, id: str, content: str, embedding: str,
                       tsvector: str | None, typed: bool, own_ids: str | None = None,
                       versioned: bool = True, subset: Subset | None = None) -> dict[str, Any]:
        """What ``datasets.corpus_mapping`` holds for a live dataset; ``own_ids``: the kind of
        a text or uuid id column (:func:`eval_harness.datasets.document_ids.own_id_kind`), whose
        documents are read through the harness's integer ids; ``versioned``: whether the
        relation's rows have ``xmin`` (a table; not a view). An integer-id corpus's record
        has neither key; ``subset``: the rows that are the corpus
        (a LangChain collection), none when all are."""
        record = {"schema": schema, "relation": relation, "id": id, "content": content,
                  "embedding": embedding, "tsvector": tsvector, "typed": typed}
        if own_ids is not None:
            record.update(own_ids=own_ids, versioned=versioned)
        if subset is not None:
            record["subset"] = {"column": subset.column, "value": subset.value,
                                "label": subset.label}
        return record

    @property
    def is_live(self) -> bool:
        return self.dataset_column is None

    @property
    def relation_name(self) -> str:
        """The relation as SQL writes it (``public.l2_insights``, ``"My Schema"."Docs"``)."""
        return sql_name(*self.relation)

    @property
    def described(self) -> str:
        """The relation, and which of its rows when only some are the corpus (messages)."""
        if self.subset is None:
            return self.relation_name
        return f"{self.relation_name} ({self.subset.label})"

    # -------------------------------------------------------------------- SQL pieces

    @property
    def has_own_ids(self) -> bool:
        """Whether the corpus's own ids are text or uuid, read through the harness's integer
        ids (:mod:`eval_harness.datasets.document_ids`); False for integer ids and copies."""
        return self.own_ids is not None

    def table(self, alias: str) -> sql.Composable:
        """``<relation> AS <alias>`` for a FROM clause; for a corpus with text or uuid ids the
        relation joined to the harness's ids (the documents the last attach saw), with the
        same column names and ``id`` the harness's integer id."""
        if self.own_ids is not None:
            columns = [self.content, self.embedding] + ([self.tsvector] if self.tsvector else [])
            if self.subset is not None:  # rows_of_dataset reads it
                columns.append(self.subset.column)
            return document_ids.joined_relation(
                self.relation, alias, dataset=self.dataset, id_column=self.id,
                kind=self.own_ids, columns=columns, versioned=self.versioned)
        return sql.SQL("{} AS {}").format(sql.Identifier(*self.relation), sql.Identifier(alias))

    def rows_of_dataset(self, alias: str) -> sql.Composable:
        """The condition that selects this dataset's rows (TRUE for a live relation that is
        all corpus; ``column = 'value'`` for a :class:`Subset`, the literal the server
        reads as the column's type, so a partial index on it serves the search)."""
        if self.dataset_column is None and self.subset is not None:
            return sql.SQL("{} = {}").format(sql.Identifier(alias, self.subset.column),
                                             sql.Literal(self.subset.value))
        if self.dataset_column is None:
            return sql.SQL("TRUE")
        return sql.SQL("{} = {}").format(sql.Identifier(alias, self.dataset_column),
                                         sql.Literal(self.dataset))

    def id_of(self, alias: str) -> sql.Composed:
        return sql.SQL("{}").format(sql.Identifier(alias, self.id))

    def candidate_table(self, alias: str) -> sql.Composable:
        """The FROM item of the search's candidate subqueries: :meth:`table`, except for a
        corpus with text or uuid ids, whose relation is read itself so that its vector and
        text indexes order the candidates (:meth:`candidate_id_of` gives the ids)."""
        if self.own_ids is not None:
            return sql.SQL("{} AS {}").format(sql.Identifier(*self.relation),
                                              sql.Identifier(alias))
        return self.table(alias)

    def candidate_id_of(self, alias: str) -> sql.Composable:
        """The harness id of a row of :meth:`candidate_table` (NULL: not attached yet)."""
        if self.own_ids is not None:
            return document_ids.harness_id_of(alias, dataset=self.dataset, id_column=self.id,
                                              kind=self.own_ids)
        return self.id_of(alias)

    def candidate_order_id_of(self, alias: str) -> sql.Composed:
        """What breaks ties among the rows of :meth:`candidate_table`: the id, and for a
        corpus with text or uuid ids its own id column (in that column's order). Not the
        harness id of :meth:`candidate_id_of`: as a sort key that lookup would run once per
        row the sort reads (every row of a relation without a vector index), while a lookup
        only in the select list runs after the sort, for the rows kept. Own ids order as
        their text does byte by byte (``COLLATE "C"``; a uuid's bytes order alike), the order
        in which attach gives harness ids (:mod:`eval_harness.datasets.document_ids`)."""
        column = sql.Identifier(alias, self.id)
        if self.own_ids is None or self.own_ids == "uuid":
            return sql.SQL("{}").format(column)
        return sql.SQL('({}::text COLLATE "C")').format(column)

    def joined_order_id_of(self, alias: str) -> sql.Composed:
        """:meth:`candidate_order_id_of` for a row of :meth:`table` (the joined form)."""
        if self.own_ids is None:
            return self.id_of(alias)
        return sql.SQL('({} COLLATE "C")').format(
            sql.Identifier(alias, document_ids.OWN_ID_COLUMN))

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
        """The dataset's own id of a document, as text (a uuid in its canonical form)."""
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


def seeded_documents(conn: psycopg.Connection, corpus: Corpus, *, seed: int, limit: int,
                     offset: int = 0) -> list[tuple[int, str, str]]:
    """``(id, own id, content)`` of the corpus's non-empty documents in a seeded order (md5 of
    the seed and the id, then the id), ``limit`` of them from position ``offset``: the same
    seed gives the same order, and a longer list extends a shorter one. Reads every row's id
    once (a sort on the server), the content of the rows returned only."""
    return conn.execute(sql.SQL("""
        SELECT o.id, o.own, {content} FROM (
            SELECT {did} AS id, {own} AS own FROM {d} WHERE {rows} AND {content} <> ''
            ORDER BY md5(%(seed)s || ':' || ({did})::text), {did}
            LIMIT %(limit)s OFFSET %(offset)s) o
        JOIN {d} ON {rows} AND {did} = o.id
        ORDER BY md5(%(seed)s || ':' || (o.id)::text), o.id""").format(
        did=corpus.id_of("d"), own=corpus.external_id_of("d"), d=corpus.table("d"),
        rows=corpus.rows_of_dataset("d"), content=corpus.content_of("d")),
        {"seed": str(seed), "limit": limit, "offset": offset}).fetchall()


def count_documents(conn: psycopg.Connection, corpus: Corpus) -> int:
    """The documents of ``corpus``."""
    return conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
        corpus.table("d"), corpus.rows_of_dataset("d"))).fetchone()[0]


def candidate_ids(corpus: Corpus, depth: int, *, semantic: bool,
                  keyword: bool = True) -> sql.Composed:
    """The candidate union for the lateral query row ``q`` (``emb``, ``tsq``): a subquery of
    ``id``s, joined to the corpus by id. ``keyword=False``: the semantic side only (the
    keyword side then comes from the keyword index, :mod:`eval_harness.datasets.keyword_index`).
    Each side breaks ties by id ascending (a text or uuid corpus: by its own id), so a tie
    at the cut-off keeps the smaller ids whatever order the rows lie in
    (:mod:`eval_harness.retrieval.hybrid`).

    A join, not ``d.id IN (...)``: before PostgreSQL 17 the IN form referencing ``q`` is
    planned as a correlated SubPlan, one vector-index scan per document of the corpus
    (tests/retrieval/test_sql_plans.py checks the plan shape). A corpus with text or uuid
    ids is ranked on its relation itself (:meth:`Corpus.candidate_table`), each candidate's
    harness id probed by its own id; a row not attached yet has none (NULL) and is dropped
    by the join to the corpus."""
    parts = []
    if semantic:
        # An empty document has no embedding: the index leaves it out, but a plan that sorts
        # would put its NULL distance last and make it a candidate with no semantic score.
        parts.append(sql.SQL(
            "(SELECT {sid} AS id FROM {s} WHERE {s_rows} AND {s_emb_col} IS NOT NULL "
            "ORDER BY {s_emb} <=> q.emb{s_order} LIMIT {depth})"))
    # A document without an embedding has no semantic score, so no fused score: it is no
    # keyword candidate either (an ingested one is empty and matches nothing anyway).
    if keyword:
        parts.append(sql.SQL(
            "(SELECT {kid} AS id FROM {k} WHERE {k_rows} AND {k_tsv} @@ q.tsq "
            "AND {k_emb_col} IS NOT NULL "
            "ORDER BY ts_rank({k_tsv}, q.tsq, 1) DESC, {k_order} LIMIT {depth})"))
    values = {"sid": corpus.candidate_id_of("s"), "s": corpus.candidate_table("s"),
              "s_rows": corpus.rows_of_dataset("s"), "s_emb_col": corpus.embedding_column("s"),
              "s_emb": corpus.embedding_of("s"), "kid": corpus.candidate_id_of("k"),
              "k": corpus.candidate_table("k"), "k_rows": corpus.rows_of_dataset("k"),
              "k_emb_col": corpus.embedding_column("k"),
              "k_tsv": corpus.tsvector_of("k"), "depth": sql.Literal(depth),
              "s_order": (sql.SQL(", {}").format(corpus.candidate_order_id_of("s"))
                          if corpus.semantic_ties_by_id else sql.SQL("")),
              "k_order": corpus.candidate_order_id_of("k")}
    return sql.SQL(" UNION ").join(part.format(**values) for part in parts)


# ------------------------------------------------------------------------------ ties

# The first server version whose planner keeps an ordered vector-index scan under a second
# sort key (an Incremental Sort over the HNSW scan); before it, ``ORDER BY distance, id``
# makes it sort every row of the corpus per query instead.
INCREMENTAL_KNN_SORT = 170000


def on_this_server(conn: psycopg.Connection, corpus: Corpus) -> Corpus:
    """``corpus`` as this server searches it: its semantic top breaks ties by id always from
    PostgreSQL 17 on, and before it only for a relation without a vector index (hnsw,
    ivfflat), whose search sorts the rows anyway. With such an index on an older server the
    index orders the semantic top alone (an approximate search: ties as the index returns
    them). Every statement built for a command's connection starts from this."""
    if conn.info.server_version >= INCREMENTAL_KNN_SORT or not corpus.semantic_ties_by_id:
        return corpus
    indexed = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = to_regclass(%s) "
        "AND a.amname IN ('hnsw', 'ivfflat'))", (corpus.relation_name,)).fetchone()[0]
    return replace(corpus, semantic_ties_by_id=False) if indexed else corpus


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


def content_version(conn: psycopg.Connection, corpus: Corpus) -> str:
    """A fingerprint of what the corpus holds: its documents' own ids and texts (the number of
    documents and the sum of a 64-bit hash of each id with the md5 of its text), so that two
    stores holding the same documents (an ingested copy and the live relation it came from, or
    the same store before and after a reindex) have the same one, and a document added,
    removed or edited changes it. What :mod:`eval_harness.comparison` calls the corpus version
    of a record; unlike :func:`corpus_version` it reads every text (one pass)."""
    count, total = conn.execute(sql.SQL(
        "SELECT count(*), coalesce(sum(hashtextextended({}::text || ':' || md5({}), 0)"
        "::numeric), 0) FROM {} WHERE {}").format(
        corpus.external_id_of("d"), corpus.content_of("d"), corpus.table("d"),
        corpus.rows_of_dataset("d"))).fetchone()
    return f"{count}:{total}"
