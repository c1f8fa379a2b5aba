"""The ``calibration`` and ``history`` sections of config.yaml
(eval_harness.settings.calibration)."""

from __future__ import annotations

import pytest

from eval_harness.settings import ConfigError, load_settings

pytestmark = pytest.mark.unit


def test_calibration_config_errors_are_one_sentence(tmp_path):
    path = tmp_path / "config.yaml"
    for text, message in (("calibration:\n  grid: {step: 0.005}\n", "calibration.grid.step"),
                          ("calibration:\n  grid: {start: 0.5, stop: 0.9, step: 0.3}\n",
                           "not a multiple"),
                          ("calibration:\n  verdict: {full_succes: 0.8}\n", "unknown key"),
                          ("calibration:\n  verdict: {full_success: 0.6}\n", "partial_success"),
                          ("calibration:\n  cv_folds: 1\n", "cv_folds"),
                          ("calibration:\n  decision: {alpha: 0}\n", "decision.alpha"),
                          ("calibration:\n  decision: {alpha: 1.5}\n", "decision.alpha"),
                          ("calibration:\n  decision: {min_gain: -0.01}\n", "min_gain"),
                          ("calibration:\n  decision: {permutations: 99}\n", "permutations"),
                          ("calibration:\n  decision: {permutations: 1e4}\n", "permutations"),
                          ("calibration:\n  decision: {alfa: 0.1}\n", "unknown key")):
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_settings(path, environ={})
    path.write_text("history:\n  duckdb_path: x/h.duckdb\n")
    assert load_settings(path, environ={}).history_duckdb_path == tmp_path / "x" / "h.duckdb"


def test_min_judged_defaults_to_0_9_and_lies_in_0_1(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("calibration: {}\n")
    assert load_settings(path, environ={}).calibration.min_judged == 0.9
    path.write_text("calibration:\n  min_judged: 0.75\n")
    assert load_settings(path, environ={}).calibration.min_judged == 0.75
    for value, message in (("1.2", r"'calibration.min_judged' must lie in \[0, 1\]"),
                           ("-0.1", r"must lie in \[0, 1\]"),
                           ("high", "'calibration.min_judged' must be a number"),
                           ("true", "'calibration.min_judged' must be a number")):
        path.write_text(f"calibration:\n  min_judged: {value}\n")
        with pytest.raises(ConfigError, match=message):
            load_settings(path, environ={})

def test_calibration_decision_defaults_and_values(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("calibration:\n  seed: 3\n")
    decision = load_settings(path, environ={}).calibration.decision
    assert (decision.alpha, decision.min_gain, decision.permutations) == (0.05, 0.0, 10_000)
    path.write_text("calibration:\n  decision: {alpha: 0.01, min_gain: 0.02, permutations: 500}\n")
    decision = load_settings(path, environ={}).calibration.decision
    assert (decision.alpha, decision.min_gain, decision.permutations) == (0.01, 0.02, 500)
