"""One query's dual-judge scores as ground truth: per-query Cohen's kappa and the write into
``ground_truth`` (``judged_docs``, ``judge1_score`` / ``judge2_score`` aligned with it, NULL
where a judgement is unscored or failed, the judge specs, the kappa, each judgement's outcome
and the prompt versions)."""

from __future__ import annotations

from typing import Sequence

import psycopg

from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.protocol import JudgeResult, Outcome
from eval_harness.metrics.agreement import cohen_kappa
from eval_harness.datasets import ground_truth
from eval_harness.datasets.ground_truth import SKIPPED  # a judgement not asked (staged, judge 2)


class QueryChanged(RuntimeError):
    """The ground-truth query was changed (re-ingested) after it was planned; not written."""


def judgement_score(result: JudgeResult[float] | None) -> float | None:
    """The score of a scored judgement; None when it is unscored, failed or was not asked
    (None: staged judging skipped judge 2)."""
    return float(result.value) if result is not None and result.outcome is Outcome.SCORED \
        else None


def judgement_status(result: JudgeResult[float] | None) -> str:
    """The stored status: the outcome, or ``skipped`` for a judgement not asked (None)."""
    return SKIPPED if result is None else result.outcome.value


def pair_kappa(scores1: Sequence[float | None], scores2: Sequence[float | None], *,
               threshold: float) -> float | None:
    """Cohen's kappa of ``score > threshold`` over the pairs both judges scored; None if none.

    Degenerate cases follow :func:`eval_harness.metrics.agreement.cohen_kappa` (both judges
    give one and the same label to every pair: 1.0).
    """
    both = [(a, b) for a, b in zip(scores1, scores2) if a is not None and b is not None]
    if not both:
        return None
    return cohen_kappa([int(a > threshold) for a, _ in both],
                       [int(b > threshold) for _, b in both]).value


def store_query_judgements(conn: psycopg.Connection, query_id: int, doc_ids: Sequence[int],
                           results1: Sequence[JudgeResult[float]],
                           results2: Sequence[JudgeResult[float] | None], *, judge1: str,
                           judge2: str,
                           threshold: float, run_id: str,
                           planned: PlannedQuery | None = None) -> tuple[float | None, bool]:
    """Write one query's judgements into ``ground_truth`` (and commit).

    Returns the query's kappa and whether the stored judgement changed: it was not judged
    before, or its documents, scores, outcomes, judges or prompt versions differ (the run id
    and time are always rewritten and do not count). With ``planned``, the row is written only
    while its query text, expected documents and embedding are still the planned ones;
    otherwise :class:`QueryChanged` is raised and nothing is written (an ingest changed the
    query and cleared its scores meanwhile).
    """
    scores1 = [judgement_score(r) for r in results1]
    scores2 = [judgement_score(r) for r in results2]
    kappa = pair_kappa(scores1, scores2, threshold=threshold)
    versions = [next((r.prompt_version for r in results if r is not None and r.prompt_version),
                     None) for results in (results1, results2)]
    changed = ground_truth.write_query_judgements(
        conn, query_id, doc_ids=doc_ids, scores=(scores1, scores2),
        statuses=([judgement_status(r) for r in results1],
                  [judgement_status(r) for r in results2]),
        judges=(judge1, judge2), prompt_versions=versions, kappa=kappa, run_id=run_id,
        planned_as=None if planned is None
        else (planned.text, planned.expected, planned.embedding))
    conn.commit()
    if planned is not None and changed is None:
        raise QueryChanged(f"ground-truth query {planned.external_id} changed during the run")
    return kappa, bool(changed)
