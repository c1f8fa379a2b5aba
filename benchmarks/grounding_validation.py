"""Validate the offline grounding judge against human labels, leave-one-set-out over BEGIN dev.

    .venv/bin/python benchmarks/grounding_validation.py [--resamples 2000]

Data (read in place from ``../shared/datasets/``, never copied into this repository): the BEGIN
dev splits of Wizard-of-Wikipedia (``begin-wow-dev``, 430 responses, CC BY 4.0), CMU Document
Grounded Conversations (``begin-cmu-dev``, 416, movies) and Topical-Chat (``begin-tc-dev``, 383,
CDLA-Sharing 1.0), each response with the knowledge it should rest on and a human label;
licences and notices beside each file. Dziri et al., "Evaluating Groundedness in Dialogue
Systems: The BEGIN Benchmark", arXiv:2105.00071. Positive = "Fully attributable"; "Not fully
attributable" and "Generic" are negative.

Two methods, each put through the same procedure:

* baseline: unigram precision, the share of the response's word tokens (lower-cased) found
  anywhere in the knowledge; the response passes at ``precision >= t``;
* ours: ``local:lexical`` grounding as the gate runs it (claims aligned with the best span,
  :mod:`eval_harness.judges.local.grounding`); a claim is supported at ``support >= t``, and
  the response passes when at least 0.8 of its claims are (the gate threshold, fixed a priori).
  A response with no checkable claim, or whose verdict depends on "cannot tell" claims, is
  not passed (the gate records it unscored). "Cannot tell" never changes whether a response
  passes; it only separates "failed" from "unscored", so it plays no part in choosing ``t``.

Choosing ``t`` without looking at the held-out labels: for each held-out set, ``t`` is the
value of a fixed grid (0.30, 0.31, ..., 0.95) with the best mean balanced accuracy over the
other two sets (each set weighs the same; ties: the lowest). The shipped threshold
(``judges.local.lexical_support``) is chosen the same way on all three sets.

Figures per held-out set: ROC AUC (threshold-free; ours ranks responses by the claim support
that decides the gate, the k-th lowest with k = the claims allowed to fail, a response with no
checkable claim lowest), balanced accuracy and Cohen's kappa of pass/not-pass with the human
labels, for both methods, and the difference ours - baseline with a 95% percentile bootstrap
interval (responses of the held-out set resampled with replacement, paired, seed 0).
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

from eval_harness.judges.local.grounding import align_answer

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SETS = {"wow": DATASETS / "begin-wow-dev" / "begin_dev_wow.tsv",
        "cmu": DATASETS / "begin-cmu-dev" / "begin_dev_cmu.tsv",
        "tc": DATASETS / "begin-tc-dev" / "begin_dev_tc.tsv"}
DATA = SETS["wow"]
POSITIVE = "Fully attributable"
GATE_SHARE = 0.8                                 # quality_gates.gates.grounding.threshold
GRID = np.round(np.arange(0.30, 0.951, 0.01), 2)
SEED, RESAMPLES = 0, 2000
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def load_begin(path: Path = DATA) -> tuple[list[str], list[str], np.ndarray]:
    """Responses, knowledge texts and labels (1 = fully attributable); CRLF lines are fine."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    labels = np.array([row["begin_label"].strip() == POSITIVE for row in rows], dtype=int)
    return [r["response"] for r in rows], [r["knowledge"] for r in rows], labels


def unigram_precision(response: str, source: str) -> float:
    """Share of the response's tokens that occur in the source (0.0 for an empty response)."""
    tokens = _TOKEN.findall(response.lower())
    vocabulary = set(_TOKEN.findall(source.lower()))
    return sum(t in vocabulary for t in tokens) / len(tokens) if tokens else 0.0


def claim_supports(response: str, source: str | Sequence[str]) -> list[float]:
    """Best-span support of each checkable claim of the response (empty: none to check)."""
    sources = [source] if isinstance(source, str) else list(source)
    return [a.support for a in align_answer(response, sources)]


def allowed_failures(claims: int) -> int:
    """How many of ``claims`` may be unsupported with the share still >= GATE_SHARE."""
    return int(math.floor(claims * (1 - GATE_SHARE) + 1e-9))


def gate_passes(supports: Sequence[float], threshold: float) -> int:
    """1 when the gate passes the response: claims, and >= GATE_SHARE of them supported."""
    if not supports:
        return 0  # no checkable claim: "cannot tell", never passed
    return int(sum(s >= threshold for s in supports) >= GATE_SHARE * len(supports) - 1e-9)


def deciding_support(supports: Sequence[float]) -> float:
    """The claim support that decides the gate (the response passes iff it reaches the
    threshold); -1.0 without a checkable claim."""
    if not supports:
        return -1.0
    return sorted(supports)[allowed_failures(len(supports))]


@dataclass(frozen=True)
class Scored:
    """One method on one set: a score for ranking and a decision rule for a threshold."""

    score: np.ndarray
    decide: Callable[[float], np.ndarray]


