"""Citation markers, claim sentences and the citation-coverage gate (no LLM).

Citation markers. ``[n]`` cites ``sources[n - 1]``; a number has 1 to 3 digits. Accepted forms:

    [3]              one source
    [1][2]           adjacent markers, each read on its own
    [1, 2]  [1; 2]   a list in one pair of brackets
    [1-3]   [1–3]    an inclusive range, hyphen or en dash ([3-1] is read as 1..3)
    [1, 3-5]         lists and ranges combined; spaces inside the brackets are allowed

A marker that is also a link's text, ``[1](url)``, still counts. Not markers: footnotes
``[^1]``, four-digit numbers such as ``[2020]``, anything inside code.

Units. The answer is cut into units before anything is counted:

- fenced code blocks (``` or ~~~ at any indentation, also right after a list-item or
  blockquote marker; an unclosed fence runs to the end) and
  inline code spans are removed first, so code never holds citations, words or boundaries;
- headings (``#`` lines and setext underlines) are dropped: a heading is not a claim;
- each list item (``-``, ``*``, ``+``, ``1.``, ``1)``) with its continuation lines is one unit;
- each table row is one unit; the header and delimiter rows are dropped;
- blockquote markers are stripped and the text is read like any other;
- a paragraph is split into sentences after ``.``, ``!``, ``?`` or ``…`` followed by whitespace,
  unless the next character is a lowercase letter (ASCII or Latin-1). Citation markers right
  after the punctuation belong to the sentence before them (``A.[1] B.`` is ``A.[1]`` and
  ``B.``). A ``.`` does not end a sentence after an abbreviation in :data:`ABBREVIATIONS`,
  after an initialism or initial (``e.g.``, ``i.e.``, ``U.S.``, ``Ph.D.``, ``J. Smith``), or
  after ``No.``, ``p.``, ``Jan.`` and similar (:data:`NUMBER_ABBREVIATIONS`) before a number.
  Decimals (``3.14``) and URLs have no whitespace after their dots, so they are never split.

Claim sentence: a unit with at least ``min_claim_words`` words (default 4) that does not end
with ``?`` (a question) or ``:`` (a lead-in to a list), ignoring trailing citation markers,
quotes, brackets and emphasis. A word is a run of letters, digits, ``'`` or ``-`` that starts
with a letter, so bare numbers and citation markers are not words.

Score::

    coverage = cited claim sentences / claim sentences
    score    = coverage * 0.5   if any cited number is < 1 or > len(sources), or cites a
                                source marked missing, else coverage

A source marked ``"missing": true`` is one the answer lists by an id its corpus does not hold
(answers read in place with ``sources.kind: ids``, :mod:`eval_harness.gates.answers_mapping`):
a marker citing it cites nothing, so it is invalid like a number out of range;
``details["missing_sources"]`` names every such source (number and id), cited or not.

A claim sentence is cited when it holds at least one marker, valid or not: an invalid marker is
penalised once, by the halving. Degenerate inputs: with no claim sentence at all (empty answer,
only headings, code, questions or short fragments) coverage is 0.0, so score 0.0 and the gate
fails, as in the seed implementation; ``details["degenerate"]`` says ``"no_claim_sentences"`` so
a report can tell it from an uncited answer. With no sources every marker is invalid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from time import perf_counter
from typing import Any, NamedTuple

from eval_harness.gates.result import GateResult, check_threshold

GATE_NAME = "citation_coverage"
CITATION_COVERAGE_THRESHOLD = 0.7
MIN_CLAIM_WORDS = 4
INVALID_CITATION_FACTOR = 0.5
MAX_LISTED_UNCITED = 10  # uncited claims quoted in details; the count is always complete
SNIPPET_CHARS = 120

# Abbreviations whose "." never ends a sentence (compared lowercase, without the dot). Words
# like "etc.", "Inc." or "Ltd." often do end one; the lowercase rule covers them mid-sentence.
ABBREVIATIONS = frozenset({
    "al", "approx", "ca", "capt", "cf", "col", "dept", "dr", "ed", "eds", "est", "fig",
    "figs", "gen", "gov", "jr", "lt", "mr", "mrs", "ms", "mt", "prof", "ref", "refs", "rev",
    "sr", "st", "vs", "viz",
})
# Abbreviations that do not end a sentence when a number follows ("No. 5", "p. 12", "Jan. 3").
NUMBER_ABBREVIATIONS = frozenset({
    "no", "nos", "p", "pp", "vol", "sec", "ch", "art", "eq", "eqs", "ver", "v",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
})

_MARKER_NUMBERS = r"\d{1,3}(?:[ \t]*[-–,;][ \t]*\d{1,3})*"
CITATION_PATTERN = re.compile(rf"\[[ \t]*({_MARKER_NUMBERS})[ \t]*\]")
_LIST_SEPARATOR = re.compile(r"[,;]")

# Code. Both patterns start with a literal so that the regex engine can skip ahead; the fence
# pattern runs on "\n" + text so that a fence on the first line also follows a newline.
# A fence may follow blockquote and list-item markers ("> ```", "- ```"), as in CommonMark.
_CONTAINERS = r"(?:[ \t]*+(?:>|(?:[-*+]|\d{1,9}[.)])(?=[ \t])))*+"  # possessive: no backtracking
_FENCED_CODE = re.compile(
    r"\n" + _CONTAINERS +
    r"[ \t]*+(?P<fence>(?P<char>[`~])(?P=char){2,})(?:(?<=`)[^`\n]*|(?<=~)[^\n]*)$"
    r".*?"
    r"(?:\n" + _CONTAINERS + r"[ \t]*+(?P=fence)(?P=char)*+[ \t\r]*$|(?P<unclosed>\Z))",
    re.MULTILINE | re.DOTALL)
# A code span may continue over a line break inside its paragraph (CommonMark), not over a
# blank line.
_INLINE_CODE = re.compile(r"(`(?<!``)`*+)(?:[^\n]|\n(?![ \t]*+(?:\n|\Z)))*?(?<!`)\1(?!`)")

# Lines, tried on the stripped line.
_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
_SETEXT_UNDERLINE = re.compile(r"(?:=+|-{2,})[ \t]*$")
_THEMATIC_BREAK = re.compile(r"(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_LIST_MARKER = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_BLOCK_START = frozenset("#=-*_+|0123456789")  # first characters that may start a block
_TABLE_DELIMITER = re.compile(r"\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


def _lookbehinds(words: frozenset[str], template: str) -> str:
    """One fixed-width look-behind per word length, as the regex engine requires."""
    by_length: dict[int, list[str]] = {}
    for word in sorted(words):
        by_length.setdefault(len(word), []).append(word)
    return "".join(template.format("|".join(group)) for group in by_length.values())


def _sentence_pattern() -> re.Pattern[str]:
    closers = r"[\"'”’)\]*_]*+"
    # What a sentence end consumes: the stops, closing quotes or brackets, then any citation
    # markers (they belong to the sentence before), and the next text must not be lowercase.
    stop = (rf"[.!?…]++{closers}(?:[ \t]*\[[ \t]*{_MARKER_NUMBERS}[ \t]*\]{closers})*"
            r"(?=\s+[^\sa-zß-öø-ÿ])")
    # A "." does not end a sentence after an abbreviation, an initialism or an initial.
    # Look-behinds need a fixed width, hence one per word length; the rarely needed ones sit
    # behind a cheap guard (a number follows; a "." two or three characters back).
    not_abbreviation = (
        "(?i:" + _lookbehinds(ABBREVIATIONS, r"(?<!\b(?:{})\.)") + ")"
        r"(?:(?!\s+\d)|(?i:" + _lookbehinds(NUMBER_ABBREVIATIONS, r"(?<!\b(?:{})\.)") + "))"
        r"(?:(?<!\.[A-Za-z]\.)(?<!\.[A-Za-z]{2}\.)"
        r"|(?<!\b[A-Za-z]\.[A-Za-z]\.)(?<!\b(?:[A-Za-z]{2}\.[A-Za-z]|[A-Za-z]\.[A-Za-z]{2})\.)"
        r"(?<!\b[A-Za-z]{2}\.[A-Za-z]{2}\.))"
        r"(?<!\b[A-Z]\.)")
    # Is this stop a sentence end? A cheap necessary condition for `stop` (no lowercase letter
    # or whitespace up to the first whitespace, no lowercase letter after it) runs first. The
    # look-behinds only run when a letter precedes the "."; every one of them needs a letter
    # there, and most sentence ends follow a citation marker or a digit instead.
    could_end = r"(?=[.!?…]++[^\sa-zß-öø-ÿ]*\s+[^\sa-zß-öø-ÿ])"
    is_end = rf"{could_end}(?=\.(?:(?<![^\W\d_]\.)|{not_abbreviation})|[!?…]){stop}"
    # Runs without a stop are eaten whole. The loop over stops is lazy so that the end test
    # runs once at each stop and, when it holds, the end is consumed right away.
    return re.compile(rf"\S[^.!?…]*+(?:[.!?…][^.!?…]*+)*?(?:{is_end}|$)")


_SENTENCE = _sentence_pattern()
_TRAILING_CLOSERS = " \t\"'”’)*_"
# Every character that trailing closers and (ASCII) citation markers are made of.
_TRAILING_CLOSER_OR_MARKER_CHARS = _TRAILING_CLOSERS + "[]0123456789-–,;"
_ENOUGH_WORDS: dict[tuple[int, bool], re.Pattern[str]] = {}


class ParsedAnswer(NamedTuple):
    """An answer with its code removed; line numbers are those of the original text."""

    text: str                              # the answer without code, newlines kept
    unclosed_fence_lines: tuple[int, ...]  # 1-based line of each fence that is never closed
    cited_numbers: frozenset[int]          # every source number cited outside code
    every_bracket_cites: bool              # each "[" in text opens a citation marker


class Citation(NamedTuple):
    marker: str                # as written, e.g. "[1, 2]"
    numbers: tuple[int, ...]   # source numbers it cites, 1-based, in written order
    line: int                  # 1-based line in the answer


@lru_cache(maxsize=16)
def parse_answer(markdown: str) -> ParsedAnswer:
    """Remove fenced code blocks (keeping their newlines) and inline code spans; collect citations.

    A fence opens with three or more backticks or tildes and closes with at least as many of
    the same character; one that never closes hides the rest of the answer, as in CommonMark.
    Cached because both rule-based gates parse the same answer one after the other.
    """
    unclosed: tuple[int, ...] = ()
    text = markdown
    # a one-character search is a memchr, several times faster than a search for "```"
    if ("`" in text and "```" in text) or ("~" in text and "~~~" in text):
        source = "\n" + text
        pieces = []
        end = 0
        for block in _FENCED_CODE.finditer(source):
            pieces.append(source[end:block.start()])
            pieces.append("\n" * source.count("\n", block.start(), block.end()))
            end = block.end()
            if block.group("unclosed") is not None:
                unclosed += (source.count("\n", 0, block.start() + 1),)
        if pieces:
            pieces.append(source[end:])
            text = "".join(pieces)[1:]
    if "`" in text:
        text = _INLINE_CODE.sub(" ", text)
    numbers: set[int] = set()
    brackets = text.count("[")
    if brackets:
        markers = CITATION_PATTERN.findall(text)
        for content in set(markers):
            numbers.update(marker_numbers(content))
        brackets -= len(markers)
    return ParsedAnswer(text, unclosed, frozenset(numbers), brackets == 0)


@lru_cache(maxsize=4096)
def marker_numbers(content: str) -> tuple[int, ...]:
    """Source numbers inside one marker's brackets: ``"1, 3-5"`` -> ``(1, 3, 4, 5)``."""
    if content.isdigit():
        return (int(content),)
    numbers: list[int] = []
    for part in _LIST_SEPARATOR.split(content):
        low, dash, high = part.replace("–", "-").partition("-")
        if dash:
            first, last = sorted((int(low), int(high)))
            numbers.extend(range(first, last + 1))
        else:
            numbers.append(int(part))
    return tuple(numbers)


