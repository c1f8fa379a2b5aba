"""Getting a configured dataset ready before a command works on it.

A writing command (``judge``, ``calibrate``, ``attach``, the Dagster ``corpus`` asset) calls
:func:`prepare_dataset` first. For a *live* dataset that attaches it: the mapping is checked,
recorded, its ground truth mirrored and its queries embedded
(:func:`eval_harness.datasets.live.attach_live_dataset`), so every command sees the RAG system's
current ground truth. An *ingested* dataset is left as it is: ingesting reads a folder and
stays an explicit step (``eval-harness ingest``, the ``corpus`` asset). Read-only commands
(search, report, agreement, review export) never attach; nor do the dry runs (``judge
--dry-run``, ``calibrate --no-write``), which check a live mapping in place and say how the
live ground truth changed since it was last attached (:func:`check_attached_dataset`). A
dataset missing from the store gets one sentence that says what to run
(:func:`missing_dataset_message`).

**The demo RAG store.** With ``store.demo_rag_schema`` set and no ``DATABASE_URL`` (the
embedded store is the harness's own), the BEIR folder ``store.demo_rag_source`` (the bundled
SciFact, ``datasets/scifact`` under the config's folder) is laid out once in that schema
like a RAG system's own tables
(:func:`eval_harness.datasets.demo_store.build_rag_store`), before a live dataset mapped onto that
schema is attached. On a ``DATABASE_URL`` store it is never built: the harness writes
nothing outside its own schema on a user's store.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import psycopg
from psycopg import sql

from eval_harness.datasets import ground_truth, register
from eval_harness.datasets.demo_store import DemoStore, build_rag_answers, build_rag_store
from eval_harness.datasets.embeddings import embedder_factory
from eval_harness.datasets.live import (
    AttachReport,
    LiveMappingError,
    attach_live_dataset,
    live_ground_truth_rows,
    no_ground_truth_sentence,
)
from eval_harness.datasets.live_mapping import check_mapping
from eval_harness.settings import Settings
from eval_harness.settings.datasets import DatasetConfig
from eval_harness.store.catalog import relation_exists


@dataclass(frozen=True)
class PreparedDataset:
    """What :func:`prepare_dataset` did: the attach (live datasets only) and the demo store
    (when it was laid out or found for this dataset)."""

    dataset: str
    kind: str                        # "live" | "ingested" | "unconfigured"
    attach: AttachReport | None = None
    demo: DemoStore | None = None


def demo_store_wanted(settings: Settings) -> bool:
    """Whether this store gets the demo RAG schema: configured, and the embedded store."""
    return settings.demo_rag_schema is not None and not settings.database_url


def prepare_demo_store(conn: psycopg.Connection, settings: Settings,
                       cfg: DatasetConfig | None = None) -> DemoStore | None:
    """Lay out ``store.demo_rag_source`` in ``store.demo_rag_schema`` once (idempotent); None
    when no demo store is wanted here (see :func:`demo_store_wanted`).

    The layout follows ``cfg``'s mapping onto it: its language, and a stored tsvector column
    when the mapping names one (``tsvector: tsv``; null: the GIN index is on
    ``to_tsvector(language, content)`` and every keyword match is parsed again when ranked).
    """
    if not demo_store_wanted(settings):
        return None
    folder = settings.demo_rag_source
    if not folder.is_dir():
        raise LiveMappingError(
            f"'store.demo_rag_source': {folder} is not a folder, so the demo RAG store "
            f"(store.demo_rag_schema) cannot be laid out; name the bundled datasets/scifact "
            "or remove store.demo_rag_schema.")
    corpus = cfg.live.corpus if cfg is not None and cfg.live is not None else None
    on_demo = corpus is not None and corpus.relation.schema == settings.demo_rag_schema
    demo = build_rag_store(conn, folder, schema=settings.demo_rag_schema,
                           language=cfg.language if cfg is not None else "english",
                           tsvector=corpus.tsvector if on_demo else None)
    if settings.demo_rag_answers is None:
        return demo
    if not settings.demo_rag_answers.is_file():
        raise LiveMappingError(
            f"'store.demo_rag_answers': {settings.demo_rag_answers} is not a file, so the demo "
            "RAG store's answers table cannot be laid out; name the bundled "
            "datasets/answers/sample_answers.jsonl or set it to null.")
    answers = build_rag_answers(conn, settings.demo_rag_answers,
                                schema=settings.demo_rag_schema)
    return replace(demo, answers=answers)


def uses_demo_schema(cfg: DatasetConfig, settings: Settings) -> bool:
    """Whether ``cfg`` is live and maps a relation of ``store.demo_rag_schema``."""
    schema = settings.demo_rag_schema
    live = cfg.live
    return (schema is not None and live is not None
            and (live.corpus.relation.schema == schema
                 or (live.ground_truth is not None
                     and live.ground_truth.relation.schema == schema)))


def describe_demo_store(demo: DemoStore) -> str:
    """One line for the person running the demo: where the stand-in RAG store is."""
    state = "laid out now" if demo.created else "already there"
    answers = f", {demo.answers} answers" if demo.answers else ""
    return (f"demo RAG store: schema {demo.schema} ({demo.documents} documents, "
            f"{demo.queries} queries{answers}; {state}; store.demo_rag_schema)")


def refuse_missing_demo_relations(conn: psycopg.Connection, cfg: DatasetConfig,
                                   settings: Settings) -> None:
    """On a DATABASE_URL store, a mapping onto the demo schema finds nothing unless the user
    made it: say why in one sentence instead of "does not exist"."""
    live = cfg.live
    assert live is not None
    for key, relation in (("corpus", live.corpus.relation),
                          ("ground_truth", getattr(live.ground_truth, "relation", None))):
        if relation is None or relation.schema != settings.demo_rag_schema:
            continue
        if not relation_exists(conn, sql.Identifier(relation.schema, relation.name)
                               .as_string(conn)):
            raise LiveMappingError(
                f"'datasets.{cfg.name}.live.{key}.relation': {relation} does not exist in the "
                f"store at DATABASE_URL, and the demo schema '{settings.demo_rag_schema}' "
                "(store.demo_rag_schema) is laid out only in the embedded store, never in "
                f"yours; map datasets.{cfg.name}.live onto your own tables, or unset "
                "DATABASE_URL to run the demo.")


def dataset_embedder_factory(settings: Settings, cfg: DatasetConfig):
    """The deferred embedder of ``cfg``'s ``embedder`` spec (``local:MODEL`` /
    ``openai:MODEL``); the configured one for a dataset that names none."""
    if not cfg.embedder:
        return embedder_factory(settings)
    provider, _, model = cfg.embedder.partition(":")
    return embedder_factory(settings, model, provider=provider)


def prepare_dataset(conn: psycopg.Connection, settings: Settings, name: str, *,
                    progress=None) -> PreparedDataset:
    """Make dataset ``name`` ready for a writing command (module docstring): attach a live
    one (laying out the demo store first when its mapping points there), leave an ingested
    one alone. A name config.yaml does not know (e.g. one ingested with ``--name``) is left
    to the command, which says whether the store holds it. Raises
    :class:`~eval_harness.datasets.live.LiveMappingError` (one sentence) for a mapping that
    does not fit the store; then nothing was written."""
    cfg = settings.datasets.get(name)
    if cfg is None:
        return PreparedDataset(name, "unconfigured")
    if not cfg.is_live:
        return PreparedDataset(name, "ingested")
    demo = None
    if uses_demo_schema(cfg, settings):
        if demo_store_wanted(settings):
            demo = prepare_demo_store(conn, settings, cfg)
        else:
            with conn.transaction():  # no implicit transaction left open: attach commits
                refuse_missing_demo_relations(conn, cfg, settings)
    report = attach_live_dataset(conn, cfg, embedder_factory=dataset_embedder_factory(
        settings, cfg), progress=progress)
    return PreparedDataset(name, "live", attach=report, demo=demo)


def check_attached_dataset(conn: psycopg.Connection, settings: Settings,
                           name: str) -> str | None:
    """What a command that writes nothing (``judge --dry-run``, ``calibrate --no-write``)
    does instead of :func:`prepare_dataset`: a live dataset is not attached again (that
    writes the harness schema, and a role that may only SELECT could not), its mapping is
    checked in place (reads only) and the command works on the ground truth as last
    attached. Returns one line saying so, with how the live ground truth has changed since
    (new, changed and removed queries, counted as an attach would: a mapping of the corpus
    alone has none, so every query an earlier mapping mirrored counts as removed); None for
    a dataset that is not live. A live dataset never attached is left to the command, which says to
    attach it (:func:`missing_dataset_message`)."""
    cfg = settings.datasets.get(name)
    if cfg is None or not cfg.is_live:
        return None
    attached_at = register.live_attached_at(conn, name)
    if attached_at is None:
        return None
    checked = check_mapping(conn, cfg)
    gt = checked.ground_truth
    rows = (live_ground_truth_rows(gt, checked.corpus) if gt is not None else sql.SQL(
        "SELECT NULL::text AS external_id, NULL::text AS query, NULL::integer[] AS "
        "expected_docs, NULL::text[] AS expected_own WHERE FALSE"))
    new, changed, removed = conn.execute(sql.SQL("""
        WITH live AS ({rows}), kept AS (SELECT * FROM live WHERE {kept})
        SELECT count(*) FILTER (WHERE h.external_id IS NULL),
               count(*) FILTER (WHERE k.external_id IS NOT NULL AND h.external_id IS NOT NULL
                                AND (k.query, k.expected_docs)
                                    IS DISTINCT FROM (h.query, h.expected_docs)),
               count(*) FILTER (WHERE k.external_id IS NULL)
        FROM kept k FULL JOIN ({stored}) h ON h.external_id = k.external_id""").format(
        stored=ground_truth.labels_of_dataset(), rows=rows,
        kept=sql.SQL("cardinality(expected_own) > 0" if gt is not None and gt.labelled
                     else "TRUE")), (name,)).fetchone()
    since = f"as attached at {attached_at:%Y-%m-%d %H:%M %Z}".rstrip()
    state = ("unchanged since" if not (new or changed or removed) else
             f"changed since: {new} new, {changed} changed, {removed} removed queries, which "
             f"`eval-harness attach --dataset {name}` takes in")
    unmapped = "" if gt is not None else f"; {no_ground_truth_sentence(name)}"
    return (f"dataset '{name}' (live, {checked.corpus.relation_name}): not attached again "
            f"(this command writes nothing); its ground truth {since}, the live one {state}"
            f"{unmapped}")


def missing_dataset_message(settings: Settings, name: str) -> str | None:
    """One sentence for a configured dataset the store does not hold, saying what to run;
    None for a name config.yaml does not know (the store's own message lists what it has)."""
    cfg = settings.datasets.get(name)
    if cfg is None:
        return None
    run = ("`eval-harness run`" if name == settings.default_dataset
           else f"`eval-harness run --dataset {name}`")
    if cfg.is_live:
        return (f"Dataset '{name}' is not in the store: it is a live dataset of config.yaml "
                f"that is not attached yet; run `eval-harness attach --dataset {name}` or "
                f"{run}.")
    options = "".join(f" --{key} {value}" for key, value, default in (
        ("language", cfg.language, "english"), ("split", cfg.split, "test"),
        ("embeddings", cfg.embeddings, None)) if value is not None and value != default)
    return (f"Dataset '{name}' is not in the store: it is not ingested yet; run "
            f"`eval-harness ingest {cfg.path} --name {name}{options}` or {run}.")
