"""Every prompt the LLM judges send, each with a version stored beside every result.

Change a prompt's wording -> bump its version: the version is part of the cache key and is
written next to the scores, so results from different wordings are never mixed silently.

Sources: relevance scale and anchors from seed story 1.11; answer evaluation criteria and
weights from story 2.5, with issues and an improvement hint from task R5; grounding from
feature 67.6; reflexion ("Problem" + "Lesson") from the epic 2 tech spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RELEVANCE_VERSION = "relevance-v1"
EVALUATION_VERSION = "evaluation-v1"
GROUNDING_VERSION = "grounding-v1"
REFLEXION_VERSION = "reflexion-v1"
GENERATION_VERSION = "generation-v1"
CRITIQUE_VERSION = "critique-v1"

VERSIONS = {"relevance": RELEVANCE_VERSION, "evaluation": EVALUATION_VERSION,
            "grounding": GROUNDING_VERSION, "reflexion": REFLEXION_VERSION,
            "generation": GENERATION_VERSION, "critique": CRITIQUE_VERSION}

# Long texts are cut so one call stays within a predictable token budget; the cut is part of
# the messages, hence of the cache key.
MAX_DOCUMENT_CHARS = 12_000
MAX_SOURCE_CHARS = 4_000


@dataclass(frozen=True)
class Prompt:
    version: str
    system: str
    user: str


RELEVANCE_SYSTEM = """\
You are evaluating the relevance of a document for a given user query.

Rate the document's relevance on a scale from 0.0 to 1.0:
- 0.0 = Completely irrelevant (no semantic overlap)
- 0.3 = Marginally relevant (tangential connection)
- 0.5 = Moderately relevant (some useful information)
- 0.7 = Highly relevant (directly addresses query)
- 1.0 = Perfectly relevant (comprehensive answer)

Return only the number: a float between 0.0 and 1.0, nothing else."""

EVALUATION_SYSTEM = """\
You are evaluating the quality of an AI-generated answer to a user query, given the context
that was retrieved for it. Score three criteria, each from 0.0 to 1.0:

1. relevance (weight 40%): does the answer directly address the user's query?
   1.0 perfectly addresses it; 0.5 partially; 0.0 completely irrelevant.
2. accuracy (weight 40%): is the answer grounded in the provided context (no hallucinations)?
   1.0 fully based on the context; 0.5 partially, some speculation; 0.0 contradicts or
   ignores the context.
3. completeness (weight 20%): does the answer cover all important aspects?
   1.0 comprehensive; 0.5 some aspects missing; 0.0 major gaps.

Also give your reasoning in 1-2 sentences, the concrete issues with the answer (an empty list
if there are none) and one sentence telling the writer how to improve it (null if nothing
needs improving).

Return only valid JSON:
{"relevance": <float 0-1>, "accuracy": <float 0-1>, "completeness": <float 0-1>,
 "reasoning": "<1-2 sentences>", "issues": ["<issue>", ...],
 "improvement_hint": "<one sentence>" or null}"""

GROUNDING_SYSTEM = """\
You check whether an answer is grounded in numbered source documents.

Split the answer into its factual claims (one claim per statement; skip greetings and
statements that assert nothing). For each claim decide whether the sources support it:
supported is true only if at least one source states or directly implies it. Give the number
of the best supporting source, or null when none supports it.

Return only valid JSON:
{"claims": [{"claim": "<claim text>", "supported": true or false, "source": <number or null>}]}"""

REFLEXION_SYSTEM = """\
An AI assistant gave a poor answer. Reflect on it so the assistant does better next time.

Write exactly two short sections:
Problem: what went wrong, in 1-2 sentences.
Lesson: what to do differently in the future, in 1-2 sentences, phrased as advice that
applies to similar questions.

Return only those two lines, each starting with its label."""

GENERATION_SYSTEM = """\
You write search queries for testing a retrieval system, each from one document.

Write one query of the kind asked for:
- question: a question a user might ask that this document answers, in their own words;
- paraphrase: a question this document answers, using as few of the document's own words as
  you can (synonyms, another phrasing);
