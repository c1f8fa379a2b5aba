"""The local grounding judge against human labels (BEGIN WoW dev, read from ../shared).

The figures come from benchmarks/grounding_validation.py (its docstring has the method: ROC
AUC, and balanced accuracy with thresholds chosen by 5-fold cross-validation for both
methods). They are printed (pytest -s) and repeated in the assertion messages.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("grounding_validation",
                                               REPO / "benchmarks" / "grounding_validation.py")
validation = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = validation  # dataclasses look their module up there
_spec.loader.exec_module(validation)


@pytest.fixture(scope="module")
def figures():
    if not validation.DATA.exists():
        pytest.skip(f"{validation.DATA} is absent (the BEGIN dev split lives in ../shared)")
    return validation.validate(validation.DATA)


def test_the_data_is_the_documented_split(figures):
    responses, sources, labels = validation.load_begin(validation.DATA)
    assert len(responses) == len(sources) == 430 and int(labels.sum()) == 180


def test_local_grounding_beats_the_unigram_precision_baseline(figures):
    baseline, ours = figures
    report = f"\n{baseline.line()}\n{ours.line()}"
    print(report)
    assert ours.auc > baseline.auc, report
    assert ours.balanced_accuracy > baseline.balanced_accuracy, report


def test_unigram_precision_hand_worked():
    # "the cat sat" against "a cat sat down": cat, sat found; the not -> 2 / 3
    assert validation.unigram_precision("The cat sat", "a cat sat down") == pytest.approx(2 / 3)
    assert validation.unigram_precision("", "anything") == 0.0
    assert validation.claim_supports("Sure!", "anything") == []  # no claim: nothing to support
