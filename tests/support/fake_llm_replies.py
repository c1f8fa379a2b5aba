"""What the fake LLM server answers: plausible, deterministic replies to the judges' prompts.

A responder is a function ``(api, system, first_user_text, body) -> reply text``; the server
uses :func:`default_reply` unless a test sets its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

MALFORMED_REPLY = "I would say this is fairly relevant overall."

Responder = Callable[[str, str, str, dict], str]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def default_reply(api: str, system: str, user: str, body: dict) -> str:
    """Plausible, deterministic replies to the judges' four prompts."""
    if "Relevance score" in user:
        query = user.split("Query:", 1)[1].split("\n\nDocument:", 1)[0]
        document = user.split("\n\nDocument:", 1)[1]
        q = _words(query)
        share = len(q & _words(document)) / len(q) if q else 0.0
        return f"{min(1.0, round(share * 1.25, 1)):.1f}"
    if "quality of an AI-generated answer" in system:
        return json.dumps({"relevance": 0.9, "accuracy": 0.8, "completeness": 0.6,
                           "reasoning": "Addresses the query from the context.",
                           "issues": ["misses one aspect"],
                           "improvement_hint": "Cover every aspect of the question."})
    if "grounded in numbered source" in system:
        return json.dumps({"claims": [{"claim": "The answer's first claim.", "supported": True,
                                       "source": 1}]})
    if "You write search queries" in system:  # ground-truth generate: the writer
        kind = user.split("Kind: ", 1)[1].split("\n", 1)[0].strip()
        document = user.split("Document: ", 1)[1].rsplit("\n\nJSON:", 1)[0]
        terms = sorted(w for w in _words(document) if len(w) > 5)[:3] or ["topic"]
        if kind == "unanswerable":
            return json.dumps({"query": f"What do saxophone makers think of {terms[0]}?"})
        return json.dumps({"query": f"What is reported about {' and '.join(terms)}?"})
    if "You check one search query" in system:  # ground-truth generate: the critic
        query = user.split("Query: ", 1)[1].split("\n\nDocument:", 1)[0]
        document = user.split("\n\nDocument: ", 1)[1]
        asked = _words(query) - {"what", "reported", "about", "and", "think", "makers"}
        answerable = "saxophone" not in query and bool(asked & _words(document))
        return json.dumps({"answerable": answerable, "gives_away": False})
    if "Reflect on it" in system:
        return "Problem: The answer ignored the context.\nLesson: Answer from the sources."
    return "0.5"


def poor_verdicts_for(marker: str):
    """A responder: a poor answer evaluation (a reflexion and a regeneration entry follow)
    for answers containing ``marker``, :func:`default_reply` otherwise."""
    def responder(api: str, system: str, user: str, body: dict) -> str:
        if "quality of an AI-generated answer" in system and marker in user:
            return json.dumps({"relevance": 0.2, "accuracy": 0.1, "completeness": 0.1,
                               "reasoning": "Off topic.", "issues": ["ignores the question"],
                               "improvement_hint": "Answer the question asked."})
        return default_reply(api, system, user, body)

    return responder
