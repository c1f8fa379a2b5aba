"""Ground-truth domain: the dataset's corpus and its ground-truth query set.

An ingested dataset is (re)ingested from its folder; a live one is attached in place: its
mapping checked, its ground truth mirrored and its queries embedded
(:func:`eval_harness.datasets.prepare.prepare_dataset`), after the demo RAG store is laid out
when the mapping points at ``store.demo_rag_schema`` on the embedded store.
"""




import dagster as dg

from eval_harness.datasets.embeddings import embedder_factory
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.datasets.prepare import prepare_dataset
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness_pipelines.resources import EvalSettings, LiveStore

GROUP = "ground_truth"


class IngestConfig(dg.Config):
    dataset: str | None = None  # a key of `datasets` in config.yaml; default_dataset if unset


# One step ingests (or attaches) both assets in one transaction, so there is one op; it
# carries the name of the asset it starts with, as every other step does.
@dg.multi_asset(
    name="corpus",
    specs=[
        dg.AssetSpec("corpus", group_name=GROUP,
                     description="Documents of the dataset: ingested into the harness's "
                                 "l2_insights, or the RAG system's own relation (live)."),
        dg.AssetSpec("ground_truth", group_name=GROUP, deps=["corpus"],
                     description="Ground-truth queries with expected_docs (relevance >= 1); "
                                 "a live dataset's mirrored from its own relation."),
    ])
def corpus_and_ground_truth(context: dg.AssetExecutionContext, config: IngestConfig,
                            settings: EvalSettings, store: LiveStore):
    cfg = settings.load()
    dataset = cfg.dataset(config.dataset or cfg.default_dataset)
    location = store.location()
    context.log.info(f"store: {location.description}")
    if dataset.is_live:
        yield from _attached(context, cfg, dataset, location)
        return
    with location.connection() as conn:
        report = ingest_beir(
            conn, dataset.path, name=dataset.name, language=dataset.language, split=dataset.split,
            embeddings=dataset.embeddings,
            embedder_factory=embedder_factory(cfg))
    yield dg.MaterializeResult(asset_key="corpus", metadata={
        "dataset": dataset.name, "kind": "ingested", "language": dataset.language,
        "documents_new": report.documents.inserted, "documents_updated": report.documents.updated,
        "documents_removed": report.documents.deleted,
        "documents_unchanged": report.documents.unchanged, "embeddings": report.embeddings,
        "documents_without_text": len(report.empty_documents)})
    yield dg.MaterializeResult(asset_key="ground_truth", metadata={
        "dataset": dataset.name, "kind": "ingested", "split": dataset.split,
        "queries_new": report.queries.inserted, "queries_updated": report.queries.updated,
        "queries_removed": report.queries.deleted, "queries_unchanged": report.queries.unchanged,
        "queries_without_relevant_docs": report.skipped_queries})


def _attached(context: dg.AssetExecutionContext, cfg, dataset, location):
    with location.connection() as conn:
        prepared = prepare_dataset(conn, cfg, dataset.name)
        documents = dataset_info(conn, dataset.name).documents
    report = prepared.attach
    if prepared.demo is not None:
        context.log.info(f"demo RAG store in schema {prepared.demo.schema}: "
                         f"{'laid out now' if prepared.demo.created else 'already there'}")
    for notice in report.notices:
        context.log.warning(notice)
    if report.keyword is not None:  # tsvector: null: the keyword index, refreshed
        context.log.info(str(report.keyword))
    yield dg.MaterializeResult(asset_key="corpus", metadata={
        "dataset": dataset.name, "kind": "live", "relation": report.relation,
        "language": dataset.language, "embedder": dataset.embedder, "documents": documents})
    truth = dataset.live.ground_truth  # None: the corpus alone is mapped
    yield dg.MaterializeResult(asset_key="ground_truth", metadata={
        "dataset": dataset.name, "kind": "live",
        "relation": str(truth.relation) if truth is not None else "none (corpus only)",
        "queries": report.queries, "queries_new": report.inserted,
        "queries_changed": report.updated, "queries_removed": report.removed,
        "queries_without_expected_docs": report.without_expected,
        "query_embeddings_computed": report.embedded,
        "query_embeddings_cached": report.embeddings_cached})


defs = dg.Definitions(assets=[corpus_and_ground_truth])
