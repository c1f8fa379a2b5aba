"""Ground truth for a dataset that has none: its users' own queries (:mod:`.users_queries`,
``eval-harness ground-truth from-answers``) and queries written from its documents
(:mod:`.generate`, ``eval-harness ground-truth generate``).

Both are stored in the dataset's ground truth with their origin named (``users``,
``generated``; the dataset's own queries are ``dataset``), never with expected documents: the
judges label their pools, a human sample corrects the judges (PPI), and every figure names
where its queries came from. An ingest or attach of the dataset leaves them in place.
"""
