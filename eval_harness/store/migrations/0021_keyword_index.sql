-- The keyword index of a live dataset mapped with `tsvector: null` (issue #25): what the
-- harness derives from the RAG system's rows so that it can rank the keyword side exactly as
-- ts_rank(to_tsvector(language, content), q, 1) does without parsing every matching
-- document again for every query. One source per dataset, keyed by its language and corpus
-- mapping (a change of either rebuilds it). Owner: eval_harness/store/keyword_index.py.
CREATE TABLE keyword_sources (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset       text NOT NULL UNIQUE,
    language      text NOT NULL,
    mapping       jsonb NOT NULL,          -- relation, id, content, embedding
    marker        text NOT NULL CHECK (marker IN ('xmin', 'md5')),
    next_segment  integer NOT NULL DEFAULT 0,
    token         uuid NOT NULL DEFAULT gen_random_uuid(),  -- with generation (+1 by every
    generation    integer NOT NULL DEFAULT 0,                -- write): what a reader caches by
    refreshed_at  timestamptz
);

-- One row per document of the relation as last refreshed: what it was derived from
-- (`marker`: the row version's xmin for a table, md5 of its text for a view), the segment
-- holding its current postings (NULL: never a keyword candidate: no embedding or no
-- lexeme) and ts_rank's length normalisation ln(length + 1) / ln(2), computed by the
-- server so that it is the very double ts_rank divides by.
CREATE TABLE keyword_documents (
    source   integer NOT NULL REFERENCES keyword_sources ON DELETE CASCADE,
    doc_id   bigint NOT NULL,
    marker   text NOT NULL,
    segment  integer,
    norm     float8,
    PRIMARY KEY (source, doc_id)
);

-- Postings, one row per lexeme per segment (one segment per refresh batch): the documents
-- (int8, big-endian, ascending) and the lexeme's number of positions in each (int2). A
-- posting counts only while its document's current segment is this one.
CREATE TABLE keyword_postings (
    source   integer NOT NULL REFERENCES keyword_sources ON DELETE CASCADE,
    lexeme   text NOT NULL,
    segment  integer NOT NULL,
    doc_ids  bytea NOT NULL,
    counts   bytea NOT NULL,
    PRIMARY KEY (source, lexeme, segment)
);
-- read whole for every query that names the lexeme: no compression to undo
ALTER TABLE keyword_postings ALTER COLUMN doc_ids SET STORAGE EXTERNAL,
                             ALTER COLUMN counts SET STORAGE EXTERNAL;
