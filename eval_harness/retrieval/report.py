"""Retrieval quality of hybrid search over a dataset's ground truth at given weights."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import psycopg

from eval_harness.datasets import ground_truth
from eval_harness.errors import InvalidInput
from eval_harness.metrics.ranking import mean_metrics, query_metrics
from eval_harness.retrieval.fusion import fuse_scores, rank_candidates
from eval_harness.retrieval.hybrid import QueryCandidates, candidate_scores, dataset_info

if TYPE_CHECKING:
    from eval_harness.settings import Settings

METRIC_LABELS = {"p_at_5": "P@5", "recall_at_5": "Recall@5", "ndcg_at_10": "nDCG@10",
                 "mrr_at_10": "MRR@10"}


@dataclass(frozen=True)
class RetrievalReport:
    dataset: str
    queries: int
    documents: int
    semantic_weight: float
    keyword_weight: float
    candidate_depth: int
    metrics: dict[str, float]
    seconds: float
    # each query's own metrics, by the query's own id (what `report --record` stores)
    per_query: Mapping[str, Mapping[str, float]] = field(default_factory=dict, repr=False)
    # generated and users' queries of the dataset, left out: they have no human labels
    unlabelled_origins: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if key != "per_query"}


def load_qrels(conn: psycopg.Connection, dataset: str) -> dict[int, dict[int, int]]:
    """Ground truth as {query id: {doc id: grade}} for the dataset."""
    return {qid: dict(zip(docs, grades))
            for qid, docs, grades in ground_truth.graded_expected_docs(conn, dataset)}


def queries_of(conn: psycopg.Connection, dataset: str, qrels: Mapping) -> list[int] | None:
    """The query ids a candidate fetch for ``qrels`` asks for: None (every query of the
    dataset, the fetch's plain form) when ``qrels`` holds all of them, else its ids (generated
    or users' queries left out of human labels, or not judged yet)."""
    return None if len(qrels) == ground_truth.count_queries(conn, dataset) else list(qrels)


def fused_runs(candidates: list[QueryCandidates], semantic_weight: float,
               keyword_weight: float, *, depth: int = 10) -> dict[int, list[int]]:
    """Top ``depth`` document ids per query under the fusion rule."""
    return {c.query_id: rank_candidates(c.doc_ids, fuse_scores(
                c.semantic, c.keyword, semantic_weight, keyword_weight,
                query=c.query_id))[:depth].tolist()
            for c in candidates}


def retrieval_report(conn: psycopg.Connection, dataset: str, *, semantic_weight: float,
                     keyword_weight: float, candidate_depth: int) -> RetrievalReport:
    """P@5, Recall@5, nDCG@10 and MRR@10 of hybrid search over all ground-truth queries."""
    started = time.perf_counter()
    info = dataset_info(conn, dataset)
    qrels = load_qrels(conn, dataset)
    others = {origin: n for origin, n in ground_truth.query_origins(conn, dataset).items()
              if origin != "dataset"}
    if not qrels:
        held = ground_truth.described_origins(others)
        raise InvalidInput(
            f"Dataset '{dataset}' has no ground-truth queries with human labels to evaluate"
            + (f" (it holds {held} queries, which only the judges label: run `eval-harness "
               f"judge --dataset {dataset}`, then `eval-harness calibrate --dataset "
               f"{dataset} --labels judges`)." if others else
               "; make some with `eval-harness ground-truth generate` or `ground-truth "
               "from-answers`."))
    candidates = candidate_scores(conn, dataset, query_ids=queries_of(conn, dataset, qrels),
                                  candidate_depth=candidate_depth)
    runs = fused_runs(candidates, semantic_weight, keyword_weight)
    metrics = mean_metrics(runs, qrels)
    own_ids = ground_truth.query_external_ids(conn, list(qrels))
    per_query = {own_ids[query_id]: query_metrics(runs.get(query_id, ()), relevant)
                 for query_id, relevant in qrels.items()}
    return RetrievalReport(dataset, len(qrels), info.documents, semantic_weight, keyword_weight,
                           candidate_depth, metrics, time.perf_counter() - started, per_query,
                           others)


def configured_retrieval_report(conn: psycopg.Connection, settings: Settings,
                                dataset: str) -> RetrievalReport:
    """:func:`retrieval_report` at the weights ``settings`` give ``dataset``: its calibrated
    ones (``datasets.<name>.hybrid_search``), else the global ``hybrid_search``. What
    ``eval-harness report`` prints and the ``retrieval_report`` asset records."""
    weights = settings.weights_for(dataset)
    return retrieval_report(conn, dataset, semantic_weight=weights.semantic,
                            keyword_weight=weights.keyword,
                            candidate_depth=weights.candidate_depth)


def format_report(report: RetrievalReport) -> str:
    lines = [f"Retrieval report: dataset '{report.dataset}', {report.queries} queries, "
             f"{report.documents} documents",
             f"hybrid weights semantic {report.semantic_weight:g} / keyword "
             f"{report.keyword_weight:g}, candidate depth {report.candidate_depth}", ""]
    width = max(len(label) for label in METRIC_LABELS.values())
    for key, label in METRIC_LABELS.items():
        lines.append(f"  {label:<{width}}  {report.metrics[key]:.4f}")
    if report.unlabelled_origins:
        held = ground_truth.described_origins(dict(report.unlabelled_origins))
        lines.append(f"\n(human labels only: the dataset's {held} queries are left out; "
                     "`calibrate --labels judges` measures them)")
    lines.append(f"\n({report.seconds:.1f} s)")
    return "\n".join(lines)
