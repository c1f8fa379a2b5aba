"""citation_coverage with sources missing from the corpus
(eval_harness.gates.citation_coverage): an answer read in place lists a corpus id that is no
document; a marker citing it is invalid, and the result names it."""

from __future__ import annotations

import pytest

from eval_harness.gates.citation_coverage import citation_coverage

pytestmark = pytest.mark.unit

MISSING = {"id": 99999, "text": "", "missing": True}
FOUND = {"id": 5, "text": "Coffee raises blood pressure briefly."}
TWO_CLAIMS = "Coffee raises blood pressure briefly [1]. Sleep helps memory in older adults [2]."


def test_a_marker_citing_a_missing_source_is_invalid_and_halves_the_score():
    result = citation_coverage(TWO_CLAIMS, [FOUND, MISSING])
    # 2 of 2 claims cited = 1.0, halved for [2] = 0.5
    assert result.score == pytest.approx(0.5) and not result.passed
    assert result.details["invalid_citations"] == [2]
    assert result.details["missing_sources"] == [{"number": 2, "id": 99999}]


def test_a_missing_source_no_marker_cites_is_named_but_not_penalised():
    result = citation_coverage("Coffee raises blood pressure briefly [1].",
                               [FOUND, MISSING])
    assert result.score == 1.0 and result.details["invalid_citations"] == []
    assert result.details["missing_sources"] == [{"number": 2, "id": 99999}]


def test_out_of_range_and_missing_are_one_halving():
    result = citation_coverage(TWO_CLAIMS + " Tea calms the nerves of most adults [3].",
                               [FOUND, MISSING])
    # 3 of 3 claims cited = 1.0; [2] missing and [3] out of range: halved once = 0.5
    assert result.score == pytest.approx(0.5)
    assert result.details["invalid_citations"] == [2, 3]


def test_sources_without_the_mark_score_as_before():
    result = citation_coverage(TWO_CLAIMS, [FOUND, {"id": 7, "text": ""}])
    assert result.score == 1.0 and "missing_sources" not in result.details
