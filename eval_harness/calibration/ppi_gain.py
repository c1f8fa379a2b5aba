"""The gain between two weights on judge labels, corrected by the human sample (PPI).

On judge labels the calibration sweep's per-query P@5 carries the judges' bias, and a bias
need not be the same at two weights: a judge that over-rates documents sharing words with the
query over-rates the top 5 of a keyword-heavy weight more than a semantic-heavy one, so the
judges' gain P@5(a) - P@5(b) can favour a on the bias alone. Two corrected P@5 intervals
compared side by side would not fix it either: they ignore that both weights are measured on
the same queries (the paired difference has a far smaller variance) and two overlapping
intervals say nothing about the difference.

So the gain is **one** prediction-powered inference over the per-query differences
(Angelopoulos et al., "Prediction-powered inference", Science 382 (2023); PPI++ power tuning,
arXiv:2311.01453), with :func:`eval_harness.metrics.ppi.prediction_powered_mean`:

* ``Yhat`` = ``P@5_q(a) - P@5_q(b)`` under the judge labels, for every query of the sample
  frame (queries with at least one pair both judges scored, the queries
  :mod:`eval_harness.agreement.sample` draws from): the sweep's own per-query P@5, so the
  figure corrected is exactly the one a decision on judge labels would use;
* ``Y`` = the same difference under the people's labels, on the sampled queries whose top 5
  at **both** weights is fully labelled (the sample file holds every judged pair of a drawn
  query, and the judges' pool holds every grid weight's top 5, so a labelled query has both).
  A sampled query with a top-5 document left unlabelled is left out and counted
  (``incomplete_queries``): the interval then holds only if those are missing at random.

The estimate is unbiased for the mean qrels gain over the frame whatever the judges' bias;
its interval is the CLT interval over queries (tests/metrics/test_ppi_gain_coverage.py
simulates a judge biased towards one weight's top documents: >= 93% coverage at nominal 95%,
where the judges-only interval covers almost never). :func:`bias_note` is the sentence a
decision on judge labels carries when no human sample exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from eval_harness.calibration.grid import weight_label
from eval_harness.calibration.ppi_p_at_5 import human_sample_verdicts
from eval_harness.calibration.result import CalibrationResult
from eval_harness.metrics.ppi import prediction_powered_mean
from eval_harness.metrics.ranking import PRECISION_CUTOFF
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.retrieval.sweep import CandidateSet, SweepResult, rank_top_k
from eval_harness.retrieval.weights import keyword_weight_for
from eval_harness.datasets import ground_truth

METHOD = "prediction-powered inference (PPI++) over the per-query P@5 differences"
UNCORRECTED = "judge labels without a human sample: the judges' bias is uncorrected"


@dataclass(frozen=True)
class GainEstimate:
    """P@5(weight_a) - P@5(weight_b) corrected by the human sample, with its interval."""

    weight_a: float
    weight_b: float
    estimate: float
    low: float
    high: float
    n_human: int            # sampled queries with both top 5s labelled
    n_all: int              # queries of the sample frame (judged)
    method: str
    level: float
    lam: float              # the judges' weight (PPI++); 0 = the human sample alone
    judge_gain: float       # the judges' difference over the frame, uncorrected
    incomplete_queries: int  # sampled queries left out: a top-5 document unlabelled

    def to_dict(self) -> dict[str, Any]:
        return {"weight_a": self.weight_a, "weight_b": self.weight_b,
                "estimate": self.estimate, "interval": [self.low, self.high],
                "level": self.level, "n_human": self.n_human, "n_all": self.n_all,
                "lambda": self.lam, "judge_gain": self.judge_gain,
                "incomplete_queries": self.incomplete_queries, "method": self.method,
                "label_source": "judges+ppi"}

    def sentence(self) -> str:
        """One line: the gain, its interval and what it rests on."""
        text = (f"gain of {weight_label(self.weight_a)} over {weight_label(self.weight_b)} "
                f"corrected by the human sample: {self.estimate:+.4f}, {self.level:.0%} "
                f"interval [{self.low:+.4f}, {self.high:+.4f}] ({self.n_human} human-labelled "
                f"of {self.n_all} judged queries, {METHOD}, judges' weight {self.lam:.2f}; "
                f"judges alone {self.judge_gain:+.4f})")
        if self.incomplete_queries:
            text += (f"; {self.incomplete_queries} sampled queries left out because a top-5 "
                     "document is unlabelled: label them")
        return text


@dataclass(frozen=True)
class QueryFigures:
    """Per-query P@5 at one weight over the sample frame: the judges' for every query, the
    people's for the sampled queries whose top 5 there is fully labelled."""

    judge: dict[int, float]
    human: dict[int, float]
    incomplete: frozenset[int]  # sampled queries of the frame with an unlabelled top-5 doc


def bias_note(result: CalibrationResult) -> str | None:
    """The sentence a decision on judge labels carries when no human sample corrects them
    (None on human labels, or when a labelled human sample exists)."""
    if result.label_source != "judges" or result.corrected is not None:
        return None
    return UNCORRECTED


