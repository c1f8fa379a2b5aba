"""The judges: section of config.yaml: the shipped defaults, environment overrides, API keys
and the errors that name the key."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eval_harness.settings import ConfigError, load_settings
from eval_harness.settings.judges import AnchorSettings, JudgeSettings, parse_judge_settings
from paths import REPO

pytestmark = pytest.mark.unit

REPO_CONFIG = REPO / "config.yaml"


def test_the_shipped_config_has_the_judge_defaults():
    judges = load_settings(REPO_CONFIG, environ={}).judges
    assert (judges.judge1, judges.judge2) == ("openai:gpt-4o", "anthropic:claude-haiku-4-5")
    assert dict(judges.temperatures) == {"relevance": 0.0, "evaluation": 0.0, "grounding": 0.0,
                                         "reflexion": 0.7, "generation": 0.7, "critique": 0.0}
    assert dict(judges.max_tokens) == {"relevance": 100, "evaluation": 500, "grounding": 500,
                                       "reflexion": 1000, "generation": 200, "critique": 100}
    assert judges.retry.max_retries == 4 and judges.retry.base_delay_seconds == 1.0
    assert judges.retry.jitter == 0.2 and judges.hybrid_top_k == 5
    assert judges.prices["gpt-4o"].batch_discount == 0.5
    # the shipped file switches the anchor set on, with budget lines; the rest is the default
    assert judges.anchors == AnchorSettings(enabled=True, pairs=100, seed=0, budget_usd=1.0)
    assert not judges.retest.enabled and judges.retest.budget_usd == 2.0
    assert judges == replace(JudgeSettings(), prices=judges.prices, anchors=judges.anchors,
                             retest=replace(JudgeSettings().retest, budget_usd=2.0))


def test_environment_overrides_judges_and_budget():
    judges = parse_judge_settings({"judge1": "openai:gpt-4o", "budget_usd": 3},
                                  {"EVAL_HARNESS_JUDGE1": "local:embedding",
                                   "EVAL_HARNESS_JUDGE2": "anthropic:claude-3-5-haiku-20241022",
                                   "EVAL_HARNESS_JUDGE_BUDGET_USD": "none"})
    assert judges.judge1 == "local:embedding"
    assert judges.judge2 == "anthropic:claude-3-5-haiku-20241022"  # any model name is accepted
    assert judges.budget_usd is None
    assert parse_judge_settings({}, {"EVAL_HARNESS_JUDGE_BUDGET_USD": "2.5"}).budget_usd == 2.5


def test_api_keys_are_read_by_settings_and_never_shown():
    settings = load_settings(REPO_CONFIG, environ={"ANTHROPIC_API_KEY": "sk-ant-secret-123",
                                                   "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
                                                   "OPENAI_API_KEY": "sk-openai-secret-456"})
    assert settings.anthropic_api_key == "sk-ant-secret-123"
    assert settings.anthropic_base_url == "http://127.0.0.1:9"
    assert "secret" not in repr(settings)


@pytest.mark.parametrize("section, message", [
    ({"judge1": "gpt-4o"}, "must look like provider:model"),
    ({"judge1": "google:gemini"}, "unknown provider 'google'"),
    ({"judge2": "local:bm25"}, "unknown local judge 'bm25'"),
    ({"judge2": "openai:"}, "names no model"),
    ({"concurency": 4}, "unknown key 'judges.concurency'"),
    ({"concurrency": 0}, "'judges.concurrency' must be an integer >= 1"),
    ({"budget_usd": -1}, "'judges.budget_usd' must be >= 0"),
    ({"budget_usd": "lots"}, "number of USD or none"),
    ({"temperatures": {"judging": 0.0}}, "unknown key 'judges.temperatures.judging'"),
    ({"max_tokens": {"relevance": 0}}, "'judges.max_tokens.relevance' must be an integer"),
    ({"rate_limits": {"openai": {"requests_per_minute": 0}}}, "must be > 0"),
    ({"prices": {"my-model": {"input": 1.0}}}, "needs 'output'"),
    ({"retry": {"max_retries": -1}}, "'judges.retry.max_retries'"),
    ({"local": {"embedding_floor": 0.9, "embedding_ceiling": 0.3}}, "must be below"),
    ({"send_temperature": {"anthropic": "yes"}}, "must be true or false"),
])
def test_configuration_errors_name_the_key(section, message):
    with pytest.raises(ConfigError, match=message) as error:
        parse_judge_settings(section, {})
    assert str(error.value).startswith("config.yaml:") and "\n" not in str(error.value)


def test_grid_pool_is_off_by_default_and_a_flag():
    assert parse_judge_settings({}).grid_pool is False
    assert load_settings(REPO_CONFIG, environ={}).judges.grid_pool is False
    assert parse_judge_settings({"grid_pool": True}).grid_pool is True
    with pytest.raises(ConfigError, match="'judges.grid_pool' must be true or false"):
        parse_judge_settings({"grid_pool": "yes"})
