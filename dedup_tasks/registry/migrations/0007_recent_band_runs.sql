-- crawl-dedup registry, schema version 7: the recent tier's MinHash band keys as one run per commit.
--
-- Schema 6 inserted one row per (document, band) into minhash_bands_recent (42 per document, a B-tree
-- on the key and a BRIN on seq): 4.2M index entries per 100k-document commit, ~44% of a 1M-document
-- hour at 25M registered. A commit now writes its band keys as a few hundred rows of packed entries
-- (dedup_tasks/registry/_bandblocks.py, `recent_rows`): one row per (commit, shard, chunk of at most
-- 8,192 keys), `entries` n x 12 bytes: the full 64-bit key and the document's seq as an offset from
-- seq_base (big-endian uint64 + uint32). No index on the keys: a lookup reads the recent tier whole
-- (it holds at most compact_threshold_docs documents) and joins it in memory with the batch's keys,
-- which at 1e5 queries x 42 bands touch every block of it anyway. Keys are kept whole, so recent
-- matches are exact and compaction builds the main run as from rows.
--
-- batch_id: a rerun deletes its batch's rows by it; a retraction rewrites the later batch's rows
-- without the retracted documents. `shard` (the top 8 bits of the key) is the distribution column.
--
-- `minhash_bands` becomes a view of the recent keys, one row per (document, band) as before
-- (bucket = the key, seq): for inspection and the row counts of the tests; nothing reads it in a lookup.

ALTER TABLE minhash_bands DETACH PARTITION minhash_bands_recent;
ALTER TABLE minhash_bands_recent RENAME TO minhash_bands_recent_v6;
DROP TABLE minhash_bands;

CREATE TABLE minhash_bands_recent (
    batch_id  text COLLATE "C" NOT NULL,
    shard     smallint NOT NULL,
    seq_base  bigint NOT NULL,
    n         integer NOT NULL,
    entries   bytea NOT NULL
);
-- Random bytes: compression would only cost CPU.
ALTER TABLE minhash_bands_recent ALTER COLUMN entries SET STORAGE EXTERNAL;
CREATE INDEX minhash_bands_recent_batch ON minhash_bands_recent (batch_id);

-- Schema 6's recent rows become one run per batch (the batch of each key's signature row).
WITH k AS (
    SELECT s.batch_id, ((v.bucket >> 56) & 255)::smallint AS shard, v.bucket, v.seq
    FROM minhash_bands_recent_v6 v JOIN minhash_signatures s ON s.seq = v.seq
),
c AS (
    SELECT k.*, (row_number() OVER (PARTITION BY k.batch_id, k.shard ORDER BY k.bucket, k.seq) - 1) / 8192 AS chunk
    FROM k
),
b AS (SELECT c.*, min(c.seq) OVER (PARTITION BY c.batch_id, c.shard, c.chunk) AS seq_base FROM c)
INSERT INTO minhash_bands_recent (batch_id, shard, seq_base, n, entries)
SELECT batch_id, shard, min(seq_base), count(*),
       string_agg(int8send(bucket) || substring(int8send(seq - seq_base) FROM 5 FOR 4), ''::bytea ORDER BY bucket, seq)
FROM b GROUP BY batch_id, shard, chunk;

DROP TABLE minhash_bands_recent_v6;

CREATE VIEW minhash_bands AS
SELECT ('x' || encode(substring(r.entries FROM 12 * i + 1 FOR 8), 'hex'))::bit(64)::bigint AS bucket,
       r.seq_base + ('x' || encode(substring(r.entries FROM 12 * i + 9 FOR 4), 'hex'))::bit(32)::bigint::bigint AS seq
FROM minhash_bands_recent r CROSS JOIN LATERAL generate_series(0, r.n - 1) AS i;
