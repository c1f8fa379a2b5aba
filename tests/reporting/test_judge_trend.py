"""The judges by run date in the run report: a figure and a table from the judges' record,
rendered with no run recorded, with one, and with several (two judge specs, one of them a
changed model), asserted on the figure objects and the rendered Markdown and HTML."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from eval_harness.judges.dual.record import RecordRow
from eval_harness.reporting.blocks import Figure, Section, Table
from eval_harness.reporting.judge_trend import PLOT_NAME, judge_trend_blocks, judge_trend_figure
from eval_harness.reporting.render import render_html, render_markdown

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
DAY0 = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)


def row(day: int, judge: int, spec: str, *, flips=0.02, low=0.01, high=0.07, self_flips=0.03,
        other=0.81, people=0.7) -> RecordRow:
    return RecordRow(
        recorded_at=DAY0 + timedelta(days=day, seconds=judge), run_id=f"night-{day}",
        dataset="d", judge=judge, judge_spec=spec, model=spec.split(":")[1], server=None,
        prompt_version="v1", retest_flip_rate=self_flips, retest_alpha=0.9, kappa_other=other,
        kappa_other_low=other - 0.1, kappa_other_high=other + 0.05, human_pairs=10,
        human_agreement=0.9, anchor_flip_rate=flips, anchor_flip_low=low,
        anchor_flip_high=high, people_kappa=people,
        people_kappa_low=None if people is None else people - 0.2,
        people_kappa_high=None if people is None else people + 0.1,
        people_pairs=40, people_queries=12)


def rendered(blocks) -> tuple[str, str]:
    section = Section("agreement", "Dual-judge agreement", tuple(blocks))
    return (render_markdown([section], title="run"), render_html([section], title="run"))


@pytest.mark.unit
def test_no_run_recorded_shows_nothing():
    assert judge_trend_blocks([]) == [] and judge_trend_figure([]) is None


@pytest.mark.unit
def test_one_run_date_is_a_figure_and_a_row_per_judge():
    rows = [row(0, 1, "openai:gpt-4o"), row(0, 2, "anthropic:claude-haiku-4-5", people=None)]
    figure, table = judge_trend_blocks(rows)
    assert isinstance(figure, Figure) and figure.file_name == PLOT_NAME
    assert figure.png.startswith(PNG_MAGIC)
    assert isinstance(table, Table) and len(table.rows) == 2
    judge1 = next(r for r in table.rows if r[1] == "1")
    assert judge1[0] == "2026-11-20 02:00" and judge1[3] == "2.0% [1.0%, 7.0%]"
    assert judge1[4] == "3.0%" and judge1[5] == "0.810 [0.710, 0.860]"
    assert judge1[6] == "0.700 [0.500, 0.800] (n 40)"
    assert next(r for r in table.rows if r[1] == "2")[6] == "n/a"  # no people kappa there
    flips, kappas = judge_trend_figure(rows).axes
    assert [t.get_text() for t in flips.get_xticklabels() if t.get_text()] == ["11-20\n02:00"]
    markdown, html = rendered([figure, table])
    assert "2.0% [1.0%, 7.0%]" in markdown and "2.0% [1.0%, 7.0%]" in html
    assert PLOT_NAME in markdown


def test_several_dates_and_a_changed_model_each_get_their_series():
    rows = [row(day, 1, "openai:gpt-4o", flips=0.02 * (day + 1), low=0.01 * day,
                high=0.05 + 0.02 * day) for day in range(3)]
    rows += [row(day, 2, "anthropic:claude-haiku-4-5", flips=0.0, low=0.0, high=0.04)
             for day in range(3)]
    changed = replace(row(3, 1, "openai:gpt-4.1", flips=0.12, low=0.08, high=0.17),
                      retest_flip_rate=None)
    rows.append(changed)
    figure = judge_trend_figure(rows)
    flips, kappas = figure.axes
    labels = [t.get_text() for t in flips.get_xticklabels() if t.get_text()]
    assert labels == ["11-20\n02:00", "11-21\n02:00", "11-22\n02:00", "11-23\n02:00"]
    series = {text.get_text() for text in flips.get_legend().get_texts()}
    assert {"1: openai:gpt-4o (prompt v1) anchors", "1: openai:gpt-4.1 (prompt v1) anchors",
            "2: anthropic:claude-haiku-4-5 (prompt v1) anchors"} <= series
    assert "1: openai:gpt-4.1 (prompt v1) self" not in series  # not measured: no point
    # the anchor flip rates are drawn with their interval: the changed judge's bar 0.08..0.17
    bars = [c for c in flips.collections if len(c.get_segments())]
    spans = {tuple(round(v, 4) for v in (seg[0][1], seg[1][1]))
             for c in bars for seg in c.get_segments()}
    assert (0.08, 0.17) in spans and (0.0, 0.05) in spans
    kappa_labels = {text.get_text() for text in kappas.get_legend().get_texts()}
    assert "1: openai:gpt-4o (prompt v1) people" in kappa_labels
    blocks = judge_trend_blocks(rows)
    table = blocks[1]
    assert len(table.rows) == 7
    gpt4o = [r for r in table.rows if r[2] == "openai:gpt-4o (prompt v1)"]
    assert [r[0][:10] for r in gpt4o] == ["2026-11-22", "2026-11-21", "2026-11-20"]
    assert gpt4o[0][3] == "6.0% [2.0%, 9.0%]"
    markdown, _ = rendered(blocks)
    assert markdown.count("openai:gpt-4.1 (prompt v1)") == 1


@pytest.mark.unit
@pytest.mark.parametrize("runs", [1, 4])
def test_a_record_without_any_figure_measured_has_a_table_but_no_plot(runs):
    empty = [replace(row(day, 1, "local:lexical"), retest_flip_rate=None, kappa_other=None,
                     anchor_flip_rate=None, people_kappa=None) for day in range(runs)]
    blocks = judge_trend_blocks(empty)
    assert [type(b) for b in blocks] == [Table] and len(blocks[0].rows) == runs
    assert set(blocks[0].rows[0][3:]) == {"n/a"}
