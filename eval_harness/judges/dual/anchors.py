"""The anchor set: a few judged pairs frozen once, re-judged by every run to see a judge drift.

With ``judges.anchors`` on, the first run that judges a dataset chooses a seeded sample of
``pairs`` of its judged (query, document) pairs (:func:`choose_anchors`) and freezes them in
``judge_anchors`` (:mod:`.anchor_sql`): the texts, the score and label each judge gave then,
its spec and prompt version, and the human verdict on the pair where the review queue has one.

Every later run re-judges the anchors **before** it judges anything else, past the reply cache
(:meth:`LLMJudge.relevance` with ``retest=True``, logged in ``api_cost_log`` with purpose
``anchor``, never cached), and compares each judge with its frozen self
(:func:`compare_judge`): the label flip rate with a Wilson interval, the mean paired score
shift with a t interval, and agreement with the human verdicts on anchors. Each comparison is
stored in ``judge_anchor_runs``; the ``judge_drift`` asset check reads the newest
(:func:`drift_reasons` is its rule). A judge whose model or prompt version changed in config
since the anchors were frozen is thereby compared with the old one before any of its labels
are used, and the run summary says so ("judge 1 changed openai:gpt-4o -> openai:gpt-4.1: ...").
A retest never replaces a cached reply; a new judge's anchor replies are its first, so they
are cached and its labels on those pairs cost nothing more.

A local judge (``local:*``) is re-judged too: it is deterministic and free (no request, no
cost row), so a comparison of a local judge shows 0 flips unless its code or its version
(``local-v3``, recorded like a prompt version) changed, which is what it then detects.
``local:embedding`` uses the stored vectors of the pair (an anchor whose vectors this run
did not load is unscored and left out of the comparison).

Anchors are paid for once per dataset, judge spec and UTC day (:mod:`.anchor_nights`): shard
runs, two processes or a backfill of several runs in one night re-judge them once; the others
use that comparison (``reused_from`` names the run that measured it).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import psycopg

from eval_harness.judges.client.budget import BudgetLineExhausted
from eval_harness.judges.dual import anchor_sql
from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.dual.scores import judgement_score
from eval_harness.judges.local.relevance import LOCAL_PROMPT_VERSION
from eval_harness.judges.protocol import Passage
from eval_harness.metrics.drift import drift_alarm, paired_shift
from eval_harness.metrics.proportions import wilson_interval
from eval_harness.settings.judges import AnchorSettings, DriftSettings
from eval_harness.store.judge_review import adjudicated_labels

PURPOSE = "anchor"  # api_cost_log.purpose of an anchor scoring


@dataclass(frozen=True)
class AnchorComparison:
    """One judge re-judging the anchors in one run, against the frozen values."""

    judge: int
    spec: str
    prompt_version: str | None
    frozen_spec: str
    frozen_prompt_version: str | None
    pairs: int                       # anchors scored both when frozen and now
    flips: int
    flip_rate: float | None
    flip_low: float | None
    flip_high: float | None
    score_shift: float | None        # mean of (now - frozen)
    shift_low: float | None
    shift_high: float | None
    human_pairs: int                 # anchors with a human verdict, scored now
    human_agreement: float | None    # share of them whose label now matches the verdict
    requests: int = 0
    cost_usd: float = 0.0
    reused_from: str | None = None   # the run that measured it today (None: this run did)
    cut_short: bool = False          # its budget line stopped the re-judging part way

    @property
    def changed(self) -> bool:
        """The judge in config is not the one the anchors were frozen with."""
        return (self.spec, self.prompt_version) != (self.frozen_spec, self.frozen_prompt_version)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "changed": self.changed}

    def line(self) -> str:
        """``judge 1 changed openai:gpt-4o -> openai:gpt-4.1: flips 12% [8%, 17%] of the
        anchors' labels, scores +0.05 [+0.02, +0.08] ...``"""
        if self.changed:
            old = _judge_name(self.frozen_spec, self.frozen_prompt_version,
                              self.prompt_version != self.frozen_prompt_version)
            new = _judge_name(self.spec, self.prompt_version,
                              self.prompt_version != self.frozen_prompt_version)
            head = f"judge {self.judge} changed {old} -> {new}"
        else:
            head = f"judge {self.judge} ({self.spec}) on the anchors"
        if self.reused_from:
            head += f" (measured today by run {self.reused_from})"
        if self.flip_rate is None:
            return f"{head}: no anchor scored both when frozen and now"
        pct = lambda v: f"{100 * v:.0f}%"  # noqa: E731
        sig = lambda v: f"{v:+.2f}"  # noqa: E731
        shift = (f"scores {sig(self.score_shift)}" + ("" if self.shift_low is None else
                 f" [{sig(self.shift_low)}, {sig(self.shift_high)}]"))
        human = ("" if self.human_agreement is None else
                 f"; agrees with people on {pct(self.human_agreement)} of "
                 f"{self.human_pairs} anchors")
        return (f"{head}: flips {pct(self.flip_rate)} [{pct(self.flip_low)}, "
                f"{pct(self.flip_high)}] of the anchors' labels, {shift} ({self.pairs} "
                f"anchors){human}")


