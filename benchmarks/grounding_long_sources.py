"""Stress test of the offline grounding judge on long sources, built from BEGIN dev.

    .venv/bin/python benchmarks/grounding_long_sources.py [--resamples 2000]

There is no labelled long-document data here (news summaries and the like), so long sources
are made from what exists (``../shared/datasets/begin-*-dev``, read in place; see
benchmarks/grounding_validation.py for the data and its licences): each response's knowledge
passage is put, at a random place, among other knowledge passages of the same set (none equal
to it), until the source has 3,000 to 4,000 characters. The human label still says whether the
response is supported by its passage, now inside a long source.

Conditions, each through the grounding gate's rule (pass = at least 0.8 of the claims
supported; "cannot tell" and answers with no checkable claim never pass):

* short: the knowledge passage alone (as labelled);
* long: the passage inside the 3,000-4,000-character source;
* long, cut at 500: the long source cut to the old ``grounding_source_chars`` default (500) by
  ``prompts.truncate``; the judge now says "cannot tell" for what the cut may hide.

Figures: the pass rate of grounded responses (true-positive rate) and of ungrounded ones
(false-positive rate) per set, for ``local:lexical`` as shipped (local-grounding-v1) and for the
judge it replaces (local-v3: best window including the whole source, threshold 0.73), with
95% paired bootstrap intervals of long - short (responses resampled, seed 0).

Multi-part answers: three grounded responses of different passages joined into one answer,
their passages spread over one long source (with fillers): the answer should pass. The same
with the third response replaced by an ungrounded one that states something (a checkable
claim, no question) and whose passage is also in the source: it should fail (a claim in three
unsupported). 300 answers per set and kind, Wilson 95% intervals.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grounding_validation import SETS, load_begin, parse_args  # noqa: E402

from eval_harness.gates.llm_gates import grounding_result  # noqa: E402
from eval_harness.settings.judges import LocalJudgeSettings  # noqa: E402
from eval_harness.judges.local.grounding import checkable_claims  # noqa: E402
from eval_harness.judges.local.verdicts import check_grounding_aligned  # noqa: E402
from eval_harness.judges.local.relevance import (CLAIM_SUPPORT_THRESHOLD,  # noqa: E402
                                       check_grounding_locally, claim_support)
from eval_harness.judges.prompts import truncate  # noqa: E402
from eval_harness.metrics.proportions import wilson_interval  # noqa: E402

SEED, RESAMPLES, GATE_SHARE, OLD_CUT = 0, 2000, 0.8, 500
LOW, HIGH = 3000, 4000
MULTI_PART = 300
SUPPORT = LocalJudgeSettings().lexical_support


def long_source(passages: Sequence[str], fillers: Sequence[str], rng: random.Random, *,
                low: int = LOW, high: int = HIGH) -> str:
    """``passages`` at random places among ``fillers`` (none repeated, none equal to a
    passage) until the text has between ``low`` and ``high`` characters (or fillers run out)."""
    target = rng.randint(low, high)
    parts, size = list(passages), sum(len(p) + 1 for p in passages)
    pool = [f for f in dict.fromkeys(fillers) if f not in passages]
    rng.shuffle(pool)
    for filler in pool:
        if size + len(filler) + 1 > high:
            continue
        parts.append(filler)
        size += len(filler) + 1
        if size >= target:
            break
    rng.shuffle(parts)
    return " ".join(parts)


def aligned_passes(answer: str, sources: Sequence[str]) -> tuple[bool, bool]:
    """(passed, unscored) through the gate's rule with local:lexical as shipped."""
    result = grounding_result(check_grounding_aligned(answer, sources, SUPPORT), {},
                              GATE_SHARE, 0.0)
    return result.score is not None and result.score >= GATE_SHARE, result.score is None


def old_passes(answer: str, sources: Sequence[str]) -> tuple[bool, bool]:
    """(passed, unscored) of the replaced judge (local-v3 windows, no claims = 1.0)."""
    share = check_grounding_locally(answer, sources, claim_support,
                                    CLAIM_SUPPORT_THRESHOLD).supported_share
    return share is None or share >= GATE_SHARE, False


JUDGES: dict[str, Callable[[str, Sequence[str]], tuple[bool, bool]]] = {
    "local-grounding-v1 (shipped)": aligned_passes, "local-v3 (replaced)": old_passes}


@dataclass(frozen=True)
class Rates:
    """Pass rates of grounded (TPR) and ungrounded (FPR) responses, and the share of grounded
    responses failed and left unscored ("cannot tell")."""

    judge: str
    dataset: str
    condition: str
    tpr: float
    fpr: float
    grounded_failed: float
    grounded_unscored: float
    tpr_change: tuple[float, float, float] | None = None   # long - short, (value, low, high)
    fpr_change: tuple[float, float, float] | None = None


