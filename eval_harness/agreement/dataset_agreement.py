"""How far to trust the dual-judge labels of a dataset: everything the ``agreement`` command,
its report and the Dagster check show, in one :class:`DatasetAgreement`.

The statistics of :mod:`eval_harness.metrics.agreement` run over the judged pairs
(:mod:`eval_harness.agreement.judge_pairs`):

* judge 1 vs judge 2: :func:`~eval_harness.metrics.agreement.agreement_report`, and the kappa
  gate on it (:mod:`eval_harness.agreement.kappa_gate`);
* each judge vs the human labels, where a query has them;
* the final labels (:func:`~eval_harness.agreement.judge_pairs.final_labels`) vs the human
  labels.

Judge-vs-judge statistics leave the pairs judge 2 was not asked out (and count them apart):
they are not unscored, only not in judge 2's sample. Judge-vs-human statistics
use each judge's own scores, never the overridden labels, so they measure the judges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import psycopg

from eval_harness.agreement.judge_pairs import JudgePairs, QueryText, final_labels, load_judge_pairs
from eval_harness.agreement.kappa_gate import KappaGate, KappaVerdict, kappa_gate, kappa_verdict
from eval_harness.agreement.people import JudgeWithPeople, human_verdicts, judges_with_people
from eval_harness.agreement.review import adjudicated_labels, review_counts
from eval_harness.judges.dual.record import RecordRow, load_record
from eval_harness.judges.retest.self_agreement import StoredRetest, stored_retests
from eval_harness.metrics.agreement import (AgreementInputError, AgreementReport,
                                            JudgeHumanReport, agreement_report,
                                            judge_vs_human, to_jsonable)
from eval_harness.settings import AgreementSettings


@dataclass(frozen=True)
class RaterVsHuman:
    """One rater (a judge, or the final labels) against the human labels."""

    rater: str
    models: tuple[str, ...]
    report: JudgeHumanReport | None
    reason: str | None = None


@dataclass(frozen=True)
class DatasetAgreement:
    """Everything :func:`dataset_agreement` computes; ``to_dict`` is strict JSON."""

    dataset: str
    settings: AgreementSettings
    n_queries: int
    n_judged_queries: int
    n_pairs: int
    report: AgreementReport | None  # None when no pair is scored by both judges
    reason: str | None
    versus_human: tuple[RaterVsHuman, ...]  # judge 1, judge 2, final labels
    judge1_models: tuple[str, ...]
    judge2_models: tuple[str, ...]
    queries: Mapping[int, QueryText]  # ground_truth id -> external id and text
    n_adjudicated_overrides: int  # judged pairs whose final label is a human verdict
    n_judge2_skipped: int  # pairs judge 2 was not asked (staged judging): judge 1's labels
    review_pending: int
    review_adjudicated: int
    gate: KappaGate
    verdict: KappaVerdict  # the gate's verdict, stand-ins considered (say this one)
    retest: tuple[StoredRetest, ...] = ()  # each judge against itself, newest test-retest
    record: tuple[RecordRow, ...] = ()  # the judges' record: newest runs per judge spec
    people: tuple[JudgeWithPeople, ...] = ()  # each judge vs the human verdicts (people.py)
    people_sources: Mapping[str, int] = field(default_factory=dict)  # verdicts per source

    def to_dict(self) -> dict:
        return to_jsonable(self)

    def summary(self) -> dict[str, float | int | str | None]:
        """The headline numbers as flat plain values (asset metadata, one-line logs)."""
        report = self.report
        interval = report.kappa_interval if report else None
        return {
            "dataset": self.dataset,
            "kappa": report.kappa.value if report else None,
            "kappa_ci_low": interval.low if interval else None,
            "kappa_ci_high": interval.high if interval else None,
            "confidence": self.settings.confidence,
            "landis_koch": report.interpretation if report else "Undefined",
            "n_pairs": self.n_pairs,
            "n_scored": report.n_scored if report else 0,
            "n_unscored": report.n_unscored if report else self.n_pairs,
            "gwet_ac1": report.gwet_ac1.value if report else None,
            "krippendorff_alpha": report.krippendorff_alpha.value if report else None,
            "kappa_floor": self.settings.kappa_floor,
            "kappa_verdict": self.verdict.status,
            "n_judge2_skipped": self.n_judge2_skipped,
            "review_pending": self.review_pending,
            "review_adjudicated": self.review_adjudicated,
        }


def dataset_agreement(conn: psycopg.Connection, dataset: str, settings: AgreementSettings, *,
                      configured_judges: tuple[str, str] | None = None) -> DatasetAgreement:
    """Judge-vs-judge agreement, each judge and the final labels vs humans, and the gate
    with its verdict (``configured_judges``: judges.judge1 / judge2, to tell labels from
    local stand-ins; None: every failure is a FAIL)."""
    pairs = load_judge_pairs(conn, dataset)
    adjudicated = adjudicated_labels(conn, dataset)
    pending, done = review_counts(conn, dataset)
    options = {"threshold": settings.relevance_threshold,
               "n_resamples": settings.bootstrap_resamples, "confidence": settings.confidence}
    report, reason = None, None
    if len(pairs) == 0:
        reason = "no query of this dataset has judged documents yet"
    else:
        asked = [i for i, skipped in enumerate(pairs.skipped2 or (False,) * len(pairs))
                 if not skipped]  # pairs judge 2 was not asked are in no judge-judge statistic
        try:
            report = agreement_report([pairs.scores1[i] for i in asked],
                                      [pairs.scores2[i] for i in asked],
                                      query_ids=[pairs.query_ids[i] for i in asked], **options)
        except AgreementInputError as exc:  # nothing scored by both judges
            reason = str(exc)
    labels = final_labels(pairs, adjudicated, threshold=settings.relevance_threshold)
    final_scores = [None if f.label is None else float(f.label) for f in labels]
    versus_human = (
        _versus_human("judge 1", pairs.judge1_models, pairs.scores1, pairs, options),
        _versus_human("judge 2", pairs.judge2_models, pairs.scores2, pairs, options),
        _versus_human("final labels", (), final_scores, pairs, options),
    )
    verdicts = human_verdicts(conn, dataset)
    people = judges_with_people(verdicts, pairs.keys, (pairs.scores1, pairs.scores2),
                                (pairs.judge1_models, pairs.judge2_models), **options)
    interval = report.kappa_interval if report else None
    gate = kappa_gate(lower_bound=interval.low if interval else None,
                      kappa=report.kappa.value if report else None,
                      floor=settings.kappa_floor, n_scored=report.n_scored if report else 0,
                      confidence=settings.confidence)
    return DatasetAgreement(
        dataset=dataset, settings=settings, n_queries=pairs.n_queries,
        n_judged_queries=len(pairs.queries), n_pairs=len(pairs), report=report, reason=reason,
        versus_human=versus_human, judge1_models=pairs.judge1_models,
        judge2_models=pairs.judge2_models, queries=pairs.queries,
        n_adjudicated_overrides=sum(f.source == "adjudicated" for f in labels),
        n_judge2_skipped=sum(pairs.skipped2),
        review_pending=pending, review_adjudicated=done, gate=gate,
        verdict=kappa_verdict(gate, configured=configured_judges,
                              used=(pairs.judge1_models, pairs.judge2_models),
                              stand_in_judges=settings.stand_in_judges),
        retest=tuple(stored_retests(conn, dataset, threshold=settings.relevance_threshold,
                                    n_resamples=settings.bootstrap_resamples,
                                    confidence=settings.confidence)),
        record=tuple(load_record(conn, dataset)), people=people,
        people_sources={"human sample": verdicts.sample, "adjudicated": verdicts.adjudicated})


def _versus_human(rater: str, models: tuple[str, ...], scores, pairs: JudgePairs,
                  options: dict) -> RaterVsHuman:
    if len(pairs) == 0:
        return RaterVsHuman(rater, models, None, "no judged pairs")
    try:
        report = judge_vs_human(scores, pairs.human, query_ids=pairs.query_ids, **options)
    except AgreementInputError as exc:  # no pair has both a score and a human label
        return RaterVsHuman(rater, models, None, str(exc))
    return RaterVsHuman(rater, models, report)


