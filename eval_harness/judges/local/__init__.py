"""The offline judges: their text handling (:mod:`.text`), the relevance judges and their
answer heuristics (:mod:`.relevance`), the grounding alignment (:mod:`.grounding`) and its
verdicts (:mod:`.verdicts`)."""
