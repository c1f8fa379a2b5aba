"""Anchors paid once a night: one re-judging per dataset, judge spec and UTC day.

Every run with ``judges.anchors`` on re-judges the anchor set before its labels
(:mod:`.anchor_set`). Run as shards (``judge --shard i/n``), as two processes at once, or as a
backfill of several runs in one night, each would pay for the whole set again and measure
nothing more. So the anchor step runs under a claim on the dataset (an advisory lock in its
own space, :class:`~eval_harness.judges.dual.claims.QueryClaims`; waited for by polling, so
the run's event loop stays free): the first run re-judges, the others wait for it and then
find its comparison. A judge whose comparison was measured today (UTC, by the store's
clock), with the same spec and prompt version, since the set was last frozen and with the
same human verdicts on the anchors (people labelling since would make its human agreement
stale), and not cut short by its budget line, is not re-judged: this run stores a copy of
that comparison under its own run id (requests and cost 0, ``reused_from`` naming the run
that measured it), so its drift check and its record read it like their own. A judge changed
in config has no comparison today and is re-judged.

Freezing the set takes the same claim, so two shards never freeze two samples.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import psycopg

from eval_harness.judges.anchors import sql
from eval_harness.judges.anchors.anchor_set import (freeze_from_run, human_fingerprint,
                                                    prompt_version, rejudge_anchors)
from eval_harness.judges.anchors.drift import (AnchorComparison, comparison_from_row,
                                               stored_comparisons)
from eval_harness.judges.dual.claims import QueryClaims
from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.protocol import Passage
from eval_harness.settings.judges import AnchorSettings, DriftSettings

ANCHOR_SPACE = "eval_harness.judge-anchors"  # keyed-lock space: one key per dataset
log = logging.getLogger("eval_harness.judges")


async def _claim(conn: psycopg.Connection, session, dataset: str) -> QueryClaims | None:
    """The dataset's anchor claim, waited for (None: the run was stopped meanwhile)."""
    claims = QueryClaims(conn, space=ANCHOR_SPACE)
    if not claims.try_claim(dataset):
        log.warning(f"another judge run is re-judging or freezing the anchors of dataset "
                    f"'{dataset}'; waiting for it (its comparison is then used, not paid "
                    "again)")
        if not await claims.wait_for_some([dataset], until=lambda: session.halted,
                                          halted=session.pipeline.halted):
            return None
    return claims


async def anchors_of_the_night(conn: psycopg.Connection, session, drift: DriftSettings, *,
                               dataset: str, threshold: float,
                               passages: Mapping[tuple[str, int], tuple[Passage, Passage]]
                               | None = None) -> list[AnchorComparison]:
    """Each judge's comparison with the anchors of ``dataset`` for this run: measured today
    by another run (reused, nothing paid) or re-judged now (:func:`rejudge_anchors`)."""
    claims = await _claim(conn, session, dataset)
    if claims is None:
        return []
    try:
        reused, todo = [], []
        mine = {c.judge: c for c in stored_comparisons(conn, dataset, run_id=session.run_id)}
        frozen = sql.frozen_anchors(conn, dataset)
        for slot, judge in ((1, session.judge1), (2, session.judge2)):
            humans = human_fingerprint([r for r in frozen if r[0] == slot])
            row = sql.measured_today(conn, dataset, slot, judge.spec, prompt_version(judge),
                                     humans)
            if row is None:
                todo.append(slot)
                continue
            values = dict(zip(sql.RUN_COLUMNS, row))
            if values["run_id"] != session.run_id:  # a rerun of a run id keeps its rows
                if slot in mine and mine[slot].reused_from == values["run_id"]:
                    reused.append(mine[slot])
                    continue
                values.update(reused_from=values["run_id"], run_id=session.run_id,
                              requests=0, cost_usd=0.0)
                sql.store_anchor_run(conn, values)
            reused.append(comparison_from_row(values))
        conn.commit()
        fresh = (await rejudge_anchors(conn, session, drift, dataset=dataset,
                                       threshold=threshold, slots=todo, passages=passages)
                 if todo else [])
        return sorted(reused + fresh, key=lambda c: c.judge)
    finally:
        claims.release_all()


async def freeze_once(conn: psycopg.Connection, session, planned: Sequence[PlannedQuery],
                      first_scores, documents: Mapping[int, Passage],
                      settings: AnchorSettings, *, dataset: str, threshold: float) -> int:
    """:func:`freeze_from_run` under the dataset's anchor claim: of runs finishing together,
    one freezes the set, the others find it frozen (0)."""
    claims = await _claim(conn, session, dataset)
    if claims is None:
        return 0
    try:
        return freeze_from_run(conn, session, planned, first_scores, documents, settings,
                               dataset=dataset, threshold=threshold)
    finally:
        claims.release_all()


def run_passages(planned: Sequence[PlannedQuery], documents: Mapping[int, Passage]
                 ) -> dict[tuple[str, int], tuple[Passage, Passage]]:
    """The run's (query, document) passages by (query key, doc id): the stored vectors a
    local embedding judge re-judges the anchors with."""
    return {(p.external_id, d): (Passage(p.text, p.query_id, p.embedding), documents[d])
            for p in planned for d in p.doc_ids if d in documents}
