"""Live datasets: the RAG system's own relations, checked and attached in place.

A live dataset (``datasets.<name>.live`` in config.yaml) is never copied. Attaching it:

1. **checks the mapping** against the store before any work
   (:mod:`eval_harness.datasets.live_mapping`): each relation exists and may be read, each
   column exists with a usable type (integer, text or uuid ids, text content, a pgvector
   ``vector`` embedding, a ``tsvector`` when one is named, an array of expected ids), the
   embedding's dimensions match the dataset's embedder, the corpus's ids are unique and
   every id in expected_docs is a document of the corpus. Each problem is one sentence
   naming the config key. Rows without an embedding or text are counted and named in a
   notice (:mod:`eval_harness.datasets.live_rows`: what search does with them);
2. **records the mapping** in the harness's ``datasets`` row
   (:mod:`eval_harness.datasets.register`), so every later command (also a
   read-only one) reads the corpus through it (:class:`eval_harness.datasets.corpus.Corpus`);
   for a corpus with text or uuid ids it gives each document it has not seen an integer id
   (:mod:`eval_harness.datasets.document_ids`), which every harness table keeps, and the
   commands after it read the documents this attach saw;
3. **mirrors the ground truth** (id, query, expected_docs) into the harness's
   ``ground_truth``, beside what the harness keeps per query (query embedding, judge scores).
   A query whose text or expected ids changed loses its judge scores; a removed one is
   removed. A labelled query without expected ids is left out; a dataset mapped by
   ``queries`` (no labels) keeps every query, with empty expected_docs, for the judges to
   label. A dataset mapped by its corpus alone has no ground-truth relation: nothing is
   mirrored, the queries an earlier mapping mirrored are removed, and its generated and
   users' queries (``eval-harness ground-truth generate`` / ``from-answers``) stay. The RAG
   system's relations are only read;
4. **embeds the queries** with the dataset's embedder, through the ``query_embeddings``
   cache keyed by model and text (:mod:`eval_harness.datasets.query_embeddings`), so a rerun
   embeds nothing twice.

Everything it writes is in the harness schema, in one transaction under the ingest lock.
Then, for a corpus mapped with ``tsvector: null``, it brings the keyword index up to date
(:mod:`eval_harness.datasets.keyword_index`: only added, changed and removed rows, in
transactions of its own; :attr:`AttachReport.keyword` says what it did).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from eval_harness.datasets import document_ids, ground_truth, keyword_index, register
from eval_harness.datasets.corpus import Corpus
from eval_harness.datasets.embeddings import Embedder, check_vectors, embed_in_batches
from eval_harness.datasets.ingest import INGEST_LOCK
from eval_harness.datasets.keyword_index import KeywordRefresh
from eval_harness.datasets.live_mapping import (
    TEXT_TYPES,
    CheckedMapping,
    check_mapping,
    embedder_model,
    ground_truth_key,
    relation_columns,
)
from eval_harness.datasets.live_rows import LiveMappingError, row_notices
from eval_harness.datasets.query_embeddings import cache_query_embeddings, cached_query_embeddings
from eval_harness.settings.datasets import DatasetConfig, GroundTruthMapping

MAX_ID = 2**31 - 1  # the harness keeps document ids as integer


@dataclass
class AttachReport:
    dataset: str
    relation: str
    queries: int = 0
    inserted: int = 0
    updated: int = 0
    removed: int = 0
    without_expected: int = 0
    embedded: int = 0          # query texts embedded now
    embeddings_cached: int = 0  # taken from the query_embeddings cache
    notices: list[str] = field(default_factory=list)
    keyword: KeywordRefresh | None = None  # tsvector: null only
    ground_truth_mapped: bool = True  # false: the corpus alone is mapped

    def __str__(self) -> str:
        embeddings = (f"query embeddings: {self.embedded} computed, {self.embeddings_cached} "
                      "cached")
        if self.ground_truth_mapped:
            line = (f"dataset '{self.dataset}' (live, {self.relation}): {self.queries} queries "
                    f"({self.inserted} new, {self.updated} changed, {self.removed} removed); "
                    f"{embeddings}")
        else:
            line = (f"dataset '{self.dataset}' (live, {self.relation}): "
                    f"{no_ground_truth_sentence(self.dataset)}; {self.queries} generated or "
                    f"users' queries kept, {self.removed} mirrored ones removed; {embeddings}")
        return line if self.keyword is None else f"{line}\n{self.keyword}"


def no_ground_truth_sentence(dataset: str) -> str:
    """What a live dataset mapped by its corpus alone lacks and what makes its queries (the
    attach report's and the doctor's words)."""
    return (f"no ground-truth relation mapped: make queries with `eval-harness ground-truth "
            f"generate --dataset {dataset}` or `ground-truth from-answers --dataset {dataset}`")


# ------------------------------------------------------------------------------ attach

def attach_live_dataset(conn: psycopg.Connection, cfg: DatasetConfig, *,
                        embedder_factory: Callable[[], Embedder],
                        progress=None) -> AttachReport:
    """Check, record and mirror live dataset ``cfg`` (module docstring); one transaction."""
    with conn.transaction():
        # the ingest lock: an ingest and an attach of the same name must not interleave
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (INGEST_LOCK,))
        checked = check_mapping(conn, cfg)
        report = AttachReport(cfg.name, checked.corpus.described,
                              ground_truth_mapped=checked.ground_truth is not None)
        _record_dataset(conn, cfg, checked)
        corpus = checked.corpus
        if corpus.has_own_ids:
            document_ids.assign_document_ids(conn, cfg.name, corpus.relation, corpus.id,
                                             corpus.own_ids, rows=corpus.rows_of_dataset("r"))
        _stage_ground_truth(conn, checked, report)
        if checked.ground_truth is not None:
            _check_expected_ids(conn, cfg, checked)
        report.notices += row_notices(conn, cfg.live.corpus, _staged_expected_own_ids(conn),
                                      corpus.own_ids, corpus.subset)
        _merge_ground_truth(conn, cfg.name, report)
        _embed_queries(conn, cfg, checked.corpus.dim, embedder_factory, report, progress)
    corpus = _recorded_corpus(conn, cfg.name)
    if keyword_index.serves(corpus):
        report.keyword = keyword_index.refresh_keyword_index(conn, corpus)
    else:
        with conn.transaction():  # a tsvector column now: the derived data is not needed
            keyword_index.drop_keyword_index(conn, cfg.name)
    return report


def _record_dataset(conn: psycopg.Connection, cfg: DatasetConfig,
                    checked: CheckedMapping) -> None:
    kind = register.dataset_kind(conn, cfg.name)
    if kind is not None and kind != "live":
        raise LiveMappingError(
            f"'datasets.{cfg.name}': a dataset of this name was ingested as a copy; choose "
            "another name for the live mapping (the copy stays until you remove it).")
    register.record_live_dataset(
        conn, cfg.name, language=checked.corpus.language,
        model=embedder_model(cfg.embedder or ""),
        dim=checked.corpus.dim, source_path=checked.corpus.relation_name,
        corpus_mapping=checked.corpus_record, ground_truth_mapping=checked.ground_truth_record)


def _stage_ground_truth(conn: psycopg.Connection, checked: CheckedMapping,
                        report: AttachReport) -> None:
    """The live ground truth into ``_live_gt`` (dropped at commit): own id as text, query,
    expected ids deduplicated in their order (none for an unlabelled dataset), as the
    harness's ids and as the corpus's own ids (text). Without a ground-truth mapping the
    table stays empty, so the merge removes every query an earlier mapping mirrored."""
    conn.execute("""CREATE TEMP TABLE _live_gt (external_id text PRIMARY KEY, query text,
                    expected_docs integer[], expected_own text[]) ON COMMIT DROP""")
    gt = checked.ground_truth
    if gt is None:
        return
    key = f"datasets.{checked.corpus.dataset}.live.{ground_truth_key(gt)}"
    try:
        with conn.transaction():
            conn.execute(sql.SQL("INSERT INTO _live_gt {}").format(
                live_ground_truth_rows(gt, checked.corpus)))
    except psycopg.errors.UniqueViolation:
        raise LiveMappingError(f"'{key}.id': {gt.relation}.{gt.id} is not unique.") from None
    except psycopg.errors.NumericValueOutOfRange:
        raise LiveMappingError(f"'datasets.{checked.corpus.dataset}.live.ground_truth."
                               f"expected_docs': ids above {MAX_ID} are not supported.") from None
    missing = conn.execute("SELECT count(*), min(external_id) FROM _live_gt "
                           "WHERE query IS NULL OR btrim(query) = ''").fetchone()
    if missing[0]:
        raise LiveMappingError(f"'{key}.query': {missing[0]} rows of {gt.relation} have no "
                               "query text "
                               f"(e.g. id {missing[1]}).")
    if not gt.labelled:
        return
    report.without_expected = conn.execute(
        "DELETE FROM _live_gt WHERE coalesce(cardinality(expected_own), 0) = 0").rowcount
    if report.without_expected:
        report.notices.append(f"{report.without_expected} queries of {gt.relation} have no "
                              "expected document and were left out")


def live_ground_truth_rows(gt: GroundTruthMapping, corpus: Corpus) -> sql.Composed:
    """``SELECT external_id, query, expected_docs, expected_own`` of every row of the live
    ground truth: its own id as text, the query, the expected ids deduplicated in their
    order (none for an unlabelled dataset) as the harness mirrors them, and the same as the
    corpus's own ids (text). An integer corpus's own ids are the harness's; a text or uuid
    corpus's are translated through its documents (one that is no document, or that the
    last attach did not see, has no harness id: it is in ``expected_own`` only)."""
    own = sql.SQL("ARRAY[]::text[]") if not gt.labelled else sql.SQL(
        "ARRAY(SELECT e::text FROM unnest(g.{}) WITH ORDINALITY AS u(e, n) WHERE e IS NOT NULL "
        "GROUP BY e ORDER BY min(n))").format(sql.Identifier(gt.expected_docs))
    if not gt.labelled:
        expected: sql.Composable = sql.SQL("ARRAY[]::integer[]")
    elif not corpus.has_own_ids:
        expected = sql.SQL(
            "ARRAY(SELECT e FROM unnest(g.{}) WITH ORDINALITY AS u(e, n) WHERE e IS NOT NULL "
            "GROUP BY e ORDER BY min(n))::integer[]").format(sql.Identifier(gt.expected_docs))
    else:
        # a uuid is matched in its canonical text form; one statement, by the ids' index
        expected = sql.SQL(
            "ARRAY(SELECT {did} FROM unnest({own}) WITH ORDINALITY AS u(e, n) "
            "JOIN {d} ON {dext} = u.e ORDER BY u.n)::integer[]").format(
            own=own, did=corpus.id_of("d"), d=corpus.table("d"),
            dext=corpus.external_id_of("d"))
    return sql.SQL("SELECT g.{id}::text AS external_id, g.{query} AS query, "
                   "{expected} AS expected_docs, {own} AS expected_own "
                   "FROM {rel} AS g").format(
        id=sql.Identifier(gt.id), query=sql.Identifier(gt.query), expected=expected, own=own,
        rel=sql.Identifier(gt.relation.schema, gt.relation.name))


def _check_expected_ids(conn: psycopg.Connection, cfg: DatasetConfig,
                        checked: CheckedMapping) -> None:
    corpus = checked.corpus
    # an integer corpus is probed by its ids; a text or uuid one by its own ids as text
    ids, found = (("expected_own", corpus.external_id_of("d")) if corpus.has_own_ids
                  else ("expected_docs", corpus.id_of("d")))
    count, examples, queries = conn.execute(sql.SQL("""
        SELECT count(*), (array_agg(m.e ORDER BY m.e))[1:5], (array_agg(m.q ORDER BY m.e))[1:5]
        FROM (SELECT DISTINCT ON (u.e) u.e, g.external_id AS q
              FROM _live_gt g, unnest(g.{ids}) AS u(e)
              WHERE NOT EXISTS (SELECT 1 FROM {d} WHERE {found} = u.e AND {rows})
              ORDER BY u.e, g.external_id) m""").format(
        ids=sql.Identifier(ids), d=corpus.table("d"), found=found,
        rows=corpus.rows_of_dataset("d"))).fetchone()
    if count:
        shown = ", ".join(str(e) for e in examples) + (", ..." if count > 5 else "")
        raise LiveMappingError(
            f"'datasets.{cfg.name}.live.ground_truth.expected_docs': {count} ids are not "
            f"documents of {corpus.described} (e.g. {shown}, expected by queries "
            f"{', '.join(dict.fromkeys(queries))}); fix the ground truth or the corpus mapping.")


def _staged_expected_own_ids(conn: psycopg.Connection) -> set[str]:
    return {i for (i,) in conn.execute("SELECT DISTINCT unnest(expected_own) FROM _live_gt")}


def _merge_ground_truth(conn: psycopg.Connection, dataset: str, report: AttachReport) -> None:
    """Upsert the staged rows into ``ground_truth``; a changed query or changed expected ids
    drop the query's embedding (if the text changed) and its judge scores."""
    rows = ground_truth.upsert_attached_queries(conn, dataset)
    report.inserted = sum(1 for (is_new,) in rows if is_new)
    report.updated = len(rows) - report.inserted
    report.removed = ground_truth.delete_queries_not_staged(conn, dataset, "_live_gt")
    report.queries = ground_truth.count_queries(conn, dataset)


