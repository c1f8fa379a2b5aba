"""The owner of ``document_ids``: the harness's integer ids of the documents of a live corpus
whose own ids are text or uuid.

Every harness table keeps document ids as integers (the ground truth's expected and judged
documents, the review queue, the human sample, the keyword index, the candidate cache). A live
corpus with an integer id column uses its own ids as they are. For one whose id column is
text (``text``, ``varchar``, ``char``) or ``uuid`` (LangChain's ``langchain_pg_embedding.id``,
LlamaIndex's ``node_id``), :func:`assign_document_ids` gives every document it has not seen an
integer (per dataset, from 1 up, new ones in the byte order of their own ids), at attach; an id
is never given again nor taken back, so a document that leaves the corpus and comes back has
its judge labels still. :func:`joined_relation` is what :class:`~eval_harness.datasets.corpus.Corpus`
reads in place of the relation: the relation joined to its ids, so every statement of the
harness runs on integer ids; the documents are those the last attach saw (a row added since
has no id yet and is not read).

The join compares the ids in the relation's own type (``own_id`` for text, ``own_uuid`` for
uuid), so both directions use an index: from an id here to the relation's id index (a lookup
by id), and from a row of the relation to its id here. The search's candidate subqueries
read the relation itself, ordered by its own vector or text index, and take each row's id
from here (:func:`harness_id_of`): a row added since the last attach has none and is left
out after the cut-off, so until the next attach it may take one of the candidate places.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

# The own-id kinds a live corpus may have besides integer, by column type (format_type).
OWN_ID_KINDS = {"text": "text", "character varying": "text", "character": "char",
                "uuid": "uuid"}
OWN_ID_COLUMN = "eval_harness_own_id"  # the own id as text, in joined_relation's columns


def own_id_kind(column_type: str) -> str | None:
    """``text``, ``char`` or ``uuid`` for an id column of that type; None otherwise (an
    integer column needs no surrogate)."""
    return OWN_ID_KINDS.get(column_type)


def _join_condition(kind: str, relation_alias: str, ids_alias: str,
                    id_column: str) -> sql.Composed:
    own = sql.Identifier(relation_alias, id_column)
    if kind == "uuid":
        return sql.SQL("{} = {}").format(sql.Identifier(ids_alias, "own_uuid"), own)
    if kind == "char":
        # char(n) compares blank-padded: its index answers the bpchar form, ours the text form
        return sql.SQL("{m} = {own}::text AND {own} = {m}::bpchar").format(
            m=sql.Identifier(ids_alias, "own_id"), own=own)
    return sql.SQL("{} = {}").format(sql.Identifier(ids_alias, "own_id"), own)


def joined_relation(relation: Sequence[str], alias: str, *, dataset: str, id_column: str,
                    kind: str, columns: Sequence[str], versioned: bool) -> sql.Composed:
    """``(SELECT ...) AS <alias>``: the rows of ``relation`` that have a harness id, with the
    harness id under the name ``id_column``, the own id as text under
    :data:`OWN_ID_COLUMN`, each of ``columns`` and (``versioned``: a table, whose rows have
    one) the row's ``xmin``. The planner flattens it into a join, so the relation's own
    indexes serve it."""
    inner = sql.Identifier(alias + "_ids")
    carried = [sql.Identifier(alias, c) for c in dict.fromkeys(columns)]
    if versioned:
        carried.append(sql.SQL("{}.xmin AS xmin").format(sql.Identifier(alias)))
    return sql.SQL(
        "(SELECT {ids}.doc_id AS {id}, {ids}.own_id AS {own}, {carried} "
        "FROM {rel} AS {a} JOIN document_ids AS {ids} ON {ids}.dataset = {dataset} "
        "AND {join}) AS {a}").format(
        ids=inner, id=sql.Identifier(id_column), own=sql.Identifier(OWN_ID_COLUMN),
        carried=sql.SQL(", ").join(carried), a=sql.Identifier(alias), rel=sql.Identifier(*relation),
        dataset=sql.Literal(dataset),
        join=_join_condition(kind, alias, alias + "_ids", id_column))


def harness_id_of(alias: str, *, dataset: str, id_column: str, kind: str) -> sql.Composed:
    """The harness id of the row ``alias`` of the relation itself (not joined): a scalar
    subquery, one index probe here per row it is computed for; NULL for a row the last
    attach did not see. What the search's candidate subqueries select and break ties by,
    so that the planner orders them by the relation's own vector or text index (a join
    would let it drive from this table and sort every document per query)."""
    return sql.SQL("(SELECT m.doc_id FROM document_ids AS m WHERE m.dataset = {} AND {})").format(
        sql.Literal(dataset), _join_condition(kind, alias, "m", id_column))


def assign_document_ids(conn: psycopg.Connection, dataset: str, relation: Sequence[str],
                        id_column: str, kind: str,
                        rows: sql.Composable = sql.SQL("TRUE")) -> int:
    """Give each row of ``relation`` whose own id (``id_column``, of ``kind``) has no harness
    id in ``dataset`` yet the next ones, in own-id order; how many were given. ``rows``: the
    condition (on alias ``r``) selecting the corpus's rows (a LangChain collection's). One
    pass over the relation's ids; runs in the caller's transaction (attach's)."""
    own = sql.Identifier("r", id_column)
    given = conn.execute(sql.SQL("""
        INSERT INTO document_ids (dataset, own_id, own_uuid, doc_id)
        SELECT %(dataset)s, n.own_id, {uuid}, b.base + row_number() OVER (ORDER BY n.own_id COLLATE "C")
        FROM (SELECT {own}::text AS own_id FROM {rel} AS r WHERE {own} IS NOT NULL AND {rows}
              EXCEPT
              SELECT own_id FROM document_ids WHERE dataset = %(dataset)s) n,
             (SELECT coalesce(max(doc_id), 0) AS base FROM document_ids
              WHERE dataset = %(dataset)s) b""").format(
        uuid=sql.SQL("n.own_id::uuid" if kind == "uuid" else "NULL::uuid"), own=own,
        rel=sql.Identifier(*relation), rows=rows), {"dataset": dataset}).rowcount
    return given

