"""Re-freezing the anchor set (``eval-harness judge --refreeze-anchors``).

After deciding to keep a judge that the drift check flagged (a new model or prompt version
in config.yaml, or a provider's change under the same name that people reviewed), the anchor
set frozen with the old judge has served its purpose. A re-freezing run:

1. says what it will drop (:func:`describe_frozen`: the set's size, the judge specs and
   prompt versions it was frozen with, and when);
2. does not re-judge the old set (comparing with a set about to go would be paid for
   nothing) and judges the dataset as usual;
3. after judging, drops the old set and freezes a new one from this run's scores in one
   transaction (:func:`drop_and_freeze`): a run stopped before then keeps the old set;
4. re-scores the new anchors with each LLM judge past the reply cache
   (:func:`rescore_frozen`, purpose ``anchor`` in ``api_cost_log``, like every night's
   anchors) and freezes those fresh scores, so the set holds what the judges answer today,
   not a reply cached before the provider changed the model. Local judges are code: their
   run scores stand.

The comparisons of earlier runs (``judge_anchor_runs``) stay, as the judges' history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

import psycopg

from eval_harness.judges.anchors import sql
from eval_harness.judges.anchors.anchor_set import PURPOSE
from eval_harness.judges.dual.scores import judgement_score
from eval_harness.judges.protocol import Passage


@dataclass(frozen=True)
class FrozenJudge:
    """One judge's part of a frozen anchor set."""

    judge: int
    spec: str
    prompt_version: str | None
    pairs: int
    frozen_at: datetime


@dataclass(frozen=True)
class Refrozen:
    """What a re-freezing run did: the set it dropped and the one it froze."""

    dropped: tuple[FrozenJudge, ...]
    frozen: int = 0         # pairs in the new set
    requests: int = 0       # anchor re-scorings sent past the cache
    cost_usd: float = 0.0

    def to_dict(self) -> dict:
        return {"dropped": [{**asdict(f), "frozen_at": f.frozen_at.isoformat()}
                            for f in self.dropped],
                "frozen": self.frozen, "requests": self.requests, "cost_usd": self.cost_usd}

    def line(self) -> str:
        return (f"anchor set re-frozen: dropped {describe_frozen(self.dropped)}; froze "
                f"{self.frozen} pairs re-scored past the cache ({self.requests} requests, "
                f"${self.cost_usd:.4f})")


def frozen_judges(conn: psycopg.Connection, dataset: str) -> tuple[FrozenJudge, ...]:
    """The anchor set of ``dataset`` per judge (empty when none is frozen)."""
    return tuple(FrozenJudge(*row) for row in sql.frozen_set(conn, dataset))


def describe_frozen(frozen: Sequence[FrozenJudge]) -> str:
    """``100 pairs frozen 2026-11-20 14:02 UTC with judge 1 openai:gpt-4o (prompt v1), judge 2
    anthropic:claude-haiku-4-5 (prompt v1)``, or ``no anchor set``."""
    if not frozen:
        return "no anchor set"
    pairs = max(f.pairs for f in frozen)
    when = min(f.frozen_at for f in frozen).strftime("%Y-%m-%d %H:%M UTC")
    judges = ", ".join(f"judge {f.judge} {f.spec}"
                       + ("" if f.prompt_version is None else f" (prompt {f.prompt_version})")
                       for f in frozen)
    return f"{pairs} pairs frozen {when} with {judges}"


def drop_and_freeze(conn: psycopg.Connection, dataset: str,
                    freeze: Callable[[], int]) -> tuple[tuple[FrozenJudge, ...], int]:
    """Drop the anchor set of ``dataset`` and call ``freeze`` (which freezes the new set and
    commits), in one transaction: a failure before the commit keeps the old set. The set
    dropped and how many pairs were frozen."""
    dropped = frozen_judges(conn, dataset)
    sql.drop_anchors(conn, dataset)
    try:
        frozen = freeze()
    except BaseException:
        conn.rollback()
        raise
    return dropped, frozen


async def rescore_frozen(conn: psycopg.Connection, session, *, dataset: str,
                         threshold: float) -> tuple[int, float]:
    """Score the frozen anchors of ``dataset`` anew with each LLM judge past the cache and
    freeze those scores (an anchor whose scoring fails keeps the run's score); the requests
    sent and their cost."""
    frozen = sql.frozen_anchors(conn, dataset)
    requests, cost = 0, 0.0
    for slot, judge in ((1, session.judge1), (2, session.judge2)):
        rows = [r for r in frozen if r[0] == slot]
        if not rows or not hasattr(judge, "relevance_request"):
            continue  # a local judge is code: its run score stands
        window = asyncio.Semaphore(64)

        async def score(row):
            async with window:
                return await judge.relevance(Passage(row[6], None), Passage(row[7], row[5]),
                                             retest=True, purpose=PURPOSE)

        results = await asyncio.gather(*(score(r) for r in rows), return_exceptions=True)
        fresh = []
        for row, result in zip(rows, results):
            if isinstance(result, BaseException):
                continue
            requests += result.calls
            cost += result.cost_usd
            value = judgement_score(result)
            if value is not None:
                fresh.append((row[4], row[5], value, value > threshold))
        sql.refreeze_scores(conn, dataset, slot, fresh)
        conn.commit()
    return requests, cost


async def refreeze(conn: psycopg.Connection, session, freeze: Callable[[], int], *,
                   dataset: str, threshold: float) -> Refrozen:
    """Steps 3 and 4 of the module docstring, after the run has judged."""
    dropped, frozen = drop_and_freeze(conn, dataset, freeze)
    requests, cost = await rescore_frozen(conn, session, dataset=dataset, threshold=threshold)
    return Refrozen(dropped, frozen, requests, cost)
