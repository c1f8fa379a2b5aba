"""The small corpus the dual-judge tests share: eight documents, three queries, their qrels,
and the two LLM judges (one per provider) that judge it on the fake server."""

DOCS = {"d1": "aspirin lowers heart attack risk", "d2": "statins lower cholesterol",
        "d3": "exercise and heart health", "d4": "vitamin d and bones",
        "d5": "sleep improves memory", "d6": "coffee and liver health",
        "d7": "aspirin and stomach bleeding", "d8": "memory training in older adults"}
QUERIES = {"q1": "aspirin heart attack", "q2": "cholesterol statins", "q3": "memory sleep"}
QRELS = [("q1", "d1", 1), ("q1", "d3", 1), ("q2", "d2", 1), ("q3", "d5", 1)]
LLM = {"judge1": "openai:gpt-4o", "judge2": "anthropic:claude-haiku-4-5"}
