"""The indexes a live dataset's search needs on the RAG system's relation, and what it costs
without them.

The hybrid search (:func:`eval_harness.datasets.corpus.candidate_ids`) asks the corpus three
things, and each is fast only with an index the RAG system owns:

* **embedding**: ``ORDER BY <embedding> <=> query, id LIMIT depth`` (the index orders by the
  distance, an Incremental Sort puts equal distances in id order); served by an HNSW or IVFFlat
  index on exactly :meth:`Corpus.embedding_of` (the column itself when it is ``vector(n)``,
  the cast ``(col::vector(n))`` when it is an untyped ``vector``) with ``vector_cosine_ops``. An index with the
  L2 or inner-product operator class does not serve a cosine ``ORDER BY``;
* **text**: ``<tsvector> @@ tsquery``; served by a GIN index on exactly
  :meth:`Corpus.tsvector_of` (the mapped tsvector column, or
  ``to_tsvector('<language>'::regconfig, content)``);
* **id**: the candidates are joined back to the corpus by id; served by a unique btree index.

A corpus of some rows of its relation (a LangChain collection, :class:`Subset`) needs its
vector index restricted to those rows (``WHERE collection_id = '<uuid>'``): an index over the
whole table would be filtered after the approximate scan, returning fewer than ``depth``
candidates, and cannot even be built when another collection holds other dimensions. Its
text and id indexes may cover the whole table (an exact scan, then filtered) or the subset.

An index matches when the server prints its key exactly as it would print the search's
expression (``pg_get_indexdef``), so a varchar ``content`` is matched as ``content::text``,
the implicit cast the search gets too. Everything here only reads (the doctor runs it in a
read-only session); the statements it composes (:func:`create_statement`,
:func:`drop_statement`) are run by ``eval-harness index`` only, when the user asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import psycopg
from psycopg import sql

from eval_harness.datasets.live_catalog import LiveDataset, probe_query
from eval_harness.datasets.corpus import Corpus, candidate_ids, on_this_server

VECTOR_METHODS = ("hnsw", "ivfflat")
COSINE_OPCLASS = "vector_cosine_ops"
NAME_BYTES = 63  # the server truncates longer identifiers


@dataclass(frozen=True)
class ExistingIndex:
    oid: int
    schema: str
    name: str
    method: str      # hnsw, ivfflat, gin, btree, ...
    key: str         # its first key as pg_get_indexdef prints it
    opclass: str
    keys: int
    unique: bool
    partial: bool
    valid: bool      # False: left INVALID by a failed CREATE INDEX CONCURRENTLY (or building)
    predicate: str = ""  # a partial index's WHERE, as pg_get_expr prints it

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Need:
    """One index the search needs: which side, its methods, key, operator class."""

    side: str                   # embedding | text | id
    methods: tuple[str, ...]
    key: str                    # as pg_get_indexdef prints it
    opclass: str | None
    unique: bool
    create: sql.Composed        # the key and options of the CREATE INDEX statement
    wanted: str                 # how a person reads the need
    column: str                 # the column the key is built on, as the server prints it
    predicate: str = ""         # the rows it must cover (a Subset), as pg_get_expr prints it
    subset_only: bool = False   # only an index restricted to ``predicate`` serves

    def near(self, index: ExistingIndex) -> bool:
        """Same method family over the same column, another key or shape (worth naming)."""
        return index.method in self.methods and re.search(
            rf'(?<![\w"]){re.escape(self.column)}(?![\w"])', index.key) is not None

    def matches(self, index: ExistingIndex) -> bool:
        """Same method family, key and shape (opclass and validity are judged apart)."""
        covers = (_same(index.predicate, self.predicate) if index.partial or self.subset_only
                  else True)
        return (index.method in self.methods and _same(index.key, self.key)
                and index.keys == 1 and covers and bool(self.predicate or not index.partial)
                and (index.unique or not self.unique))


@dataclass
class SideState:
    need: Need
    serving: ExistingIndex | None = None
    wrong_opclass: list[ExistingIndex] = field(default_factory=list)
    other_key: list[ExistingIndex] = field(default_factory=list)  # same column, other expression
    invalid: list[ExistingIndex] = field(default_factory=list)    # same definition, INVALID
    statement: str = ""                                           # CREATE INDEX CONCURRENTLY ...

    @property
    def ok(self) -> bool:
        return self.serving is not None


@dataclass
class IndexAssessment:
    corpus: Corpus
    relkind: str        # r table, m materialized view, p partitioned table, v view, ...
    rows: float         # pg_class.reltuples (-1: never analysed)
    owned: bool         # this role may create indexes on it (it owns the relation)
    sides: list[SideState]

    @property
    def indexable(self) -> bool:
        return self.relkind in ("r", "m")

    @property
    def missing(self) -> list[SideState]:
        return [s for s in self.sides if not s.ok]


def _same(printed: str, expected: str) -> bool:
    def bare(text: str) -> str:
        text = "".join(text.split())
        while text.startswith("(") and text.endswith(")"):
            text = text[1:-1]
        return text
    return bare(printed) == bare(expected)


# ------------------------------------------------------------------------------ catalog

def relation_indexes(conn: psycopg.Connection, oid: int) -> list[ExistingIndex]:
    """Every index on relation ``oid``, as the catalog describes it."""
    return [ExistingIndex(*row) for row in conn.execute("""
        SELECT ic.oid, n.nspname, ic.relname, am.amname, pg_get_indexdef(i.indexrelid, 1, true),
               coalesce(opc.opcname, ''), i.indnkeyatts, i.indisunique, i.indpred IS NOT NULL,
               i.indisvalid AND i.indisready AND i.indislive,
               coalesce(pg_get_expr(i.indpred, i.indrelid, true), '')
        FROM pg_index i
        JOIN pg_class ic ON ic.oid = i.indexrelid
        JOIN pg_namespace n ON n.oid = ic.relnamespace
        JOIN pg_am am ON am.oid = ic.relam
        LEFT JOIN pg_opclass opc ON opc.oid = i.indclass[0]
        WHERE i.indrelid = %s ORDER BY ic.relname""", (oid,))]


def _quote_ident(conn: psycopg.Connection, name: str) -> str:
    return conn.execute("SELECT quote_ident(%s)", (name,)).fetchone()[0]


def needed_indexes(conn: psycopg.Connection, corpus: Corpus, oid: int) -> list[Need]:
    """The embedding, text and id indexes the search over ``corpus`` needs, each keyed by
    the very expression :class:`Corpus` gives the search (printed as the server prints it)."""
    column = _quote_ident(conn, corpus.embedding)
    vector_key = f"({column}::vector({corpus.dim}))" if corpus.cast_embedding else column
    vector_expr: sql.Composable = sql.Identifier(corpus.embedding)
    if corpus.cast_embedding:
        vector_expr = sql.SQL("({}::vector({}))").format(vector_expr, sql.Literal(corpus.dim))
    if corpus.tsvector is not None:
        text_key_ = _quote_ident(conn, corpus.tsvector)
        text_expr: sql.Composable = sql.Identifier(corpus.tsvector)
        text_wanted, text_column = f"the tsvector column {text_key_}", text_key_
    else:
        language = conn.execute("SELECT quote_literal(%s::regconfig::text)",
                                (corpus.language,)).fetchone()[0]
        content = _quote_ident(conn, corpus.content)
        kind = conn.execute("SELECT format_type(atttypid, NULL) FROM pg_attribute "
                            "WHERE attrelid = %s AND attname = %s",
                            (oid, corpus.content)).fetchone()
        cast = "" if kind is None or kind[0] == "text" else "::text"  # the implicit cast
        text_key_ = f"to_tsvector({language}::regconfig, {content}{cast})"
        text_expr = sql.SQL("to_tsvector({}::regconfig, {})").format(
            sql.Literal(corpus.language), sql.Identifier(corpus.content))
        text_wanted, text_column = text_key_, content
    id_key = _quote_ident(conn, corpus.id)
    where, predicate, of_subset = sql.SQL(""), "", ""
    if corpus.subset is not None:
        subset = corpus.subset
        where = sql.SQL(" WHERE {} = {}").format(sql.Identifier(subset.column),
                                                 sql.Literal(subset.value))
        kind = conn.execute("SELECT format_type(atttypid, NULL) FROM pg_attribute "
                            "WHERE attrelid = %s AND attname = %s",
                            (oid, subset.column)).fetchone()
        cast = f"::{kind[0]}" if kind is not None and kind[0] not in ("text",) else ""
        value = conn.execute("SELECT quote_literal(%s)", (subset.value,)).fetchone()[0]
        predicate = f"{_quote_ident(conn, subset.column)} = {value}{cast}"
        of_subset = f" WHERE {predicate} (the rows of {subset.label})"
    return [
        Need("embedding", VECTOR_METHODS, vector_key, COSINE_OPCLASS, False,
             sql.SQL("USING hnsw ({} vector_cosine_ops){}").format(vector_expr, where),
             f"HNSW or IVFFlat index on {vector_key} with {COSINE_OPCLASS}{of_subset}", column,
             predicate, subset_only=bool(predicate)),
        Need("text", ("gin",), text_key_, None, False,
             sql.SQL("USING gin ({}){}").format(text_expr, where),
             f"GIN index on {text_wanted}{of_subset}", text_column, predicate),
        Need("id", ("btree",), id_key, None, True,
             sql.SQL("USING btree ({})").format(sql.Identifier(corpus.id)),
             f"unique btree index on {id_key}", id_key, predicate),
    ]


def _index_name(corpus: Corpus, need: Need) -> str:
    table = corpus.relation[-1]
    base = {"embedding": f"{table}_{corpus.embedding}_cosine_idx",
            "text": f"{table}_{corpus.tsvector or corpus.content}_gin_idx",
            "id": f"{table}_{corpus.id}_key"}[need.side]
    return base.encode()[:NAME_BYTES].decode(errors="ignore")


def _free_name(conn: psycopg.Connection, schema: str, base: str) -> str:
    """``base``, or ``base1``, ``base2``, ... when an index or table has the name."""
    for n in range(100):
        suffix = str(n) if n else ""
        name = base.encode()[:NAME_BYTES - len(suffix)].decode(errors="ignore") + suffix
        if conn.execute("SELECT to_regclass(%s) IS NULL",
                        (sql.Identifier(schema, name).as_string(conn),)).fetchone()[0]:
            return name
    raise LookupError(f"No free index name like {base} in schema {schema}.")


def create_statement(conn: psycopg.Connection, corpus: Corpus, need: Need, name: str) -> str:
    """``CREATE [UNIQUE] INDEX CONCURRENTLY "name" ON "schema"."relation" USING ...``."""
    return sql.SQL("CREATE {}INDEX CONCURRENTLY {} ON {} {}").format(
        sql.SQL("UNIQUE " if need.unique else ""), sql.Identifier(name),
        sql.Identifier(*corpus.relation), need.create).as_string(conn)


def drop_statement(conn: psycopg.Connection, index: ExistingIndex) -> str:
    return sql.SQL("DROP INDEX CONCURRENTLY {}").format(
        sql.Identifier(index.schema, index.name)).as_string(conn)


def assess_indexes(conn: psycopg.Connection, corpus: Corpus) -> IndexAssessment:
    """Which of the needed indexes exist on ``corpus``'s relation (reads only); a missing
    one carries the statement that creates it."""
    name = sql.Identifier(*corpus.relation).as_string(conn)
    row = conn.execute("SELECT c.oid, c.relkind, c.reltuples, pg_has_role(c.relowner, 'USAGE') "
                       "FROM pg_class c WHERE c.oid = to_regclass(%s)", (name,)).fetchone()
    if row is None:
        raise LookupError(f"The relation {corpus.relation_name} of dataset '{corpus.dataset}' "
                          "does not exist (or this role cannot see its schema).")
    oid, relkind, rows, owned = row
    existing = relation_indexes(conn, oid) if relkind in ("r", "m") else []
    sides = []
    for need in needed_indexes(conn, corpus, oid):
        state = SideState(need)
        for index in existing:
            if need.matches(index):
                if need.opclass and index.opclass != need.opclass:
                    state.wrong_opclass.append(index)
                elif not index.valid:
                    state.invalid.append(index)
                elif state.serving is None:
                    state.serving = index
            elif need.near(index):
                state.other_key.append(index)
        if not state.ok:
            index_name = (state.invalid[0].name if state.invalid
                          else _free_name(conn, corpus.relation[0], _index_name(corpus, need)))
            state.statement = create_statement(conn, corpus, need, index_name)
        sides.append(state)
    return IndexAssessment(corpus, relkind, float(rows), bool(owned), sides)


def index_busy(conn: psycopg.Connection, index: ExistingIndex) -> int | None:
    """The pid of another session holding a lock on ``index`` (a CREATE INDEX CONCURRENTLY
    still building it), else None: an INVALID index nobody holds is a failed build's leftover."""
    row = conn.execute("SELECT pid FROM pg_locks WHERE relation = %s AND pid <> "
                       "pg_backend_pid() LIMIT 1", (index.oid,)).fetchone()
    return None if row is None else row[0]


