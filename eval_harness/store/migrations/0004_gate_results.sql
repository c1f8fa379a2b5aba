-- Quality gates (issue #6): stored per-answer gate results and the regeneration queue.
--
-- Neither table references `answers` with a foreign key: `answers` is a contract that a user
-- may replace with a view over their own schema. Results of answers that no longer exist are
-- ignored by every summary, which joins the current answers.

-- One row per (answer, gate): the latest evaluation. A result is current for an answer when
-- content_hash equals the hash of the answer's query, answer text and sources as they are now
-- (eval_harness.answers.CONTENT_HASH_SQL) and gate_version equals the gate's version (what the
-- score depends on besides the answer: rule parameters, judge model, prompt version). Anything
-- else is stale and the next run evaluates the answer again. The threshold is not part of the
-- version: changing it re-derives `passed` from the stored score without re-evaluating.
CREATE TABLE gate_results (
    answer_id    text NOT NULL,
    gate         text NOT NULL,
    content_hash text NOT NULL,
    gate_version text NOT NULL,
    score        float8 CHECK (score BETWEEN 0.0 AND 1.0),   -- NULL: the gate could not score it
    passed       boolean NOT NULL,
    threshold    float8 NOT NULL CHECK (threshold BETWEEN 0.0 AND 1.0),
    details      jsonb NOT NULL DEFAULT '{}'::jsonb,
    latency_ms   float8 NOT NULL DEFAULT 0 CHECK (latency_ms >= 0),
    evaluated_at timestamptz NOT NULL DEFAULT now(),
    run_id       text,
    PRIMARY KEY (answer_id, gate),
    CHECK (score IS NOT NULL OR NOT passed)   -- an unscored answer never passes
);

-- Answers the answer_reward gate judged poor (reward below the reflexion threshold), listed
-- once each with the judge's improvement hint, for the live assistant to regenerate. The
-- assistant sets consumed_at when it has used the entry; a later poor verdict on a changed
-- answer (another content_hash) queues it again.
CREATE TABLE regeneration_queue (
    answer_id        text PRIMARY KEY,
    content_hash     text NOT NULL,
    reward           float8 NOT NULL CHECK (reward BETWEEN -1.0 AND 1.0),
    improvement_hint text,
    issues           jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(issues) = 'array'),
    run_id           text,
    queued_at        timestamptz NOT NULL DEFAULT now(),
    consumed_at      timestamptz
);
CREATE INDEX regeneration_queue_pending_idx ON regeneration_queue (queued_at)
    WHERE consumed_at IS NULL;