def extract_citations(markdown: str) -> list[Citation]:
    """Every citation marker of an answer outside code, in order of appearance."""
    text = parse_answer(markdown).text
    found = []
    line, scanned = 1, 0
    for marker in CITATION_PATTERN.finditer(text):
        line += text.count("\n", scanned, marker.start())
        scanned = marker.start()
        found.append(Citation(marker.group(), marker_numbers(marker.group(1)), line))
    return found


def split_sentences(markdown: str) -> list[str]:
    """The units of an answer: sentences of paragraphs, list items and table rows.

    Headings and code are left out; see the module docstring for every rule.
    """
    return _units(parse_answer(markdown).text)


def is_claim_sentence(unit: str, *, min_words: int = MIN_CLAIM_WORDS) -> bool:
    """At least ``min_words`` words, and not a question or a lead-in ending in ``:``."""
    return _enough_words(min_words).match(unit) is not None and _is_statement(unit)


def citation_coverage(answer: str, sources: Sequence[Mapping[str, Any]], *,
                      threshold: float = CITATION_COVERAGE_THRESHOLD,
                      min_claim_words: int = MIN_CLAIM_WORDS) -> GateResult:
    """Share of claim sentences that carry a citation, halved if any citation is invalid.

    ``sources`` is the ordered list the citations refer to (``[1]`` is ``sources[0]``); only
    its length and the sources marked ``"missing"`` are used. Formula, definitions and
    degenerate cases are in the module docstring.
    """
    started = perf_counter()
    threshold = check_threshold(GATE_NAME, threshold)
    if not isinstance(answer, str):
        raise TypeError(f"Gate {GATE_NAME!r}: the answer must be a Markdown string, "
                        f"got {type(answer).__name__}.")
    parsed = parse_answer(answer)
    enough_words = _enough_words(min_claim_words, ascii_text=parsed.text.isascii()).match
    source_count = len(sources)
    cited_numbers = parsed.cited_numbers
    invalid = (sorted(n for n in cited_numbers if n < 1 or n > source_count)
               if cited_numbers and (min(cited_numbers) < 1 or max(cited_numbers) > source_count)
               else [])
    # isinstance(dict), not the Mapping ABC: this runs for every source of every answer, and
    # sources come from JSON (an ABC check cost the gate 5% of its speed)
    missing = [(number, source.get("id")) for number, source in enumerate(sources, start=1)
               if isinstance(source, dict) and source.get("missing") is True]
    if missing:
        invalid = sorted(set(invalid) | {n for n, _ in missing if n in cited_numbers})

    claims = cited = 0
    uncited: list[str] = []
    # Markers never straddle units; when every "[" opens one, finding "[" is enough.
    every_bracket_cites = parsed.every_bracket_cites
    search_marker = CITATION_PATTERN.search
    for unit in _units(parsed.text):
        if enough_words(unit) is None or (unit[-1] != "." and not _is_statement(unit)):
            continue  # not a claim sentence (the "." test saves a call in the common case)
        claims += 1
        if "[" in unit and (every_bracket_cites or search_marker(unit) is not None):
            cited += 1
        elif len(uncited) < MAX_LISTED_UNCITED:
            uncited.append(unit if len(unit) <= SNIPPET_CHARS
                           else unit[:SNIPPET_CHARS - 1] + "…")

    coverage = cited / claims if claims else 0.0
    score = coverage * INVALID_CITATION_FACTOR if invalid else coverage
    details = {
        "claim_sentences": claims,
        "cited_claim_sentences": cited,
        "coverage": coverage,
        "cited_numbers": sorted(cited_numbers),
        "invalid_citations": invalid,
        "source_count": source_count,
        "uncited_claims": uncited,
        "min_claim_words": min_claim_words,
        "degenerate": None if claims else "no_claim_sentences",
    }
    if missing:
        details["missing_sources"] = [{"number": n, "id": i} for n, i in missing]
    return GateResult(gate=GATE_NAME, score=score, passed=score >= threshold,
                      threshold=threshold, details=details,
                      latency_ms=(perf_counter() - started) * 1000.0)