def _embed_queries(conn: psycopg.Connection, cfg: DatasetConfig, dim: int,
                   embedder_factory: Callable[[], Embedder], report: AttachReport,
                   progress) -> None:
    texts = ground_truth.queries_without_embedding(conn, cfg.name)
    if not texts:
        return
    model = embedder_model(cfg.embedder or "")
    found = cached_query_embeddings(conn, model, texts)
    missing = [t for t in texts if t not in found]
    report.embeddings_cached = len(found)
    if missing:
        vectors = embed_in_batches(embedder_factory(), missing, progress=progress)
        check_vectors(vectors, [t[:40] for t in missing], what="query",
                      source=f"datasets.{cfg.name}", model=cfg.embedder,
                      fix="nothing was stored.")
        new = dict(zip(missing, vectors))
        cache_query_embeddings(conn, model, new)
        found.update(new)
        report.embedded = len(missing)
    wrong = {len(v) for v in found.values()} - {dim}
    if wrong:
        raise LiveMappingError(f"'datasets.{cfg.name}.embedder': {cfg.embedder} gives "
                               f"{sorted(wrong)[0]}-dimensional query vectors but the corpus "
                               f"embeddings have {dim}; name the model that embedded the corpus.")
    ground_truth.set_query_embeddings(conn, cfg.name, [(found[t], t) for t in texts])


