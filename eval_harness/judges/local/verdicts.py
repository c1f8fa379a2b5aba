"""Verdicts of the offline grounding judge, with the evidence for each and an honest "cannot tell".

A claim is aligned with its best span (:mod:`eval_harness.judges.local.grounding`); with the
support threshold ``t`` (``judges.local.lexical_support``) and the band
:data:`CANNOT_TELL_MARGIN` below it, the claim is

* supported when its best support reaches ``t``;
* unsupported when it stays below ``t - CANNOT_TELL_MARGIN``;
* "cannot tell" in between, where the evidence is mixed. Also "cannot tell", never
  "unsupported", when a source reached the judge cut (it ends in ``[...]``): the support may
  lie in the part cut off, and a cut must not decide a verdict silently.

An answer with no checkable claim ("Yes.", "96 %", "I agree!") is "cannot tell" as a whole:
without the question the judge cannot know what it asserts. A "cannot tell" claim never counts
as supported: :attr:`Grounding.supported_share` is the share with every undecided claim
unsupported. The grounding gate scores an answer only when its verdict does not depend on the
undecided claims (:attr:`LocalGrounding.share_bounds`), and records it unscored otherwise.

Each claim keeps its evidence: the source, the span (offsets and text), the support, the words
of the claim the span lacks and, when a span matched more words but stated something else, that
span and the conflict (a figure, a name, a negation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_harness.judges.local.grounding import SIGNALS, Alignment, Span, align_answer
from eval_harness.judges.protocol import ClaimCheck, Grounding

GROUNDING_VERSION = "local-grounding-v1"  # stored as the grounding result's prompt version
# The band where the evidence is mixed, on BEGIN dev (benchmarks/grounding_validation.py):
# within 0.05 below the threshold at least 1 in 4 responses is grounded (class-balanced),
# further below fewer.
CANNOT_TELL_MARGIN = 0.05
CUT_MARK = "[...]"       # prompts.truncate's mark at the end of a cut source
EVIDENCE_CHARS = 300     # the span text kept in a result, at most

SUPPORTED, UNSUPPORTED, CANNOT_TELL = "supported", "unsupported", "cannot tell"


def _evidence(span: Span | None) -> dict[str, Any] | None:
    if span is None:
        return None
    text = span.text if len(span.text) <= EVIDENCE_CHARS else \
        span.text[:EVIDENCE_CHARS].rstrip() + " ..."
    return {"source": span.source, "start": span.start, "end": span.end, "text": text}


@dataclass(frozen=True)
class ClaimEvidence(ClaimCheck):
    """A claim's verdict and its evidence (``source`` is set only when supported, as for
    every judge; ``evidence`` names the aligned span whatever the verdict)."""

    verdict: str = UNSUPPORTED
    evidence: dict[str, Any] | None = field(default=None, compare=False)
    missing_words: tuple[str, ...] = ()
    conflict: dict[str, Any] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "supported": self.supported, "verdict": self.verdict,
                "source": self.source, "support": self.support, "evidence": self.evidence,
                "missing_words": list(self.missing_words), "conflict": self.conflict}


@dataclass(frozen=True)
class LocalGrounding(Grounding):
    """:class:`Grounding` with each claim's evidence and the judge's "cannot tell"s.

    ``cannot_tell`` says why the answer as a whole cannot be judged (None when it can);
    ``sources_cut`` lists the sources that reached the judge cut.
    """

    cannot_tell: str | None = None
    sources_cut: tuple[int, ...] = ()
    signals: tuple[str, ...] = SIGNALS

    @property
    def undecided(self) -> int:
        return sum(getattr(c, "verdict", None) == CANNOT_TELL for c in self.claims)

    @property
    def share_bounds(self) -> tuple[float, float] | None:
        """Supported share with every undecided claim unsupported, and with each supported."""
        low = self.supported_share
        return None if low is None else (low, low + self.undecided / len(self.claims))

    def to_dict(self) -> dict[str, Any]:
        return {"claims": [c.to_dict() if isinstance(c, ClaimEvidence) else
                           {"claim": c.claim, "supported": c.supported, "source": c.source}
                           for c in self.claims],
                "supported_share": self.supported_share, "undecided_claims": self.undecided,
                "cannot_tell": self.cannot_tell, "sources_cut": list(self.sources_cut),
                "signals": list(self.signals)}


def verdict(support: float, threshold: float, *, margin: float = CANNOT_TELL_MARGIN,
            cut: bool = False) -> str:
    """``supported`` from ``threshold`` up; ``cannot tell`` within ``margin`` below it (or
    anywhere below it when a source was cut); ``unsupported`` under that."""
    if support >= threshold:
        return SUPPORTED
    return CANNOT_TELL if cut or support >= threshold - margin else UNSUPPORTED


def judge_alignments(alignments: Sequence[Alignment], threshold: float, *,
                     margin: float = CANNOT_TELL_MARGIN,
                     sources_cut: tuple[int, ...] = ()) -> LocalGrounding:
    """The verdicts of aligned claims, with their evidence (see the module docstring)."""
    checks = []
    for a in alignments:
        decided = verdict(a.support, threshold, margin=margin, cut=bool(sources_cut))
        supported = decided == SUPPORTED
        conflict = None if a.rival is None or supported else {
            **_evidence(a.rival), "support": round(a.rival_support, 6),
            "conflicts": list(a.conflicts)}
        checks.append(ClaimEvidence(
            a.claim, supported, a.span.source if supported and a.span else None,
            support=round(a.support, 6), verdict=decided, evidence=_evidence(a.span),
            missing_words=a.missing_words, conflict=conflict))
    why = None if checks else "the answer makes no claim the local judge can check"
    return LocalGrounding(tuple(checks), cannot_tell=why, sources_cut=sources_cut)


def check_grounding_aligned(answer: str, sources: Sequence[str], threshold: float, *,
                            margin: float = CANNOT_TELL_MARGIN) -> LocalGrounding:
    """Align each claim of ``answer`` with the sources and judge it (module docstring)."""
    stripped = [s.rstrip() for s in sources]
    cut = tuple(i for i, s in enumerate(stripped, start=1) if s.endswith(CUT_MARK))
    texts = [s[:-len(CUT_MARK)] if i in cut else s for i, s in enumerate(stripped, start=1)]
    return judge_alignments(align_answer(answer, texts), threshold, margin=margin,
                            sources_cut=cut)