def _judge_name(spec: str, version: str | None, with_version: bool) -> str:
    return f"{spec} (prompt {version})" if with_version else spec


def drift_reasons(comparison: AnchorComparison, drift: DriftSettings) -> list[str]:
    """Why ``comparison`` fails the drift check ([] when it passes): the flip rate's lower
    bound above ``judges.drift.max_flip_rate``, or the agreement with human verdicts on
    anchors below ``judges.drift.min_human_agreement`` (only when some anchor has one)."""
    reasons = []
    if comparison.pairs and drift_alarm(comparison.flips, comparison.pairs,
                                        max_flip_rate=drift.max_flip_rate,
                                        confidence=drift.confidence):
        reasons.append(f"judge {comparison.judge} ({comparison.spec}) flips "
                       f"{comparison.flips} of {comparison.pairs} anchor labels: lower bound "
                       f"{comparison.flip_low:.3f} > judges.drift.max_flip_rate "
                       f"{drift.max_flip_rate:.3f}")
    if comparison.human_agreement is not None and \
            comparison.human_agreement < drift.min_human_agreement:
        reasons.append(f"judge {comparison.judge} ({comparison.spec}) agrees with the human "
                       f"verdicts on {comparison.human_agreement:.0%} of "
                       f"{comparison.human_pairs} anchors < judges.drift.min_human_agreement "
                       f"{drift.min_human_agreement:.0%}")
    return reasons


def compare_judge(judge: int, frozen: Sequence[tuple[float | None, bool | None]],
                  now: Sequence[float | None], *, spec: str, prompt_version: str | None,
                  frozen_spec: str, frozen_prompt_version: str | None, threshold: float,
                  confidence: float = 0.95, requests: int = 0,
                  cost_usd: float = 0.0) -> AnchorComparison:
    """Compare ``now`` (today's scores, None where unscored) with ``frozen`` (``(score, human
    label or None)`` per anchor, same order); only anchors scored both times count."""
    both = [(f, h, n) for (f, h), n in zip(frozen, now) if f is not None and n is not None]
    then = np.array([f for f, _, _ in both], dtype=float)
    today = np.array([n for _, _, n in both], dtype=float)
    flips = int(np.sum((then > threshold) != (today > threshold)))
    rate = low = high = shift = s_low = s_high = None
    if both:
        rate = flips / len(both)
        low, high = wilson_interval(flips, len(both), confidence=confidence)
        shift, s_low, s_high = paired_shift(then, today, confidence=confidence)
    humans = [(h, n > threshold) for _, h, n in both if h is not None]
    agreement = (sum(h == label for h, label in humans) / len(humans)) if humans else None
    return AnchorComparison(judge, spec, prompt_version, frozen_spec, frozen_prompt_version,
                            len(both), flips, rate, low, high, shift, s_low, s_high,
                            len(humans), agreement, requests, cost_usd)


def choose_anchors(pairs: Sequence[tuple[str, int]], *, size: int, seed: int) -> list[int]:
    """Indices of a seeded sample of ``size`` of ``pairs`` ((query key, doc id)), in the
    pairs' sorted order; the same seed draws the same pairs whatever order they come in."""
    order = sorted(range(len(pairs)), key=lambda i: pairs[i])
    if len(order) <= size:
        return order
    picked = np.random.default_rng(seed).choice(len(order), size=size, replace=False)
    return [order[i] for i in sorted(picked)]


def human_fingerprint(rows: Sequence[tuple]) -> str:
    """A short digest of the human verdicts on one judge's anchors (``frozen_anchors`` rows):
    the same verdicts, the same digest."""
    verdicts = sorted((r[4], r[5], r[10]) for r in rows if r[10] is not None)
    return hashlib.sha256(repr(verdicts).encode()).hexdigest()[:16]


def _prompt_version(judge) -> str | None:
    """The judge's prompt version; a local judge's is its heuristics' version."""
    if not hasattr(judge, "relevance_request"):
        return LOCAL_PROMPT_VERSION if getattr(judge, "provider", None) == "local" else None
    return judge.relevance_request("", "").prompt_version


