"""The judges' record: each judge spec (provider:model, server, prompt version) with its
measured reliability run by run, so a reader knows which judge the labels came from and how
good it was that night.

A judge run (:func:`eval_harness.judges.dual.run.judge_dataset`) writes one row per judge
(:func:`write_record`, upserted on run id and judge: a rerun of the same run id replaces its
rows) with the figures the run measured, each None when it did not:

* ``self flips``: the test-retest label flip rate and Krippendorff's alpha on the scores
  (``judges.retest`` / ``judge --retest``, :mod:`eval_harness.judges.retest`);
* ``kappa other``: the run's pooled Cohen's kappa between the two judges;
* ``anchor flips``: the flip rate against the frozen anchor labels with its Wilson interval,
  and the share of anchors with a human verdict whose label now matches it
  (``judges.anchors``, :mod:`eval_harness.judges.anchors`).

The judges layer knows no human verdicts beyond the anchors', so the agreement step (a layer
above) fills the rest onto the newest row of each judge through :func:`record_people`:
``with people``, the judge's Cohen's kappa against every human verdict the harness holds (the
human sample and the adjudicated review queue) with a bootstrap-over-queries interval and its
n, and ``kappa other`` with its interval, both over the dataset's stored scores.

:func:`load_record` reads the newest rows per spec; :func:`record_table` lays them out for
``eval-harness agreement`` and the run report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Sequence

import psycopg

from eval_harness.judges.dual import record_sql

RECENT = 7  # rows shown per judge spec
HEADER = ("date", "judge", "spec", "server", "prompt", "self flips", "kappa other",
          "with people", "anchor flips")


@dataclass(frozen=True)
class RecordRow:
    recorded_at: datetime
    run_id: str
    dataset: str
    judge: int
    judge_spec: str
    model: str
    server: str | None
    prompt_version: str | None
    retest_flip_rate: float | None
    retest_alpha: float | None
    kappa_other: float | None
    kappa_other_low: float | None
    kappa_other_high: float | None
    human_pairs: int
    human_agreement: float | None
    anchor_flip_rate: float | None
    anchor_flip_low: float | None
    anchor_flip_high: float | None = None
    people_kappa: float | None = None       # Cohen's kappa against the human verdicts
    people_kappa_low: float | None = None
    people_kappa_high: float | None = None
    people_pairs: int = 0                   # pairs with a verdict the judge scored
    people_queries: int = 0                 # their queries: the bootstrap's units


def _prompt_version(judge) -> str | None:
    if not hasattr(judge, "relevance_request"):
        return None  # a local judge has no prompt
    return judge.relevance_request("", "").prompt_version


def record_rows(summary, judges: Sequence) -> list[dict]:
    """One row per judge of a finished run (``summary``: its :class:`JudgeRunSummary`,
    ``judges``: the session's judge 1 and judge 2)."""
    retest = {r.judge: r for r in summary.retest or ()}
    anchors = {a.judge: a for a in summary.anchors or ()}
    rows = []
    for index, judge in enumerate(judges, start=1):
        figures = retest.get(index)
        agreement = None if figures is None else figures.agreement
        anchor = anchors.get(index)
        rows.append({
            "run_id": summary.run_id, "dataset": summary.dataset, "judge": index,
            "judge_spec": judge.spec, "model": judge.spec.split(":", 1)[-1],
            "server": getattr(judge, "base_url", None),
            "prompt_version": _prompt_version(judge),
            "retest_flip_rate": None if agreement is None else agreement.flip_rate,
            "retest_alpha": None if agreement is None else agreement.alpha_scores,
            "kappa_other": summary.pooled_kappa, "kappa_other_low": None,
            "kappa_other_high": None,
            "human_pairs": 0 if anchor is None else anchor.human_pairs,
            "human_agreement": None if anchor is None else anchor.human_agreement,
            "anchor_flip_rate": None if anchor is None else anchor.flip_rate,
            "anchor_flip_low": None if anchor is None else anchor.flip_low,
            "anchor_flip_high": None if anchor is None else anchor.flip_high})
    return rows


def write_record(conn: psycopg.Connection, summary, judges: Sequence) -> None:
    """Store the run's rows and commit."""
    record_sql.store_record(conn, record_rows(summary, judges))
    conn.commit()


def record_people(conn: psycopg.Connection, dataset: str,
                  figures: Mapping[int, Mapping[str, object]]) -> dict[int, str]:
    """Write the agreement step's ``figures`` per judge (keys among
    :data:`~.record_sql.PEOPLE_COLUMNS`) onto the newest row of each judge of ``dataset``;
    ``{judge: run id}`` of the rows updated (a judge without a row yet is left out). The
    caller commits."""
    updated = {}
    for judge, values in sorted(figures.items()):
        run_id = record_sql.update_people(conn, dataset, judge, values)
        if run_id is not None:
            updated[judge] = run_id
    return updated


def load_record(conn: psycopg.Connection, dataset: str, *,
                per_spec: int = RECENT) -> list[RecordRow]:
    """The newest ``per_spec`` rows of each judge spec of ``dataset``, by judge and spec,
    oldest first within a spec."""
    return [RecordRow(*row) for row in record_sql.judge_record(conn, dataset,
                                                               per_spec=per_spec)]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _kappa_cell(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "n/a"
    return _num(value) if low is None or high is None else (
        f"{_num(value)} [{_num(low)}, {_num(high)}]")


def people_cell(row: RecordRow) -> str:
    """``0.712 [0.540, 0.850] (40 pairs, 12 queries)``: kappa against the human verdicts."""
    if row.people_kappa is None:
        return "n/a"
    return (f"{_kappa_cell(row.people_kappa, row.people_kappa_low, row.people_kappa_high)} "
            f"({row.people_pairs} pairs, {row.people_queries} queries)")


def anchor_cell(row: RecordRow) -> str:
    """``4.0% [1.1%, 13.5%]; people 90.0% of 10``: flips against the frozen anchor labels
    (Wilson interval) and agreement with the human verdicts on anchors."""
    if row.anchor_flip_rate is None:
        return "n/a"
    bounds = (f"[{_pct(row.anchor_flip_low)}, {_pct(row.anchor_flip_high)}]"
              if row.anchor_flip_high is not None else f"(>= {_pct(row.anchor_flip_low)})")
    people = ("" if row.human_agreement is None
              else f"; people {_pct(row.human_agreement)} of {row.human_pairs}")
    return f"{_pct(row.anchor_flip_rate)} {bounds}{people}"


def record_table(rows: Sequence[RecordRow]) -> list[tuple[str, ...]]:
    """The rows as text cells under :data:`HEADER` ("n/a": not measured that run)."""
    return [(row.recorded_at.strftime("%Y-%m-%d %H:%M"), str(row.judge), row.judge_spec,
             row.server or "default", row.prompt_version or "-", _pct(row.retest_flip_rate),
             _kappa_cell(row.kappa_other, row.kappa_other_low, row.kappa_other_high),
             people_cell(row), anchor_cell(row)) for row in rows]


RECORD_READING = (
    "Self flips: the test-retest label flip rate (`judges.retest`). Kappa other: Cohen's "
    "kappa with the other judge, with its bootstrap interval once the agreement step has run. "
    "With people: Cohen's kappa against the human verdicts (human sample and adjudicated "
    "review queue) with its bootstrap-over-queries interval and n. Anchor flips: the flip "
    "rate against the frozen anchor labels with its Wilson interval, and agreement with the "
    "human verdicts on anchors. n/a: not measured that run.")


def format_record_markdown(rows: Sequence[RecordRow]) -> str:
    """The "Judges' record" part of the agreement report."""
    head = "## Judges' record\n\n"
    if not rows:
        return (head + "No judge run recorded yet: `eval-harness judge` writes a row per "
                "judge each run.\n")
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells) + " |" for cells in record_table(rows)]
    return (head + f"The last {RECENT} runs of each judge spec (provider:model, server, prompt "
            f"version). {RECORD_READING}\n\n" + "\n".join(lines) + "\n")
