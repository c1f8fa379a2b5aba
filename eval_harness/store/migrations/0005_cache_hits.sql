-- Judge reply cache hits (the run report, issue #7).
--
-- A hit on judge_cache costs nothing and writes no api_cost_log row. The ledger counts the
-- hits of a run per (provider, model, operation) and writes one row per such key each time
-- it flushes (so a run can have several rows per key: sum them). `saved_cost` is what the
-- cached replies would have cost as live calls at list price (their stored usage priced
-- with judges.prices, no batch discount). A batch result reaching its own judge through the
-- cache is the batch being delivered, not a saving, and is not counted.
CREATE TABLE api_cache_hit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    run_id     text,
    api_name   text NOT NULL,
    model      text NOT NULL,
    operation  text NOT NULL,
    hits       integer NOT NULL CHECK (hits > 0),
    saved_cost float8 NOT NULL DEFAULT 0 CHECK (saved_cost >= 0)
);
CREATE INDEX api_cache_hit_log_run_idx ON api_cache_hit_log (run_id);
