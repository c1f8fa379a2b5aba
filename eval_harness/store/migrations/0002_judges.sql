-- LLM judges (issue #3): the reply cache and what the dual-judge run writes per query.

-- One row per distinct provider call. `key` is the SHA-256 of exactly what changes the
-- output (provider, model, prompt version, temperature, max tokens, system prompt and
-- messages); a call whose key is here is answered from this table: no provider call, no
-- cost. Unparseable replies are kept too (they are what the provider said); failed calls
-- (no reply) are not, so a rerun tries them again.
CREATE TABLE judge_cache (
    key            text PRIMARY KEY CHECK (key ~ '^[0-9a-f]{64}$'),
    provider       text NOT NULL,
    model          text NOT NULL,
    operation      text NOT NULL,
    prompt_version text NOT NULL,
    reply          text NOT NULL,
    input_tokens   integer NOT NULL DEFAULT 0,
    output_tokens  integer NOT NULL DEFAULT 0,
    cached_tokens  integer NOT NULL DEFAULT 0,
    batch          boolean NOT NULL DEFAULT false,
    run_id         text,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Per judged query, beside judged_docs / judge1_score / judge2_score (aligned arrays):
-- the outcome of each judgement ('scored'; 'unscored': the reply did not parse even after
-- one re-ask; 'failed': no reply after the retries), the prompt versions of judge 1 and
-- judge 2, and the run that wrote them. Meaningful only while judged_docs is not NULL.
ALTER TABLE ground_truth
    ADD COLUMN judge1_status         text[],
    ADD COLUMN judge2_status         text[],
    ADD COLUMN judge_prompt_versions text[],
    ADD COLUMN judge_run_id          text,
    ADD COLUMN judged_at             timestamptz;

CREATE INDEX api_retry_log_run_idx ON api_retry_log (run_id);
