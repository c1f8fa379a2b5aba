"""The offline grounding judge on hand-made long sources: alignment, conflicts, "cannot tell"."""

from __future__ import annotations

import json

import pytest

from eval_harness.judges.local.grounding import (
    WHOLE_SOURCE_CHARS,
    Claim,
    SourceIndex,
    align_answer,
    checkable_claims,
    figures,
)
from eval_harness.judges.local.relevance import check_grounding_locally, claim_support
from eval_harness.judges.local.text import sentence_bounds
from eval_harness.judges.local.verdicts import (
    CANNOT_TELL,
    CANNOT_TELL_MARGIN,
    SUPPORTED,
    UNSUPPORTED,
    check_grounding_aligned,
    verdict,
)
from eval_harness.judges.prompts import truncate

pytestmark = pytest.mark.unit

T = 0.66  # judges.local.lexical_support

# Unrelated filler, about 3,450 characters of it, in sentences that share common words
# (years, "the", "was", "of") with the facts below but not the facts themselves.
FILLER = " ".join([
    "The harbour of the old town was rebuilt after the storm of 1953 and now hosts a market.",
    "Local fishermen sell mackerel, herring and crab there every morning except on Sundays.",
    "A narrow-gauge railway once linked the harbour to the quarries in the hills behind it.",
    "The quarries closed in the 1960s, and the line was turned into a footpath for walkers.",
    "In summer a ferry crosses to the island twice a day, weather permitting.",
    "The island has a lighthouse, a chapel and a colony of puffins that nest on its cliffs.",
    "Birdwatchers count the puffins each June; the colony has grown for a decade.",
    "The chapel is said to date from the twelfth century, although it was restored later.",
    "Visitors are asked to keep to the marked paths so that the burrows are not disturbed.",
    "The town museum shows tools from the quarries and photographs of the railway.",
] * 4)

FACT = ("The bridge over the river Wear was opened in 1929 and carries 18,000 vehicles a "
        "day.")
SECOND = "Its engineer, Ralph Freeman, later designed the Sydney Harbour Bridge."
THIRD = "The bridge was not damaged in the floods of 1771, which destroyed its predecessor."


def long_source(*facts: str) -> str:
    """The facts spread through about 3,450 characters of filler."""
    sentences = sentence_bounds(FILLER)
    step = len(sentences) // (len(facts) + 1)
    parts, previous = [], 0
    for k, fact in enumerate(facts, start=1):
        cut = sentences[k * step][0]
        parts += [FILLER[previous:cut].strip(), fact]
        previous = cut
    parts.append(FILLER[previous:].strip())
    return " ".join(parts)


def verdicts(answer: str, *sources: str) -> list[str]:
    return [c.verdict for c in check_grounding_aligned(answer, list(sources), T).claims]


def test_a_claim_is_aligned_with_its_sentence_deep_inside_a_long_source():
    source = long_source(FACT)
    assert len(source) > 3000
    grounding = check_grounding_aligned(
        "The bridge over the Wear opened in 1929 and carries 18,000 vehicles a day.",
        ["An unrelated first source about puffins.", source], T)
    (claim,) = grounding.claims
    assert claim.verdict == SUPPORTED and claim.supported and claim.source == 2
    start, end = claim.evidence["start"], claim.evidence["end"]
    assert FACT in source[start:end] and end - start < 3 * len(FACT)  # a small span, not all
    assert claim.evidence["text"] == source[start:end]
    json.dumps(grounding.to_dict())  # what the gate stores


@pytest.mark.parametrize("claim, conflict", [
    ("The bridge over the river Wear was opened in 1931 and carries 18,000 vehicles a day.",
     "figures not in the span: 1931"),
    ("The bridge over the river Wear was opened in 1929 and carries 81,000 vehicles a day.",
     "figures not in the span: 81000"),
    ("The bridge over the river Tyne was opened in 1929 and carries 18,000 vehicles a day.",
     "names not in the span: tyne"),
    ("The bridge over the river Wear was not opened in 1929.",
     "the claim is negated, the span is not"),
])
def test_a_wrong_figure_name_or_negation_beside_a_matching_span_is_not_supported(claim,
                                                                                  conflict):
    grounding = check_grounding_aligned(claim, [long_source(FACT)], T)
    (check,) = grounding.claims
    assert not check.supported and check.verdict in (UNSUPPORTED, CANNOT_TELL)
    assert conflict in check.conflict["conflicts"]
    assert check.conflict["support"] >= T  # the words alone would have passed it
    assert FACT in check.conflict["text"]


