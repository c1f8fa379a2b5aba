-- Where each ground-truth query came from (issue #38), so it is never mixed silently with
-- human labels. `origin`: 'dataset' (the dataset's own queries: a BEIR queries file, a live
-- ground-truth or queries relation; their expected_docs are human labels), 'generated'
-- (written from one corpus document by `eval-harness ground-truth generate`; its
-- `source_document` is that document's harness id, `query_kind` question | paraphrase |
-- unanswerable, `generator` the generator's spec and prompt version) or 'users' (asked by
-- the RAG system's users, sampled by `ground-truth from-answers`; `answer_ids` are the answers
-- it was asked in). Generated and users' queries have no expected_docs: the judges label
-- their pools. An ingest or attach replaces the dataset's own queries only.
ALTER TABLE ground_truth
    ADD COLUMN origin text NOT NULL DEFAULT 'dataset'
        CHECK (origin IN ('dataset', 'generated', 'users')),
    ADD COLUMN source_document integer,
    ADD COLUMN query_kind text CHECK (query_kind IN ('question', 'paraphrase', 'unanswerable')),
    ADD COLUMN generator text,
    ADD COLUMN answer_ids text[];
CREATE INDEX ground_truth_origin_idx ON ground_truth (dataset, origin);
