"""Turn judge replies into values: forgiving in form, strict in meaning.

Accepted forms: surrounding whitespace, Markdown emphasis (``**0.7**``), a label
(``Score: 0.7``), a trailing full stop (``0.7.``), a short verbal anchor after the number
(``0.7 (highly relevant)``), an explanation on later lines, code fences around a reply or
around JSON, prose before or after one JSON object.

Rejected meanings: a number outside its range, NaN or infinity, no number, two candidate
numbers (``0.7 or 0.8``), percentages and fractions (``70%``, ``7/10``), JSON without a
required field. Every rejection raises :class:`ParseError` whose message says what was wrong;
it is sent back to the judge once (see :func:`eval_harness.judges.prompts.correction`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from eval_harness.judges.protocol import AnswerEvaluation, ClaimCheck, Grounding, Reflexion


class ParseError(ValueError):
    """A reply that does not carry a usable value; the message explains why in one clause."""


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_EMPHASIS = re.compile(r"[*_`\"']+")
_LABEL = re.compile(r"^(?:the\s+)?(?:relevance(?:\s+score)?|score|rating)\s*(?:\([^)]*\)\s*)?"
                    r"(?:is\s*)?[:=]?\s*", re.IGNORECASE)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_SEPARATORS = " .,;:-\u2013\u2014(\t"  # what may follow the number: space, stop, dash, "("
_RELEVANCE_KEYS = ("score", "relevance", "relevance_score", "rating")


def strip_fences(text: str) -> str:
    """The content of the first fenced code block, or the text itself without one."""
    match = _FENCE.search(text)
    return match.group(1).strip() if match else text.strip()


def _finite(value: float, what: str) -> float:
    if math.isnan(value) or math.isinf(value):
        raise ParseError(f"{what} is not a finite number")
    return value


def parse_number(value: Any, what: str, low: float, high: float) -> float:
    """A JSON number (or a numeric string) within [low, high]."""
    if isinstance(value, bool) or value is None:
        raise ParseError(f"{what} must be a number between {low:g} and {high:g}, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER.fullmatch(text):
            raise ParseError(f"{what} must be a number between {low:g} and {high:g}, "
                             f"got {value!r}")
        value = float(text)
    if not isinstance(value, (int, float)):
        raise ParseError(f"{what} must be a number between {low:g} and {high:g}, got {value!r}")
    number = _finite(float(value), what)
    if not low <= number <= high:
        raise ParseError(f"{what} {number:g} is outside {low:g}..{high:g}")
    return number


def parse_relevance(text: str) -> float:
    """A relevance score in [0, 1] from a reply such as ``0.7``, ``Score: 0.7`` or ``**0.7**``."""
    body = strip_fences(text or "")
    if body.startswith("{"):
        data = extract_json(body)
        for key in _RELEVANCE_KEYS:
            if key in data:
                return parse_number(data[key], "the relevance score", 0.0, 1.0)
        raise ParseError("the JSON reply has no 'score' field")
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if not lines:
        raise ParseError("the reply is empty; expected a number between 0.0 and 1.0")
    first = _EMPHASIS.sub("", lines[0]).strip()
    first = _LABEL.sub("", first, count=1).strip()
    match = _NUMBER.match(first)
    if not match:
        raise ParseError(f"the reply does not start with a number: {lines[0][:80]!r}")
    rest = first[match.end():]
    if rest.startswith(("%", "/")) or (rest and rest[0] not in _SEPARATORS):
        raise ParseError(f"expected a plain number between 0.0 and 1.0, got {lines[0][:80]!r}")
    if _NUMBER.search(rest.lstrip(".")):
        raise ParseError(f"the reply holds more than one number: {lines[0][:80]!r}")
    return parse_number(match.group(0), "the relevance score", 0.0, 1.0)


def extract_json(text: str, *, allow_list: bool = False) -> Any:
    """The one JSON object (or list, if allowed) in a reply, fenced or surrounded by prose."""
    body = strip_fences(text or "")
    starts = [i for i in (body.find("{"), body.find("[") if allow_list else -1) if i >= 0]
    if not starts:
        raise ParseError("the reply contains no JSON object")
    start = min(starts)
    try:
        data, end = json.JSONDecoder().raw_decode(body, start)
    except json.JSONDecodeError as exc:
        raise ParseError(f"the JSON is not valid ({exc.msg} at character {exc.pos})") from None
    if body[end:].strip().startswith(("{", "[")):
        raise ParseError("the reply contains more than one JSON value")
    if not isinstance(data, dict) and not (allow_list and isinstance(data, list)):
        raise ParseError("the reply's JSON is not an object")
    return data


def _text(value: Any, what: str, *, required: bool) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ParseError(f"'{what}' is missing or empty")
        return None
    if not isinstance(value, str):
        raise ParseError(f"'{what}' must be a string, got {type(value).__name__}")
    return value.strip()


def parse_evaluation(text: str) -> AnswerEvaluation:
    """Criterion scores in [0, 1], reasoning, issues and an improvement hint from JSON.

    The reward is computed from the criteria (:func:`reward_from_criteria`); a
    ``reward_score`` field in the reply, if any, is ignored.
    """
    data = extract_json(text)
    scores = data
    for nested in ("criteria", "scores"):
        if isinstance(data.get(nested), dict):
            scores = {**data[nested], **{k: v for k, v in data.items() if k in
                                         ("relevance", "accuracy", "completeness")}}
    values = {}
    for name in ("relevance", "accuracy", "completeness"):
        if name not in scores:
            raise ParseError(f"'{name}' is missing")
        values[name] = parse_number(scores[name], f"'{name}'", 0.0, 1.0)
    issues = data.get("issues", [])
    if isinstance(issues, str):
        issues = [issues] if issues.strip() else []
    if not isinstance(issues, list) or not all(isinstance(i, str) for i in issues):
        raise ParseError("'issues' must be a list of strings")
    hint = _text(data.get("improvement_hint"), "improvement_hint", required=False)
    if hint is not None and hint.lower() in ("null", "none", "n/a"):
        hint = None
    return AnswerEvaluation(reasoning=_text(data.get("reasoning"), "reasoning", required=True),
                            issues=tuple(i.strip() for i in issues if i.strip()),
                            improvement_hint=hint, **values)


_TRUE, _FALSE = {"true", "yes", "supported"}, {"false", "no", "unsupported", "not supported"}


def _flag(value: Any, position: int) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ParseError(f"claim {position}: 'supported' must be true or false, got {value!r}")


def _source(value: Any, position: int, n_sources: int | None) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null", "none")):
        return None
    if isinstance(value, str) and re.fullmatch(r"\[?\s*\d+\s*\]?", value.strip()):
        value = int(value.strip().strip("[]"))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(f"claim {position}: 'source' must be a source number or null, "
                         f"got {value!r}")
    if value < 1 or (n_sources is not None and value > n_sources):
        raise ParseError(f"claim {position}: source {value} does not exist "
                         f"(sources are numbered 1..{n_sources})")
    return value


def parse_grounding(text: str, *, n_sources: int | None = None) -> Grounding:
    """Claims with a supported flag and the supporting source number from JSON."""
    data = extract_json(text, allow_list=True)
    claims = data if isinstance(data, list) else data.get("claims")
    if not isinstance(claims, list):
        raise ParseError("'claims' is missing or not a list")
    checks = []
    for position, item in enumerate(claims, start=1):
        if not isinstance(item, dict):
            raise ParseError(f"claim {position} is not an object")
        claim = _text(item.get("claim"), f"claims[{position}].claim", required=True)
        if "supported" not in item:
            raise ParseError(f"claim {position}: 'supported' is missing")
        supported = _flag(item["supported"], position)
        source = _source(item.get("source"), position, n_sources)
        checks.append(ClaimCheck(claim, supported, source))
    return Grounding(tuple(checks))


_SECTION = re.compile(r"^[#>*\s_-]*(problem|lesson)(?:\s+learned)?[*_\s]*[:：][*_\s]*",
                      re.IGNORECASE | re.MULTILINE)


def parse_reflexion(text: str) -> Reflexion:
    """``Problem: ...`` and ``Lesson: ...`` sections (or JSON with those keys), both non-empty."""
    body = strip_fences(text or "")
    if body.startswith("{"):
        data = extract_json(body)
        lesson = data.get("lesson", data.get("lesson_learned"))
        return Reflexion(_text(data.get("problem"), "problem", required=True),
                         _text(lesson, "lesson", required=True))
    marks = list(_SECTION.finditer(body))
    found: dict[str, str] = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        label = mark.group(1).lower()
        if label in found:
            raise ParseError(f"the reply has two '{label.title()}:' sections")
        found[label] = " ".join(body[mark.end():end].split()).strip(" *_")
    for label in ("problem", "lesson"):
        if not found.get(label):
            raise ParseError(f"the '{label.title()}:' section is missing or empty")
    return Reflexion(found["problem"], found["lesson"])


def parse_generated_query(text: str) -> str:
    """The query of a generation reply ``{"query": "..."}`` (one line, at most 500
    characters)."""
    query = _text(extract_json(text).get("query"), "query", required=True)
    assert query is not None
    query = " ".join(query.split())
    if len(query) > 500:
        raise ParseError(f"'query' is {len(query)} characters long; at most 500")
    return query


def parse_critique(text: str) -> tuple[bool, bool]:
    """``(answerable, gives_away)`` of a critique reply."""
    data = extract_json(text)
    flags = []
    for key in ("answerable", "gives_away"):
        value = data.get(key)
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            value = value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise ParseError(f"'{key}' must be true or false, got {value!r}")
        flags.append(value)
    return flags[0], flags[1]
