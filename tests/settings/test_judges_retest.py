"""``judges.retest``: off by default, on with a section or ``true``, every key validated."""

from __future__ import annotations

import pytest

from eval_harness.settings import ConfigError
from eval_harness.settings.judges import RetestSettings, parse_judge_settings

pytestmark = pytest.mark.unit


def test_retest_is_off_by_default_and_when_disabled():
    assert parse_judge_settings({}).retest == RetestSettings(enabled=False)
    assert not parse_judge_settings({"retest": {"enabled": False, "queries": 5}}).retest.enabled
    assert not parse_judge_settings({"retest": False}).retest.enabled


def test_a_retest_section_switches_it_on_with_its_values():
    assert parse_judge_settings({"retest": {"queries": 20, "repeats": 3, "seed": 0}}).retest \
        == RetestSettings(True, 20, 3, 0)
    assert parse_judge_settings({"retest": True}).retest == RetestSettings(enabled=True)
    assert parse_judge_settings({"retest": {"repeats": 5}}).retest == RetestSettings(
        True, 20, 5, 0)


def test_the_retest_has_its_own_budget_line_without_limit_by_default():
    assert parse_judge_settings({"retest": True}).retest.budget_usd is None
    judges = parse_judge_settings({"budget_usd": 5, "retest": {"budget_usd": 0.5}})
    assert (judges.budget_usd, judges.retest.budget_usd) == (5.0, 0.5)
    assert parse_judge_settings({"retest": {"budget_usd": None}}).retest.budget_usd is None


@pytest.mark.parametrize("section, message", [
    ({"retest": {"queries": 1}}, "'judges.retest.queries' must be an integer >= 2"),
    ({"retest": {"repeats": 0}}, "'judges.retest.repeats' must be an integer >= 1"),
    ({"retest": {"seed": -1}}, "'judges.retest.seed' must be an integer >= 0"),
    ({"retest": {"repeats": 2.5}}, "'judges.retest.repeats' must be an integer"),
    ({"retest": {"enabled": "yes"}}, "'judges.retest.enabled' must be true or false"),
    ({"retest": {"repeat": 3}}, "repeat"),
    ({"retest": 3}, "judges.retest"),
    ({"retest": {"budget_usd": -1}}, "'judges.retest.budget_usd' must be >= 0"),
    ({"retest": {"budget_usd": "lots"}}, "'judges.retest.budget_usd' must be a number of USD"),
])
def test_bad_retest_settings_name_the_key(section, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("'", "'")):
        parse_judge_settings(section)