# ------------------------------------------------------------------------------ query plans

@dataclass(frozen=True)
class PlanSide:
    side: str                    # semantic | keyword
    cost: float                  # the planner's total cost of the candidate subquery
    access: str                  # e.g. "Index Scan using l2_insights_embedding_idx"
    whole: bool                  # it reads the whole relation (no index condition or order)
    relation: str | None = None  # the relation read whole
    rows: float = -1.0           # its estimated rows (reltuples; -1: never analysed)


SCANS = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Index Scan")


def _nodes(plan: Mapping[str, Any]):
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _access(conn: psycopg.Connection, side: str, limit: Mapping[str, Any]) -> PlanSide:
    """How the candidate subquery under ``limit`` reads the corpus: through an index that
    answers its condition or order, or the whole relation (a Seq Scan, or an index walked
    end to end, which is what a planner forbidden to scan sequentially falls back to)."""
    for node in _nodes(limit):
        kind = node["Node Type"]
        if kind not in SCANS:
            continue
        access = kind if kind == "Seq Scan" else f"{kind} using {node['Index Name']}"
        if kind != "Seq Scan" and ("Index Cond" in node or "Order By" in node):
            return PlanSide(side, limit["Total Cost"], access, False)
        relation = f"{node.get('Schema', '')}.{node['Relation Name']}".lstrip(".")
        rows = conn.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)",
                            (sql.Identifier(*relation.split(".")).as_string(conn),)).fetchone()
        return PlanSide(side, limit["Total Cost"], access, True, relation,
                        float(rows[0]) if rows else -1.0)
    return PlanSide(side, limit["Total Cost"], limit["Node Type"], False)


