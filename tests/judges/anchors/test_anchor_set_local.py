"""Local judges on the anchors: re-judged like LLM judges, free (no provider request, no
cost row), 0 flips while their code is unchanged, and a changed local judge (a new
heuristics version) compared with the old one on the anchors."""

from __future__ import annotations

import uuid

from colliding_processes import beir
from eval_harness.judges.anchors import anchor_set as anchors_module
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.judges.local import relevance
from eval_harness.settings.judges import AnchorSettings
from eval_harness.datasets.ingest import ingest_beir
from fake_llm_server import judge_settings

LOCAL = {"judge1": "local:lexical", "judge2": "local:embedding"}


def test_local_judges_are_re_judged_on_the_anchors_for_free(settings, conn, tmp_path,
                                                             monkeypatch):
    tag = uuid.uuid4().hex[:8]
    name = f"localanchors_{tag}"
    ingest_beir(conn, beir(tmp_path / name, n_docs=30, n_queries=6, tag=tag), name=name)
    config = judge_settings(settings, None, **LOCAL, anchors=AnchorSettings(True, 15, 0))
    first = judge_dataset(conn, config, name)
    assert first.anchors_frozen == 15
    versions = conn.execute("SELECT DISTINCT judge, prompt_version FROM judge_anchors "
                            "WHERE dataset = %s ORDER BY judge", (name,)).fetchall()
    assert versions == [(1, "local-v3"), (2, "local-v3")]  # the heuristics' version, frozen

    second = judge_dataset(conn, config, name)
    lexical, embedding = second.anchors
    # both re-judged (local:embedding from the pairs' stored vectors), nothing flips
    assert (lexical.pairs, embedding.pairs) == (15, 15)
    assert (lexical.flips, embedding.flips, lexical.score_shift) == (0, 0, 0.0)
    assert second.provider_calls == 0 and second.cost_usd == 0
    assert conn.execute("SELECT count(*) FROM api_cost_log WHERE run_id = %s",
                        (second.run_id,)).fetchone()[0] == 0
    assert not lexical.changed and "judge 1 (local:lexical) on the anchors: flips 0%" \
        in second.format()

    # a new version of the local heuristics (one version for both local judges) whose
    # lexical scores differ: both are compared at once (the new version has no comparison
    # today), the lexical judge's labels flip, the embedding judge's do not
    monkeypatch.setattr(anchors_module, "LOCAL_PROMPT_VERSION", "local-v4")
    original = relevance.lexical_relevance
    monkeypatch.setattr(relevance, "lexical_relevance",
                        lambda query, document: 1.0 - original(query, document))
    third = judge_dataset(conn, config, name)
    lexical, embedding = third.anchors
    assert lexical.changed and lexical.flips > 0 and lexical.reused_from is None
    assert embedding.changed and embedding.flips == 0 and embedding.reused_from is None
    assert third.provider_calls == 0
    assert lexical.line().startswith("judge 1 changed local:lexical (prompt local-v3) -> "
                                     "local:lexical (prompt local-v4): flips ")
