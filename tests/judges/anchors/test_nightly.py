"""Anchors are paid once per dataset, judge spec and UTC day: two shard runs at once
freeze one set and re-judge it once (anchor requests == anchors x LLM judges), a backfill
run the same day pays nothing, a new human verdict on an anchor or the next day pays
again; nothing outside the anchors is paid twice (provider requests counted against the
fake LLM server)."""

from __future__ import annotations

import asyncio
import threading

from colliding_processes import beir, fake_keys, two_judges_config, wait_until
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.anchors.drift import stored_comparisons
from eval_harness.judges.anchors.sql import frozen_anchors, set_human_labels
from eval_harness.judges.dual.dry_run import estimate_judge_run
from eval_harness.judges.dual.run import judge_dataset, judge_dataset_async
from eval_harness.judges.dual.shards import parse_shard
from eval_harness.judges.dual.summary import JudgeRunSummary
from eval_harness.settings import load_settings

PAIRS = 12  # judges.anchors.pairs; a shard with fewer judged pairs freezes all of its own


def _shards_at_once(location, settings, fake) -> dict[str, JudgeRunSummary]:
    """Shards 0/2 and 1/2 side by side, each on a connection of its own: no reply is given
    until both are in their run (each holds the dataset's lock shared) and one has asked."""
    shared = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = "
              "'ShareLock' AND granted AND database = (SELECT oid FROM pg_database "
              "WHERE datname = current_database())")
    summaries: dict[str, JudgeRunSummary] = {}

    def run(shard: str) -> None:
        with location.connection() as conn:
            summaries[shard] = asyncio.run(judge_dataset_async(
                conn, settings, "jd", shard=parse_shard(shard)))

    fake.hold_replies_after(0)
    threads = [threading.Thread(target=run, args=(shard,)) for shard in ("0/2", "1/2")]
    for thread in threads:
        thread.start()
    try:
        with location.connection(autocommit=True) as watch:
            wait_until(lambda: watch.execute(shared).fetchone()[0] == 2
                       and any(r.held for r in fake.chat_records()),
                       what="both shards in their run, one asking", timeout=60)
    finally:
        fake.release_replies()
        for thread in threads:
            thread.join(timeout=60)
    assert sorted(summaries) == ["0/2", "1/2"]
    return summaries


def _purposes(location, run_ids) -> dict[str, int]:
    with location.connection() as conn:
        return dict(conn.execute("SELECT purpose, count(*) FROM api_cost_log WHERE run_id = "
                                 "ANY(%s) GROUP BY purpose", (list(run_ids),)).fetchall())


def test_two_shards_freeze_one_set_and_re_judge_it_once_a_night(fresh, tmp_path, fake):
    folder = beir(tmp_path / "judged", n_docs=30, n_queries=10, tag=tmp_path.name[-12:])
    config = two_judges_config(folder, tmp_path, concurrency=8)
    config.write_text(config.read_text().replace(
        "  hybrid_top_k: 2\n", f"  hybrid_top_k: 2\n  anchors: {{pairs: {PAIRS}}}\n"
        "  timeout_seconds: 300\n"))  # held replies are not retried on a loaded machine
    settings = load_settings(config, environ={"DATABASE_URL": fresh.url, **fake_keys(fake)})
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="jd")

    # night 1: both shards judge their queries and end together; one set is frozen, from
    # the pairs of the shard that ends first
    first = _shards_at_once(fresh, settings, fake)
    pairs = sum(s.pairs for s in first.values())
    assert fake.chat_requests == 2 * pairs  # each label paid once, the freezing is free
    frozen = [s for s in first.values() if s.anchors_frozen]
    assert len(frozen) == 1 and [s.anchors_frozen for s in first.values()].count(0) == 1
    anchors = frozen[0].anchors_frozen
    assert anchors == min(PAIRS, frozen[0].pairs)
    with fresh.connection() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT (query_key, doc_id)) "
                            "FROM judge_anchors").fetchone() == (2 * anchors, anchors)

    # night 2: the shards again, at once: one re-judges the anchors, the other uses that
    fake.reset()
    second = _shards_at_once(fresh, settings, fake)
    assert fake.chat_requests == 2 * anchors  # anchors x LLM judges, and nothing else
    assert _purposes(fresh, [s.run_id for s in second.values()]) == {"anchor": 2 * anchors}
    assert sorted(s.provider_calls for s in second.values()) == [0, 2 * anchors]
    measured = next(s for s in second.values() if s.provider_calls)
    reused = next(s for s in second.values() if not s.provider_calls)
    assert [a.reused_from for a in measured.anchors] == [None, None]
    assert [a.reused_from for a in reused.anchors] == [measured.run_id] * 2
    assert [a.pairs for a in reused.anchors] == [anchors, anchors]
    assert f"(measured today by run {measured.run_id})" in reused.format()
    with fresh.connection() as conn:  # each run's drift check reads its own comparisons
        for s in second.values():
            assert [c.pairs for c in stored_comparisons(conn, "jd", run_id=s.run_id)] \
                == [anchors, anchors]

    # a backfill run the same day pays nothing; its dry run says so
    fake.reset()
    with fresh.connection() as conn:
        dry = estimate_judge_run(conn, settings, "jd")
        conn.rollback()
        assert [a.requests for a in dry.anchors] == [0, 0] and dry.to_pay == 0
        assert f"re-judged today by run {measured.run_id}: used again, $0" in dry.format()
        backfill = judge_dataset(conn, settings, "jd")
        assert fake.chat_requests == 0 and backfill.billed_calls == 0
        assert {a.reused_from for a in backfill.anchors} == {measured.run_id}

        # a person gives a verdict on an anchor: the day's comparison is stale, re-measured
        query_key, doc_id = frozen_anchors(conn, "jd")[0][4:6]
        assert set_human_labels(conn, "jd", [(query_key, doc_id, True)]) == 2
        conn.commit()
        reviewed = judge_dataset(conn, settings, "jd")
        assert fake.chat_requests == 2 * anchors == reviewed.billed_calls
        assert [(a.reused_from, a.human_pairs) for a in reviewed.anchors] == [(None, 1)] * 2

        # the next UTC day the anchors are re-judged again, once
        fake.reset()
        conn.execute("UPDATE judge_anchor_runs SET created_at = created_at - interval '1 day'")
        conn.commit()
        night3 = judge_dataset(conn, settings, "jd")
        assert fake.chat_requests == 2 * anchors == night3.billed_calls
        assert [a.reused_from for a in night3.anchors] == [None, None]