def test_a_number_word_matches_its_digits_and_one_is_no_figure():
    assert figures("two platinum and five gold albums, 1,200 copies") == {"2", "5", "1200"}
    assert figures("one of the biggest bands") == frozenset()
    source = "The duo has earned two platinum and five gold albums."
    assert verdicts("They have earned 2 platinum and 5 gold albums.", source) == [SUPPORTED]
    assert verdicts("They have earned 3 platinum and 5 gold albums.", source) != [SUPPORTED]


def test_claims_supported_by_different_parts_of_one_long_source_all_pass():
    source = long_source(FACT, SECOND, THIRD)
    answer = ("The Wear bridge opened in 1929 and carries 18,000 vehicles a day [1]. "
              "Its engineer Ralph Freeman later designed the Sydney Harbour Bridge [1]. "
              "The bridge was not damaged in the floods of 1771 [1].")
    grounding = check_grounding_aligned(answer, [source], T)
    assert [c.verdict for c in grounding.claims] == [SUPPORTED] * 3
    spans = [(c.evidence["start"], c.evidence["end"]) for c in grounding.claims]
    assert len(set(spans)) == 3 and spans == sorted(spans)  # three places, in order


def test_words_scattered_over_a_long_source_do_not_support_a_claim():
    # every word of the claim is somewhere in the source, never together: the replaced
    # judge (best window including the whole source) passes it, the aligned one does not
    source = long_source(FACT, SECOND)
    claim = "Ralph Freeman sold mackerel and herring from the lighthouse chapel every summer."
    assert check_grounding_locally(claim, [source], claim_support, 0.73).claims[0].supported
    assert verdicts(claim, source) == [UNSUPPORTED]


def test_a_short_source_is_also_a_span_as_a_whole():
    source = ("The AdipoChaser mouse labels adipocytes. It was fed a high-fat diet. "
              "Beige cells grew.")
    assert len(source) <= WHOLE_SOURCE_CHARS
    runs = SourceIndex(source, 1).runs
    assert (0, 3) in runs and len(runs) == 3 + 2 + 1
    index = SourceIndex(long_source(FACT), 1)  # never a long source whole: units and pairs
    assert len(index.units) > 30 and all(width <= 2 for _, width in index.runs)


def test_a_cut_source_makes_what_it_may_hide_cannot_tell():
    source = long_source(FACT)
    cut = truncate(source, 500)
    assert cut.endswith("[...]") and FACT not in cut
    grounding = check_grounding_aligned(
        "The bridge over the river Wear was opened in 1929 and carries 18,000 vehicles a day.",
        [cut], T)
    assert grounding.sources_cut == (1,)
    assert [c.verdict for c in grounding.claims] == [CANNOT_TELL]
    assert grounding.supported_share == 0.0 and grounding.share_bounds == (0.0, 1.0)


def test_the_verdict_band():
    assert verdict(T, T) == SUPPORTED
    assert verdict(T - CANNOT_TELL_MARGIN, T) == CANNOT_TELL
    assert verdict(T - CANNOT_TELL_MARGIN - 0.01, T) == UNSUPPORTED
    assert verdict(0.0, T, cut=True) == CANNOT_TELL


@pytest.mark.parametrize("answer", ["Yes.", "Sure!", "I agree!", "That's true.",
                                    "What about you?", "Do you like the bridge?", "96 %",
                                    "Yes, he is."])
def test_an_answer_with_no_checkable_claim_is_cannot_tell(answer):
    grounding = check_grounding_aligned(answer, [long_source(FACT)], T)
    assert grounding.claims == () and grounding.supported_share is None
    assert grounding.cannot_tell == "the answer makes no claim the local judge can check"


def test_claims_are_sentences_without_questions_particles_or_pleasantries():
    claims = checkable_claims("Great question! yes, the bridge opened in 1929. did you know "
                              "that? No, it was not rebuilt. Dr. Smith met J. K. Rowling in "
                              "the U.S. in 1990.")
    assert [c.text for c in claims] == ["yes, the bridge opened in 1929.",
                                       "No, it was not rebuilt.",
                                       "Dr. Smith met J. K. Rowling in the U.S. in 1990."]
    assert not Claim.parse("yes, the bridge opened in 1929.").negated
    assert Claim.parse("No, it was not rebuilt.").negated  # the particle is not the negation
    assert Claim.parse("Dr. Smith met J. K. Rowling.").names >= {"smith", "rowling"}


def test_the_closest_conflicting_span_and_the_missing_words_are_kept():
    (alignment,) = align_answer("The Wear bridge was opened in 1931.", [long_source(FACT)])
    assert alignment.rival is not None and FACT in alignment.rival.text
    assert alignment.conflicts == ("figures not in the span: 1931",)
    assert alignment.support < alignment.rival_support