def _enough_words(min_words: int, *, ascii_text: bool = False) -> re.Pattern[str]:
    """A regex whose ``match`` succeeds on text with at least ``min_words`` words.

    With ``ascii_text`` the regex is only valid for ASCII text, where it is about twice as fast:
    ASCII ranges compile to a bitmap, while the Unicode classes test each character's category.
    """
    key = (min_words, ascii_text)
    pattern = _ENOUGH_WORDS.get(key)
    if pattern is None:
        if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 1:
            raise ValueError(f"min_claim_words must be a positive integer, got {min_words!r}.")
        # gap, then a word's first letter, then the rest of it; the same classes in ASCII
        gap, letter, rest = ((r"[^A-Za-z]", "[A-Za-z]", r"[\w'-]") if ascii_text
                             else (r"[\W\d_]", r"[^\W\d_]", r"[\w'’-]"))
        # Possessive runs, so that a word is never re-split into shorter words; the last word
        # is found by its first letter alone.
        pattern = re.compile(rf"(?:{gap}*+{letter}{rest}*+){{{min_words - 1}}}{gap}*+{letter}",
                             re.ASCII if ascii_text else 0)
        _ENOUGH_WORDS[key] = pattern
    return pattern


def _is_statement(unit: str) -> bool:
    """Not a question and not a lead-in: the last stop, trailing markers aside, is no ? or :."""
    if unit[-1] == ".":  # the common case: nothing to look through
        return True
    # Next most common, "A claim.[1]": stripping every closer or marker character removes at
    # least what the exact loop below removes, so if that leaves no "?" or ":" at the end,
    # neither would the loop. ASCII only, because a marker's digits may be any decimal digit.
    if unit.isascii() and not unit.rstrip(_TRAILING_CLOSER_OR_MARKER_CHARS).endswith(("?", ":")):
        return True
    tail = unit.rstrip(_TRAILING_CLOSERS)
    while tail.endswith("]"):  # look through trailing markers: "Is it? [1]"
        opening = tail.rfind("[")
        if opening < 0 or CITATION_PATTERN.fullmatch(tail, opening) is None:
            break
        tail = tail[:opening].rstrip(_TRAILING_CLOSERS)
    return not tail.endswith(("?", ":"))


