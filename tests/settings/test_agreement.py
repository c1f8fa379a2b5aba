"""The ``agreement`` section of config.yaml (eval_harness.settings.agreement)."""

from __future__ import annotations

import pytest

from eval_harness.settings import AgreementSettings, ConfigError, load_settings

pytestmark = pytest.mark.unit


def test_agreement_settings_parse_and_reject_bad_values(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("agreement:\n  kappa_floor: 0.6\n  bootstrap_resamples: 500\n")
    parsed = load_settings(config, environ={}).agreement
    assert (parsed.kappa_floor, parsed.bootstrap_resamples, parsed.disagreement_threshold) == (
        0.6, 500, 0.4)
    assert load_settings(environ={"EVAL_HARNESS_CONFIG": str(config)}).agreement.kappa_floor \
        == 0.6
    for bad in ("kappa_flor: 0.7", "disagreement_threshold: 1.5", "bootstrap_resamples: 0",
                "relevance_threshold: high"):
        config.write_text(f"agreement:\n  {bad}\n")
        with pytest.raises(ConfigError, match="agreement"):
            load_settings(config, environ={})


def test_agreement_settings_read_the_rule_and_reject_an_unknown_one():
    from eval_harness.settings import ConfigError
    from eval_harness.settings.values import validated
    assert AgreementSettings().disagreement_rule == "exclude"
    assert validated(AgreementSettings, {"disagreement_rule": "mean"}).disagreement_rule == "mean"
    with pytest.raises(ConfigError, match="disagreement_rule' must be exclude, judge1 or mean"):
        validated(AgreementSettings, {"disagreement_rule": "vote"}, ("agreement",))