def _change(short: np.ndarray, long: np.ndarray, rng: np.random.Generator,
            resamples: int) -> tuple[float, float, float]:
    n = len(short)
    draws = [float(long[rows].mean() - short[rows].mean())
             for rows in (rng.integers(0, n, n) for _ in range(resamples))]
    return (float(long.mean() - short.mean()), float(np.percentile(draws, 2.5)),
            float(np.percentile(draws, 97.5)))


def single_response_rates(*, resamples: int = RESAMPLES,
                          sets: dict[str, Path] = SETS) -> list[Rates]:
    rows = []
    for name, path in sets.items():
        responses, knowledge, labels = load_begin(path)
        rng = random.Random(SEED)
        longs = [long_source([k], knowledge, rng) for k in knowledge]
        conditions = {"short": knowledge, "long": longs,
                      f"long, cut at {OLD_CUT}": [truncate(s, OLD_CUT) for s in longs]}
        for judge, passes in JUDGES.items():
            outcome = {c: np.array([passes(r, [s]) for r, s in zip(responses, sources)],
                                   dtype=bool) for c, sources in conditions.items()}
            boot = np.random.default_rng(SEED)
            for condition, result in outcome.items():
                passed, unscored = result[:, 0], result[:, 1]
                changes = (None, None)
                if condition != "short":
                    short = outcome["short"][:, 0]
                    changes = (_change(short[labels == 1], passed[labels == 1], boot, resamples),
                               _change(short[labels == 0], passed[labels == 0], boot, resamples))
                grounded = labels == 1
                rows.append(Rates(judge, name, condition, float(passed[grounded].mean()),
                                  float(passed[~grounded].mean()),
                                  float((~passed[grounded] & ~unscored[grounded]).mean()),
                                  float(unscored[grounded].mean()), *changes))
    return rows


@dataclass(frozen=True)
class MultiPart:
    judge: str
    dataset: str
    kind: str          # "3 grounded" (should pass) / "2 grounded + 1 ungrounded" (should fail)
    answers: int
    passed: int

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.passed, self.answers)


def multi_part_rates(*, answers: int = MULTI_PART,
                     sets: dict[str, Path] = SETS) -> list[MultiPart]:
    rows = []
    for name, path in sets.items():
        responses, knowledge, labels = load_begin(path)
        rng = random.Random(SEED)
        grounded = [i for i in range(len(labels)) if labels[i] == 1]
        # an ungrounded response that states something: a checkable claim and no question
        # (a question or a pleasantry added to a grounded answer leaves it grounded)
        ungrounded = [i for i in range(len(labels)) if labels[i] == 0
                      and checkable_claims(responses[i]) and "?" not in responses[i]]
        cases: dict[str, list[tuple[str, str]]] = {"3 grounded": [],
                                                   "2 grounded + 1 ungrounded": []}
        for kind, cases_of_kind in cases.items():
            while len(cases_of_kind) < answers:
                picked = rng.sample(grounded, 3 if kind == "3 grounded" else 2)
                if kind != "3 grounded":
                    picked.append(rng.choice(ungrounded))
                passages = [knowledge[i] for i in picked]
                if len(set(passages)) < len(passages):
                    continue  # one passage per part
                answer = " ".join(responses[i].strip().rstrip(".") + "." for i in picked)
                cases_of_kind.append((answer, long_source(passages, knowledge, rng)))
        for judge, passes in JUDGES.items():
            for kind, cases_of_kind in cases.items():
                passed = sum(passes(a, [s])[0] for a, s in cases_of_kind)
                rows.append(MultiPart(judge, name, kind, len(cases_of_kind), passed))
    return rows


def _fmt(change: tuple[float, float, float] | None) -> str:
    return "" if change is None else f"{change[0]:+.3f} [{change[1]:+.3f}, {change[2]:+.3f}]"


def main(argv: list[str]) -> int:
    args = parse_args(argv, __doc__.splitlines()[0])
    if args is None:
        return 2
    print(f"{'judge':<29} {'set':<4} {'condition':<18} {'TPR':>6} {'FPR':>6} "
          f"{'grounded: failed':>16} {'unscored':>8}  TPR long-short              "
          f"FPR long-short")
    for r in single_response_rates(resamples=args.resamples):
        print(f"{r.judge:<29} {r.dataset:<4} {r.condition:<18} {r.tpr:>6.3f} {r.fpr:>6.3f} "
              f"{r.grounded_failed:>16.3f} {r.grounded_unscored:>8.3f}  "
              f"{_fmt(r.tpr_change):<27} {_fmt(r.fpr_change)}")
    print("\nmulti-part answers in one long source (pass rate, Wilson 95%):")
    for m in multi_part_rates():
        low, high = m.interval
        print(f"{m.judge:<29} {m.dataset:<4} {m.kind:<26} {m.passed:>4}/{m.answers} = "
              f"{m.passed / m.answers:.3f} [{low:.3f}, {high:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
