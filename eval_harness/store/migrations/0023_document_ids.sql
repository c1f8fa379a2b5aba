-- The harness's integer ids of the documents of a live dataset whose own id column is text
-- or uuid (issue #32: LangChain's varchar ids, LlamaIndex's node_id, uuid columns). Every
-- harness table keeps document ids as integers (ground_truth.expected_docs and judged_docs,
-- the review queue, the keyword index, the candidate cache); for such a corpus attach gives
-- each document it has not seen an integer here, once, so judge labels stay with the same
-- document across reruns. A live corpus with integer ids has no rows here: its own ids are
-- the harness's. Owner: eval_harness/store/document_ids.py.
CREATE TABLE document_ids (
    dataset   text NOT NULL REFERENCES datasets (name) ON DELETE CASCADE,
    own_id    text NOT NULL,    -- the RAG's own id as text (a uuid in its canonical form)
    own_uuid  uuid,             -- the same id as a uuid, for a uuid column (joined in its type)
    doc_id    integer NOT NULL CHECK (doc_id > 0),
    PRIMARY KEY (dataset, own_id),
    UNIQUE (dataset, doc_id)
);
CREATE UNIQUE INDEX document_ids_own_uuid ON document_ids (dataset, own_uuid);
