-- Test-retest of the judges (issue #23): each judge re-scores every pair of a seeded sample
-- of queries `repeats` times past the reply cache. Repeat 0 is the score the run's labels
-- came from (the cached reply); repeats 1.. are the retests. score is NULL where a scoring
-- was unscored or failed; label is score > agreement.relevance_threshold.
CREATE TABLE judge_retests (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    run_id          text NOT NULL,
    dataset         text NOT NULL,
    judge           smallint NOT NULL CHECK (judge IN (1, 2)),
    judge_spec      text NOT NULL,
    model           text NOT NULL,
    prompt_version  text,
    query_id        integer REFERENCES ground_truth (id) ON DELETE SET NULL,
    query_key       text NOT NULL,   -- the query's external id (kept if the row goes)
    doc_id          integer NOT NULL,
    repeat          smallint NOT NULL CHECK (repeat >= 0),
    score           float8 CHECK (score BETWEEN 0 AND 1),
    label           boolean,
    UNIQUE (run_id, judge, query_key, doc_id, repeat)
);
CREATE INDEX judge_retests_run_idx ON judge_retests (run_id);

-- Why a billed call was made: 'label' (the run's own judgements, cached) or 'retest' (a
-- retest scoring, never cached). The cost report shows each purpose as its own line.
ALTER TABLE api_cost_log ADD COLUMN purpose text NOT NULL DEFAULT 'label';