def baseline_method(responses: Sequence[str], sources: Sequence[str]) -> Scored:
    score = np.array([unigram_precision(r, s) for r, s in zip(responses, sources)])
    return Scored(score, lambda t: (score >= t).astype(int))


def aligned_method(responses: Sequence[str], sources: Sequence[str]) -> Scored:
    supports = [claim_supports(r, s) for r, s in zip(responses, sources)]
    # gate_passes(s, t) == deciding_support(s) >= t, so one array serves both
    score = np.array([deciding_support(s) for s in supports])
    return Scored(score, lambda t: (score >= t).astype(int))


def choose_threshold(methods: Sequence[Scored], labels: Sequence[np.ndarray]) -> float:
    """The grid value with the best mean balanced accuracy over the given sets (ties: lowest)."""
    accuracy = [np.mean([balanced_accuracy_score(y, m.decide(t)) for m, y in zip(methods, labels)])
                for t in GRID]
    return float(GRID[int(np.argmax(accuracy))])


def auc(labels: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC by the rank-sum formula (ties count half); NaN with one class only."""
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if not positives or not negatives:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    sorted_scores = score[order]
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    average = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(average, counts)
    return float((ranks[labels == 1].sum() - positives * (positives + 1) / 2)
                 / (positives * negatives))


def kappa(labels: np.ndarray, predicted: np.ndarray) -> float:
    """Cohen's kappa; 0.0 when both raters give one label only (no disagreement to measure)."""
    value = cohen_kappa_score(labels, predicted)
    return 0.0 if math.isnan(value) else float(value)


def binary_agreement(labels: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """(balanced accuracy, Cohen's kappa) of 0/1 arrays, fast enough for the bootstrap.

    balanced accuracy = (TPR + TNR) / 2; kappa = (p_o - p_e) / (1 - p_e) with p_e from the
    marginals (0.0 when p_e = 1). ``labels`` must hold both classes.
    """
    n = len(labels)
    tp = int(np.sum(labels & predicted))
    positives, called = int(labels.sum()), int(predicted.sum())
    tn = n - positives - called + tp
    balanced = (tp / positives + tn / (n - positives)) / 2
    observed = (tp + tn) / n
    expected = (positives * called + (n - positives) * (n - called)) / n ** 2
    return balanced, (0.0 if expected == 1 else (observed - expected) / (1 - expected))


@dataclass(frozen=True)
class Figures:
    auc: float
    balanced_accuracy: float
    kappa: float
    threshold: float

    @classmethod
    def of(cls, labels: np.ndarray, method: Scored, threshold: float) -> Figures:
        predicted = method.decide(threshold)
        return cls(auc(labels, method.score), balanced_accuracy_score(labels, predicted),
                   kappa(labels, predicted), threshold)


@dataclass(frozen=True)
class HeldOut:
    """Both methods on one held-out set, and the bootstrap intervals of ours - baseline."""

    name: str
    n: int
    positives: int
    baseline: Figures
    ours: Figures
    intervals: dict[str, tuple[float, float]]   # "auc", "balanced_accuracy", "kappa"
    not_checkable: int                          # responses with no checkable claim

    def difference(self, key: str) -> float:
        return getattr(self.ours, key) - getattr(self.baseline, key)


def paired_bootstrap(labels: np.ndarray, ours: Scored, baseline: Scored, t_ours: float,
                     t_base: float, *, resamples: int = RESAMPLES,
                     seed: int = SEED) -> dict[str, tuple[float, float]]:
    """95% percentile intervals of ours - baseline (AUC, balanced accuracy, kappa)."""
    rng = np.random.default_rng(seed)
    p_ours, p_base = ours.decide(t_ours), baseline.decide(t_base)
    draws: dict[str, list[float]] = {"auc": [], "balanced_accuracy": [], "kappa": []}
    n = len(labels)
    for _ in range(resamples):
        rows = rng.integers(0, n, n)
        y = labels[rows]
        if y.min() == y.max():
            continue  # one class only: no figure to compare
        draws["auc"].append(auc(y, ours.score[rows]) - auc(y, baseline.score[rows]))
        (ba_ours, k_ours), (ba_base, k_base) = (binary_agreement(y, p_ours[rows]),
                                                binary_agreement(y, p_base[rows]))
        draws["balanced_accuracy"].append(ba_ours - ba_base)
        draws["kappa"].append(k_ours - k_base)
    return {key: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5)))
            for key, v in draws.items()}


@dataclass(frozen=True)
class Validation:
    held_out: dict[str, HeldOut]        # leave-one-set-out
    shipped_threshold: float            # ours, chosen on all three sets
    shipped_baseline: float
    at_shipped: dict[str, tuple[Figures, Figures]]   # set -> (baseline, ours)


def load_sets(paths: dict[str, Path] = SETS):
    """name -> (labels, baseline method, our method)."""
    loaded = {}
    for name, path in paths.items():
        responses, sources, labels = load_begin(path)
        loaded[name] = (labels, baseline_method(responses, sources),
                        aligned_method(responses, sources))
    return loaded


