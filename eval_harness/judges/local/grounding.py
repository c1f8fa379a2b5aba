"""Offline grounding by alignment: each claim against the best small span of the sources.

The ``local:lexical`` grounding judge. A long source is never judged as one window (a long
article offers some window that "supports" almost any sentence), and never cut silently: it is
windowed. The verdicts (supported / unsupported / cannot tell) are in
:mod:`eval_harness.judges.local.verdicts`; the method and its validation against human
labels in benchmarks/grounding_validation.py and benchmarks/RESULTS.md ("Grounding validation").

Claims
    The answer's sentences (a lower-case start also begins one; abbreviations and initials do
    not end one), citation marks and Markdown headings left out, each with at least two words
    and a content word besides a leading answer particle ("Yes,", "No but", "Not really,").
    Not claims: a question (it asserts nothing), and a phatic sentence whose content words are
    all pleasantries ("I agree.", "That's true.", "Great question!").

Spans
    Each source is split into sentences; one longer than :data:`MAX_UNIT_CHARS` becomes
    overlapping windows of :data:`WINDOW_WORDS` words. A span is one such unit or two adjacent
    ones, and a source no longer than :data:`WHOLE_SOURCE_CHARS` (a short retrieved chunk, no
    longer than a pair can be) is also a span as a whole. Every claim is aligned with every
    span of every source; no span is longer than two units.

Support of a claim by a span
    The weighted share of the claim's words (stemmed; a number word counts as its digits)
    that the span holds: content words weigh 1 and must be in the span; function words weigh
    :data:`FUNCTION_WORD_WEIGHT` and may be in the span or within :data:`CONTEXT_UNITS`
    sentences of it (a grounded sentence borrows the source's wording, but "he", "was", "it's"
    need not sit in the very sentence that holds the fact).

Conflicts
    A span that lacks something the claim states cannot support it, however many words match:
    a figure (digits, or a number word from "two" up), a name (a capitalised word not at the
    start), or a negation ("not", "never", "n't", "non-", ...) when the span holds neither a
    negation nor a negative word ("forbidden", "unable", "lack", ...).

Signals used: word coverage, figures, negation, names (:data:`SIGNALS`). No semantic signal:
stored embeddings exist for whole documents, not for claims or spans, and the optional local
embedder (sentence-transformers) was not installed where the judge was validated, so no
embedding signal was measured and none is used.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from eval_harness.judges.local.text import (
    STOPWORDS,
    WORD,
    claim_sentences,
    sentence_bounds,
    stem,
    words,
)

SIGNALS = ("word coverage", "figures", "negation", "names")

FUNCTION_WORD_WEIGHT = 0.5
CONTEXT_UNITS = 2              # function words may sit this many sentences from the span
MAX_UNIT_CHARS = 300           # a longer sentence is windowed
WHOLE_SOURCE_CHARS = 2 * MAX_UNIT_CHARS  # a source this short is also a span as a whole
WINDOW_WORDS, WINDOW_STRIDE = 40, 20

_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_NON_SPACE = re.compile(r"\S+")
_PARTICLE = re.compile(r"^\s*(?:(?:yes|yeah|yep|no|nope|nah|oh|well|ok|okay|sure)\b"
                       r"|not really\b|not exactly\b)[\s,.!:;-]*(?:but\s+)?", re.IGNORECASE)
NEGATIONS = frozenset("""not no non never nor none nothing nobody neither cannot without
n't""".split())  # "non" as in "non-chromatin bound"
NEGATIVE_STEMS = ("forbid", "ban", "prohibit", "unable", "lack", "fail", "refus", "absen",
                  "deni", "declin", "reject")
CONTRACTIONS = frozenset("s t d m ll re ve".split())  # it's, can't, I'd, I'm, we'll, ...
FUNCTION_WORDS = STOPWORDS | NEGATIONS | CONTRACTIONS
# Fixed before validation, from everyday conversation and chat answers, not from the data.
PHATIC_WORDS = frozenset(map(stem, """agree true right correct interesting interest cool nice
great awesome wow lol haha sure okay ok yes yeah yep love like know think guess believe sound
really indeed exactly thanks thank hello hi hey fun funny amazing glad good bad sad crazy
wonderful question oh well hope help happy welcome please sorry""".split()))
_NUMBER_WORDS = dict(zip("two three four five six seven eight nine ten eleven twelve".split(),
                         map(str, range(2, 13))))
_NUMBER_WORDS.update({"twenty": "20", "thirty": "30", "forty": "40", "fifty": "50",
                      "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
                      "hundred": "100", "thousand": "1000", "million": "1000000",
                      "billion": "1000000000"})


