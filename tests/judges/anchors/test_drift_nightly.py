"""The first nightly run after a provider changes a judge catches it: the fake provider's
judge drifts from a date (the fake server's clock), run N the night before passes the
``judge_drift`` check, run N+1 that night fails it, and only the anchors are paid for
(provider requests counted)."""

from __future__ import annotations

import uuid
from datetime import date, timedelta

from colliding_processes import beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.anchors.drift import stored_comparisons
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.settings.judges import AnchorSettings, DriftSettings
from eval_harness_pipelines.assets.judging import drift_result
from fake_llm_judges import DriftingJudge, JudgeBehaviours
from fake_llm_server import judge_settings
from judge_runs import LLM

CHANGED = date(2026, 3, 14)  # the day the provider swaps the model behind "gpt-4o"


def _night_passes(conn, dataset: str) -> None:
    """The store's clock moves on a day: today's comparisons become yesterday's."""
    conn.execute("UPDATE judge_anchor_runs SET created_at = created_at - interval '1 day' "
                 "WHERE dataset = %s", (dataset,))
    conn.commit()


def _check(conn, dataset: str, run_id: str):
    """The judge_drift check's verdict on the comparisons of ``run_id``."""
    result, reasons, _ = drift_result(stored_comparisons(conn, dataset, run_id=run_id),
                                      DriftSettings(), dataset=dataset)
    return result.passed, reasons


def test_the_first_nightly_run_after_the_change_fails_judge_drift(
        settings, conn, tmp_path, fake):
    tag = uuid.uuid4().hex[:8]
    name = f"nightly_{tag}"
    ingest_beir(conn, beir(tmp_path / name, n_docs=60, n_queries=24, tag=tag), name=name)
    config = judge_settings(settings, fake, **LLM, budget_usd=None,
                            anchors=AnchorSettings(True, 100, 0))
    # 30% of the anchors flip (about 30 of 100, drawn by hash from texts new each run): at 15%
    # a draw now and then held too few flips for the check to call it drift
    drifting = JudgeBehaviours({"gpt-4o": DriftingJudge(0, 0.3, from_date=CHANGED)},
                               today=fake.day)
    fake.responder = drifting

    fake.today = CHANGED - timedelta(days=2)
    frozen = judge_dataset(conn, config, name)  # the first run freezes 100 anchors
    assert frozen.anchors_frozen == 100 and fake.chat_requests == 2 * frozen.pairs

    fake.reset()
    fake.responder, fake.today = drifting, CHANGED - timedelta(days=1)  # night N
    _night_passes(conn, name)
    before = judge_dataset(conn, config, name)
    assert fake.chat_requests == 200 == before.billed_calls  # the anchors only
    assert [a.flips for a in before.anchors] == [0, 0] and drifting.flips["gpt-4o"] == 0
    assert _check(conn, name, before.run_id) == (True, [])

    fake.reset()
    fake.responder, fake.today = drifting, CHANGED  # night N+1: the model changed today
    _night_passes(conn, name)
    after = judge_dataset(conn, config, name)
    assert fake.chat_requests == 200 == after.billed_calls  # labels still from the cache
    judge1, judge2 = after.anchors
    assert judge1.flips == drifting.flips["gpt-4o"] > 5 and judge2.flips == 0
    passed, reasons = _check(conn, name, after.run_id)
    assert not passed and len(reasons) == 1
    assert reasons[0].startswith("judge 1 (openai:gpt-4o) flips ")
    assert "> judges.drift.max_flip_rate 0.050" in reasons[0]
