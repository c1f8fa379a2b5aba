"""Four `judge --shard` processes of two layouts against one fake provider share one rate per
provider and one budget: the provider never sees more than the configured rate (+5%) in any
60 s window, all of them together spend the budget plus at most one call, no judgement is
paid twice, and the share of a process killed mid-run goes back to the others in seconds."""

from __future__ import annotations

import json
import signal
import time

import pytest

from colliding_processes import child_env, cli, fake_keys, finish, scalar, wait_until
from judge_projects import judge_project

RPM = 180  # per provider, configured: the four processes share it
KILL_AT = 30.0  # seconds after the first request
LAYOUTS = ("0/2", "1/2", "1/4", "3/4")  # 1/4 and 3/4 are halves of 1/2


def _max_in_window(times: list[float], window: float = 60.0) -> int:
    """The most requests any ``window`` seconds hold (windows starting at a request)."""
    times = sorted(times)
    best, end = 0, 0
    for start, t in enumerate(times):
        while end < len(times) and times[end] < t + window:
            end += 1
        best = max(best, end - start)
    return best


@pytest.mark.slow
def test_four_shard_processes_share_one_rate_and_one_budget(fresh, tmp_path, fake):
    project = judge_project(fresh, tmp_path, n_queries=170)
    env = child_env(fresh, **fake_keys(fake))
    limits = "".join(f"    {p}: {{requests_per_minute: {RPM}, tokens_per_minute: null}}\n"
                     for p in ("openai", "anthropic"))
    text = project["config"].read_text()
    text = text[:text.index("  rate_limits:")] + "  rate_limits:\n" + limits
    config = tmp_path / "shared.yaml"
    config.write_text(text.replace(
        "  budget_usd: 5.0\n",
        "  budget_usd: BUDGET\n  retest: {enabled: false}\n  anchors: {enabled: false}\n"))

    # over a minute of sending at the shared rate, a part of the dataset: a call costs about
    # $0.0002 on the fake provider's usage at the default prices, so $0.10 is some 450 calls,
    # 75 s at the 2 x 180 a minute the shards share.
    # Two calls in flight per provider and process (0.3 are needed at 3 a second and the fake's
    # latency): every call reserves its worst case, and with 8 each, 32 reservations of the
    # dearer judge stop fitting in what is left of a small budget long before it is spent.
    budget = 0.1
    config.write_text(config.read_text().replace("BUDGET", str(budget))
                      .replace("  concurrency: 8\n", "  concurrency: 2\n"))

    runs = {layout: cli("--config", config, "judge", "--json", "--shard", layout, env=env,
                        cwd=tmp_path) for layout in LAYOUTS}
    wait_until(lambda: fake.chat_requests > 0, what="the first request",
               processes=list(runs.values()), timeout=120)
    first = min(r.at for r in fake.chat_records())
    time.sleep(max(0.0, first + KILL_AT - time.monotonic()))
    victim = runs.pop("3/4")
    victim.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    victim.wait(timeout=10)
    outcomes = {layout: finish(run, timeout=300) for layout, run in runs.items()}
    summaries = {layout: json.loads(out) for layout, (_, out, _) in outcomes.items()}
    # 0 for a shard that finished, 1 for one the budget stopped (the command's exit codes)
    assert all(code == (1 if summaries[layout]["stopped"] == "budget" else 0)
               for layout, (code, _, _) in outcomes.items()), outcomes

    records = [r for r in fake.chat_records() if r.api in ("openai", "anthropic")]
    for api in ("openai", "anthropic"):
        times = [r.at for r in records if r.api == api]
        # every 60 s window: at most the configured rate, +5%
        assert _max_in_window(times) <= RPM * 1.05, (api, _max_in_window(times))
    # the killed process's share went back to the others within seconds: after its lease
    # ran out they sent at (nearly) the whole rate, not at three quarters of it (to the
    # provider the judges were waiting on: the faster judge waits for the other at times)
    after = {api: sum(killed_at + 5 <= r.at < killed_at + 20 for r in records if r.api == api)
             for api in ("openai", "anthropic")}
    assert max(after.values()) >= 0.9 * RPM / 60 * 15, after

    # one budget: the shards stopped on it with the one sentence, and what all of them spent
    # (the killed one included) is the budget plus at most one call
    spent = float(scalar(fresh, "SELECT coalesce(sum(estimated_cost), 0) FROM api_cost_log"))
    most = float(scalar(fresh, "SELECT coalesce(max(estimated_cost), 0) FROM api_cost_log"))
    assert budget * 0.95 <= spent <= budget + most, (spent, budget, most)
    assert any(s["stopped"] == "budget" for s in summaries.values()), summaries
    for s in summaries.values():
        if s["stopped"] == "budget":
            assert "is used up" in s["stop_reason"] and "all its processes" in s["stop_reason"]
        # (the JSON rounds to six decimals, so it may be up to 5e-7 above the sum)
        assert s["budget_usd"] == budget and s["spent_together_usd"] <= spent + 1e-6
    assert max(s["spent_together_usd"] for s in summaries.values()) == pytest.approx(
        spent, abs=1e-6)  # the JSON rounds to six decimals
    # no judgement paid twice: every request body the provider saw is distinct
    bodies = [json.dumps(r.body, sort_keys=True) for r in records]
    assert len(bodies) == len(set(bodies))
    # and nothing of the sharing outlives the runs but the killed process's row
    assert scalar(fresh, "SELECT count(*) FROM judge_holders") <= 1
