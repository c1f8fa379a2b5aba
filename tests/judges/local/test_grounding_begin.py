"""The local grounding judge against human labels: BEGIN dev (three sets, read from ../shared).

The figures come from benchmarks/grounding_validation.py (its docstring has the method:
leave-one-set-out, thresholds chosen on the other two sets for both methods, paired bootstrap
intervals). They are printed (pytest -s) and repeated in the assertion messages. The metric
helpers are checked against scikit-learn on random cases.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, roc_auc_score

from paths import REPO

_spec = importlib.util.spec_from_file_location("grounding_validation",
                                               REPO / "benchmarks" / "grounding_validation.py")
validation = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = validation  # dataclasses look their module up there
_spec.loader.exec_module(validation)

SIZES = {"wow": (430, 180), "cmu": (416, 59), "tc": (383, 74)}


@pytest.fixture(scope="module")
def figures():
    missing = [str(p) for p in validation.SETS.values() if not p.exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} absent (the BEGIN dev splits live in ../shared)")
    return validation.validate(resamples=300)


def test_the_data_is_the_documented_splits(figures):
    for name, path in validation.SETS.items():
        responses, sources, labels = validation.load_begin(path)
        assert (len(responses), int(labels.sum())) == SIZES[name], name
        assert len(sources) == len(responses)


def test_leave_one_set_out_beats_the_baseline_on_every_held_out_set(figures):
    report = validation.report(figures)
    print("\n" + report)
    for held in figures.held_out.values():
        assert held.ours.balanced_accuracy > held.baseline.balanced_accuracy, report
        assert held.ours.auc > held.baseline.auc, report
        low, high = held.intervals["balanced_accuracy"]
        assert low <= held.difference("balanced_accuracy") <= high, report


def test_the_shipped_threshold_is_the_configured_one(figures):
    from eval_harness.settings import load_settings
    from eval_harness.settings.judges import LocalJudgeSettings

    configured = load_settings(REPO / "config.yaml", environ={}).judges.local.lexical_support
    assert figures.shipped_threshold == configured == LocalJudgeSettings().lexical_support
    for name, (baseline, ours) in figures.at_shipped.items():
        assert ours.balanced_accuracy > baseline.balanced_accuracy, name


def test_the_cannot_tell_margin_follows_its_rule(figures):
    from eval_harness.judges.local.verdicts import CANNOT_TELL_MARGIN

    band = validation.cannot_tell_band(figures.shipped_threshold)
    assert validation.cannot_tell_margin(band, figures.shipped_threshold) == CANNOT_TELL_MARGIN


@pytest.mark.unit
def test_unigram_precision_hand_worked():
    # "the cat sat" against "a cat sat down": cat, sat found; the not -> 2 / 3
    assert validation.unigram_precision("The cat sat", "a cat sat down") == pytest.approx(2 / 3)
    assert validation.unigram_precision("", "anything") == 0.0
    assert validation.claim_supports("Sure!", "anything") == []  # no claim: nothing to support


@pytest.mark.unit
def test_the_deciding_support_reproduces_the_gate_rule():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        supports = list(rng.random(rng.integers(0, 12)))
        threshold = float(rng.random())
        share_rule = validation.gate_passes(supports, threshold)
        assert share_rule == int(validation.deciding_support(supports) >= threshold)
    # 4 claims may not lose one (0.75 < 0.8); 5 may (0.8)
    assert validation.gate_passes([0.9, 0.9, 0.9, 0.1], 0.5) == 0
    assert validation.gate_passes([0.9, 0.9, 0.9, 0.9, 0.1], 0.5) == 1
    assert validation.gate_passes([], 0.5) == 0  # "cannot tell" never passes


def test_fast_metrics_agree_with_scikit_learn():
    rng = np.random.default_rng(1)
    for _ in range(500):
        n = int(rng.integers(2, 60))
        labels = rng.integers(0, 2, n)
        labels[:2] = (0, 1)  # both classes
        predicted = rng.integers(0, 2, n)
        score = np.round(rng.random(n), 1)  # ties on purpose
        balanced, kappa = validation.binary_agreement(labels, predicted)
        assert balanced == pytest.approx(balanced_accuracy_score(labels, predicted))
        expected = cohen_kappa_score(labels, predicted)
        assert kappa == pytest.approx(0.0 if np.isnan(expected) else expected)
        assert validation.auc(labels, score) == pytest.approx(roc_auc_score(labels, score))
    assert np.isnan(validation.auc(np.ones(4, dtype=int), np.arange(4.0)))  # one class only
