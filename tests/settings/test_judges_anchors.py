"""``judges.anchors`` (off when absent) and ``judges.drift``: defaults, every key validated."""

from __future__ import annotations

import re

import pytest

from eval_harness.settings import ConfigError
from eval_harness.settings.judges import AnchorSettings, DriftSettings, parse_judge_settings

pytestmark = pytest.mark.unit


def test_anchors_are_off_when_absent_and_on_with_a_section():
    assert parse_judge_settings({}).anchors == AnchorSettings(enabled=False)
    assert parse_judge_settings({"anchors": {"pairs": 100, "seed": 0}}).anchors == \
        AnchorSettings(True, 100, 0)
    assert parse_judge_settings({"anchors": True}).anchors == AnchorSettings(enabled=True)
    assert not parse_judge_settings({"anchors": {"enabled": False}}).anchors.enabled


def test_anchors_have_their_own_budget_line_without_limit_by_default():
    assert parse_judge_settings({"anchors": True}).anchors.budget_usd is None
    judges = parse_judge_settings({"budget_usd": 5, "anchors": {"budget_usd": 0.25}})
    assert (judges.budget_usd, judges.anchors.budget_usd) == (5.0, 0.25)
    assert judges.anchors == AnchorSettings(True, 100, 0, 0.25)


def test_drift_defaults_and_values():
    assert parse_judge_settings({}).drift == DriftSettings(0.05, 0.7, True, 0.95)
    assert parse_judge_settings({"drift": {"max_flip_rate": 0.1, "blocking": False}}).drift \
        == DriftSettings(0.1, 0.7, False, 0.95)


@pytest.mark.parametrize("section, message", [
    ({"anchors": {"pairs": 1}}, "'judges.anchors.pairs' must be an integer >= 2"),
    ({"anchors": {"seed": -1}}, "'judges.anchors.seed' must be an integer >= 0"),
    ({"anchors": {"pair": 10}}, "pair"),
    ({"anchors": 3}, "judges.anchors"),
    ({"anchors": {"budget_usd": -0.5}}, "'judges.anchors.budget_usd' must be >= 0"),
    ({"anchors": {"budget_usd": True}}, "'judges.anchors.budget_usd' must be a number"),
    ({"drift": {"max_flip_rate": 1.5}}, "'judges.drift.max_flip_rate' must lie in [0, 1]"),
    ({"drift": {"min_human_agreement": -0.1}},
     "'judges.drift.min_human_agreement' must lie in [0, 1]"),
    ({"drift": {"blocking": "no"}}, "'judges.drift.blocking' must be true or false"),
    ({"drift": {"max_flips": 0.1}}, "max_flips"),
])
def test_bad_anchor_and_drift_settings_name_the_key(section, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_judge_settings(section)