def _recorded_corpus(conn: psycopg.Connection, dataset: str) -> Corpus:
    """The corpus of live ``dataset`` as just recorded (what every later command reads)."""
    row = register.dataset_row(conn, dataset)
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE and not conn.autocommit:
        conn.commit()
    name, language, _model, dim, _kind, mapping = row
    return Corpus.live(name, language, dim, mapping)


# ------------------------------------------------------------------------------ write-back

# The columns seed story 1.11 keeps in the RAG system's ground_truth, with the types that
# hold the harness's values exactly (FLOAT is double precision; a narrower type would round
# them, so a rerun could not tell that a row already holds them).
SEED_JUDGE_COLUMNS = {"judge1_score": ("double precision[]",),
                      "judge2_score": ("double precision[]",),
                      "judge1_model": TEXT_TYPES, "judge2_model": TEXT_TYPES,
                      "kappa": ("double precision",)}


@dataclass(frozen=True)
class WriteBackReport:
    """What :func:`write_back_judge_scores` did: the rows it changed and the columns it
    wrote, or the one sentence saying why it wrote nothing (``refused``)."""

    relation: str
    rows: int = 0
    columns: tuple[str, ...] = ()
    refused: str | None = None

    def __str__(self) -> str:
        if self.refused:
            return self.refused
        return (f"judge scores written back to {self.relation} ({', '.join(self.columns)}): "
                f"{self.rows} rows changed")


