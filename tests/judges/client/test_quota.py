"""The shared quota's parts on a real store: holders' shares of one account's rate, a dead
holder's share and reservations returned, one budget reserved and settled across holders,
and a limiter sending at its share."""

from __future__ import annotations

import asyncio

import pytest

from eval_harness.judges.client.adaptive import AdaptiveRateLimiter
from eval_harness.judges.client.quota import (
    QuotaHolder,
    SharedBudget,
    account_of,
    budget_scope,
    spent_in_scope,
)
from eval_harness.judges.client.rate_headers import RateSignal


def _gone(conn, holder: QuotaHolder) -> None:
    """``holder`` stopped beating a minute ago (its process was killed)."""
    conn.execute("UPDATE judge_holders SET heartbeat_at = heartbeat_at - interval '1 minute' "
                 "WHERE holder = %s", (holder.holder,))
    conn.commit()


def test_an_account_is_shared_by_its_active_holders_and_a_dead_ones_share_returns(store):
    account = account_of("openai", "http://127.0.0.1:1/v1", "sk-one")
    assert "sk-one" not in account and account != account_of("openai", None, "sk-two")
    with store.connection() as a_conn, store.connection() as b_conn, \
            store.connection() as c_conn:
        a, b, c = QuotaHolder(a_conn), QuotaHolder(b_conn), QuotaHolder(c_conn)
        a.register({"openai": account})
        assert a.share("openai") == 1.0  # alone: the whole rate
        b.register({"openai": account})
        assert b.share("openai") == 0.5  # sees a at once
        assert a.beat({"openai"}) == {"openai": 0.5}  # a sees b at its next heartbeat
        c.register({"openai": account_of("openai", None, "sk-other")})  # another account
        assert a.beat({"openai"}) == {"openai": 0.5}
        # b idle since its last heartbeat: a takes the whole rate again
        assert b.beat(set()) == {"openai": 0.5}
        assert a.beat({"openai"}) == {"openai": 1.0}
        b.beat({"openai"})
        assert a.beat({"openai"}) == {"openai": 0.5}
        _gone(b_conn, b)  # killed: no heartbeat for longer than the lease
        assert a.beat({"openai"}) == {"openai": 1.0}
        b.leave()
        a.leave()
        assert a_conn.execute("SELECT count(*) FROM judge_holders WHERE holder IN (%s, %s)",
                              (a.holder, b.holder)).fetchone()[0] == 0


def test_one_budget_across_holders_reserves_settles_and_forgets_a_dead_reservation(store):
    with store.connection() as a_conn, store.connection() as b_conn:
        scope = budget_scope(a_conn, "ds")
        assert scope.startswith("ds@20")
        a, b = QuotaHolder(a_conn), QuotaHolder(b_conn)
        a.register({})
        b.register({})
        budget_a = SharedBudget(a_conn, 1.0, scope=scope, line="label", holder=a.holder)
        budget_b = SharedBudget(b_conn, 1.0, scope=scope, line="label", holder=b.holder)
        assert budget_a.try_reserve(0.6)
        assert not budget_b.try_reserve(0.6)  # 0.6 reserved by a
        assert budget_b.pending == 1  # a's: worth waiting for
        budget_a.settle(0.6, 0.3)
        assert budget_b.try_reserve(0.6)  # 0.3 spent + 0.6 fits in 1.0
        assert not budget_a.try_reserve(0.2)
        assert budget_a.spent_usd == pytest.approx(0.3)
        assert "dataset ds on" in budget_a.exhausted_message(0.2)
        assert "all its processes together" in budget_a.exhausted_message(0.2)
        _gone(a_conn, b)  # b killed holding 0.6: its reservation no longer counts
        assert budget_a.try_reserve(0.2)
        assert budget_a.pending == 1  # only its own
        budget_a.settle(0.2, 0.1)
        budget_b.charge(0.05)  # a batch result nothing was reserved for
        assert spent_in_scope(a_conn, scope) == pytest.approx(0.45)
        a.leave()


def test_a_limiter_sends_at_its_share_of_what_the_provider_allows():
    async def main():
        clock = [0.0]

        async def sleep(seconds):
            clock[0] += seconds

        limiter = AdaptiveRateLimiter(120, 60_000, clock=lambda: clock[0], sleep=sleep)
        limiter.set_share(0.25)
        assert limiter.requests_per_minute == 30 and limiter.tokens_per_minute == 15_000
        # the provider's headers speak for the account: the share applies to them
        limiter.observe({}, outcome="success")
        limiter.controller.observe(RateSignal(request_limit=60.0), now=clock[0])
        limiter.observe({}, outcome="success")
        assert limiter.requests_per_minute == pytest.approx(15)
        for _ in range(4):
            await limiter.acquire()
        assert clock[0] == pytest.approx(4 * 4.0)  # one request every 4 s at 15/min
        with pytest.raises(ValueError):
            limiter.set_share(0)

    asyncio.run(main())
