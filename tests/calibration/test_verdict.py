"""The P@5 verdict (eval_harness.calibration.verdict): the bands' edges, exact comparisons,
and the sentence naming a band the ground truth cannot reach. The figure a calibration's
verdict is given on: tests/calibration/test_run.py and test_decision_ppi.py."""

from __future__ import annotations

import doctest

import pytest

from eval_harness.calibration import verdict as verdict_module
from eval_harness.calibration.verdict import precision_verdict


def test_the_doctests_run():
    assert doctest.testmod(verdict_module).failed == 0


def test_verdict_edges_and_bands():
    assert precision_verdict(0.75) == "full_success"
    assert precision_verdict(0.7499) == "partial_success"
    assert precision_verdict(0.70) == "partial_success"
    assert precision_verdict(0.6999) == "failure"
    assert precision_verdict(0.0) == "failure" and precision_verdict(1.0) == "full_success"
    assert precision_verdict(0.8, full_success=0.85, partial_success=0.8) == "partial_success"
    assert precision_verdict(35 / 50) == "partial_success"  # a mean P@5 of exactly 0.7
    with pytest.raises(ValueError, match="bands"):
        precision_verdict(0.7, full_success=0.6, partial_success=0.7)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        precision_verdict(float("nan"))