def write_back_judge_scores(conn: psycopg.Connection, cfg: DatasetConfig) -> WriteBackReport:
    """Copy the harness's stored judge scores of live dataset ``cfg`` into the RAG system's
    own ground-truth rows, as seed story 1.11 keeps them there (opt-in:
    ``datasets.<name>.live.write_judge_scores: true``; the caller checks the key).

    For every query the harness has judged, the live row whose id is the query's own id gets
    ``judge1_score`` / ``judge2_score`` (float8[] aligned with the harness's ``judged_docs``
    of that query: its expected documents, then the hybrid top k; NULL where a judgement is
    unscored), ``judge1_model`` / ``judge2_model`` (the judge specs) and ``kappa``: those of
    the columns the relation has; the seed has no column naming the judged documents, so
    none is written. A row already holding these values is not touched.

    The one write the harness makes outside its schema, so it refuses in one sentence, and
    writes nothing, when the relation is a view, lacks all these columns, has one of another
    type, or this role may not UPDATE them; the judge run itself stays stored either way.
    One transaction.
    """
    # settings refuse write_judge_scores without a ground-truth mapping
    assert cfg.live is not None and cfg.live.ground_truth is not None
    gt = cfg.live.ground_truth
    name = sql.Identifier(gt.relation.schema, gt.relation.name)
    rows = 0
    with conn.transaction():
        present, problem = _write_back_columns(conn, name.as_string(conn))
        if problem is None:
            own_id = _own_id_as_column_type(conn, name.as_string(conn), gt.id)
            try:
                with conn.transaction():
                    rows = conn.execute(sql.SQL("""
                        UPDATE {rel} AS t SET ({cols}) = ROW({values})
                        FROM {mirror}
                        WHERE h.dataset = %s AND h.judged_docs IS NOT NULL
                          AND t.{id} = {own_id}
                          AND ({current}) IS DISTINCT FROM ({values})""").format(
                        rel=name, mirror=ground_truth.table("h"), id=sql.Identifier(gt.id),
                        own_id=own_id,
                        cols=sql.SQL(", ").join(map(sql.Identifier, present)),
                        values=sql.SQL(", ").join(sql.Identifier("h", c) for c in present),
                        current=sql.SQL(", ").join(sql.Identifier("t", c) for c in present)),
                        (cfg.name,)).rowcount
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction,
                    psycopg.errors.DataError) as exc:
                problem = (f"could not be updated "
                           f"({(exc.diag.message_primary or type(exc).__name__).rstrip('.')})")
    if problem is not None:
        return WriteBackReport(str(gt.relation), refused=(
            f"'datasets.{cfg.name}.live.write_judge_scores': {gt.relation} {problem}; the "
            "judge scores stay in the harness's own ground_truth."))
    return WriteBackReport(str(gt.relation), rows, tuple(present))


