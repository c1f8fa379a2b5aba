-- Answers imported from traces (issue #24): the trace an answer was made of and the span
-- (OpenInference LLM span) that produced it, lower-case hex, so gate results can be linked
-- back to the trace (Phoenix annotations, OTel gen_ai.evaluation.result events). NULL for
-- answers from JSONL, RAGAS or DeepEval files.
ALTER TABLE answers ADD COLUMN trace_id text, ADD COLUMN span_id text;