def validate(paths: dict[str, Path] = SETS, *, resamples: int = RESAMPLES) -> Validation:
    data = load_sets(paths)
    names = list(data)
    held_out = {}
    for name in names:
        train = [n for n in names if n != name]
        labels = data[name][0]
        t_base = choose_threshold([data[n][1] for n in train], [data[n][0] for n in train])
        t_ours = choose_threshold([data[n][2] for n in train], [data[n][0] for n in train])
        base, ours = data[name][1], data[name][2]
        held_out[name] = HeldOut(
            name, len(labels), int(labels.sum()), Figures.of(labels, base, t_base),
            Figures.of(labels, ours, t_ours),
            paired_bootstrap(labels, ours, base, t_ours, t_base, resamples=resamples),
            int((ours.score < 0).sum()))
    everything = [data[n][0] for n in names]
    t_ours = choose_threshold([data[n][2] for n in names], everything)
    t_base = choose_threshold([data[n][1] for n in names], everything)
    at_shipped = {n: (Figures.of(data[n][0], data[n][1], t_base),
                      Figures.of(data[n][0], data[n][2], t_ours)) for n in names}
    return Validation(held_out, t_ours, t_base, at_shipped)


MIXED = 0.25  # "cannot tell": at least 1 in 4 grounded, on balanced classes (fixed a priori)


def cannot_tell_margin(band: Sequence[tuple[float, float, str]], threshold: float) -> float:
    """The widest band below ``threshold`` whose slices (from the top) all keep the
    class-balanced share of grounded responses at :data:`MIXED` or more."""
    low = threshold
    for start, share, _ in band:
        if share < MIXED:
            break
        low = start
    return round(threshold - low, 2)


def cannot_tell_band(threshold: float, paths: dict[str, Path] = SETS, *,
                     step: float = 0.05, depth: int = 6) -> list[tuple[float, float, str]]:
    """(slice start, share, counts) for slices of width ``step`` below ``threshold``: the
    class-balanced share of grounded responses among those whose deciding support lies in
    the slice (mean over the sets) and, per set, grounded/responses there."""
    data = load_sets(paths)
    rows = []
    for k in range(depth):
        high = threshold - k * step
        low = high - step
        shares, counts = [], []
        for labels, _, ours in data.values():
            inside = (ours.score >= low - 1e-9) & (ours.score < high - 1e-9)
            pos = labels[inside].sum() / labels.sum()
            neg = (1 - labels[inside]).sum() / (1 - labels).sum()
            shares.append(pos / (pos + neg) if pos + neg else 0.0)
            counts.append(f"{int(labels[inside].sum())}/{int(inside.sum())}")
        rows.append((round(low, 2), float(np.mean(shares)), ", ".join(counts)))
    return rows


def report(v: Validation) -> str:
    lines = ["leave-one-set-out (threshold chosen on the other two sets):",
             f"{'held out':<8} {'n (pos)':>10} {'method':<9} {'t':>5} {'AUC':>6} "
             f"{'bal.acc':>7} {'kappa':>6}"]
    for h in v.held_out.values():
        for label, f in (("baseline", h.baseline), ("ours", h.ours)):
            lines.append(f"{h.name:<8} {f'{h.n} ({h.positives})':>10} {label:<9} "
                         f"{f.threshold:>5.2f} {f.auc:>6.3f} {f.balanced_accuracy:>7.3f} "
                         f"{f.kappa:>6.3f}")
        diffs = "  ".join(f"{key} {h.difference(key):+.3f} [{lo:+.3f}, {hi:+.3f}]"
                          for key, (lo, hi) in h.intervals.items())
        lines.append(f"{'':<8} ours - baseline: {diffs}; no checkable claim: "
                     f"{h.not_checkable}")
    lines.append(f"shipped thresholds (all three sets): ours {v.shipped_threshold:.2f}, "
                 f"baseline {v.shipped_baseline:.2f}")
    for name, (base, ours) in v.at_shipped.items():
        lines.append(f"  {name:<4} balanced accuracy {ours.balanced_accuracy:.3f} vs "
                     f"{base.balanced_accuracy:.3f}, kappa {ours.kappa:.3f} vs {base.kappa:.3f}")
    return "\n".join(lines)


def parse_args(argv: list[str], description: str) -> argparse.Namespace | None:
    """The benchmarks' common options; None (after saying why) when the data is missing."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    args = parser.parse_args(argv)
    missing = [str(p) for p in SETS.values() if not p.exists()]
    if missing:
        print(f"{', '.join(missing)} not found: the BEGIN dev splits are read from ../shared.")
        return None
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv, __doc__.splitlines()[0])
    if args is None:
        return 2
    validation = validate(resamples=args.resamples)
    print(report(validation))
    print("cannot-tell band below the shipped threshold (class-balanced share grounded; "
          "grounded/responses per set):")
    band = cannot_tell_band(validation.shipped_threshold)
    for low, share, counts in band:
        print(f"  from {low:.2f}: {share:.2f} ({counts})")
    print(f"cannot-tell margin (slices with a share >= {MIXED}): "
          f"{cannot_tell_margin(band, validation.shipped_threshold):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
