"""The environment a test gives `eval-harness judge` run in-process against the fake server."""

from __future__ import annotations


def judge_cli_environment(monkeypatch, store, fake, *, tag: str = "cli") -> None:
    """DATABASE_URL on ``store``, both providers on ``fake`` with made-up keys (``tag`` names
    the test in them), and no judge override left over from the caller's environment."""
    monkeypatch.setenv("DATABASE_URL", store.url)
    for variable in ("EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2",
                     "EVAL_HARNESS_JUDGE_BUDGET_USD", "EVAL_HARNESS_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-test-{tag}-000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", f"sk-ant-test-{tag}-000000")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)
