"""The P@5 corrected for judge error by a human sample: prediction-powered inference per query.

Judges label every judged query; people label a seeded uniform sample of them
(:mod:`eval_harness.agreement.sample`). At each weight reported (the default and the best),
for every judged query:

* the judges' P@5 (``yhat``): the share of its top 5 at that weight, as the calibration
  sweep ranks them, that the judges call relevant. The judge label is derived here, because
  no shared labels module exists yet: a pair is relevant when **both** judges scored it above
  ``agreement.relevance_threshold``; a pair the judges disagree on, one of them did not
  score, or nobody judged counts as not relevant. PPI stays valid whatever this rule is (any
  function of the judges' output is a valid prediction; a better rule only narrows the
  interval);
* the human P@5 (``y``), for a sampled query whose top-5 documents all carry a person's
  verdict: the share labelled ``relevant``. ``review sample`` exports every judged pair of
  a sampled query and the judges' pool holds the top 5 of every evaluated weight, so a fully
  labelled sampled query has a human P@5 at each weight. Sampled queries with a top-5
  document left unlabelled are left out and counted (``incomplete_queries``): they are
  missing labels, so the estimate is valid only when that count is 0 (the text says so).

Why this is valid PPI: the sampled queries are a uniform random sample of the judged
queries (the unit drawn is the unit measured), ``y`` is a person's P@5 on them, ``yhat`` is
computed the same way on every judged query, and :func:`prediction_powered_mean` estimates
the mean of ``y`` over the judged queries with a 95% CLT interval over queries. The figures
equal ``ppi_py.ppi_mean_ci`` on the same vectors (tests/calibration/test_ppi_p_at_5.py).

With such an estimate at the weights in force after the decision (the best weight when the
decision changed them, else the weights kept: ``kept``) and the judges' labels calibrated
on, the P@5 verdict is given on the corrected estimate (clipped to [0, 1]) instead of the judge-labelled
P@5, and every output says so (:mod:`.verdict`: the text, the JSON, the ``calibrated_weights``
row, the Dagster check). Complete human labels keep the verdict; the corrected lines are
shown beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from eval_harness.agreement import sql as agreement_sql
from eval_harness.agreement.review_file import VERDICTS
from eval_harness.calibration.grid import GridPoint, weight_label
from eval_harness.metrics.ppi import PPIEstimate, labels_to_halve_width, prediction_powered_mean
from eval_harness.metrics.ranking import PRECISION_CUTOFF
from eval_harness.retrieval.sweep import CandidateSet, rank_top_k
from eval_harness.retrieval.weights import keyword_weight_for
from eval_harness.datasets import ground_truth

LEVEL = 0.95
LABEL_SOURCE = "judges corrected by a human sample (prediction-powered inference)"
JUDGE_LABEL_RULE = "relevant when both judges score above agreement.relevance_threshold"


@dataclass(frozen=True)
class CorrectedP5:
    """The corrected P@5 at one weight."""

    semantic_weight: float
    judge_p_at_5: float           # the judges' P@5 over all judged queries, uncorrected
    ppi: PPIEstimate
    labels_to_halve_width: int | None  # more human-labelled queries; None: labels cannot
    incomplete_queries: int       # sampled queries whose top 5 here is not all labelled

    def to_dict(self) -> dict[str, Any]:
        return dict(self.ppi.to_dict(), level=LEVEL, unit="query",
                    judge_p_at_5=self.judge_p_at_5,
                    labels_to_halve_width=self.labels_to_halve_width,
                    incomplete_queries=self.incomplete_queries, label_source=LABEL_SOURCE)


@dataclass(frozen=True)
class CorrectedEstimates:
    """What :func:`corrected_estimates` adds to a calibration (None where too few sampled
    queries are fully labelled at that weight: PPI needs two)."""

    default: CorrectedP5 | None
    best: CorrectedP5 | None
    sampled_queries: int
    labelled_pairs: int
    judge_label_rule: str = JUDGE_LABEL_RULE
    # at the weights kept, when the decision kept weights other than the best grid point (the
    # verdict's weights); None otherwise, or when they are not ``w / 1 - w`` (not computed)
    kept: CorrectedP5 | None = None

    def at(self, point: GridPoint) -> CorrectedP5 | None:
        """The corrected P@5 at ``point`` (the weights the verdict is given at), if computed."""
        for corrected in (self.kept, self.best):
            if corrected is not None and math.isclose(corrected.semantic_weight,
                                                      point.semantic_weight, abs_tol=1e-9) \
                    and math.isclose(keyword_weight_for(point.semantic_weight),
                                     point.keyword_weight, abs_tol=1e-9):
                return corrected
        return None

    def add_to_json(self, data: dict) -> dict:
        """Put the ``ppi`` objects into ``data["default"]`` / ``data["best"]`` and the human
        sample's size into ``data["human_sample"]`` (what the verdict rests on is
        ``data["verdict"]``, from :mod:`.verdict`)."""
        for name, corrected in (("default", self.default), ("best", self.best)):
            data[name]["ppi"] = None if corrected is None else corrected.to_dict()
        if self.kept is not None:
            data["kept_ppi"] = self.kept.to_dict()
        data["human_sample"] = {"sampled_queries": self.sampled_queries,
                                "labelled_pairs": self.labelled_pairs,
                                "judge_label_rule": self.judge_label_rule}
        return data

    def lines(self) -> list[str]:
        """One line per weight (the verdict's own line is :mod:`.verdict`'s)."""
        out = []
        named = [("default", self.default), ("best", self.best)]
        for name, corrected in named + ([("kept", self.kept)] if self.kept else []):
            if corrected is None:
                out.append(f"Corrected P@5 at the {name} weight: not computed (fewer than 2 "
                           f"sampled queries have all their top 5 labelled)")
                continue
            out.append(_weight_line(name, corrected))
        return out


def _weight_line(name: str, corrected: CorrectedP5) -> str:
    ppi = corrected.ppi
    halve = (f"labelling more of the {ppi.n_judged} judged queries cannot halve it"
             if corrected.labels_to_halve_width is None
             else f"{corrected.labels_to_halve_width} more labelled queries would halve it")
    text = (f"Corrected P@5 at the {name} weight {weight_label(corrected.semantic_weight)}: "
            f"{ppi.estimate:.4f}, 95% interval [{ppi.interval[0]:.4f}, {ppi.interval[1]:.4f}] "
            f"(PPI over queries: {ppi.n_human} human-labelled of {ppi.n_judged} judged, "
            f"judges' weight {ppi.lam:.2f}; judges alone {corrected.judge_p_at_5:.4f}); {halve}")
    if corrected.incomplete_queries:
        text += (f"; {corrected.incomplete_queries} sampled queries left out because their "
                 "top 5 is not all labelled, so the interval holds only if they are missing "
                 "at random: label them")
    return text


def corrected_estimates(conn: psycopg.Connection, dataset: str, candidates: CandidateSet, *,
                        default_weight: float, best_weight: float, kept: GridPoint | None,
                        relevance_threshold: float) -> CorrectedEstimates | None:
    """The corrected P@5 of a calibration of ``dataset`` on ``candidates`` at the default and
    the best weight, and at ``kept`` (the weights the decision kept, when it kept them and
    their keyword weight is ``1 - semantic``); None when nobody labelled a pair of the
    dataset's human sample. Reads the store only."""
    with conn.transaction():
        human = human_sample_verdicts(conn, dataset)
        judged = ground_truth.judged_query_rows(conn, dataset)
    labelled = sum(len(docs) for docs in human.values())
    if labelled == 0:
        return None
    judge = judge_labels(judged, relevance_threshold)
    at_kept = None
    if kept is not None and math.isclose(keyword_weight_for(kept.semantic_weight),
                                         kept.keyword_weight, abs_tol=1e-9):
        at_kept = corrected_at_weight(candidates, kept.semantic_weight, judge, human)
    return CorrectedEstimates(
        default=corrected_at_weight(candidates, default_weight, judge, human),
        best=corrected_at_weight(candidates, best_weight, judge, human),
        sampled_queries=len(human), labelled_pairs=labelled, kept=at_kept)


