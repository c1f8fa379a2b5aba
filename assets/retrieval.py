"""Validation domain: hybrid-search quality at the configured weights (the retrieval report)."""



from typing import Any

import dagster as dg

from eval_harness.files import write_report
from eval_harness.retrieval.report import METRIC_LABELS, configured_retrieval_report, format_report
from eval_harness_pipelines.check_outcomes import readable
from eval_harness_pipelines.resources import EvalSettings, LiveStore

GROUP = "validation"


class RetrievalReportConfig(dg.Config):
    dataset: str | None = None


@dg.asset(group_name=GROUP, deps=["ground_truth"],
          description="P@5, Recall@5, nDCG@10, MRR@10 of hybrid search at the configured weights.")
def retrieval_report(context: dg.AssetExecutionContext, config: RetrievalReportConfig,
                     settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
    cfg = settings.load()
    dataset = config.dataset or cfg.default_dataset
    with store.location().connection() as conn:  # the dataset's calibrated weights, else global
        report = configured_retrieval_report(conn, cfg, dataset)
        conn.commit()  # the candidate cache's new entries, the only rows a report writes
    text = format_report(report)
    path = write_report(cfg.root / "reports", "retrieval-report.md",
                        f"# Retrieval report\n\n```\n{text}\n```\n")
    context.log.info(text)
    metadata: dict[str, Any] = {label: dg.MetadataValue.float(report.metrics[key])
                                for key, label in METRIC_LABELS.items()}
    metadata.update({"dataset": dataset, "queries": report.queries,
                     "semantic_weight": report.semantic_weight,
                     "keyword_weight": report.keyword_weight,
                     "report": dg.MetadataValue.md(f"```\n{text}\n```"),
                     "report_path": dg.MetadataValue.path(str(path))})
    return dg.MaterializeResult(metadata=readable(metadata))


defs = dg.Definitions(assets=[retrieval_report])
