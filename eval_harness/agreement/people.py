"""The judges against people: each judge's Cohen's kappa with the human verdicts the harness
holds, and those verdicts carried to the judges' record and the anchor set.

A human verdict on a (query, document) pair comes from one of two places: the human sample
(``review sample`` / ``review import``, :mod:`.sample`; a uniform sample of judged queries)
or the review queue (a person adjudicated a pair the judges disagree on, :mod:`.review`).
Where a pair has both, the adjudicated verdict counts, as in the final labels. The queue
holds the pairs the judges disagree on, so a kappa over adjudicated pairs alone is lower than
over a uniform sample: :class:`PeopleVerdicts` counts the verdicts of each source, and the
reports say the mix.

:func:`judges_with_people` measures each judge's labels (score above
``agreement.relevance_threshold``) against those verdicts with
:func:`eval_harness.metrics.agreement.judge_vs_human`: pooled Cohen's kappa and its
bootstrap-over-queries interval, the pairs and queries it rests on.

The judges layer reads no human verdict beyond the anchors' own column (it sits below this
layer), so :func:`record_with_people` (called by ``eval-harness agreement`` and the
``judge_agreement`` asset, after the agreement figures are computed) writes them down:

* onto the newest judges' record row of each judge
  (:func:`eval_harness.judges.dual.record.record_people`): ``with people`` and ``kappa
  other`` with its interval;
* onto the frozen anchors (:func:`give_anchors_verdicts`), so the next run's drift check
  compares each judge with the verdicts people gave since (``eval-harness judge`` and the
  ``dual_judge_scores`` asset also do this just before a run with anchors on).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

import psycopg

from eval_harness.agreement import sql
from eval_harness.agreement.review import adjudicated_labels
from eval_harness.judges.anchors.anchor_set import give_verdicts
from eval_harness.judges.dual.record import load_record, record_people
from eval_harness.metrics.agreement import AgreementInputError, JudgeHumanReport, judge_vs_human

PairKey = tuple[int, int]  # (ground_truth.id, doc id)


@dataclass(frozen=True)
class PeopleVerdicts:
    """Every human verdict of a dataset: ``labels`` (pair -> relevant?) and how many came
    from each source (an adjudicated verdict wins over a sample one on the same pair)."""

    labels: Mapping[PairKey, bool]
    sample: int       # pairs whose verdict is the human sample's
    adjudicated: int  # pairs whose verdict is the review queue's


@dataclass(frozen=True)
class JudgeWithPeople:
    """One judge against the human verdicts (``report`` None: nothing to compare, ``reason``)."""

    judge: int
    models: tuple[str, ...]
    report: JudgeHumanReport | None
    reason: str | None = None

    def figures(self) -> dict[str, object]:
        """The judges' record's ``with people`` columns."""
        report = self.report
        if report is None:
            return {"people_kappa": None, "people_kappa_low": None, "people_kappa_high": None,
                    "people_pairs": 0, "people_queries": 0}
        interval = report.kappa_interval
        return {"people_kappa": report.kappa.value, "people_kappa_low": interval.low,
                "people_kappa_high": interval.high, "people_pairs": report.n_scored,
                "people_queries": interval.n_queries}

    def line(self) -> str:
        """``judge 1 (openai:gpt-4o) against people: kappa 0.712 [0.540, 0.850] on 40 pairs
        of 12 queries``."""
        head = f"judge {self.judge} ({', '.join(self.models) or 'unknown model'}) against people"
        report = self.report
        if report is None or report.kappa.value is None:
            return f"{head}: n/a ({self.reason or report.kappa.reason})"
        interval = report.kappa_interval
        bounds = ("" if interval.low is None else
                  f" [{interval.low:.3f}, {interval.high:.3f}]")
        return (f"{head}: kappa {report.kappa.value:.3f}{bounds} on {report.n_scored} pairs of "
                f"{interval.n_queries} queries")


def human_verdicts(conn: psycopg.Connection, dataset: str) -> PeopleVerdicts:
    """The human sample's verdicts and the review queue's adjudications of ``dataset``."""
    labels = {(qid, doc): verdict == "relevant"
              for qid, doc, verdict in sql.human_sample_labels(conn, dataset)
              if verdict is not None}
    sample = set(labels)
    adjudicated = {key: bool(value) for key, value in adjudicated_labels(conn, dataset).items()}
    labels.update(adjudicated)
    return PeopleVerdicts(labels, len(sample - set(adjudicated)), len(adjudicated))


def judges_with_people(verdicts: PeopleVerdicts, keys: Sequence[PairKey],
                       scores: Sequence[Sequence[float | None]],
                       models: Sequence[tuple[str, ...]], *, threshold: float,
                       n_resamples: int, confidence: float) -> tuple[JudgeWithPeople, ...]:
    """Each judge's kappa with the human verdicts over the judged pairs ``keys`` (``scores``:
    one sequence per judge, aligned with ``keys``; None: that judge did not score the pair)."""
    human = [None if key not in verdicts.labels else int(verdicts.labels[key]) for key in keys]
    query_ids: list[Hashable] = [qid for qid, _ in keys]
    out = []
    for judge, (judge_scores, judge_models) in enumerate(zip(scores, models), start=1):
        if not verdicts.labels:
            out.append(JudgeWithPeople(judge, judge_models, None, "no human verdict yet: "
                                       "`eval-harness review sample` or `review export`"))
            continue
        try:
            report = judge_vs_human(judge_scores, human, query_ids=query_ids,
                                    threshold=threshold, n_resamples=n_resamples,
                                    confidence=confidence)
        except AgreementInputError:
            out.append(JudgeWithPeople(judge, judge_models, None,
                                       "no pair it scored has a human verdict"))
            continue
        out.append(JudgeWithPeople(judge, judge_models, report))
    return tuple(out)


def give_anchors_verdicts(conn: psycopg.Connection, dataset: str) -> int:
    """Write every human verdict of ``dataset`` onto the anchors of that pair (each judge's
    row; :func:`eval_harness.judges.anchors.anchor_set.give_verdicts`), in the caller's
    transaction; how many anchor rows changed. ``eval-harness judge`` and the
    ``dual_judge_scores`` asset call it (and commit) before a run with anchors on, so its
    drift check already sees the verdicts given since the last agreement step."""
    return give_verdicts(conn, dataset, human_verdicts(conn, dataset).labels)


@dataclass(frozen=True)
class PeopleRecorded:
    """What :func:`record_with_people` wrote (``written`` False: the role may not write)."""

    written: bool
    record_runs: Mapping[int, str]  # judge -> run id of the record row updated
    anchors_updated: int            # anchor rows whose human verdict changed


def record_with_people(conn: psycopg.Connection, result) -> PeopleRecorded:
    """Write ``result``'s (a :class:`~eval_harness.agreement.dataset_agreement.DatasetAgreement`)
    people figures and kappa interval onto the newest judges' record rows, and the human verdicts
    onto the anchors; one transaction, committed. A role that may only read the harness schema (or
    a read-only transaction) writes nothing: the transaction is rolled back and ``written``
    is False, so the caller can say so."""
    try:
        anchors = give_anchors_verdicts(conn, result.dataset)
        figures = {people.judge: people.figures() for people in result.people}
        if result.report is not None:
            interval = result.report.kappa_interval
            for values in figures.values():
                values.update(kappa_other=result.report.kappa.value,
                              kappa_other_low=interval.low, kappa_other_high=interval.high)
        runs = record_people(conn, result.dataset, figures)
        conn.commit()
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction):
        conn.rollback()
        return PeopleRecorded(False, {}, 0)
    return PeopleRecorded(True, runs, anchors)


def recorded_agreement(conn: psycopg.Connection, result):
    """:func:`record_with_people`, then ``result`` with the judges' record read again (so it
    shows what was just written); ``(result, PeopleRecorded)``."""
    recorded = record_with_people(conn, result)
    if not recorded.written:
        return result, recorded
    return replace(result, record=tuple(load_record(conn, result.dataset))), recorded


def format_people_markdown(result) -> str:
    """The "Judges vs people" part of the agreement report."""
    head = "## Judges vs people\n\n"
    sources = result.people_sources
    if not result.people:
        return head + "Not measured.\n"
    lines = "".join(f"- {people.line()}\n" for people in result.people)
    return (head + lines + f"\nHuman verdicts: {sources.get('human sample', 0)} from the human "
            f"sample (a uniform sample of judged queries), {sources.get('adjudicated', 0)} "
            "adjudicated in the review queue (pairs the judges disagreed on, so a kappa resting "
            "mostly on them reads low). The interval is a bootstrap over the queries. A judge "
            "whose kappa with people is low gives labels people would not: label more of the "
            "human sample (`eval-harness review sample`) before trusting it, or change the "
            "judge.\n")
