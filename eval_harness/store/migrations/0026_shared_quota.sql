-- One rate limit and one budget for every process that judges against this store (many
-- `judge --shard I/N` processes, Dagster's multiprocess, Celery or Kubernetes executors).
--
-- A holder is one judge session of one process. It says it is alive every half second; one
-- not heard from for a few seconds is gone (killed, its machine lost): its share of the rate
-- and its reservations of the budget go back to the others.
CREATE TABLE judge_holders (
    holder       text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The providers a holder sends to, by account (a hash of the provider, its server and its
-- key; never the key): the configured rate of an account is divided among its active holders.
CREATE TABLE judge_rate_shares (
    provider text NOT NULL,
    account  text NOT NULL,
    holder   text NOT NULL REFERENCES judge_holders (holder) ON DELETE CASCADE,
    active   boolean NOT NULL,   -- had calls waiting or on their way since its last heartbeat
    PRIMARY KEY (provider, account, holder)
);

-- What each holder spent and holds reserved of one budget: judges.budget_usd ('label'), the
-- retest and anchor lines, for one dataset on one UTC day (scope 'dataset@2026-12-03').
-- Spending stays when its holder is gone; reservations count only while it is alive.
CREATE TABLE judge_budget_spend (
    scope        text NOT NULL,
    line         text NOT NULL,
    holder       text NOT NULL,
    spent_usd    float8 NOT NULL DEFAULT 0,
    reserved_usd float8 NOT NULL DEFAULT 0,
    pending      integer NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, line, holder)
);
