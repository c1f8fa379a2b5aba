"""The dual-judge scores of a dataset, read from ``ground_truth``, and how far to trust them.

``ground_truth`` keeps, per query, the aligned arrays ``judged_docs`` / ``judge1_score`` /
``judge2_score`` (a NULL element is a pair that judge did not score). Here they become one
row per (query, document) pair, and the statistics of :mod:`eval_harness.metrics.agreement`
run over them:

* judge 1 vs judge 2: :func:`~eval_harness.metrics.agreement.agreement_report`;
* each judge vs the human labels, where a query has them: a judged document is
  human-relevant iff it is in the query's ``expected_docs`` (a query with an empty
  ``expected_docs`` counts as unlabelled, not as "nothing is relevant");
* the final labels (below) vs the human labels.

**Where an adjudicated label overrides the judges.** :func:`final_labels` is the one place
that turns two judge scores into the binary label a pair carries downstream: a human verdict
from the review queue (:func:`eval_harness.agreement.review.adjudicated_labels`) wins over both
judges; without one, the label is ``mean(score1, score2) > relevance_threshold``; a pair
judge 2 was not asked (staged dual judging: ``judge2_status`` ``skipped``) takes judge 1's
label; any other pair that only one judge scored and nobody adjudicated has no label.
Judge-vs-judge statistics leave the pairs judge 2 was not asked out (and count them apart):
they are not unscored, only not in judge 2's sample. Judge-vs-human statistics
use each judge's own scores, never the overridden labels, so they measure the judges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import psycopg

from eval_harness.metrics.agreement import (AgreementInputError, AgreementReport,
                                            JudgeHumanReport, agreement_report,
                                            judge_vs_human, to_jsonable)
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.agreement.people import JudgeWithPeople, human_verdicts, judges_with_people
from eval_harness.agreement.review import adjudicated_labels, review_counts
from eval_harness.judges.dual.record import RecordRow, load_record
from eval_harness.judges.retest.self_agreement import StoredRetest, stored_retests
from eval_harness.settings import AgreementSettings
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


@dataclass(frozen=True)
class RaterVsHuman:
    """One rater (a judge, or the final labels) against the human labels."""

    rater: str
    models: tuple[str, ...]
    report: JudgeHumanReport | None
    reason: str | None = None


@dataclass(frozen=True)
class KappaGate:
    """The trust gate: the lower confidence bound of pooled kappa against the floor."""

    passed: bool
    lower_bound: float | None
    kappa: float | None
    floor: float
    n_scored: int
    description: str


PASS, WARN, FAIL = "PASS", "WARN", "FAIL"


@dataclass(frozen=True)
class KappaVerdict:
    """The kappa gate's one verdict, said the same way everywhere it is shown (the
    ``agreement`` command and its exit code, ``reports/agreement.md``, the run report's
    summary and agreement section, the Dagster check and ``run``'s check lines).

    ``WARN`` is a failed gate on labels that came from local stand-ins for API judges whose
    keys are unset (with ``agreement.stand_in_judges: warn``): the stand-ins' agreement is no
    evidence about the judges that were configured, neither for nor against them, so it does
    not block. ``FAIL`` blocks; ``PASS`` passes.
    """

    status: str                 # PASS | WARN | FAIL
    description: str            # the gate's sentence, and why a failure only warns
    stand_ins: str | None       # stand_in_note(): the labels' stand-ins, else None

    @property
    def blocks(self) -> bool:
        return self.status == FAIL


def kappa_verdict(gate: KappaGate, *, configured: tuple[str, str] | None,
                  used: tuple[Sequence[str], Sequence[str]],
                  stand_in_judges: str = "warn") -> KappaVerdict:
    """The verdict of ``gate`` on labels written by the judge models ``used`` (per slot)
    when ``configured`` (judge1, judge2 specs; None: unknown) were asked for."""
    note = stand_in_note(configured, used) if configured is not None else None
    if note is None:
        return KappaVerdict(PASS if gate.passed else FAIL, gate.description, None)
    nothing = "agreement of stand-ins says nothing about the configured judges"
    if gate.passed:
        return KappaVerdict(PASS, f"{gate.description} Note: {note}, and {nothing}.", note)
    if stand_in_judges == "warn":
        return KappaVerdict(WARN, f"{gate.description} Only a warning: {note}, and {nothing}; "
                            "set the keys for the real gate (agreement.stand_in_judges: block "
                            "makes it block anyway).", note)
    return KappaVerdict(FAIL, f"{gate.description} It blocks although {note} "
                        "(agreement.stand_in_judges: block).", note)


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


def kappa_gate(*, lower_bound: float | None, kappa: float | None, floor: float, n_scored: int,
               confidence: float = 0.95) -> KappaGate:
    """Pass iff the lower confidence bound of pooled kappa is at least ``floor``.

    The point estimate alone is not enough: with few queries a kappa of 0.75 can have a
    lower bound of 0.4. No scored pair, or an interval that could not be computed (fewer
    than two queries), fails with a description saying why.
    """
    level = f"{confidence:.0%}"
    if n_scored == 0:
        return KappaGate(False, None, None, floor, 0,
                         "No (query, document) pair is scored by both judges, so agreement "
                         "is unknown; run the judges before calibrating on these labels.")
    if lower_bound is None:
        return KappaGate(False, None, kappa, floor, n_scored,
                         f"Kappa is {_fmt(kappa)} but its {level} interval is undefined "
                         "(a bootstrap over queries needs at least 2 judged queries); judge "
                         "more queries before trusting these labels.")
    if lower_bound < floor:
        return KappaGate(False, lower_bound, kappa, floor, n_scored,
                         f"The lower {level} bound of pooled kappa is {_fmt(lower_bound)} "
                         f"(kappa {_fmt(kappa)}), below the floor {floor:.2f}: the judge "
                         "labels are not trustworthy enough; review the disagreement queue "
                         "or improve the judges.")
    return KappaGate(True, lower_bound, kappa, floor, n_scored,
                     f"The lower {level} bound of pooled kappa is {_fmt(lower_bound)} "
                     f"(kappa {_fmt(kappa)}), at or above the floor {floor:.2f}.")


def stand_in_note(configured: tuple[str, str], used: tuple[Sequence[str], Sequence[str]]
                  ) -> str | None:
    """Why the labels say nothing about the configured judges, or ``None``.

    A slot is a stand-in when it is configured with an API judge but every label it wrote
    came from a local judge (its API key was unset and ``judges.fallback_to_local`` swapped
    one in). Agreement of stand-ins is no evidence about the judges that were configured.
    """
    swapped = [f"{', '.join(models)} for {spec}" for spec, models in zip(configured, used)
               if not spec.startswith("local:") and models
               and all(m.startswith("local:") for m in models)]
    if not swapped:
        return None
    return ("the labels come from local stand-ins (" + "; ".join(swapped) + ") because the "
            "API keys are unset")


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


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"