@lru_cache(maxsize=1 << 16)  # the stemmer would dominate the judge's time
def term(token: str) -> str:
    """What a word is matched as: its stem, or for a number word its digits ("two" = "2")."""
    found = _NUMBER_WORDS.get(token) or stem(token)
    # the light stemmer strips "-ation" but not "-ated": "phosphorylated" and
    # "phosphorylation" meet at "phosphoryl" (short stems such as "treat" are left alone)
    return found[:-2] if found.endswith("at") and len(found) >= 6 else found


def _figures(text: str, tokens: Sequence[str]) -> frozenset[str]:
    found = {n.replace(",", "") for n in _DIGITS.findall(text)}
    found.update(_NUMBER_WORDS[t] for t in tokens if t in _NUMBER_WORDS)
    return frozenset(found)


def figures(text: str) -> frozenset[str]:
    """Figures a text states: digit groups ("1,200" = "1200") and number words from "two" up
    ("one" is too often a pronoun to be held to a figure)."""
    return _figures(text, words(text))


def _units(text: str) -> list[tuple[int, int]]:
    """Sentences, a longer one as overlapping word windows."""
    units = []
    for start, end in sentence_bounds(text):
        if end - start <= MAX_UNIT_CHARS:
            units.append((start, end))
            continue
        tokens = [m.span() for m in _NON_SPACE.finditer(text, start, end)]
        for i in range(0, max(1, len(tokens) - WINDOW_WORDS + WINDOW_STRIDE), WINDOW_STRIDE):
            window = tokens[i:i + WINDOW_WORDS]
            units.append((window[0][0], window[-1][1]))
    return units or ([(0, len(text))] if text.strip() else [])


@dataclass(frozen=True, slots=True)
class Span:
    """One unit of a source, two adjacent ones, or a short source whole: what a claim is
    checked against."""

    source: int                # 1-based source number
    start: int                 # character offsets in the source
    end: int
    text: str
    stems: frozenset[str]      # content words are looked up here
    words: frozenset[str]      # names are looked up here (and in stems)

    @property
    def numbers(self) -> frozenset[str]:
        return figures(self.text)

    @property
    def negative(self) -> bool:
        """Holds a negation or a negative word ("forbidden", "unable", "lack", ...)."""
        return not self.words.isdisjoint(NEGATIONS) or any(
            w.startswith(NEGATIVE_STEMS) for w in self.words)


class SourceIndex:
    """A source's units and where each stem occurs, so that a claim is scored against every
    span in time proportional to its words' occurrences, not to the number of spans.

    The spans (``runs``, as (first unit, number of units)): every unit, every pair of adjacent
    units and, for a source no longer than :data:`WHOLE_SOURCE_CHARS` (no longer than a pair
    can be), the whole source: one more candidate, not a sliding window, so no more chance
    matches.
    """

    def __init__(self, text: str, source: int) -> None:
        self.text, self.source = text, source
        self.units = _units(text)  # (start, end) of each
        self.stems = [frozenset(map(term, set(words(text[start:end]))))
                      for start, end in self.units]
        self._where: dict[str, list[int]] = {}
        n = len(self.units)
        self.runs = [(i, 1) for i in range(n)] + [(i, 2) for i in range(n - 1)]
        self.whole = n > 2 and len(text.strip()) <= WHOLE_SOURCE_CHARS
        if self.whole:
            self.runs.append((0, n))

    def span(self, run: tuple[int, int]) -> Span:
        first, width = run
        start, end = self.units[first][0], self.units[first + width - 1][1]
        piece = self.text[start:end]
        return Span(self.source, start, end, piece,
                    frozenset().union(*self.stems[first:first + width]), frozenset(words(piece)))

    def where(self, key: str) -> list[int]:
        """The units holding the stem ``key`` (looked up for a claim's stems only)."""
        found = self._where.get(key)
        if found is None:
            found = self._where[key] = [i for i, stems in enumerate(self.stems) if key in stems]
        return found

    def found_weights(self, claim: Claim) -> list[float]:
        """Per run, the weight of the claim's words found: content words in the span,
        function words within :data:`CONTEXT_UNITS` units of it."""
        n = len(self.units)
        single, pair, whole = [0.0] * n, [0.0] * max(0, n - 1), 0.0
        for weights, reach in ((claim.content, 0), (claim.function, CONTEXT_UNITS)):
            for key, weight in weights.items():
                at = self.where(key)
                if not at:
                    continue
                whole += weight
                # unit u counts for unit i when |i - u| <= reach, for pair (i, i+1) when
                # i - reach <= u <= i + 1 + reach; each span once per word
                for i in {j for u in at for j in range(u - reach, u + reach + 1) if 0 <= j < n}:
                    single[i] += weight
                for i in {j for u in at for j in range(u - reach - 1, u + reach + 1)
                          if 0 <= j < n - 1}:
                    pair[i] += weight
        return single + pair + ([whole] if self.whole else [])


