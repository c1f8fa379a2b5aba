"""Ground-truth domain: the ingested corpus and the ground-truth query set."""


from typing import Optional

import dagster as dg

from eval_harness_pipelines.resources import EvalSettings, LiveStore
from eval_harness.store.embeddings import embedder_factory
from eval_harness.store.ingest import ingest_beir

GROUP = "ground_truth"


class IngestConfig(dg.Config):
    dataset: Optional[str] = None  # a key of `datasets` in config.yaml; default_dataset if unset


# One step ingests both assets in one transaction (eval_harness.store.ingest), so there is
# one op; it carries the name of the asset it starts with, as every other step does.
@dg.multi_asset(
    name="corpus",
    specs=[
        dg.AssetSpec("corpus", group_name=GROUP,
                     description="Documents of the dataset in l2_insights (embedding + tsvector)."),
        dg.AssetSpec("ground_truth", group_name=GROUP, deps=["corpus"],
                     description="Ground-truth queries with expected_docs (relevance >= 1)."),
    ])
def corpus_and_ground_truth(context: dg.AssetExecutionContext, config: IngestConfig,
                            settings: EvalSettings, store: LiveStore):
    cfg = settings.load()
    dataset = cfg.dataset(config.dataset or cfg.default_dataset)
    location = store.location()
    context.log.info(f"store: {location.description}")
    with location.connection() as conn:
        report = ingest_beir(
            conn, dataset.path, name=dataset.name, language=dataset.language, split=dataset.split,
            embeddings=dataset.embeddings,
            embedder_factory=embedder_factory(cfg))
    yield dg.MaterializeResult(asset_key="corpus", metadata={
        "dataset": dataset.name, "language": dataset.language,
        "documents_new": report.documents.inserted, "documents_updated": report.documents.updated,
        "documents_removed": report.documents.deleted,
        "documents_unchanged": report.documents.unchanged, "embeddings": report.embeddings,
        "documents_without_text": len(report.empty_documents)})
    yield dg.MaterializeResult(asset_key="ground_truth", metadata={
        "dataset": dataset.name, "split": dataset.split,
        "queries_new": report.queries.inserted, "queries_updated": report.queries.updated,
        "queries_removed": report.queries.deleted, "queries_unchanged": report.queries.unchanged,
        "queries_without_relevant_docs": report.skipped_queries})


defs = dg.Definitions(assets=[corpus_and_ground_truth])
