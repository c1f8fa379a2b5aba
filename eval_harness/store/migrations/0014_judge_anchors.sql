-- The judges' anchor set (issue #23): a seeded sample of judged (query, document) pairs of a
-- dataset, chosen once and frozen with the score and label each judge gave then and any human
-- verdict on the pair (an adjudication of the review queue). Every later run with
-- judges.anchors on re-judges the anchors past the reply cache and compares (judge_anchor_runs).
-- The texts are frozen too, so the question asked again is the one asked then.
CREATE TABLE judge_anchors (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset         text NOT NULL,
    query_key       text NOT NULL,   -- the query's external id
    doc_id          integer NOT NULL,
    judge           smallint NOT NULL CHECK (judge IN (1, 2)),
    judge_spec      text NOT NULL,
    model           text NOT NULL,
    prompt_version  text,
    query_text      text NOT NULL,
    doc_text        text NOT NULL,
    frozen_score    float8 CHECK (frozen_score BETWEEN 0 AND 1),
    frozen_label    boolean,
    human_label     boolean,         -- NULL: no human verdict on the pair when frozen
    frozen_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (dataset, judge, query_key, doc_id)
);

-- One judge's re-judging of the anchors in one run, compared with the frozen values.
CREATE TABLE judge_anchor_runs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    run_id          text NOT NULL,
    dataset         text NOT NULL,
    judge           smallint NOT NULL CHECK (judge IN (1, 2)),
    judge_spec      text NOT NULL,
    prompt_version  text,
    frozen_spec     text NOT NULL,   -- the judge the anchors were frozen with
    frozen_prompt_version text,
    pairs           integer NOT NULL,  -- anchors scored both then and now
    flips           integer NOT NULL,
    flip_rate       float8,
    flip_low        float8,
    flip_high       float8,
    score_shift     float8,
    shift_low       float8,
    shift_high      float8,
    human_pairs     integer NOT NULL DEFAULT 0,
    human_agreement float8,
    requests        integer NOT NULL DEFAULT 0,
    cost_usd        float8 NOT NULL DEFAULT 0
);
CREATE INDEX judge_anchor_runs_dataset_idx ON judge_anchor_runs (dataset, created_at);
