"""The format compliance gate (eval_harness.gates.format_compliance).

Every expected value below was worked out by hand from the rules in the module docstring;
the comment next to it shows the count.
"""

from __future__ import annotations

import pytest

from eval_harness.gates.format_compliance import FORMAT_COMPLIANCE_THRESHOLD, format_compliance

pytestmark = pytest.mark.unit


# --- format_compliance -----------------------------------------------------------------------

CLEAN_ANSWER = """## Retrieval

Hybrid search combines BM25 and dense vectors [1]. Reranking helps [2][3].

- Retrieve candidates [1-3]
- Rerank them [2]

```bash
# a comment, not a heading
-
curl http://x/?q=[9]
```

Call `f([7])` to see it.
"""


def test_clean_answer_scores_one():
    result = format_compliance(CLEAN_ANSWER)
    assert result.gate == "format_compliance"
    assert (result.score, result.passed, result.threshold) == (1.0, True, 0.95)
    assert result.details["issues"] == []
    assert result.details["issue_types"] == []


@pytest.mark.parametrize(("answer", "expected_issue"), [
    ("Text [1].\n\n## \n\nMore.", {"type": "empty_heading", "line": 3, "snippet": "##"}),
    ("Text [1].\n#", {"type": "empty_heading", "line": 2, "snippet": "#"}),
    ("- one [1]\n-\n- three", {"type": "empty_list_item", "line": 2, "snippet": "-"}),
    ("1. one [1]\n2.  \n3. three", {"type": "empty_list_item", "line": 2, "snippet": "2."}),
    ("See [the docs]() for more [1].",
     {"type": "empty_link", "line": 1, "snippet": "See [the docs]() for more [1]."}),
    ("A picture ![chart]( ) [1].",
     {"type": "empty_link", "line": 1, "snippet": "A picture ![chart]( ) [1]."}),
    ("First [1].\nThird [3].",
     {"type": "non_sequential_citations", "line": 2, "snippet": "Third [3].",
      "marker": "[3]", "cited": [1, 3], "missing": [2]}),
    ("Only the second source [2].",
     {"type": "non_sequential_citations", "line": 1, "snippet": "Only the second source [2].",
      "marker": "[2]", "cited": [2], "missing": [1]}),
    ("Zero is no source [0][1].",
     {"type": "non_sequential_citations", "line": 1, "snippet": "Zero is no source [0][1].",
      "marker": "[0]", "cited": [0, 1], "missing": []}),
    ("Code [1]:\n\n```python\nprint(1)\n",
     {"type": "unclosed_code_fence", "line": 3, "snippet": "```python"}),
])
def test_each_issue_type_alone_costs_one_tenth(answer, expected_issue):
    result = format_compliance(answer)
    assert result.score == 0.9
    assert result.passed is False  # 0.9 < 0.95: a single issue fails the gate
    assert result.details["issues"] == [expected_issue]
    assert result.details["issue_types"] == [expected_issue["type"]]


def test_penalty_is_per_issue_type_not_per_occurrence():
    answer = "##\n\n###\n\n-\n\n*\n\nText [1]."
    result = format_compliance(answer)
    # two types (empty_heading x2, empty_list_item x2): 1 - 2 * 0.1
    assert result.score == 0.8
    assert result.details["issue_count"] == 4
    assert [issue["line"] for issue in result.details["issues"]] == [1, 3, 5, 7]


def test_four_issue_types_listed_by_line():
    answer = "# Title\n\n##\n\nSome text [1].\n\n- item\n-\n\nA [link]() here [3].\n"
    result = format_compliance(answer)
    assert result.score == 0.6  # 4 types: 1 - 4 * 0.1
    assert result.details["issues"] == [
        {"type": "empty_heading", "line": 3, "snippet": "##"},
        {"type": "empty_list_item", "line": 8, "snippet": "-"},
        {"type": "empty_link", "line": 10, "snippet": "A [link]() here [3]."},
        {"type": "non_sequential_citations", "line": 10, "snippet": "A [link]() here [3].",
         "marker": "[3]", "cited": [1, 3], "missing": [2]},
    ]


def test_all_five_issue_types_score_one_half():
    answer = "##\n\n-\n\n[x]() [2]\n\n~~~\ncode"
    result = format_compliance(answer)
    assert result.score == 0.5  # 5 types: 1 - 5 * 0.1
    assert result.details["issue_types"] == ["empty_heading", "empty_link", "empty_list_item",
                                             "non_sequential_citations", "unclosed_code_fence"]


def test_three_issue_types_score_exactly_seven_tenths():
    result = format_compliance("##\n\n-\n\n[x]()")
    assert result.score == 0.7


@pytest.mark.parametrize("answer", [
    "B [2]. A [1].",            # order of appearance does not matter
    "All [1-3]. Again [2].",    # a range cites every number in it
    "Both [1, 2]. Then [3].",
    "Range with an en dash [1–2].",
])
def test_sequential_citations(answer):
    assert format_compliance(answer).details["issue_types"] == []


def test_fences_close_only_with_the_same_character_and_enough_of_it():
    closed = "~~~\ncode\n~~~~\n\nText [1]."
    assert format_compliance(closed).score == 1.0
    not_closed_by_tildes = "````\ncode\n~~~~\n```\n\nText [1]."
    result = format_compliance(not_closed_by_tildes)
    assert result.details["issues"] == [
        {"type": "unclosed_code_fence", "line": 1, "snippet": "````"}]


def test_empty_answer_has_no_format_issue():
    result = format_compliance("")
    assert (result.score, result.passed) == (1.0, True)


def test_format_threshold_is_configurable():
    assert format_compliance("Text [2].", threshold=0.9).passed is True
    assert FORMAT_COMPLIANCE_THRESHOLD == 0.95