# The type a query's own id (text in the harness) is cast to, to meet the live id column in
# its own type (so its index finds the row): format_type's name, except char(n), which the
# cast would cut to one character.
_CAST_OF_ID_TYPE = {"smallint": "bigint", "integer": "bigint", "bigint": "bigint",
                    "text": "text", "character varying": "text", "character": "bpchar",
                    "uuid": "uuid"}


def _own_id_as_column_type(conn: psycopg.Connection, relation: str,
                           column: str) -> sql.Composable:
    """``h.external_id`` cast to the type of the id column ``column`` of ``relation``."""
    kind = conn.execute("SELECT format_type(atttypid, NULL) FROM pg_attribute "
                        "WHERE attrelid = to_regclass(%s) AND attname = %s",
                        (relation, column)).fetchone()
    cast = _CAST_OF_ID_TYPE.get(kind[0] if kind else "", "text")
    return sql.SQL("h.external_id::" + cast)


def _write_back_columns(conn: psycopg.Connection, relation: str) -> tuple[list[str], str | None]:
    """The seed's judge columns ``relation`` has, and why they cannot be written (or None)."""
    row = conn.execute("SELECT c.oid, c.relkind FROM pg_class c WHERE c.oid = to_regclass(%s)",
                       (relation,)).fetchone()
    if row is None:
        return [], "does not exist (any more)"
    if row[1] not in ("r", "p"):
        return [], "is a view, not a table (map the table itself to write them back)"
    columns = relation_columns(conn, row[0])
    present = [c for c in SEED_JUDGE_COLUMNS if c in columns]
    if not present:
        return [], f"has none of the columns {', '.join(SEED_JUDGE_COLUMNS)}"
    for column in present:
        if columns[column][0] not in SEED_JUDGE_COLUMNS[column]:
            return [], (f"has column {column} of type {columns[column][0]}, which cannot hold "
                        f"it (expected {' or '.join(SEED_JUDGE_COLUMNS[column])})")
    denied = [c for c in present if not conn.execute(
        "SELECT has_column_privilege(%s::oid, %s, 'UPDATE')", (row[0], c)).fetchone()[0]]
    if denied:
        return [], f"may not be updated by this role (no UPDATE on {', '.join(denied)})"
    return present, None
