-- A note a person writes beside a sampled pair's verdict (issue #26), as judge_review keeps
-- one beside a review verdict: the human-sample file has the review file's `note` column,
-- and import stores it instead of dropping it.
ALTER TABLE human_sample ADD COLUMN note text;