def human_sample_verdicts(conn: psycopg.Connection, dataset: str) -> dict[int, dict[int, int]]:
    """{query id: {doc id: 1 relevant / 0 not}} of every sampled query of ``dataset``'s human
    sample (an empty dict for a sampled query nobody labelled yet); runs in the caller's
    transaction."""
    human: dict[int, dict[int, int]] = {}
    for qid, doc, verdict in agreement_sql.human_sample_labels(conn, dataset):
        human.setdefault(qid, {})
        if verdict is not None:
            human[qid][doc] = VERDICTS[verdict]
    return human


def judge_labels(judged_rows: list[tuple], threshold: float) -> dict[int, dict[int, int]]:
    """{query id: {doc id: 1 relevant / 0 not}} of the judged queries that have at least one
    pair both judges scored (the frame the human sample is drawn from); rule in the module
    docstring. ``judged_rows`` as :func:`eval_harness.datasets.ground_truth.judged_query_rows` returns them."""
    labels: dict[int, dict[int, int]] = {}
    for qid, _ext, _text, docs, scores1, scores2, *_ in judged_rows:
        pairs = [(doc, s1, s2) for doc, s1, s2 in zip(docs, scores1 or (), scores2 or ())
                 if _scored(s1) and _scored(s2)]
        if pairs:
            labels[qid] = {doc: int(s1 > threshold and s2 > threshold) for doc, s1, s2 in pairs}
    return labels


def corrected_at_weight(candidates: CandidateSet, weight: float,
                        judge: dict[int, dict[int, int]],
                        human: dict[int, dict[int, int]]) -> CorrectedP5 | None:
    """PPI of the mean human P@5 at ``weight`` over the judged queries, or None when fewer
    than two sampled queries have a fully labelled top 5 there."""
    tops = rank_top_k(candidates, weight, keyword_weight=keyword_weight_for(weight),
                      k=PRECISION_CUTOFF)
    top_of = dict(zip(candidates.query_ids, tops))
    yhat_all, y, yhat, incomplete = [], [], [], 0
    for qid, labels in judge.items():
        if qid not in top_of:
            continue
        top = [int(doc) for doc in top_of[qid]]
        judged_p5 = sum(labels.get(doc, 0) for doc in top) / PRECISION_CUTOFF
        yhat_all.append(judged_p5)
        if qid in human:
            if all(doc in human[qid] for doc in top):
                y.append(sum(human[qid][doc] for doc in top) / PRECISION_CUTOFF)
                yhat.append(judged_p5)
            else:
                incomplete += 1
    if len(y) < 2:
        return None
    vectors = {"y_labeled": np.asarray(y), "yhat_labeled": np.asarray(yhat),
               "yhat_unlabeled": np.asarray(yhat_all)}
    return CorrectedP5(semantic_weight=float(weight), judge_p_at_5=float(np.mean(yhat_all)),
                       ppi=prediction_powered_mean(**vectors, alpha=1.0 - LEVEL),
                       labels_to_halve_width=labels_to_halve_width(**vectors),
                       incomplete_queries=incomplete)


def _scored(score) -> bool:
    return score is not None and math.isfinite(score) and 0.0 <= score <= 1.0
