"""What the rows of a live corpus hold, checked when it is attached: one row per id, an
embedding per row, a text per row.

The mapping's columns can have the right types and still hold rows the harness cannot use as
documents (:mod:`eval_harness.datasets.live_mapping` checks the types):

* **ids that repeat, or NULL ids**: every statement joins candidates back to the corpus by
  id, so a repeated id multiplies rows (the same document ranked several times, metrics over
  duplicates). Refused, naming how many ids repeat and a few of them, as for the ground
  truth. A unique index on the column (with NOT NULL) proves it without reading a row, as
  the seeds' primary key does; a view or an unindexed table is read once (one aggregate over
  the id column, linear; see docs/operations.md for its cost at scale);
* **NULL embeddings**: such a row has no semantic score, so the fused score (which needs
  both) is undefined; it is left out of search entirely, never a candidate, like an
  ingested empty document. Attach says how many rows that is (and how many of them the
  ground truth expects);
* **no text** (NULL or empty content): read as an empty text; such a row is found by its
  embedding only. Attach says how many.

A corpus of only some rows of its relation (a LangChain collection,
:class:`~eval_harness.datasets.corpus.Subset`) is checked on those rows only. Reads only.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from eval_harness.datasets.corpus import Subset
from eval_harness.errors import InvalidInput
from eval_harness.settings.datasets import CorpusMapping

EXAMPLES = 5  # ids a message shows


class LiveMappingError(InvalidInput):
    """A live mapping does not fit the store; one sentence naming the config key.
    (Defined here, the lowest module raising it; :mod:`eval_harness.datasets.live` exports it.)"""


def _examples(ids, count: int) -> str:
    return ", ".join(str(i) for i in ids[:EXAMPLES]) + (", ..." if count > EXAMPLES else "")


def _relation(mapping: CorpusMapping) -> sql.Identifier:
    return sql.Identifier(mapping.relation.schema, mapping.relation.name)


def _rows_of(subset: Subset | None) -> sql.Composable:
    """The condition selecting the corpus's rows of the relation (TRUE: all of them)."""
    if subset is None:
        return sql.SQL("TRUE")
    return sql.SQL("{} = {}").format(sql.Identifier(subset.column), sql.Literal(subset.value))


def has_unique_index(conn: psycopg.Connection, oid: int, column: str) -> bool:
    """Whether ``column`` of relation ``oid`` is NOT NULL with a valid, non-partial unique
    index on it alone (a primary key is one): then no two rows share an id."""
    return conn.execute("""
        SELECT a.attnotnull AND EXISTS (
            SELECT 1 FROM pg_index i
            WHERE i.indrelid = a.attrelid AND i.indisunique AND i.indisvalid
              AND i.indpred IS NULL AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum)
        FROM pg_attribute a WHERE a.attrelid = %s AND a.attname = %s""",
                        (oid, column)).fetchone()[0]


def check_unique_ids(conn: psycopg.Connection, mapping: CorpusMapping, oid: int,
                     where: str, subset: Subset | None = None) -> None:
    """Refuse a corpus whose id column repeats an id or holds NULL (module docstring)."""
    if has_unique_index(conn, oid, mapping.id):
        return
    repeated, examples, without = conn.execute(sql.SQL("""
        SELECT count(*) FILTER (WHERE g.n > 1 AND g.id IS NOT NULL),
               (array_agg(g.id ORDER BY g.id) FILTER (WHERE g.n > 1 AND g.id IS NOT NULL))
                   [1:{shown}],
               coalesce(sum(g.n) FILTER (WHERE g.id IS NULL), 0)
        FROM (SELECT {id} AS id, count(*) AS n FROM {rel} WHERE {rows} GROUP BY {id}) g""").format(
        id=sql.Identifier(mapping.id), rel=_relation(mapping), rows=_rows_of(subset),
        shown=sql.Literal(EXAMPLES))).fetchone()
    column = f"{mapping.relation}.{mapping.id}"
    if repeated:
        raise LiveMappingError(
            f"'{where}.id': {column} is not unique: {repeated} ids occur in more than one row "
            f"(e.g. {_examples(examples, repeated)}), and every search joins documents by id; "
            "map a relation or view with one row per document.")
    if without:
        raise LiveMappingError(f"'{where}.id': {without} rows of {mapping.relation} have no id "
                              f"(NULL in {mapping.id}); map a relation or view whose rows all "
                              "have one.")


