"""The citation coverage gate (eval_harness.gates.citation_coverage): citation extraction,
sentence splitting, claim sentences, coverage; properties of both rule-based gates.

Every expected value below was worked out by hand from the rules in the module docstrings;
the comment next to it shows the count.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from eval_harness.gates.citation_coverage import (
    CITATION_COVERAGE_THRESHOLD,
    Citation,
    citation_coverage,
    extract_citations,
    is_claim_sentence,
    split_sentences,
)
from eval_harness.gates.format_compliance import format_compliance
from gate_sources import sources

# --- citation extraction ---------------------------------------------------------------------

@pytest.mark.unit
def test_accepted_citation_forms():
    answer = "A [1]. B [1][2]. C [1, 2]. D [2;3]. E [1-3]. F [2–4]. G [1, 3-4]. H [ 5 ]. I [3-1]."
    assert [(c.marker, c.numbers) for c in extract_citations(answer)] == [
        ("[1]", (1,)), ("[1]", (1,)), ("[2]", (2,)), ("[1, 2]", (1, 2)), ("[2;3]", (2, 3)),
        ("[1-3]", (1, 2, 3)), ("[2–4]", (2, 3, 4)), ("[1, 3-4]", (1, 3, 4)), ("[ 5 ]", (5,)),
        ("[3-1]", (1, 2, 3)),
    ]


@pytest.mark.unit
def test_what_is_not_a_citation():
    answer = "Footnote [^1], year [2020], letters [a], code `x[1]`.\n\n```\ny = z[2]\n```\n"
    assert extract_citations(answer) == []


@pytest.mark.unit
def test_citation_lines_are_lines_of_the_original_answer():
    answer = "Intro [1].\n\n```\nline [9]\n```\n\nAfter code [2]."
    assert extract_citations(answer) == [Citation("[1]", (1,), 1), Citation("[2]", (2,), 7)]


# --- sentence splitting ----------------------------------------------------------------------

@pytest.mark.unit
def test_abbreviations_do_not_end_sentences():
    answer = ("Dr. Smith compared tools, e.g. Python and Rust. Results from the U.S. Census "
              "agree, i.e. They match. Lewis et al. (2020) found it vs. Baselines. Done.")
    assert split_sentences(answer) == [
        "Dr. Smith compared tools, e.g. Python and Rust.",
        "Results from the U.S. Census agree, i.e. They match.",
        "Lewis et al. (2020) found it vs. Baselines.",
        "Done.",
    ]


@pytest.mark.unit
def test_numbers_initials_and_lowercase_continuations():
    answer = ("See No. 5 for details. Fig. 3 shows it. The plan by J. Smith was cheap. "
              "Apples, pears, etc. and more fruit. The answer is no. The end.")
    assert split_sentences(answer) == [
        "See No. 5 for details.",
        "Fig. 3 shows it.",
        "The plan by J. Smith was cheap.",
        "Apples, pears, etc. and more fruit.",
        "The answer is no.",
        "The end.",
    ]


@pytest.mark.unit
def test_decimals_and_urls_are_not_split():
    answer = ("Recall rose by 3.14 points to 0.62 overall. See https://example.com/a.b?x=1.5 "
              "for data. Visit www.example.org. It has more.")
    assert split_sentences(answer) == [
        "Recall rose by 3.14 points to 0.62 overall.",
        "See https://example.com/a.b?x=1.5 for data.",
        "Visit www.example.org.",
        "It has more.",
    ]


@pytest.mark.unit
def test_question_exclamation_and_markers_after_the_stop():
    answer = "Wait! Is it true? Yes. RAG helps.[1] It works. [2] Really well [3]."
    assert split_sentences(answer) == [
        "Wait!", "Is it true?", "Yes.", "RAG helps.[1]", "It works. [2]", "Really well [3].",
    ]


@pytest.mark.unit
def test_each_list_item_is_one_unit():
    answer = ("Intro text here:\n\n"
              "- First item. Still the first item [1]\n"
              "- Second item\n  continues here.\n"
              "* Third\n"
              "1. Ordered item [2]\n"
              "2) Another one\n"
              "-\n"
              "After the list.")
    assert split_sentences(answer) == [
        "Intro text here:",
        "First item. Still the first item [1]",
        "Second item continues here.",
        "Third",
        "Ordered item [2]",
        "Another one",
        "After the list.",  # an empty item has nothing for the line to continue
    ]


@pytest.mark.unit
def test_a_line_right_after_a_list_item_continues_it():
    assert split_sentences("- An item\nstill the item. Yes.\n\nNew paragraph.") == [
        "An item still the item. Yes.", "New paragraph."]


@pytest.mark.unit
def test_headings_and_code_are_not_units():
    answer = ("# Title\n\n## Section [1]\nText one.\n\n"
              "```python\nx = 1. Not a sentence\n```\n\n"
              "Use `a.b()` now. Done.\n\n"
              "Setext Heading\n==============\n\n"
              "Another heading\n---\n\n"
              "***\n\n"
              "Last line.")
    assert split_sentences(answer) == ["Text one.", "Use   now.", "Done.", "Last line."]


@pytest.mark.unit
def test_table_rows_blockquotes_and_paragraph_lines():
    answer = ("| Method | Recall |\n|---|---|\n| BM25 works well | 0.61 [1] |\n\n"
              "> Quoted claim one. Quoted claim two.\n\n"
              "A sentence that runs\nacross two lines. Next one.")
    assert split_sentences(answer) == [
        "| BM25 works well | 0.61 [1] |",
        "Quoted claim one.", "Quoted claim two.",
        "A sentence that runs across two lines.", "Next one.",
    ]


@pytest.mark.unit
def test_degenerate_splitting():
    assert split_sentences("") == []
    assert split_sentences("\n\n  \n") == []
    assert split_sentences("```\nonly code\n```") == []
    assert split_sentences("no stop at all") == ["no stop at all"]


# --- claim sentences -------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize(("unit", "expected"), [
    ("RAG reduces hallucination rates [1].", True),         # 4 words
    ("RAG reduces hallucinations [1].", False),              # 3 words
    ("In 2020 and 2021 [1] [2].", False),                    # words: In, and
    ("It doesn't work for GPT-4 models.", True),             # 6 words
    ("Does RAG reduce hallucination rates?", False),         # a question
    ("Does RAG reduce hallucination rates? [1]", False),     # a question, marker after it
    ("Does RAG reduce hallucination rates [1]?", False),
    ("The main steps are as follows:", False),              # a lead-in
    ("**The main steps are as follows:**", False),
    ("BM25 matches exact keywords well", True),              # no stop needed
])
def test_claim_sentence(unit, expected):
    assert is_claim_sentence(unit) is expected


@pytest.mark.unit
def test_claim_word_minimum_is_an_option():
    assert is_claim_sentence("It doesn't work for GPT-4 models.", min_words=6) is True
    assert is_claim_sentence("It doesn't work for GPT-4 models.", min_words=7) is False
    with pytest.raises(ValueError, match="min_claim_words must be a positive integer, got 0"):
        is_claim_sentence("text", min_words=0)


# --- citation_coverage -----------------------------------------------------------------------

COVERAGE_ANSWER = """## Overview [1]

