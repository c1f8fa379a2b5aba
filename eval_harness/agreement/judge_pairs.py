"""The dual-judge scores of a dataset as (query, document) pairs, read from ``ground_truth``,
and the one label each pair carries downstream.

``ground_truth`` keeps, per query, the aligned arrays ``judged_docs`` / ``judge1_score`` /
``judge2_score`` (a NULL element is a pair that judge did not score). Here they become one
row per (query, document) pair, with the human label where the query has one: a judged
document is human-relevant iff it is in the query's ``expected_docs`` (a query with an empty
``expected_docs`` counts as unlabelled, not as "nothing is relevant").

**Where an adjudicated label overrides the judges.** :func:`final_labels` is the one place
that turns two judge scores into the binary label a pair carries downstream: a human verdict
from the review queue (:func:`eval_harness.agreement.review.adjudicated_labels`) wins over both
judges; without one, the label is ``mean(score1, score2) > relevance_threshold``; a pair
judge 2 was not asked (staged dual judging: ``judge2_status`` ``skipped``) takes judge 1's
label; any other pair that only one judge scored and nobody adjudicated has no label.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import psycopg

from eval_harness.agreement.review import adjudicated_labels
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.datasets.ground_truth import SKIPPED, count_queries, judged_query_rows

PairKey = tuple[int, int]  # (ground_truth.id, l2_insights.id)


class JudgeScoresError(ValueError):
    """Stored judge scores are malformed; the message names the query and what to do."""


@dataclass(frozen=True)
class QueryText:
    external_id: str
    text: str


@dataclass(frozen=True)
class JudgePairs:
    """Every judged (query, document) pair of a dataset, in ground_truth id order.

    Position ``i`` of each tuple describes one pair; ``None`` is an unscored pair (or, in
    ``human``, a query without human labels).
    """

    dataset: str
    query_ids: tuple[int, ...]
    doc_ids: tuple[int, ...]
    scores1: tuple[float | None, ...]
    scores2: tuple[float | None, ...]
    human: tuple[int | None, ...]
    queries: Mapping[int, QueryText]  # the judged queries
    judge1_models: tuple[str, ...]
    judge2_models: tuple[str, ...]
    n_queries: int  # every ground-truth query of the dataset, judged or not
    # True where judge 2 was not asked (staged dual judging); empty: none was skipped
    skipped2: tuple[bool, ...] = ()

    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def keys(self) -> tuple[PairKey, ...]:
        return tuple(zip(self.query_ids, self.doc_ids))


@dataclass(frozen=True)
class FinalLabel:
    """The label a pair carries downstream; ``source`` is "adjudicated", "judges" or None."""

    query_id: int
    doc_id: int
    label: int | None
    source: str | None


def load_judge_pairs(conn: psycopg.Connection, dataset: str) -> JudgePairs:
    """Every judged pair of ``dataset`` with both scores and the human label.

    Raises ``UnknownDataset`` (a ``LookupError``) for a dataset not in the store and
    :class:`JudgeScoresError` when a query's score arrays do not line up with its
    ``judged_docs`` or hold a score outside [0, 1]. NaN is read as unscored.
    """
    with conn.transaction():
        dataset_info(conn, dataset, with_counts=False)
        n_queries = count_queries(conn, dataset)
        rows = judged_query_rows(conn, dataset)
    columns: dict[str, list] = {k: [] for k in ("query_ids", "doc_ids", "scores1", "scores2",
                                                "human", "skipped2")}
    queries: dict[int, QueryText] = {}
    models1, models2 = set(), set()
    for qid, external_id, text, docs, s1, s2, m1, m2, expected, status2 in rows:
        where = f"ground_truth query '{external_id}' (id {qid}) of dataset '{dataset}'"
        if len(set(docs)) != len(docs):
            raise JudgeScoresError(f"{where} lists a document twice in judged_docs; re-run "
                                   "the judges for this query.")
        scores1 = _aligned_scores(s1, len(docs), where, "judge1_score")
        scores2 = _aligned_scores(s2, len(docs), where, "judge2_score")
        relevant = set(expected)
        queries[qid] = QueryText(external_id, text)
        models1.update(m for m in (m1,) if m)
        models2.update(m for m in (m2,) if m)
        columns["query_ids"] += [qid] * len(docs)
        columns["doc_ids"] += list(docs)
        columns["scores1"] += scores1
        columns["scores2"] += scores2
        columns["human"] += [int(d in relevant) if relevant else None for d in docs]
        skipped = list(status2 or [])
        columns["skipped2"] += [i < len(skipped) and skipped[i] == SKIPPED
                                for i in range(len(docs))]
    return JudgePairs(dataset=dataset, queries=queries, judge1_models=tuple(sorted(models1)),
                      judge2_models=tuple(sorted(models2)), n_queries=int(n_queries),
                      **{k: tuple(v) for k, v in columns.items()})


def final_labels(pairs: JudgePairs, adjudicated: Mapping[PairKey, int], *,
                 threshold: float) -> tuple[FinalLabel, ...]:
    """The binary label of every judged pair: the human verdict overrides both judges.

    Per pair: an adjudicated verdict if there is one (``source="adjudicated"``); else, when
    both judges scored it, ``1 if (score1 + score2) / 2 > threshold else 0``
    (``source="judges"``); else, when judge 2 was not asked (staged judging) and judge 1
    scored it, ``1 if score1 > threshold else 0`` (``source="judge1"``); else no label
    (``label=None, source=None``), never a guess.
    """
    labels = []
    skipped2 = pairs.skipped2 or (False,) * len(pairs)
    for key, s1, s2, skipped in zip(pairs.keys, pairs.scores1, pairs.scores2, skipped2):
        if key in adjudicated:
            labels.append(FinalLabel(*key, adjudicated[key], "adjudicated"))
        elif skipped and s1 is not None:
            labels.append(FinalLabel(*key, int(s1 > threshold), "judge1"))
        elif s1 is not None and s2 is not None:
            labels.append(FinalLabel(*key, int((s1 + s2) / 2 > threshold), "judges"))
        else:
            labels.append(FinalLabel(*key, None, None))
    return tuple(labels)


def load_final_labels(conn: psycopg.Connection, dataset: str, *,
                      threshold: float) -> tuple[FinalLabel, ...]:
    """:func:`final_labels` of ``dataset`` from the store: the ground truth the judges and
    the reviewers built together, for downstream use."""
    pairs = load_judge_pairs(conn, dataset)
    return final_labels(pairs, adjudicated_labels(conn, dataset), threshold=threshold)


def _aligned_scores(scores: list | None, n_docs: int, where: str, column: str) -> list:
    if scores is None:
        return [None] * n_docs
    if len(scores) != n_docs:
        raise JudgeScoresError(
            f"{where} has {n_docs} judged_docs but {len(scores)} {column} values; the arrays "
            "must be aligned, so re-run the judges for this query.")
    clean = [None if s is None or math.isnan(s) else float(s) for s in scores]
    for position, score in enumerate(clean):
        if score is not None and not 0.0 <= score <= 1.0:
            raise JudgeScoresError(
                f"{where} has {column}[{position + 1}] = {score!r}, outside [0, 1]; re-run the "
                "judges for this query (an unparseable reply is stored as NULL).")
    return clean
