-- Anchors are re-judged once per dataset, judge spec and UTC day (issue #23): a run that finds
-- the comparison another run (a shard, a second process, an earlier run of a backfill)
-- measured today, with the same judge and the same frozen set, uses it instead of paying
-- for the anchors again. Its row copies that comparison (requests and cost 0) and names the
-- run that measured it, so the drift check and the record of every run read their own run
-- id; trends count only the measured rows (reused_from IS NULL).
ALTER TABLE judge_anchor_runs ADD COLUMN reused_from text;
-- true when the anchors' budget line (judges.anchors.budget_usd) stopped the re-judging part
-- way: such a comparison counts fewer anchors and is not reused (a rerun measures them all)
ALTER TABLE judge_anchor_runs ADD COLUMN cut_short boolean NOT NULL DEFAULT false;
-- a fingerprint of the human verdicts on the anchors the comparison was made with: once people
-- give or change a verdict, the day's comparison is not reused (its human agreement is stale)
ALTER TABLE judge_anchor_runs ADD COLUMN human_labels text;
CREATE INDEX judge_anchor_runs_night_idx
    ON judge_anchor_runs (dataset, judge, judge_spec, created_at) WHERE reused_from IS NULL;