def explain_candidates(conn: psycopg.Connection, corpus: Corpus, depth: int, text: str,
                       vector: str | None) -> list[PlanSide]:
    """The planner's estimate (EXPLAIN, nothing run) of the search's own candidate subqueries
    for one query: the semantic side (when there is a vector) and the keyword side."""
    semantic = vector is not None
    corpus = on_this_server(conn, corpus)
    if conn.execute("SELECT to_regprocedure('eh_or_tsquery(regconfig, text)') IS NOT NULL"
                    ).fetchone()[0]:
        tsquery = sql.SQL("eh_or_tsquery({}::regconfig, {})")
    else:  # no harness schema yet: the same plan shape with the server's own parser
        tsquery = sql.SQL("plainto_tsquery({}::regconfig, {})")
    statement = sql.SQL(
        "EXPLAIN (FORMAT JSON, VERBOSE) WITH q AS MATERIALIZED (SELECT {emb} AS emb, {tsq} AS "
        "tsq) SELECT c.id FROM q CROSS JOIN LATERAL ({candidates}) c").format(
        emb=(sql.SQL("{}::vector({})").format(sql.Literal(vector), sql.Literal(corpus.dim))
             if semantic else sql.SQL("NULL::vector")),
        tsq=tsquery.format(sql.Literal(corpus.language), sql.Literal(text)),
        candidates=candidate_ids(corpus, depth, semantic=semantic))
    plan = conn.execute(statement).fetchone()[0][0]["Plan"]
    limits = [node for node in _nodes(plan) if node["Node Type"] == "Limit"]
    sides = ("semantic", "keyword") if semantic else ("keyword",)
    return [_access(conn, side, limit) for side, limit in zip(sides, limits)]


