"""The LLM client: the request pipeline (:mod:`.runner`) with its retry policy, rate
limiting, ledger, pricing and batches, the session that builds a run's judges, and the
providers (:mod:`.providers`, one module each)."""
