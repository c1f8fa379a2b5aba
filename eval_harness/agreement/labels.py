"""The ground truth the judges make: one binary label per judged (query, document) pair.

Most RAG systems have queries but no relevance labels; then the two judges label the pairs
(``eval-harness judge``) and calibration runs on these labels (``calibrate --labels judges``).
Per pair, with ``relevant = score > agreement.relevance_threshold`` for each judge:

* a verdict a person gave in the review queue (:func:`eval_harness.agreement.review.
  adjudicated_labels`) always wins (source ``adjudicated``);
* both judges relevant -> relevant, both not -> not relevant (source ``judges``);
* one relevant and the other not is a disagreement: it waits in the review queue and, until
  a person decides, ``agreement.disagreement_rule`` labels it: ``exclude`` (no label, source
  ``excluded``), ``judge1`` (judge 1's label) or ``mean`` (``(score1 + score2) / 2 >
  threshold``), source ``rule``;
* a pair judge 2 was not asked (staged dual judging, :mod:`eval_harness.judges.staging.staged`)
  takes judge 1's label (source ``judge1``): the random sample judge 2 scored showed the
  judges agree well enough;
* a pair that a judge did not score (and nobody adjudicated) has no label (``unscored``).

In calibration a document of a query's top 5 must be judged (labelled or excluded), else
the P@5 of that weight would count an unknown document as not relevant; the judge plan's
grid pool (:func:`eval_harness.judges.dual.plan.grid_pool`) makes this hold at every grid
weight. An ``excluded`` pair counts as not relevant there (P@5 is then a lower bound) and
the number of such pairs is reported.

:func:`pair_label` and :func:`derive_labels` are pure; :func:`load_judge_labels` is the one
reader (the stored scores through
:func:`eval_harness.agreement.judge_pairs.load_judge_pairs`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import psycopg

from eval_harness.agreement.judge_pairs import load_judge_pairs
from eval_harness.agreement.review import adjudicated_labels
from eval_harness.settings import DISAGREEMENT_RULES, AgreementSettings

LABEL_SOURCES = ("human", "judges")
JUDGE_FIRST = "run `eval-harness judge --dataset {dataset}` first (it judges the grid pool)"


class LabelsMissing(ValueError):
    """The labels a calibration asked for do not exist (yet); one sentence saying what to run."""


def pair_label(score1: float | None, score2: float | None, *, threshold: float, rule: str,
               adjudicated: int | None = None,
               judge2_skipped: bool = False) -> tuple[int | None, str]:
    """``(label, source)`` of one pair by the rules of the module docstring.

    ``label`` is 1 relevant, 0 not relevant, None no label (``source`` says why:
    ``excluded`` or ``unscored``).
    """
    if rule not in DISAGREEMENT_RULES:
        raise ValueError(f"disagreement rule must be one of {', '.join(DISAGREEMENT_RULES)}, "
                         f"got {rule!r}.")
    if adjudicated is not None:
        return int(adjudicated), "adjudicated"
    if judge2_skipped and score1 is not None:
        return int(score1 > threshold), "judge1"
    if score1 is None or score2 is None:
        return None, "unscored"
    relevant1, relevant2 = score1 > threshold, score2 > threshold
    if relevant1 == relevant2:
        return int(relevant1), "judges"
    if rule == "exclude":
        return None, "excluded"
    if rule == "judge1":
        return int(relevant1), "rule"
    return int((score1 + score2) / 2 > threshold), "rule"


@dataclass(frozen=True)
class JudgeLabels:
    """Every judged pair's label of one dataset (:func:`derive_labels`)."""

    dataset: str
    rule: str
    labels: Mapping[int, Mapping[int, int | None]]  # query id -> doc id -> label
    sources: Mapping[str, int]                       # pairs per source
    excluded_pairs: frozenset[tuple[int, int]] = frozenset()  # disagreements left unlabelled

    def qrels(self) -> dict[int, dict[int, int]]:
        """{query id: {doc id: 1 relevant / 0 not}} of the settled pairs (an excluded pair
        counts as not relevant: module docstring)."""
        return {q: {d: int(label or 0) for d, label in docs.items()
                    if label is not None or (q, d) in self.excluded_pairs}
                for q, docs in self.labels.items()}

    def judged(self, query_id: int) -> set[int]:
        """The documents of ``query_id`` whose label is settled (labelled or excluded)."""
        return {d for d, label in self.labels.get(query_id, {}).items()
                if label is not None or (query_id, d) in self.excluded_pairs}

    def to_dict(self) -> dict:
        return {"disagreement_rule": self.rule, "pairs": dict(self.sources),
                "excluded": len(self.excluded_pairs)}


def derive_labels(dataset: str, pairs: list[tuple[int, int, float | None, float | None]],
                  adjudicated: Mapping[tuple[int, int], int], *, threshold: float,
                  rule: str, judge2_skipped: frozenset[tuple[int, int]] = frozenset()
                  ) -> JudgeLabels:
    """The labels of ``pairs`` (query id, doc id, score1, score2) under ``rule``;
    ``judge2_skipped``: the pairs judge 2 was not asked (staged judging)."""
    labels: dict[int, dict[int, int | None]] = {}
    sources: Counter[str] = Counter()
    excluded = []
    for query_id, doc_id, score1, score2 in pairs:
        label, source = pair_label(score1, score2, threshold=threshold, rule=rule,
                                   adjudicated=adjudicated.get((query_id, doc_id)),
                                   judge2_skipped=(query_id, doc_id) in judge2_skipped)
        sources[source] += 1
        if source == "excluded":
            excluded.append((query_id, doc_id))
        labels.setdefault(query_id, {})[doc_id] = label
    return JudgeLabels(dataset, rule, labels, dict(sources), frozenset(excluded))


def load_judge_labels(conn: psycopg.Connection, dataset: str,
                      settings: AgreementSettings) -> JudgeLabels:
    """The judge labels of ``dataset`` from the stored judge scores and review verdicts."""
    stored = load_judge_pairs(conn, dataset)
    pairs = list(zip(stored.query_ids, stored.doc_ids, stored.scores1, stored.scores2))
    skipped = frozenset(key for key, skip in zip(stored.keys, stored.skipped2) if skip)
    return derive_labels(dataset, pairs, adjudicated_labels(conn, dataset),
                         threshold=settings.relevance_threshold,
                         rule=settings.disagreement_rule, judge2_skipped=skipped)


def unjudged_in_top(labels: JudgeLabels, tops: Mapping[int, list[int]]) -> dict[int, list[int]]:
    """{query id: documents of its top list without a settled label}, only where any."""
    missing = {}
    for query_id, docs in tops.items():
        judged = labels.judged(query_id)
        unjudged = [d for d in docs if d not in judged]
        if unjudged:
            missing[query_id] = unjudged
    return missing