def row_notices(conn: psycopg.Connection, mapping: CorpusMapping, expected_ids: set[str],
                own_ids: str | None = None, subset: Subset | None = None) -> list[str]:
    """One line each for the rows without an embedding and the rows without text (module
    docstring), naming rows by their own ids; ``expected_ids`` are the ground truth's
    expected documents, by their own ids as text; ``own_ids``: the id column's kind (None:
    integer; ``text``, ``char``, ``uuid``)."""
    rel = _relation(mapping)
    embedding, content = sql.Identifier(mapping.embedding), sql.Identifier(mapping.content)
    no_vector, no_text = conn.execute(sql.SQL(
        "SELECT count(*) FILTER (WHERE {e} IS NULL), "
        "count(*) FILTER (WHERE {c} IS NULL OR {c} = '') FROM {rel} WHERE {rows}").format(
        e=embedding, c=content, rel=rel, rows=_rows_of(subset))).fetchone()
    notices = []
    if no_vector:
        ids = _ids_where(conn, mapping, sql.SQL("{} IS NULL").format(embedding), subset)
        expected = _count_expected(conn, mapping, expected_ids, own_ids,
                                   sql.SQL("{} IS NULL").format(embedding), subset)
        also = (f" ({expected} of them expected by the ground truth, which search cannot "
                "find)" if expected else "")
        notices.append(f"{_rows(no_vector)} of {mapping.relation} {_have(no_vector)} no "
                       f"embedding (NULL in {mapping.embedding}; ids {_examples(ids, no_vector)}"
                       f"): left out of search, neither semantic nor keyword candidates, as "
                       f"an empty document{also}; embed them to include them")
    if no_text:
        ids = _ids_where(conn, mapping, sql.SQL("({c} IS NULL OR {c} = '')").format(c=content),
                         subset)
        notices.append(f"{_rows(no_text)} of {mapping.relation} {_have(no_text)} no text "
                       f"(NULL or empty {mapping.content}; ids {_examples(ids, no_text)}): "
                       f"read as empty, found by {'its' if no_text == 1 else 'their'} "
                       "embedding only")
    return notices


def _rows(count: int) -> str:
    return "1 row" if count == 1 else f"{count} rows"


def _have(count: int) -> str:
    return "has" if count == 1 else "have"


def _ids_where(conn: psycopg.Connection, mapping: CorpusMapping,
               condition: sql.Composable, subset: Subset | None) -> list:
    """The smallest ids of the rows where ``condition`` holds (a top-N sort, linear)."""
    return [i for (i,) in conn.execute(sql.SQL(
        "SELECT {id} FROM {rel} WHERE {cond} AND {rows} ORDER BY {id} LIMIT {n}").format(
        id=sql.Identifier(mapping.id), rel=_relation(mapping), cond=condition,
        rows=_rows_of(subset), n=sql.Literal(EXAMPLES)))]


# How the expected own ids (text) are compared with the id column, in its own type so that
# its index can answer (char(n) compares by its text: blank-padding aside).
_ID_ARRAY_OF_KIND = {None: "{id} = ANY(%s::bigint[])", "text": "{id} = ANY(%s::text[])",
                     "uuid": "{id} = ANY(%s::uuid[])", "char": "{id}::text = ANY(%s::text[])"}


def _count_expected(conn: psycopg.Connection, mapping: CorpusMapping, expected_ids: set[str],
                    own_ids: str | None, condition: sql.Composable,
                    subset: Subset | None) -> int:
    if not expected_ids:
        return 0
    return conn.execute(sql.SQL("SELECT count(*) FROM {rel} WHERE {cond} AND {rows} AND " +
                                _ID_ARRAY_OF_KIND[own_ids]).format(
        rel=_relation(mapping), cond=condition, rows=_rows_of(subset),
        id=sql.Identifier(mapping.id)), (sorted(expected_ids),)).fetchone()[0]


def sampled_dimensions(conn: psycopg.Connection, mapping: CorpusMapping, where: str,
                       subset: Subset | None = None) -> int:
    """The dimensions of an untyped vector column, from its first 1,000 vectors (of the
    ``subset`` when the corpus is some rows only: another LangChain collection may hold
    another model's vectors); they must agree: the search casts every vector to one
    dimension."""
    dims = [d for (d,) in conn.execute(sql.SQL(
        "SELECT DISTINCT vector_dims(e) FROM (SELECT {} AS e FROM {} WHERE {} IS NOT NULL "
        "AND {} LIMIT 1000) s").format(sql.Identifier(mapping.embedding), _relation(mapping),
                                       sql.Identifier(mapping.embedding), _rows_of(subset)))]
    rows = f"{mapping.relation}.{mapping.embedding}" + (f" ({subset.label})" if subset else "")
    if not dims:
        raise LiveMappingError(f"'{where}.embedding': {rows} holds no vector yet; nothing to "
                               "search.")
    if len(dims) > 1:
        raise LiveMappingError(f"'{where}.embedding': {rows} mixes vectors of "
                               f"{sorted(dims)} dimensions; a dataset needs one embedding "
                               "model (map a view that selects one).")
    return dims[0]
