-- crawl-dedup registry, schema version 5: the main tier's MinHash band keys packed into blocks.
--
-- One row per (document, band) cost ~85 bytes per band key (tuple header, line pointer, B-tree entry):
-- 1.8 KB per document at 21 bands, 3.6 KB at 42. The main tier now holds one row per (run, bucket):
-- a run is what one compaction wrote, a bucket the top `bits` bits of the band key (chosen per run
-- for ~128 keys a block), and `entries` n x 8 bytes: the next 32 bits of each key and the seq of its
-- document as an offset from seq_base (big-endian uint32 each, dedup_tasks/registry/_bandblocks.py).
-- ~9 bytes per band key including the index. The recent tier keeps one row per (document, band): it
-- is small, commits insert into it, and compaction turns it into a new run.
--
-- Blocks are never rewritten for a rerun or a retraction: their seq simply no longer has a row in
-- minhash_signatures (the documents' liveness), which every lookup joins. Merging main runs drops
-- those dead entries.
--
-- Hash-partitioned on `shard` (the top 8 bits of the band key): with Citus this is the distribution
-- column (create_distributed_table('minhash_bands_main', 'shard')), each shard answering the probes
-- of its keys.

CREATE TABLE minhash_band_runs (
    run         bigint PRIMARY KEY,
    bits        smallint NOT NULL CHECK (bits BETWEEN 8 AND 32),
    entries     bigint NOT NULL,
    blocks      bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE minhash_bands DETACH PARTITION minhash_bands_main;
ALTER TABLE minhash_bands_main RENAME TO minhash_bands_main_v4;

CREATE TABLE minhash_bands_main (
    shard     smallint NOT NULL,
    run       bigint NOT NULL,
    bucket    bigint NOT NULL,
    seq_base  bigint NOT NULL,
    n         integer NOT NULL,
    entries   bytea NOT NULL
) PARTITION BY HASH (shard);
CREATE TABLE minhash_bands_main_p0 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 0);
CREATE TABLE minhash_bands_main_p1 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 1);
CREATE TABLE minhash_bands_main_p2 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 2);
CREATE TABLE minhash_bands_main_p3 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE minhash_bands_main_p4 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 4);
CREATE TABLE minhash_bands_main_p5 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 5);
CREATE TABLE minhash_bands_main_p6 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 6);
CREATE TABLE minhash_bands_main_p7 PARTITION OF minhash_bands_main FOR VALUES WITH (MODULUS 8, REMAINDER 7);
-- Random bytes: compression would only cost CPU (and blocks stay under the TOAST threshold).
ALTER TABLE minhash_bands_main ALTER COLUMN entries SET STORAGE MAIN;
CREATE INDEX minhash_bands_main_bucket ON minhash_bands_main (bucket, run);

-- The main tier's rows of schema 4 become run 1.
INSERT INTO minhash_band_runs (run, bits, entries, blocks)
SELECT 1, greatest(8, least(32, ceil(log(2, count(*) / 128.0))::int)), count(*), 0
FROM minhash_bands_main_v4 HAVING count(*) > 0;

WITH r AS (SELECT bits::int AS bits FROM minhash_band_runs WHERE run = 1),
k AS (
    SELECT (v.bucket >> (64 - r.bits)) & ((1::bigint << r.bits) - 1) AS bucket,
           (v.bucket >> (32 - r.bits)) & 4294967295 AS rem,
           v.seq, r.bits
    FROM minhash_bands_main_v4 v CROSS JOIN r
),
b AS (SELECT k.*, min(k.seq) OVER (PARTITION BY k.bucket) AS seq_base FROM k)
INSERT INTO minhash_bands_main (shard, run, bucket, seq_base, n, entries)
SELECT (bucket >> (min(bits) - 8))::smallint, 1, bucket, min(seq_base), count(*),
       string_agg(substring(int8send(rem) FROM 5 FOR 4) || substring(int8send(seq - seq_base) FROM 5 FOR 4),
                  ''::bytea ORDER BY rem, seq)
FROM b GROUP BY bucket;

UPDATE minhash_band_runs SET blocks = (SELECT count(*) FROM minhash_bands_main WHERE run = 1) WHERE run = 1;
DROP TABLE minhash_bands_main_v4;