def freeze_from_run(conn: psycopg.Connection, session, planned: Sequence[PlannedQuery],
                    first_scores: Mapping[int, tuple[list, list]],
                    documents: Mapping[int, Passage], settings: AnchorSettings, *,
                    dataset: str, threshold: float) -> int:
    """Freeze the anchor set of ``dataset`` from this run's stored scores (when it has none
    yet); how many pairs were frozen (0 when the set already exists)."""
    if anchor_sql.frozen_anchors(conn, dataset):
        return 0
    judged = [(plan, position, doc_id) for plan in planned if plan.query_id in first_scores
              for position, doc_id in enumerate(plan.doc_ids)
              if any(first_scores[plan.query_id][slot][position] is not None
                     for slot in (0, 1))]
    chosen = choose_anchors([(p.external_id, d) for p, _, d in judged], size=settings.pairs,
                            seed=settings.seed)
    humans = adjudicated_labels(conn, dataset)
    rows = []
    for index in chosen:
        plan, position, doc_id = judged[index]
        document = documents.get(doc_id)
        for slot, judge in ((1, session.judge1), (2, session.judge2)):
            score = first_scores[plan.query_id][slot - 1][position]
            if score is None:
                continue
            rows.append((slot, judge.spec, _prompt_version(judge), plan.external_id, doc_id,
                         plan.text, "" if document is None else document.text, score,
                         score > threshold, humans.get((plan.query_id, doc_id))))
    anchor_sql.freeze_anchors(conn, dataset, rows)
    conn.commit()
    return len(chosen)


async def rejudge_anchors(conn: psycopg.Connection, session, drift: DriftSettings, *,
                          dataset: str, threshold: float, slots: Sequence[int] = (1, 2),
                          passages: Mapping[tuple[str, int], tuple[Passage, Passage]]
                          | None = None) -> list[AnchorComparison]:
    """Re-judge the frozen anchors of ``dataset`` with the judges in ``slots`` as config has
    them (an LLM judge past the cache, a local judge anew: it is free), and store and
    return each judge's comparison ([] before the set is frozen). ``passages``: the run's
    (query, document) passages by (query key, doc id), whose stored vectors
    ``local:embedding`` needs (an anchor without them is unscored, not compared)."""
    frozen = anchor_sql.frozen_anchors(conn, dataset)
    out = []
    for slot, judge in ((1, session.judge1), (2, session.judge2)):
        rows = [r for r in frozen if r[0] == slot]
        if not rows or slot not in slots:
            continue
        window = asyncio.Semaphore(64)
        is_llm = hasattr(judge, "relevance_request")

        async def score(row, judge=judge, window=window, is_llm=is_llm):
            q, d = (passages or {}).get((row[4], row[5]), (None, None))
            # the texts asked then; the vectors stored now (local:embedding's input)
            query = Passage(row[6], None, getattr(q, "embedding", None))
            document = Passage(row[7], row[5], getattr(d, "embedding", None))
            async with window:
                if is_llm:
                    return await judge.relevance(query, document, retest=True,
                                                 purpose=PURPOSE)
                return await judge.relevance(query, document)

        results = await asyncio.gather(*(score(r) for r in rows), return_exceptions=True)
        done = [r for r in results if not isinstance(r, BaseException)]
        cut_short = any(isinstance(r, BudgetLineExhausted) for r in results)
        comparison = compare_judge(
            slot, [(r[8], r[10]) for r in rows],
            [None if isinstance(r, BaseException) else judgement_score(r) for r in results],
            spec=judge.spec, prompt_version=_prompt_version(judge), frozen_spec=rows[0][1],
            frozen_prompt_version=rows[0][3], threshold=threshold,
            confidence=drift.confidence, requests=sum(r.calls for r in done),
            cost_usd=sum(r.cost_usd for r in done))
        comparison = replace(comparison, cut_short=cut_short)
        anchor_sql.store_anchor_run(conn, {**asdict(comparison), "run_id": session.run_id,
                                           "dataset": dataset, "judge_spec": comparison.spec,
                                           "human_labels": human_fingerprint(rows)})
        conn.commit()
        out.append(comparison)
    return out


def stored_comparisons(conn: psycopg.Connection, dataset: str, *,
                       run_id: str | None = None) -> list[AnchorComparison]:
    """The newest (or ``run_id``'s) comparisons with the anchors of ``dataset``."""
    return [comparison_from_row(dict(zip(anchor_sql.RUN_COLUMNS, row)))
            for row in anchor_sql.anchor_runs(conn, dataset, run_id=run_id)]


def comparison_from_row(values: Mapping[str, Any]) -> AnchorComparison:
    """A comparison from a ``judge_anchor_runs`` row (keys: ``anchor_sql.RUN_COLUMNS``)."""
    values = {**values, "spec": values["judge_spec"]}
    return AnchorComparison(**{k: values[k] for k in AnchorComparison.__dataclass_fields__})
