-- Named result sets that `eval-harness compare BASE CANDIDATE` compares: `report --record NAME`
-- records one dataset's retrieval metrics per ground-truth query, `gate --record NAME` each
-- gate's score per answer (keyed by the answer's normalised query, so answers match across
-- records). Recording a name again adds a record: the newest of a (name, kind, dataset) is the
-- one compared, the earlier ones are its history.
CREATE TABLE result_records (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                 text NOT NULL CHECK (name <> ''),
    kind                 text NOT NULL CHECK (kind IN ('retrieval', 'gates')),
    dataset              text NOT NULL,   -- the dataset of a retrieval record; '' for gates
    recorded_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    code_version         text NOT NULL,   -- the commit (or package version) that measured it
    configuration        jsonb NOT NULL,  -- what it was measured at (weights, depth, gates)
    corpus_version       text,            -- hash of the documents' own ids and texts
    ground_truth_version text,            -- hash of the qrels in the dataset's own ids
    units                integer NOT NULL -- queries (answers' queries) measured
);
CREATE INDEX result_records_newest ON result_records (name, kind, dataset, id DESC);

-- One measured value of a record: a metric (precision_at_5, ...) or a gate's score, of one
-- unit (a ground-truth query's own id; an answer's normalised query).
CREATE TABLE result_record_values (
    record_id bigint NOT NULL REFERENCES result_records (id) ON DELETE CASCADE,
    row_name  text NOT NULL,
    unit      text NOT NULL,
    value     float8 NOT NULL,
    PRIMARY KEY (record_id, row_name, unit)
);
