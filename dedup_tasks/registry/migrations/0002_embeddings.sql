-- crawl-dedup registry, schema version 2: document embeddings of the L4 semantic layer.
--
-- A cache of vectors, one per (model_id, batch_id, doc_id): each document is embedded at most once
-- per model. model_id is part of the key because vectors of different models live in different
-- spaces and are never compared. The vector is float32 little-endian bytes (numpy .tobytes()); `dim`
-- says how many. Not part of the commit's fingerprint tables: a rerun of a batch re-writes (upserts)
-- the same deterministic vectors, so no seq range is needed.

CREATE TABLE embeddings (
    model_id      text COLLATE "C" NOT NULL,
    batch_id      text COLLATE "C" NOT NULL,
    doc_id        text COLLATE "C" NOT NULL,
    dim           integer NOT NULL,
    vector        bytea NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_id, batch_id, doc_id)
);
