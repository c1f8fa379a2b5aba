"""The text the offline judges read: words, content words, sentences and claim sentences.

One module for both local judges' text handling (:mod:`.relevance` and :mod:`.grounding` read
it). Two sentence rules live here side by side, each kept as its callers have it (they give
different sentences on the same answer, and the judges' results depend on them):

* :func:`sentences` / :func:`simple_claim_sentences`: a sentence ends at ``.``, ``!`` or
  ``?`` followed by a capital or a digit; abbreviations are not recognised. Used by the text
  support heuristics of both local judges (answer evaluation's accuracy criterion,
  :func:`~eval_harness.judges.local.relevance.check_grounding_locally`).
* :func:`sentence_bounds` / :func:`claim_sentences`: abbreviation-aware ("Dr. Smith", "J. K.
  Rowling", "e.g. this"), with closing quotes kept in the sentence. Used by the grounding
  alignment (:mod:`.grounding`).

Both claim rules drop citation marks and Markdown headings and keep a sentence of at least
:data:`MIN_CLAIM_WORDS` words with a content word. The citation_coverage gate
(:mod:`eval_harness.gates.citation_coverage`) has a claim rule of its own.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[^\W_]+")
_TOKEN = re.compile(r"n't|[^\W_]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
CITATION = re.compile(r"\s*\[(\d+)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_BOUNDARY = re.compile(r"(?<=[.!?])([\"'\u201d\u2019)\]]*)\s+(?=[\"'\u201c\u2018(\[]?[^\W_])")
_MARKUP = re.compile(r"^\s*(?:#+|[-*+>]|\d+[.)])\s+")
_INITIALS = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]?")
HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers him his how i if in into is it its itself just
may me might more most must my no nor not now of off on once only or other our ours out over
own same shall she should so some such than that the their theirs them then there these they
this those through to too under until up upon very was we were what when where which while
who whom whose why will with would you your yours
aber als am an auch auf aus bei bin bis da dass dem den der des die doch du ein eine einem
einen einer eines er es für hat ich ihr im in ist mit nach nicht noch oder sich sie sind so
über um und uns von vor war wie wir zu zum zur
""".split())
ABBREVIATIONS = frozenset("""mr mrs ms dr prof st sr jr vs etc al fig figs no nos vol approx
ca cf eq ref inc ltd co corp dept est jan feb mar apr jun jul aug sep sept oct nov dec""".split())
_SUFFIXES = ("ational", "ization", "fulness", "iveness", "ations", "ation", "ments", "ment",
             "ness", "ings", "ing", "ies", "edly", "ed", "ly", "es", "s")
MIN_CLAIM_WORDS = 2  # "Sure!" or "Yes." asserts nothing; "I love it." does


def stem(word: str) -> str:
    """A light suffix stripper: enough to match "treatments" with "treatment" or "treated"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def words(text: str) -> list[str]:
    """Lower-cased word tokens; "don't" gives "do" and "n't" (a negation of its own)."""
    return _TOKEN.findall(text.lower().replace("\u2019", "'").replace("n't", " n't"))


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry content (stopwords and single letters dropped)."""
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS
            and (len(w) > 1 or w.isdigit())]


def content_terms(text: str) -> list[str]:
    return [stem(w) for w in content_words(text)]


def numbers(text: str) -> set[str]:
    return {n.replace(",", ".") for n in _NUMBER.findall(text)}


def sentences(text: str) -> list[str]:
    """Sentences of a text (Markdown list markers, headings and citation marks removed); a
    sentence ends before a capital or a digit (the simple rule, see the module docstring)."""
    parts = []
    for line in text.splitlines():
        line = _MARKUP.sub("", line).strip()
        if line:
            parts.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return parts


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``; list markers and heading marks left out
    (the abbreviation-aware rule, see the module docstring)."""
    bounds, offset = [], 0
    for line in text.splitlines(keepends=True):
        marker = _MARKUP.match(line)
        start = offset + (marker.end() if marker else 0)
        body = text[start:offset + len(line)]
        cut = 0
        for match in _BOUNDARY.finditer(body):
            before = body[cut:match.start()].rstrip(".!?")
            last = before.rsplit(None, 1)[-1].lower() if before.strip() else ""
            if body[match.start() - 1] == "." and not match.group(1) and (
                    last in ABBREVIATIONS or len(last) == 1 or _INITIALS.fullmatch(last)):
                continue  # "Dr. Smith", "J. K. Rowling", "the U.S. army", "e.g. this"
            bounds.append((start + cut, start + match.start() + len(match.group(1))))
            cut = match.end()
        bounds.append((start + cut, start + len(body.rstrip())))
        offset += len(line)
    return [(s, e) for s, e in bounds if text[s:e].strip()]


def _prose(answer: str) -> str:
    """The answer without citation marks and Markdown headings (a heading names a section
    and asserts nothing, as in the citation_coverage gate)."""
    return "\n".join(line for line in CITATION.sub("", answer).splitlines()
                     if not HEADING.match(line))


def claim_sentences(answer: str) -> list[str]:
    """The answer's sentences that may assert something (at least :data:`MIN_CLAIM_WORDS`
    words by :func:`words`, a content word), split by the abbreviation-aware
    :func:`sentence_bounds`: the grounding alignment's claims."""
    prose = _prose(answer)
    found = (prose[start:end] for start, end in sentence_bounds(prose))
    return [s for s in found if len(words(s)) >= MIN_CLAIM_WORDS and content_words(s)]


def simple_claim_sentences(answer: str) -> list[str]:
    """The answer's sentences that assert something (at least :data:`MIN_CLAIM_WORDS` words
    by :data:`WORD`, some content), split by the simple :func:`sentences`: the claims of the
    text-support heuristics (answer evaluation, ``check_grounding_locally``)."""
    return [s for s in sentences(_prose(answer))
            if len(WORD.findall(s)) >= MIN_CLAIM_WORDS and content_words(s)]