Retrieval-augmented generation grounds answers in documents [1]. It reduces hallucinated \
facts in practice. Is that always true? Dr. Lewis et al. proposed the method in 2020 [2].

Key points:

- Dense retrievers embed queries and passages [1, 2]
- BM25 matches exact keywords well
- Fast

```python
print("not counted. Not at all [7]")
```
"""


@pytest.mark.unit
def test_coverage_counts_cited_claim_sentences():
    result = citation_coverage(COVERAGE_ANSWER, sources(2))
    # claims: "Retrieval-augmented ... [1]." cited, "It reduces ... practice." uncited,
    # "Dr. Lewis ... [2]." cited, "Dense retrievers ... [1, 2]" cited, "BM25 ... well" uncited;
    # not claims: the heading, the question, "Key points:", "Fast", the code block.
    assert result.gate == "citation_coverage"
    assert result.score == 0.6  # 3 / 5
    assert result.passed is False
    assert result.details == {
        "claim_sentences": 5,
        "cited_claim_sentences": 3,
        "coverage": 0.6,
        "cited_numbers": [1, 2],
        "invalid_citations": [],
        "source_count": 2,
        "uncited_claims": ["It reduces hallucinated facts in practice.",
                           "BM25 matches exact keywords well"],
        "min_claim_words": 4,
        "degenerate": None,
    }


@pytest.mark.unit
def test_invalid_citation_halves_the_score():
    result = citation_coverage(COVERAGE_ANSWER, sources(1))
    assert result.details["invalid_citations"] == [2]  # [2] and the 2 of [1, 2]
    assert result.details["coverage"] == 0.6
    assert result.score == 0.3  # 0.6 * 0.5


@pytest.mark.unit
def test_coverage_threshold_is_inclusive_and_configurable():
    cited = "- Claim number one is here [1]\n" * 7
    uncited = "- Claim number one is here\n" * 3
    result = citation_coverage(cited + uncited, sources(1))
    assert (result.score, result.passed) == (0.7, True)  # 7 / 10 >= 0.7
    assert CITATION_COVERAGE_THRESHOLD == 0.7
    assert citation_coverage(COVERAGE_ANSWER, sources(2), threshold=0.6).passed is True


@pytest.mark.unit
@pytest.mark.parametrize(("answer", "source_count", "invalid", "score"), [
    ("The first claim is cited [0].", 1, [0], 0.5),        # coverage 1.0, n < 1
    ("The first claim is cited [1-3].", 2, [3], 0.5),     # a range reaching past the sources
    ("The first claim is cited [1].", 0, [1], 0.5),       # no sources: every marker invalid
    ("The first claim is not cited.", 0, [], 0.0),
    ("## Heading [3]\n\nThe first claim is cited [1].", 1, [3], 0.5),  # headings checked too
    ("Two claims are made here [1]. Another claim without cites.", 2, [], 0.5),
])
def test_invalid_citations_and_missing_sources(answer, source_count, invalid, score):
    result = citation_coverage(answer, sources(source_count))
    assert result.details["invalid_citations"] == invalid
    assert result.score == score


@pytest.mark.unit
@pytest.mark.parametrize("answer", [
    "",
    "   \n\n",
    "# Only a heading\n\n## And another",
    "```\nsome code. With sentences [1].\n```",
    "Why? Really? Is it?",
    "Short. Too short [1].",
])
def test_no_claim_sentence_is_degenerate_and_fails(answer):
    result = citation_coverage(answer, sources(1))
    assert (result.score, result.passed) == (0.0, False)
    assert result.details["claim_sentences"] == 0
    assert result.details["degenerate"] == "no_claim_sentences"


@pytest.mark.unit
def test_uncited_claims_are_capped_but_counted():
    answer = "\n".join(f"- Uncited claim number {n} here" for n in range(15))
    result = citation_coverage(answer, sources(1))
    assert result.details["claim_sentences"] == 15
    assert len(result.details["uncited_claims"]) == 10
    assert result.details["uncited_claims"][0] == "Uncited claim number 0 here"


@pytest.mark.unit
def test_marker_outside_claims_does_not_make_a_claim_cited():
    # "[x]" is not a marker, so every "[" does not open one and each unit is searched.
    answer = "A claim with a [x] bracket here. A claim with a real cite here [1]."
    result = citation_coverage(answer, sources(1))
    assert (result.details["claim_sentences"], result.details["cited_claim_sentences"]) == (2, 1)


# --- properties ------------------------------------------------------------------------------

def pieces_of(tokens: list[str], max_size: int) -> st.SearchStrategy[str]:
    """Text glued from Markdown-ish tokens, so that the syntax actually turns up."""
    return st.lists(st.sampled_from(tokens), max_size=max_size).map("".join)


markdownish = pieces_of(list("abcXYZ019 .!?:,;-*+#|>[]()`~\n\t")
                        + ["[1]", "[2, 3]", "[0]", "e.g.", "Dr.", "```", "…", "\n- ", "\n## "],
                        max_size=120)


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(answer=markdownish, source_count=st.integers(min_value=0, max_value=4))
def test_scores_stay_in_range(answer, source_count):
    coverage = citation_coverage(answer, sources(source_count))
    assert 0.0 <= coverage.score <= 1.0
    assert coverage.passed == (coverage.score >= 0.7)
    fmt = format_compliance(answer)
    assert fmt.score in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
    assert fmt.score == round(1.0 - 0.1 * len(fmt.details["issue_types"]), 10)
    json.dumps(coverage.to_dict())
    json.dumps(fmt.to_dict())


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(answer=pieces_of(list("abcXYZ09 .!?:-*#[]()\n") + ["[1]", "Word "], max_size=80),
       code=pieces_of(list("abc09 .!?#-*[]()\n") + ["[7]"], max_size=40))
def test_a_closed_code_block_changes_nothing(answer, code):
    with_code = f"{answer}\n\n```\n{code}\n```\n"
    assert citation_coverage(with_code, sources(2)) == citation_coverage(answer, sources(2))
    assert format_compliance(with_code).details["issue_types"] == \
        format_compliance(answer).details["issue_types"]


@settings(max_examples=200, deadline=None)
@given(answer=markdownish)
def test_an_out_of_range_citation_exactly_halves(answer):
    valid = citation_coverage(answer, sources(1000))
    if valid.details["cited_numbers"] and valid.details["cited_numbers"][0] >= 1:
        invalid = citation_coverage(answer, sources(0))
        assert invalid.score == valid.score * 0.5


@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(answer=markdownish)
@example(answer="a```a\na[1]a```")  # Hypothesis: a code span over a line break hides [1]
def test_gate_counts_agree_with_the_public_helpers(answer):
    # The gate takes shortcuts for speed; recount the slow way from the documented helpers.
    claims = [unit for unit in split_sentences(answer) if is_claim_sentence(unit)]
    cited = [unit for unit in claims if extract_citations(unit)]
    details = citation_coverage(answer, sources(3)).details
    assert details["claim_sentences"] == len(claims)
    assert details["cited_claim_sentences"] == len(cited)


# --- fast paths give the same answers as the general rules -----------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("unit, expected", [
    ("Does RAG reduce hallucination rates? [١]", False),   # Unicode digit: still a marker
    ("Does RAG reduce hallucination rates?[1][2]", False),
    ("Does RAG reduce hallucination rates? [x]", True),    # "[x]" is no marker to look past
    ("RAG reduces hallucination rates.[1, 2]", True),
    ("Ça réduit les hallucinations, d’après l’étude.", True),  # non-ASCII words are words
    ("Ça réduit tout?", False),                            # 3 words and a question
])
def test_claim_sentence_fast_paths(unit, expected):
    assert is_claim_sentence(unit) is expected


@pytest.mark.unit
def test_sentence_ends_after_markers_digits_and_abbreviations():
    answer = ("It rose by 3.14 points [2]. Dr. Lewis agrees.[1] See No. 5 again. "
              "Use e.g. BM25 here. It ends 2020. Done.")
    assert split_sentences(answer) == [
        "It rose by 3.14 points [2].", "Dr. Lewis agrees.[1]", "See No. 5 again.",
        "Use e.g. BM25 here.", "It ends 2020.", "Done.",
    ]


@pytest.mark.unit
def test_thematic_breaks_and_list_items_that_look_alike():
    answer = "- - -\n\n- item one is here -\n\n* * *\n\n* item two is here *"
    assert split_sentences(answer) == ["item one is here -", "item two is here *"]


@pytest.mark.unit
@pytest.mark.parametrize("answer", [
    "\n- ```[1]e.g.e.g.",                                   # found by Hypothesis
    "- ```\n  Aspirin lowers the risk of attack [1].\n  ```",
    "> ```\n> Aspirin lowers the risk of attack [1].\n> ```",
    "1. ~~~ text\n   Aspirin lowers the risk of attack [1].\n   ~~~",
])
def test_a_fence_after_a_list_or_quote_marker_is_code(answer):
    assert not any("[1]" in unit for unit in split_sentences(answer))
    assert extract_citations(answer) == []
    assert citation_coverage(answer, sources(3)).details["claim_sentences"] == 0
