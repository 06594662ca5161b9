-- crawl-dedup registry, schema version 11: the sentence vectors' prune reads an index, not the table.
--
-- `db prune-sentences` deletes the content-keyed vectors (batch_id '*', a cache keyed by the text's
-- hash) written before a cut-off. The primary key leads with model_id, so without this index every
-- prune scanned the whole table, head vectors and sketches included, to delete one hour's worth of a
-- month's sentences. A partial index holds only the rows the prune may delete; its predicate is the
-- prune's own literal, so the planner can use it.

CREATE INDEX embeddings_content_keyed_age ON embeddings (registered_at) WHERE batch_id = '*';