# ------------------------------------------------------------------------------ the report

RELATION_KINDS = {"v": "a view", "p": "a partitioned table", "f": "a foreign table"}


def _side_line(conn: psycopg.Connection, state: SideState) -> tuple[str, str]:
    need = state.need
    if state.serving is not None:
        index = state.serving
        how = f" with {index.opclass}" if need.opclass else ""
        unique = "unique " if need.unique else ""
        line = f"{need.side}: {unique}{index.method} index {index.qualified} on {index.key}{how}"
        if not state.invalid:
            return "ok", line
        leftover = state.invalid[0]  # still updated on every write, never read
        return "warn", (f"{line}; {leftover.qualified} is an INVALID copy: "
                        f"{drop_statement(conn, leftover)}")
    notes = [f"{need.side}: no {need.wanted}"]
    for index in state.wrong_opclass:
        notes.append(f"{index.qualified} ({index.method} with {index.opclass}) does not serve "
                     "the search's cosine ORDER BY (<=>)")
    for index in state.invalid:
        pid = index_busy(conn, index)
        notes.append(f"{index.qualified} is being built right now (pid {pid})" if pid else
                     f"{index.qualified} is INVALID (left by a failed CREATE INDEX "
                     f"CONCURRENTLY): {drop_statement(conn, index)}; then create it again")
    for index in state.other_key:
        shape = ("partial" if index.partial else "not unique" if need.unique and not index.unique
                 else f"on {index.key}")
        notes.append(f"{index.qualified} ({index.method}) is {shape}: it does not serve the search")
    return "warn", "; ".join(notes)


