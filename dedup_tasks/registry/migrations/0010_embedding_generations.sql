-- crawl-dedup registry, schema version 10: a generation per embedding model.
--
-- The rewrite sketches of kept documents (and any other model's vectors) are searched through a FAISS
-- index on disk, a cache of this table's rows. The cache says which generation of the rows it holds;
-- every write to `embeddings` moves its model's generation on, in the writer's transaction, so a
-- reader can tell whether the cache is current (same generation), one write behind (puts + 1: that
-- write was its own, apply it) or anything else (rebuild from the table). `lineage` is new whenever
-- the row is: a cache built against another registry, or before a reset, never matches by chance.

CREATE TABLE embedding_generations (
    model_id text COLLATE "C" PRIMARY KEY,
    lineage  uuid NOT NULL DEFAULT gen_random_uuid(),
    puts     bigint NOT NULL
);

-- Models already written before this version start at one write.
INSERT INTO embedding_generations (model_id, puts) SELECT DISTINCT model_id, 1 FROM embeddings;