def judged_gain(conn: psycopg.Connection, result: CalibrationResult, weight_a: float,
                weight_b: float, *, alpha: float = 0.05) -> GainEstimate | None:
    """The PPI estimate of P@5(``weight_a``) - P@5(``weight_b``) over the judged queries, with
    its two-sided ``1 - alpha`` interval (module docstring); None when fewer than two sampled
    queries have both top 5s labelled (PPI needs two). Both weights must be on the result's
    grid; ``result`` must rest on judge labels (on human labels the gain is exact: no
    correction applies). Reads the human sample and the sample frame; writes nothing."""
    if result.label_source != "judges":
        raise ValueError(f"calibration of '{result.dataset}' rests on human labels; the PPI gain "
                         "corrects judge labels only: calibrate with --labels judges.")
    return gain_on_sweep(conn, result.dataset, result.candidates, result.sweep, weight_a,
                         weight_b, alpha=alpha)


def gain_on_sweep(conn: psycopg.Connection, dataset: str, candidates: CandidateSet,
                  sweep: SweepResult, weight_a: float, weight_b: float, *,
                  alpha: float = 0.05) -> GainEstimate | None:
    """:func:`judged_gain` on a judge-labelled sweep of ``dataset``'s ``candidates``, before
    a calibration result exists (the decision on judge labels rests on it)."""
    with conn.transaction():
        human = human_sample_verdicts(conn, dataset)
        frame = sample_frame(conn, dataset)
    return gain_from_labels(candidates, sweep, weight_a, weight_b, human, frame, alpha=alpha)


def sample_frame(conn: psycopg.Connection, dataset: str) -> frozenset[int]:
    """The ids of the queries a human sample of ``dataset`` is drawn from."""
    corpus = dataset_info(conn, dataset, with_counts=False).corpus
    return frozenset(qid for qid, _ in ground_truth.scored_query_external_ids(conn, corpus))


def gain_from_labels(candidates: CandidateSet, sweep: SweepResult, weight_a: float,
                     weight_b: float, human: dict[int, dict[int, int]], frame: frozenset[int],
                     *, alpha: float = 0.05) -> GainEstimate | None:
    """:func:`judged_gain` on labels already read: ``human`` as
    :func:`~eval_harness.calibration.ppi_p_at_5.human_sample_verdicts` returns them,
    ``frame`` the sample frame's query ids."""
    y, yhat, yhat_all, incomplete = paired_differences(candidates, sweep, weight_a, weight_b,
                                                       human, frame)
    if y.size < 2:
        return None
    ppi = prediction_powered_mean(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all,
                                  alpha=alpha)
    return GainEstimate(weight_a=float(weight_a), weight_b=float(weight_b),
                        estimate=ppi.estimate, low=ppi.interval[0], high=ppi.interval[1],
                        n_human=ppi.n_human, n_all=ppi.n_judged, method=METHOD,
                        level=1.0 - alpha, lam=ppi.lam, judge_gain=float(yhat_all.mean()),
                        incomplete_queries=incomplete)


def paired_differences(candidates: CandidateSet, sweep: SweepResult, weight_a: float,
                       weight_b: float, human: dict[int, dict[int, int]], frame: frozenset[int]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(y, yhat, yhat_all, incomplete)``: the per-query differences of P@5 between the two
    weights, people's (``y``) and judges' (``yhat``) on the fully labelled sampled queries,
    judges' on the whole frame (``yhat_all``), in query order; ``incomplete`` counts the
    sampled queries left out."""
    a = query_figures(candidates, sweep, weight_a, human, frame)
    b = query_figures(candidates, sweep, weight_b, human, frame)
    both = [q for q in a.judge if q in a.human and q in b.human]
    yhat_all = np.array([a.judge[q] - b.judge[q] for q in a.judge])
    y = np.array([a.human[q] - b.human[q] for q in both])
    yhat = np.array([a.judge[q] - b.judge[q] for q in both])
    return y, yhat, yhat_all, len(a.incomplete | b.incomplete)


def query_figures(candidates: CandidateSet, sweep: SweepResult, weight: float,
                  human: dict[int, dict[int, int]], frame: frozenset[int]) -> QueryFigures:
    """The judges' per-query P@5 at ``weight`` from the sweep (the calibration's own labels)
    and the people's where the sampled query's top 5 there is all labelled."""
    judged = sweep.per_query_p_at_5[sweep.index_of(weight)]
    tops = rank_top_k(candidates, weight, keyword_weight=keyword_weight_for(weight),
                      k=PRECISION_CUTOFF)
    judge, people, incomplete = {}, {}, set()
    for qid, p_at_5, top in zip(candidates.query_ids, judged, tops):
        if qid not in frame:
            continue
        judge[qid] = float(p_at_5)
        if qid in human:
            labels = human[qid]
            if all(int(doc) in labels for doc in top):
                people[qid] = sum(labels[int(doc)] for doc in top) / PRECISION_CUTOFF
            else:
                incomplete.add(qid)
    return QueryFigures(judge, people, frozenset(incomplete))