def _plan_line(plan: PlanSide, served: bool | None) -> tuple[str, str]:
    """``served``: whether the side's index exists (None: unknown, a view; the plan says)."""
    if served is None:
        served = not plan.whole
    elif plan.whole and served:
        plan = PlanSide(plan.side, plan.cost, plan.access, True,
                        f"{plan.relation} (the planner prefers it at this size)", plan.rows)
    if plan.whole:
        rows = (f"all ~{plan.rows:,.0f} rows" if plan.rows >= 0
                else "all rows (never ANALYZEd: no row estimate)")
        access = f"{plan.access} over {rows} of {plan.relation}"
    else:
        access = plan.access
    return ("ok" if served else "warn"), (f"{plan.side} query: {access}, estimated cost "
                                          f"{plan.cost:,.2f}")


def index_report(conn: psycopg.Connection, dataset: LiveDataset, *,
                 depth: int) -> list[tuple[str, str]]:
    """``(level, sentence)`` lines (level ok or warn) on the indexes the search over
    live ``dataset`` needs, what its first ground-truth query costs, and the statements that
    create what is missing. Reads only."""
    corpus = dataset.corpus
    assert corpus is not None
    assessment = assess_indexes(conn, corpus)
    kind = RELATION_KINDS.get(assessment.relkind)
    lines = []
    if kind is not None:
        lines.append(("warn", f"{corpus.relation_name} is {kind}: its indexes cannot be "
                      "checked or created here; the plans below show whether the search "
                      "finds any"))
    else:
        lines.extend(_side_line(conn, state) for state in assessment.sides)
    served = {"semantic": None if kind else assessment.sides[0].ok,
              "keyword": None if kind else assessment.sides[1].ok}
    try:
        plans = explain_candidates(conn, corpus, depth, *probe_query(conn, dataset))
    except psycopg.Error as exc:
        lines.append(("warn", "cannot estimate the query cost: "
                      + (str(exc).strip().splitlines() or [type(exc).__name__])[0]))
    else:
        lines.extend(_plan_line(plan, served[plan.side]) for plan in plans)
    if kind is None and assessment.missing:
        lines.extend(("warn", f"missing: {state.statement};") for state in assessment.missing)
        lines.append(("warn", f"run those as the owner of {corpus.relation_name}, or "
                      f"`eval-harness index --dataset {dataset.name}`"))
    return lines