- unanswerable: a question on the same subject that this document does NOT answer, and that
  a collection of similar documents would not answer either.
Never put the answer in the query, and never copy a sentence of the document.

Return only a JSON object: {"query": "..."}"""

CRITIQUE_SYSTEM = """\
You check one search query written from one document, for a retrieval test set.

Answer two questions about the query and the document:
- answerable: can the query be answered from this document alone? (true or false)
- gives_away: does the query itself state the answer, or copy a sentence of the document,
  so that a search for it is trivial? (true or false)

Return only a JSON object: {"answerable": true|false, "gives_away": true|false}"""

CORRECTIONS = {
    "relevance": "Return only the number: a float between 0.0 and 1.0, nothing else.",
    "evaluation": "Return only the JSON object described above, with relevance, accuracy and "
                  "completeness as floats between 0.0 and 1.0.",
    "grounding": "Return only the JSON object described above.",
    "reflexion": "Return only the two lines 'Problem: ...' and 'Lesson: ...'.",
    "generation": 'Return only the JSON object {"query": "..."} with a non-empty query.',
    "critique": 'Return only the JSON object {"answerable": true|false, '
                '"gives_away": true|false}.',
}


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marked with [...] where it was cut."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " [...]"


def _numbered(sources: Sequence[str], limit: int) -> str:
    if not sources:
        return "(no sources)"
    return "\n\n".join(f"[{i}] {truncate(s, limit)}" for i, s in enumerate(sources, start=1))


def relevance_prompt(query: str, document: str) -> Prompt:
    return Prompt(RELEVANCE_VERSION, RELEVANCE_SYSTEM,
                  f"Query: {query.strip()}\n\nDocument: {truncate(document, MAX_DOCUMENT_CHARS)}"
                  "\n\nRelevance score (0.0-1.0):")


def evaluation_prompt(query: str, context: Sequence[str], answer: str) -> Prompt:
    return Prompt(EVALUATION_VERSION, EVALUATION_SYSTEM,
                  f"Query: {query.strip()}\n\nRetrieved context:\n"
                  f"{_numbered(context, MAX_SOURCE_CHARS)}\n\n"
                  f"Generated answer:\n{truncate(answer, MAX_DOCUMENT_CHARS)}")


def grounding_prompt(answer: str, sources: Sequence[str]) -> Prompt:
    return Prompt(GROUNDING_VERSION, GROUNDING_SYSTEM,
                  f"Sources:\n{_numbered(sources, MAX_SOURCE_CHARS)}\n\n"
                  f"Answer:\n{truncate(answer, MAX_DOCUMENT_CHARS)}")


def reflexion_prompt(query: str, answer: str, reasoning: str, issues: Sequence[str]) -> Prompt:
    listed = "\n".join(f"- {issue}" for issue in issues) or "- (none listed)"
    return Prompt(REFLEXION_VERSION, REFLEXION_SYSTEM,
                  f"Query: {query.strip()}\n\n"
                  f"Answer given:\n{truncate(answer, MAX_DOCUMENT_CHARS)}\n\n"
                  f"Evaluation reasoning: {reasoning.strip() or '(none)'}\nIssues found:\n{listed}")


def generation_prompt(document: str, kind: str) -> Prompt:
    """Ask for one query of ``kind`` (question, paraphrase, unanswerable) from ``document``."""
    return Prompt(GENERATION_VERSION, GENERATION_SYSTEM,
                  f"Kind: {kind}\n\nDocument: {truncate(document, MAX_SOURCE_CHARS)}\n\n"
                  "JSON:")


def critique_prompt(document: str, query: str) -> Prompt:
    """Ask whether ``query`` is answerable from ``document`` and whether it gives it away."""
    return Prompt(CRITIQUE_VERSION, CRITIQUE_SYSTEM,
                  f"Query: {query.strip()}\n\nDocument: "
                  f"{truncate(document, MAX_SOURCE_CHARS)}\n\nJSON:")


def correction(operation: str, error: str) -> str:
    """The re-ask sent once after an unparseable reply: the parse error and the format."""
    return f"Your reply could not be used: {error}. {CORRECTIONS[operation]}"