@dataclass(frozen=True, slots=True)
class Claim:
    """What is checked of a claim: its weighted stems, figures, names and negation."""

    text: str
    content: dict[str, float]   # stem -> weight (1 per occurrence)
    function: dict[str, float]  # stem -> weight (FUNCTION_WORD_WEIGHT per occurrence)
    numbers: frozenset[str]
    names: frozenset[str]
    negated: bool

    @classmethod
    def parse(cls, text: str) -> Claim:
        body = _PARTICLE.sub("", text, count=1) or text
        tokens = words(body)
        content: dict[str, float] = {}
        function: dict[str, float] = {}
        for token in tokens:
            key = term(token)
            if token in FUNCTION_WORDS:
                function[key] = function.get(key, 0.0) + FUNCTION_WORD_WEIGHT
            else:
                content[key] = content.get(key, 0.0) + 1.0
        names = frozenset(w.lower() for w in WORD.findall(body)[1:]
                          if w[:1].isupper() and w != "I" and w.lower() not in STOPWORDS)
        return cls(text, content, function, _figures(body, tokens), names,
                   not NEGATIONS.isdisjoint(tokens))

    @property
    def checkable(self) -> bool:
        """States something to look up: a content word that is not a pleasantry."""
        return bool(self.content) and not set(self.content) <= PHATIC_WORDS

    @property
    def total(self) -> float:
        return sum(self.content.values()) + sum(self.function.values())

    @property
    def can_conflict(self) -> bool:
        return bool(self.numbers or self.names or self.negated)

    def conflicts(self, span: Span) -> tuple[str, ...]:
        """What the claim states that the span does not: why the span cannot support it."""
        found = []
        missing = sorted(self.numbers - span.numbers)
        if missing:
            found.append("figures not in the span: " + ", ".join(missing))
        names = sorted(n for n in self.names
                       if n not in span.words and term(n) not in span.stems)
        if names:
            found.append("names not in the span: " + ", ".join(names))
        if self.negated and not span.negative:
            found.append("the claim is negated, the span is not")
        return tuple(found)

    def missing_words(self, span: Span, limit: int = 5) -> tuple[str, ...]:
        return tuple(k for k in self.content if k not in span.stems)[:limit]


def checkable_claims(answer: str) -> list[Claim]:
    """The claims the judge checks: not a question, not only an answer particle or
    pleasantries ("Yes, he is.", "I agree!" assert nothing the judge can look up)."""
    return [claim for claim in map(Claim.parse, claim_sentences(answer))
            if claim.checkable and not claim.text.rstrip().endswith("?")]


@dataclass(frozen=True)
class Alignment:
    """A claim and its best span: ``support`` is the best support by a span without a
    conflict, ``span`` that span. ``rival`` is a span that matches more of the claim's words
    but has a conflict (``conflicts``, ``rival_support``): it shows why a claim that looks
    supported is not."""

    claim: str
    support: float
    span: Span | None
    missing_words: tuple[str, ...] = ()
    rival: Span | None = None
    rival_support: float = 0.0
    conflicts: tuple[str, ...] = ()


def align(claim: Claim, indexes: Sequence[SourceIndex]) -> Alignment:
    """The claim's :class:`Alignment` over every span of the indexed sources (ties: the
    first span, in source order)."""
    total = claim.total
    candidates = []
    for order, index in enumerate(indexes):
        for run, found in zip(index.runs, index.found_weights(claim)):
            if found > 0:
                candidates.append((-found / total, order, run[1], run[0], index))
    candidates.sort(key=lambda c: c[:4])
    best, rival = None, None
    for value, _, width, first, index in candidates:
        span = index.span((first, width))
        if not claim.can_conflict or not claim.conflicts(span):
            best = (-value, span)
            break
        if rival is None:
            rival = (-value, span)
    if best is None:
        first_span = next((index.span(index.runs[0]) for index in indexes if index.runs), None)
        best = (0.0, first_span)  # nothing matches: the first span, for the record
    support, span = best
    missing = () if span is None else claim.missing_words(span)
    if rival is None or rival[0] <= support:
        return Alignment(claim.text, support, span, missing)
    return Alignment(claim.text, support, span, missing, rival[1], rival[0],
                     claim.conflicts(rival[1]))


def align_answer(answer: str, sources: Sequence[str]) -> list[Alignment]:
    """One :class:`Alignment` per checkable claim of the answer (no threshold involved)."""
    indexes = [SourceIndex(text, number) for number, text in enumerate(sources, start=1)]
    return [align(claim, indexes) for claim in checkable_claims(answer)]
