"""Validate the local grounding judge against human labels (BEGIN, Wizard-of-Wikipedia dev).

    .venv/bin/python benchmarks/grounding_validation.py [path/to/begin_dev_wow.tsv]

Data: ``../shared/datasets/begin-wow-dev/begin_dev_wow.tsv`` (430 dialogue responses, each
with the knowledge sentence it should rest on and a human label; CC BY 4.0; Dziri et al.,
"Evaluating Groundedness in Dialogue Systems: The BEGIN Benchmark", arXiv:2105.00071). It is
read in place, never copied into this repository. Positive class: "Fully attributable";
"Not fully attributable" and "Generic" are negative.

Two scorers, each giving one number per response (knowledge = the only source):

* baseline: unigram precision, the share of the response's word tokens (lower-cased) that
  occur in the knowledge;
* ours: ``local:lexical`` grounding (:func:`eval_harness.judges.local.check_grounding_locally`
  with :func:`~eval_harness.judges.local.claim_support`): the mean support of the response's
  claims, each by its best source window (1.0 for a response without claims, as the gate
  scores it).

ROC AUC needs no threshold. Balanced accuracy needs a decision rule, chosen without looking at
the test labels: 5-fold stratified cross-validation (seed 0). On each fold's training part the
threshold is the one of a fixed grid (0.30, 0.31, ..., 0.95) that maximises balanced accuracy;
it labels the held-out part. The five held-out parts together give the reported balanced
accuracy. For ours the rule is the gate's: a claim is supported when its support reaches the
threshold, and a response is grounded when its share of supported claims reaches the grounding
gate's 0.8 (fixed a priori, config.yaml). Both methods go through the same procedure. The
median of the five fold thresholds is what config.yaml's ``judges.local.lexical_support`` uses.
"""

from __future__ import annotations

import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.metrics import balanced_accuracy_score, roc_auc_score
from sklearn.model_selection import StratifiedKFold

from eval_harness.judges.local import check_grounding_locally, claim_support

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "begin-wow-dev" \
    / "begin_dev_wow.tsv"
POSITIVE = "Fully attributable"
GATE_SHARE = 0.8                                 # quality_gates.gates.grounding.threshold
GRID = np.round(np.arange(0.30, 0.951, 0.01), 2)
FOLDS, SEED = 5, 0
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class MethodFigures:
    name: str
    auc: float
    balanced_accuracy: float           # cross-validated
    fold_thresholds: tuple[float, ...]

    def line(self) -> str:
        return (f"{self.name:<34} ROC AUC {self.auc:.4f}   balanced accuracy (5-fold CV) "
                f"{self.balanced_accuracy:.4f}   fold thresholds "
                f"{', '.join(f'{t:.2f}' for t in self.fold_thresholds)}")


def load_begin(path: Path = DATA) -> tuple[list[str], list[str], np.ndarray]:
    """Responses, knowledge texts and labels (1 = fully attributable)."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    labels = np.array([row["begin_label"] == POSITIVE for row in rows], dtype=int)
    return [r["response"] for r in rows], [r["knowledge"] for r in rows], labels


def unigram_precision(response: str, source: str) -> float:
    """Share of the response's tokens that occur in the source (0.0 for an empty response)."""
    tokens = _TOKEN.findall(response.lower())
    vocabulary = set(_TOKEN.findall(source.lower()))
    return sum(t in vocabulary for t in tokens) / len(tokens) if tokens else 0.0


def claim_supports(response: str, source: str) -> list[float]:
    """Best-window support of each claim of the response (empty: no claims)."""
    grounding = check_grounding_locally(response, [source], claim_support, threshold=1.0)
    return [check.support for check in grounding.claims]


def _cross_validated(decide, n: int, labels: np.ndarray) -> tuple[float, tuple[float, ...]]:
    """Balanced accuracy of held-out predictions, thresholds tuned on the training folds."""
    predicted = np.zeros(n, dtype=int)
    chosen = []
    folds = StratifiedKFold(FOLDS, shuffle=True, random_state=SEED)
    for train, test in folds.split(np.zeros(n), labels):
        accuracy = [balanced_accuracy_score(labels[train], decide(train, t)) for t in GRID]
        threshold = float(GRID[int(np.argmax(accuracy))])  # ties: the lowest threshold
        chosen.append(threshold)
        predicted[test] = decide(test, threshold)
    return balanced_accuracy_score(labels, predicted), tuple(chosen)


def validate(path: Path = DATA) -> tuple[MethodFigures, MethodFigures]:
    responses, sources, labels = load_begin(path)
    n = len(labels)
    baseline = np.array([unigram_precision(r, s) for r, s in zip(responses, sources)])
    supports = [claim_supports(r, s) for r, s in zip(responses, sources)]
    ours = np.array([float(np.mean(s)) if s else 1.0 for s in supports])

    def baseline_decides(rows, threshold):
        return (baseline[rows] >= threshold).astype(int)

    def gate_decides(rows, threshold):
        return np.array([1 if not supports[i] else
                         int(np.mean([s >= threshold for s in supports[i]]) >= GATE_SHARE)
                         for i in rows])

    figures = []
    for name, score, decide in (("baseline: unigram precision", baseline, baseline_decides),
                                ("ours: local:lexical grounding", ours, gate_decides)):
        accuracy, thresholds = _cross_validated(decide, n, labels)
        figures.append(MethodFigures(name, roc_auc_score(labels, score), accuracy, thresholds))
    return figures[0], figures[1]


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DATA
    if not path.exists():
        print(f"{path} not found: the BEGIN dev split is read from ../shared (see docstring).")
        return 2
    baseline, ours = validate(path)
    print(f"BEGIN WoW dev, {path}")
    print(baseline.line())
    print(ours.line())
    print(f"median fold threshold (ours): {np.median(ours.fold_thresholds):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
