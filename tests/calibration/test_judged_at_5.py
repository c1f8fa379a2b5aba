"""Judged@5 against calibration.min_judged (eval_harness.calibration.judged_at_5): which grid
weights' P@5 is a lower bound, the sentence every output shows, and the calibration's
Judged@5 per weight on a real store against a plain loop over hybrid search's rankings."""

from __future__ import annotations

import json
import math

import pytest

from calibration_corpus import FAST, corpus  # noqa: F401 (fixture)
from eval_harness.calibration.judged_at_5 import judged_summary, share_text
from eval_harness.calibration.report import calibration_markdown
from eval_harness.calibration.run import calibrate_dataset
from eval_harness.calibration.text import format_table
from eval_harness.metrics import ranking
from eval_harness.retrieval.report import load_qrels
from eval_harness.retrieval.sweep import rank_top_k

# (semantic, keyword, Judged@5) of a five-point grid: 0.6 is the best, 0.7 the weights in force
GRID = [(0.5, 0.5, 0.95), (0.6, 0.4, 0.74), (0.7, 0.3, 0.85), (0.8, 0.2, 0.6), (0.9, 0.1, 0.92)]


@pytest.mark.unit
def test_named_weights_below_min_judged_get_the_sentence():
    summary = judged_summary("cranfield", GRID, min_judged=0.9,
                             named={"best": 0.6, "in force": 0.7})
    assert summary.is_lower_bound and summary.lowest == 0.6
    assert summary.lines() == [
        "P@5 at 0.60 / 0.40 (best) is a lower bound: only 74% of its top-5 documents are "
        "judged (calibration.min_judged 0.9); run `eval-harness judge --dataset cranfield "
        "--grid-pool` to judge the rest, then `eval-harness calibrate --dataset cranfield "
        "--labels judges` to calibrate on labels that cover every top 5",
        "P@5 at 0.70 / 0.30 (in force) is a lower bound: only 85% of its top-5 documents are "
        "judged (calibration.min_judged 0.9); run `eval-harness judge --dataset cranfield "
        "--grid-pool` to judge the rest, then `eval-harness calibrate --dataset cranfield "
        "--labels judges` to calibrate on labels that cover every top 5",
        "Judged@5 is below calibration.min_judged 0.9 at 1 more grid weight (lowest 60% at "
        "0.80 / 0.20): their P@5 is a lower bound too"]
    data = summary.to_dict()
    assert [p["roles"] for p in data["named"]] == [["best"], ["in force"]]
    assert [p["semantic_weight"] for p in data["others"]] == [0.8]
    json.dumps(data, allow_nan=False)


@pytest.mark.unit
def test_one_weight_both_best_and_in_force_is_named_once():
    summary = judged_summary("d", GRID, min_judged=0.8, named={"best": 0.6, "in force": 0.6})
    lines = summary.lines()
    assert len(lines) == 2 and lines[0].startswith("P@5 at 0.60 / 0.40 (best, in force) is")
    assert lines[1].startswith("Judged@5 is below calibration.min_judged 0.8 at 1 more grid "
                               "weight (lowest 60% at 0.80 / 0.20)")
    two_others = judged_summary("d", GRID, min_judged=0.9, named={"best": 0.5})
    assert two_others.lines() == [
        "Judged@5 is below calibration.min_judged 0.9 at 3 grid weights (lowest 60% at "
        "0.80 / 0.20): their P@5 is a lower bound (`eval-harness judge --dataset d "
        "--grid-pool` labels the rest)"]


@pytest.mark.unit
def test_no_sentence_at_or_above_min_judged_or_when_not_recorded():
    assert judged_summary("d", GRID, min_judged=0.6, named={"best": 0.6}).lines() == []
    assert not judged_summary("d", GRID, min_judged=0.0, named={"best": 0.6}).is_lower_bound
    old = [(s, k, math.nan) for s, k, _ in GRID]  # a history written before Judged@5
    unknown = judged_summary("d", old, min_judged=0.9, named={"best": 0.6})
    assert unknown.lines() == [] and unknown.lowest is None
    # a weight in force that is not on the grid is not named; the grid point is "other"
    off_grid = judged_summary("d", GRID, min_judged=0.8, named={"in force": 0.65})
    assert off_grid.named == () and len(off_grid.others) == 2


@pytest.mark.unit
def test_share_text_stays_visibly_below_the_threshold():
    assert share_text(0.74, 0.9) == "74%"
    assert share_text(0.895, 0.9) == "89.5%"  # "90%" would read as meeting 0.9
    assert share_text(0.8999, 0.9) == "89.99%"


def test_calibration_judged_at_5_equals_a_loop_and_every_output_says_lower_bound(conn, corpus):
    """The corpus' qrels list only relevant documents, so most top-5 documents are
    unlabelled: Judged@5 is well below 1 and P@5 a lower bound at every weight."""
    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, current_weight=0.7,
                               min_judged=1.0, **FAST)
    qrels = load_qrels(conn, corpus["name"])
    for point in result.grid:
        tops = rank_top_k(result.candidates, point.semantic_weight,
                          keyword_weight=point.keyword_weight, k=5)
        loop = [ranking.judged_at_k(top.tolist(), qrels[q], k=5)
                for q, top in zip(result.candidates.query_ids, tops)]
        assert point.judged_at_5 == pytest.approx(sum(loop) / len(loop), abs=1e-12)
    lowest = min(p.judged_at_5 for p in result.grid)
    assert lowest > 0 and max(p.judged_at_5 for p in result.grid) < 1
    best = result.best
    sentence = (f"P@5 at {_pair(best)} (best{', in force' if best == result.default else ''}) "
                f"is a lower bound: only {share_text(best.judged_at_5, 1.0)} of its top-5 "
                f"documents are judged (calibration.min_judged 1); run `eval-harness judge "
                f"--dataset {corpus['name']} --grid-pool` to judge the rest")
    data = result.to_dict()
    assert data["judged"]["lower_bound"] and data["judged"]["min_judged"] == 1.0
    assert data["judged"]["sentences"][0].startswith(sentence)
    assert [p["judged_at_5"] for p in data["grid"]] == [p.judged_at_5 for p in result.grid]
    assert sentence in format_table(result)
    assert f"- **{sentence}" in calibration_markdown(result)
    assert "Judged@5" in format_table(result) and "| Judged@5 |" in calibration_markdown(result)

    # at a threshold every weight meets, no output says "lower bound"
    enough = calibrate_dataset(conn, corpus["name"], candidate_depth=10, min_judged=lowest,
                               **FAST)
    assert enough.to_dict()["judged"]["sentences"] == [] and not enough.judged.is_lower_bound
    assert "lower bound" not in format_table(enough)
    assert "is a lower bound:" not in calibration_markdown(enough)


def _pair(point) -> str:
    from eval_harness.calibration.grid import weight_label

    return f"{weight_label(point.semantic_weight)} / {weight_label(point.keyword_weight)}"