def _units(text: str) -> list[str]:
    units: list[str] = []
    open_lines: list[str] = []  # lines of the open paragraph or list item
    in_item = False             # whether open_lines are a list item (one unit, not split)
    header_candidate = False    # the last unit is a table row that may be a header row
    quoted = ">" in text        # most answers have no blockquote: skip the test per line

    for line in text.split("\n"):
        line = line.strip()
        if quoted and line[:1] == ">":
            line = line.lstrip("> \t")  # blockquote markers, nested ones included
        if not line:
            if open_lines:
                _close(units, open_lines, in_item)
                open_lines, in_item = [], False
            header_candidate = False
            continue
        first = line[0]
        if first not in _BLOCK_START:  # most lines: paragraph text or an item's continuation
            open_lines.append(line)
            header_candidate = False
            continue
        if first == "|":
            if open_lines:
                _close(units, open_lines, in_item)
                open_lines, in_item = [], False
            if _TABLE_DELIMITER.match(line):
                if header_candidate:
                    units.pop()
                header_candidate = False
            else:
                units.append(line)
                header_candidate = True
            continue
        header_candidate = False
        if first in "=-" and open_lines and not in_item and _SETEXT_UNDERLINE.match(line):
            open_lines = []  # the paragraph was a setext heading
        elif ((first == "#" and _HEADING.match(line))
              or (first in "-*_" and line[-1] == first  # a break ends as it starts
                  and _THEMATIC_BREAK.match(line))):
            if open_lines:
                _close(units, open_lines, in_item)
                open_lines, in_item = [], False
        elif first != "#" and first != "=" and (marker := _LIST_MARKER.match(line)):
            if open_lines:
                _close(units, open_lines, in_item)
            rest = line[marker.end():]  # an empty item holds nothing that could continue
            open_lines, in_item = ([rest], True) if rest else ([], False)
        else:
            open_lines.append(line)

    if open_lines:
        _close(units, open_lines, in_item)
    return units


def _close(units: list[str], lines: list[str], is_item: bool) -> None:
    if is_item:
        units.append(" ".join(lines))
    else:
        units += _SENTENCE.findall(" ".join(lines))
