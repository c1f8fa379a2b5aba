"""The offline query writer and critic: queries from documents without a model or a key (the
embedded default of ``eval-harness ground-truth generate``).

**Terms.** A document's key terms are its content words (no stopwords, at least four
letters, not numbers) ranked by tf-idf, the document frequencies estimated on a seeded sample
of the corpus (:class:`TermStatistics`); the top :data:`TERMS` are used in the order they
first appear in the document.

**Kinds.**

* ``question``: the key terms in one of a few question templates ("What is known about the
  effect of A on B in C?"). It names what the document is about, not what it says.
* ``paraphrase``: the rarest key term is kept and every other is replaced by a *neighbour*:
  the word that co-occurs with it in the sampled documents most often, weighted by its
  specificity (count x idf squared), that this document never uses; the template differs
  from the question's. Its word overlap with the document is the one kept term.
* ``unanswerable``: a question joining one key term with two subjects the corpus never
  mentions (those of :data:`FOREIGN_SUBJECTS` a keyword search finds in no document, checked
  once per run by the caller): on the document's subject, answered by no document.

**The critic's rules** (:func:`critique`), the same for any writer's queries:

* gives the answer away: it repeats a run of :data:`COPIED_RUN` or more words of the
  document, or a number the document states;
* not answerable from its document (question, paraphrase): fewer than one key term of the
  document among its content words (stems compared).

Everything is deterministic: the same document, kind and seed give the same query.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from eval_harness.judges.local.text import STOPWORDS, stem

OFFLINE_VERSION = "offline-writer-v1"
TERMS = 3               # key terms a query is built from
MIN_TERMS = 2           # a document with fewer content words gets no query
COPIED_RUN = 6          # this many consecutive words of the document give a query away
_WORD = re.compile(r"[^\W\d_][^\W_]*(?:-[^\W\d_]+)*")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?%?")
_QUESTION_TEMPLATES = (
    "What is known about {a} and {b} in {c}?",
    "How does {a} relate to {b} and {c}?",
    "What role does {a} play in {b} and {c}?",
    "What is the evidence on {a}, {b} and {c}?",
)
_PARAPHRASE_TEMPLATES = (
    "Is there a link between {a} and {b} when it comes to {c}?",
    "Could {b} and {c} have anything to do with {a}?",
    "What do we know regarding {c}, {b} and {a}?",
)
_UNANSWERABLE_TEMPLATES = (
    "How does {a} influence {x} during {y}?",
    "What is the history of {a} in {x} and {y}?",
)
# Subjects far from research and product corpora; each is used only when no document of the
# corpus contains any of its words.
FOREIGN_SUBJECTS = (
    "lighthouse keeping", "medieval tapestry", "origami cranes", "harpsichord tuning",
    "falconry", "competitive yodelling", "submarine cables", "curling stones",
    "sumo wrestling", "bonsai pruning", "glassblowing", "bagpipe reeds",
    "chess openings", "kite surfing", "beekeeping hives", "stained glass windows",
)


def content_words(text: str) -> list[str]:
    """The content words of ``text`` in order, lower case: no stopwords, at least four
    letters."""
    return [w for w in (m.group().lower() for m in _WORD.finditer(text))
            if len(w) >= 4 and w not in STOPWORDS]


def plain_words(text: str) -> list[str]:
    return [m.group().lower() for m in re.finditer(r"[^\W_]+", text)]


class TermStatistics:
    """Document frequencies and co-occurrences of content words over sampled documents."""

    def __init__(self, documents: Iterable[str]) -> None:
        self.df: Counter = Counter()
        self._sets: list[frozenset[str]] = []
        for text in documents:
            words = frozenset(content_words(text))
            self.df.update(words)
            self._sets.append(words)
        self.n = max(1, len(self._sets))
        self._index: dict[str, list[int]] = {}
        for i, words in enumerate(self._sets):
            for word in words:
                self._index.setdefault(word, []).append(i)

    def idf(self, word: str) -> float:
        return math.log((self.n + 1) / (self.df.get(word, 0) + 1)) + 1.0

    def key_terms(self, text: str, k: int = TERMS) -> list[str]:
        """The ``k`` content words of ``text`` of highest tf-idf, in order of first use."""
        words = content_words(text)
        counts = Counter(words)
        ranked = sorted(counts, key=lambda w: (-counts[w] * self.idf(w), w))
        chosen: list[str] = []
        stems: set[str] = set()
        for word in ranked:
            if stem(word) not in stems:
                chosen.append(word)
                stems.add(stem(word))
            if len(chosen) == k:
                break
        first = {w: i for i, w in reversed(list(enumerate(words)))}
        return sorted(chosen, key=lambda w: first[w])

    def neighbour(self, word: str, avoid: set[str]) -> str | None:
        """The word co-occurring most often with ``word`` in the sampled documents whose
        stem is not in ``avoid``; None when there is none."""
        together: Counter = Counter()
        for i in self._index.get(word, ()):
            together.update(self._sets[i])
        stems_avoided = avoid | {stem(word)}
        # co-occurring often and specific: "results" co-occurs with everything
        ranked = sorted(together.items(), key=lambda item: (-item[1] * self.idf(item[0]) ** 2,
                                                           item[0]))
        for other, _count in ranked:
            if other != word and stem(other) not in stems_avoided:
                return other
        return None


def _pick(options: Sequence[str], *keys: str) -> str:
    digest = hashlib.md5("|".join(keys).encode()).hexdigest()
    return options[int(digest, 16) % len(options)]


@dataclass(frozen=True)
class Written:
    text: str | None          # None: the document gives no query of that kind
    reason: str | None = None  # why no query was written


def write_query(document: str, kind: str, stats: TermStatistics, *, seed: int,
                doc_key: str, foreign: Sequence[str] = FOREIGN_SUBJECTS) -> Written:
    """One query of ``kind`` from ``document`` (module docstring); ``foreign``: the subjects
    no document of the corpus mentions."""
    terms = stats.key_terms(document)
    if len(terms) < MIN_TERMS:
        return Written(None, reason=f"the document has fewer than {MIN_TERMS} content words")
    while len(terms) < TERMS:
        terms.append(terms[-1])
    if kind == "question":
        template = _pick(_QUESTION_TEMPLATES, str(seed), doc_key, kind)
        return Written(template.format(a=terms[0], b=terms[1], c=terms[2]))
    if kind == "paraphrase":
        in_document = {stem(w) for w in content_words(document)}
        kept = max(terms, key=lambda w: (stats.idf(w), w))
        swapped: list[str | None] = []
        for w in terms:
            swapped.append(w if w == kept else stats.neighbour(
                w, in_document | {stem(str(x)) for x in swapped if x}))
        if any(w is None for w in swapped):
            return Written(None, reason="no neighbour word outside the document")
        template = _pick(_PARAPHRASE_TEMPLATES, str(seed), doc_key, kind)
        a, b, c = (str(w) for w in swapped)
        return Written(template.format(a=a, b=b, c=c))
    if kind == "unanswerable":
        if len(foreign) < 2:
            return Written(None, reason="every foreign subject occurs in the corpus")
        start = int(hashlib.md5(f"{seed}|{doc_key}".encode()).hexdigest(), 16) % len(foreign)
        x, y = foreign[start], foreign[(start + 1) % len(foreign)]
        template = _pick(_UNANSWERABLE_TEMPLATES, str(seed), doc_key, kind)
        return Written(template.format(a=terms[0], x=x, y=y))
    raise ValueError(f"unknown query kind {kind!r}")


def critique(document: str, query: str, kind: str, stats: TermStatistics) -> str | None:
    """Why the offline critic drops ``query`` (written from ``document`` as ``kind``), or
    None to keep it (module docstring)."""
    doc_words = plain_words(document)
    query_words = plain_words(query)
    runs = {tuple(doc_words[i:i + COPIED_RUN]) for i in range(len(doc_words) - COPIED_RUN + 1)}
    if any(tuple(query_words[i:i + COPIED_RUN]) in runs
           for i in range(len(query_words) - COPIED_RUN + 1)):
        return f"gives the answer away: repeats {COPIED_RUN} or more words of its document"
    numbers = set(_NUMBER.findall(document))
    stated = [n for n in _NUMBER.findall(query) if n in numbers]
    if stated:
        return f"gives the answer away: states the document's number {stated[0]}"
    if kind == "unanswerable":
        return None
    key = {stem(w) for w in stats.key_terms(document, k=8)}
    asked = {stem(w) for w in content_words(query)}
    if not key & asked:
        return "not answerable from its document: none of the document's key terms"
    return None
