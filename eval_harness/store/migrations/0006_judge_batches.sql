-- Judge batches submitted to a provider's batch API (`judge --batch`).
--
-- A row is written and committed as soon as the provider has accepted the batch, so a run
-- that is killed, or whose batch outlives judges.batch.max_wait_seconds, leaves its batch
-- here: the next batch run polls it (and stores its results) instead of submitting and
-- paying for the same requests again.
--
-- `keys` are the judge_cache keys of the batch's requests (its custom ids); `requests` maps
-- each key to what is needed to store its reply without the request itself (model,
-- operation, prompt_version, query_id), since a later run may not plan every request of
-- an earlier batch. A batch may hold several models of one provider, hence `models`.
--
-- status: 'submitted' (open: poll it), 'ended' (its results are in judge_cache and
-- api_cost_log, written in the transaction that set this status, so they are stored once),
-- 'abandoned' (the provider no longer knows it, or it expired; its unanswered requests are
-- asked again).
CREATE TABLE judge_batches (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider     text NOT NULL,
    batch_id     text NOT NULL,
    models       text[] NOT NULL,
    keys         text[] NOT NULL CHECK (cardinality(keys) > 0),
    requests     jsonb NOT NULL,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    status       text NOT NULL DEFAULT 'submitted'
                 CHECK (status IN ('submitted', 'ended', 'abandoned')),
    ended_at     timestamptz,
    run_id       text,
    UNIQUE (provider, batch_id)
);
-- "open batches of this provider holding any of these keys": keys && planned keys
CREATE INDEX judge_batches_open_keys_idx ON judge_batches USING gin (keys)
    WHERE status = 'submitted';
