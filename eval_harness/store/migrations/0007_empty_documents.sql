-- Empty documents: a corpus line with no title and no text (Cranfield has two, one of them in
-- the qrels) is stored so the ground truth can point at it, but it has nothing to embed.
-- Its embedding is NULL rather than a zero vector (cosine distance to a zero vector is NaN):
-- the HNSW index leaves NULLs out, semantic search skips them, and an empty tsvector matches
-- no keyword, so search never returns an empty document. Only an empty document may lack an
-- embedding.
ALTER TABLE l2_insights
    ALTER COLUMN embedding DROP NOT NULL,
    ADD CONSTRAINT l2_insights_embedding_unless_empty
        CHECK (embedding IS NOT NULL OR content = '');
