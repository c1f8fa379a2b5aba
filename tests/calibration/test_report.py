"""A dataset's calibration report (eval_harness.calibration.report): its file names, and each
grid point's P@5 interval in its table (and the CLI's text table)."""

from __future__ import annotations

import pytest

from calibration_corpus import FAST, corpus  # noqa: F401 (fixture)
from eval_harness.calibration.report import (
    calibration_markdown,
    dataset_file_stem,
    report_file_names,
)
from eval_harness.calibration.run import calibrate_dataset
from eval_harness.calibration.text import format_table
from eval_harness.metrics.calibration import grid_p_at_5_intervals
from eval_harness.settings import DecisionSettings


@pytest.mark.unit
def test_dataset_names_become_file_names_without_collisions():
    assert dataset_file_stem("scifact.v2-test_1") == "scifact.v2-test_1"
    odd, other = dataset_file_stem("prod store/eu"), dataset_file_stem("prod store?eu")
    assert odd.startswith("prod_store_eu-") and odd != other
    escape = dataset_file_stem("../etc")
    assert "/" not in escape and not escape.startswith(".") and escape.startswith("etc-")
    assert report_file_names("prod") == ("calibration-results-prod.md", "calibration-p5-prod.png")


def test_each_grid_point_shows_its_p_at_5_interval_at_the_decision_level(conn, corpus):
    """The grid points carry the query bootstrap of their per-query P@5 at level 1 - alpha
    (seeded like the rest), and the report's table and the CLI's text table show it."""
    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, seed=4,
                               decision=DecisionSettings(alpha=0.2), **FAST)
    low, high = grid_p_at_5_intervals(result.sweep.per_query_p_at_5, confidence=0.8,
                                      n_resamples=FAST["bootstrap_resamples"], seed=4)
    assert [(p.p_at_5_low, p.p_at_5_high) for p in result.grid] == list(zip(low, high))
    assert all(p.p_at_5_low <= p.p_at_5 <= p.p_at_5_high for p in result.grid)
    assert any(p.p_at_5_low < p.p_at_5_high for p in result.grid)  # 12 queries: not exact
    markdown, text = calibration_markdown(result), format_table(result)
    assert "| semantic | keyword | P@5 | P@5 interval | Recall@5 |" in markdown
    assert "P@5 interval" in text.splitlines()[3]  # the text table's header
    for point in result.grid:
        shown = f"[{point.p_at_5_low:.4f}, {point.p_at_5_high:.4f}]"
        assert f"| {point.p_at_5:.4f} | {shown} |" in markdown
        assert f"{point.p_at_5:6.4f}  {shown:>16}" in text
    note = ("P@5 interval: 80% percentile bootstrap over the 12 queries (500 resamples, "
            "seeded)")
    assert note in markdown and note in text
    data = result.to_dict()["grid"]
    assert [(p["p_at_5_low"], p["p_at_5_high"]) for p in data] == list(zip(low, high))
