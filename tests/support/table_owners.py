"""Every harness table and the one module whose SQL may name it: what tests/test_layers.py
enforces on the code and tests/test_docs.py checks the generated tables page against (the
owners' docstrings say so too)."""

TABLE_OWNERS = {
    "ground_truth": "eval_harness/datasets/ground_truth.py",
    "datasets": "eval_harness/datasets/register.py",
    "document_ids": "eval_harness/datasets/document_ids.py",
    "l2_insights": "eval_harness/datasets/ingest.py",
    "query_embeddings": "eval_harness/datasets/query_embeddings.py",
    "keyword_sources": "eval_harness/datasets/keyword_index.py",
    "keyword_documents": "eval_harness/datasets/keyword_index.py",
    "keyword_postings": "eval_harness/datasets/keyword_index.py",
    "judge_review": "eval_harness/datasets/judge_review.py",
    "judge_cache": "eval_harness/judges/client/reply_cache.py",
    "judge_batches": "eval_harness/judges/client/sql.py",
    "api_cost_log": "eval_harness/judges/client/sql.py",
    "api_retry_log": "eval_harness/judges/client/sql.py",
    "api_cache_hit_log": "eval_harness/judges/client/sql.py",
    "human_sample": "eval_harness/agreement/sql.py",
    "calibrated_weights": "eval_harness/calibration/sql.py",
    "judge_retests": "eval_harness/judges/retest/sql.py",
    "judge_anchors": "eval_harness/judges/anchors/sql.py",
    "judge_anchor_runs": "eval_harness/judges/anchors/sql.py",
    "judge_record": "eval_harness/judges/dual/record_sql.py",
    "candidate_cache": "eval_harness/retrieval/candidate_cache.py",
    "gate_results": "eval_harness/gates/sql.py",
    "answers": "eval_harness/gates/sql.py",
    "evaluation_log": "eval_harness/gates/reflexion_sql.py",
    "episode_memory": "eval_harness/gates/reflexion_sql.py",
    "regeneration_queue": "eval_harness/gates/reflexion_sql.py",
    "result_records": "eval_harness/comparison/sql.py",
    "result_record_values": "eval_harness/comparison/sql.py",
}
