"""The judges' record against the fake LLM server: a row per judge after a run with retest
and anchors on, none added by a rerun of the same run id, a changed judge spec recorded as a
new row with its own figures, and the table `eval-harness agreement` and the report show."""

from __future__ import annotations

import json

from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.judges.dual.record import load_record
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.reporting.blocks import Table
from eval_harness.reporting.sections.agreement import agreement_section
from eval_harness.settings.judges import AnchorSettings, RetestSettings
from fake_llm_judges import DriftingJudge, JudgeBehaviours, NoisyJudge
from fake_llm_server import judge_settings
from judge_runs import LLM, small_dataset


def _dataset(conn, tmp_path) -> str:
    return small_dataset(conn, tmp_path, "record", queries=8)


def _config(settings, fake, **judges):
    return judge_settings(settings, fake, budget_usd=None, **{**LLM, **judges},
                          retest=RetestSettings(True, 4, 2, 0),
                          anchors=AnchorSettings(True, 20, 0))


def test_a_row_per_judge_per_run_none_added_by_a_rerun_and_a_new_spec_gets_its_own(
        settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path)
    first = judge_dataset(conn, _config(settings, fake), name)
    rows = load_record(conn, name)
    assert [(r.judge, r.judge_spec, r.run_id) for r in rows] == [
        (1, "openai:gpt-4o", first.run_id), (2, "anthropic:claude-haiku-4-5", first.run_id)]
    assert all(r.kappa_other == first.pooled_kappa for r in rows)
    assert [r.retest_flip_rate for r in rows] == [t.agreement.flip_rate for t in first.retest]
    assert all(r.anchor_flip_rate is None for r in rows)  # the first run freezes the anchors
    assert rows[0].server is not None  # the fake server, not the provider's default
    assert rows[0].prompt_version is not None

    # the provider changes judge 1 under the same name: it flips, the record says so
    fake.reset()
    fake.responder = JudgeBehaviours({"gpt-4o": DriftingJudge(0, 0.3)})
    second = judge_dataset(conn, _config(settings, fake), name, run_id="night-2")
    judge_dataset(conn, _config(settings, fake), name, run_id="night-2")  # rerun: no new row
    rows = load_record(conn, name)
    assert [(r.judge, r.run_id) for r in rows] == [
        (1, first.run_id), (1, "night-2"), (2, first.run_id), (2, "night-2")]
    night1 = rows[1]
    assert night1.anchor_flip_rate == second.anchors[0].flip_rate > 0
    assert rows[3].anchor_flip_rate == 0.0

    # a new judge 1 model: a row of its own, with its own figures
    fake.reset()
    fake.responder = JudgeBehaviours({"gpt-4o-mini": NoisyJudge(0.3)})
    third = judge_dataset(conn, _config(settings, fake, judge1="openai:gpt-4o-mini"), name)
    rows = load_record(conn, name)
    new = [r for r in rows if r.judge_spec == "openai:gpt-4o-mini"]
    assert [r.run_id for r in new] == [third.run_id]
    assert new[0].retest_flip_rate == third.retest[0].agreement.flip_rate > 0
    assert new[0].anchor_flip_rate == third.anchors[0].flip_rate
    assert len([r for r in rows if r.judge_spec == "openai:gpt-4o"]) == 2

    # shown by `eval-harness agreement` (its Markdown) and the report's agreement section
    agreement = dataset_agreement(conn, name, settings.agreement)
    text = format_agreement_markdown(agreement)
    assert "## Judges' record" in text
    as_json = json.loads(json.dumps(agreement.to_dict(), allow_nan=False))  # `agreement --json`
    assert len(as_json["record"]) == 6 and as_json["record"][0]["recorded_at"].startswith("20")
    record = text.split("## Judges' record", 1)[1]
    assert record.count("| openai:gpt-4o |") == 2 and "| openai:gpt-4o-mini |" in record
    section = agreement_section(conn, settings, name).section
    tables = [b for b in section.blocks if isinstance(b, Table) and b.caption
              and b.caption.startswith("Judges' record")]
    assert len(tables) == 1 and len(tables[0].rows) == 6  # judge 1: 2 + 1, judge 2: 3
    assert tables[0].columns[:3] == ("date", "judge", "spec")
