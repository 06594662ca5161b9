-- crawl-dedup registry, schema version 6: 16-bit stored band keys and bit-packed signatures.
--
-- minhash_band_runs.rem_bytes: stored key bytes per block entry of a run (4: 8-byte entries as in
-- schema 5; 2: 6-byte entries, written for runs of >= 2^20 keys by dedup_tasks/registry/_bandblocks.py).
-- Existing runs keep 4 and are read as before; merging runs takes the fewest stored bytes among them,
-- so the first merge after this migration rewrites the schema-5 run with 2-byte keys.
--
-- minhash_signatures.signature: new rows are bit-packed (dedup_tasks/registry/_sigpack.py: one byte
-- w, then num_perm values of w bits; an odd length). Rows written under schema 5 (4 * num_perm bytes,
-- an even length) are read as they are: nothing to rewrite here.

ALTER TABLE minhash_band_runs ADD COLUMN rem_bytes smallint NOT NULL DEFAULT 4 CHECK (rem_bytes IN (2, 4));
