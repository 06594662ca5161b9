-- crawl-dedup fingerprint registry, schema version 1.
--
-- Applied by dedup_tasks.registry.migrate with search_path set to the registry's schema, inside one
-- transaction. Table names are unqualified on purpose: one database can hold several registries
-- (one per schema; the tests use a fresh schema per run).
--
-- uint64 values (URL keys, content-hash halves, SimHash values, LSH bucket keys) are stored in
-- bigint columns holding the same 64 bits: a value v >= 2^63 is stored as v - 2^64 (numpy
-- `.view(np.int64)`). Only equality and bit operations are used on them, and both are unaffected by
-- the reinterpretation; their SQL ordering is not meaningful. 16-bit SimHash band values are stored
-- the same way in smallint columns (v >= 2^15 stored as v - 2^16).
--
-- `seq` is one global sequence (registry_seq) shared by every fingerprint table. A commit reserves a
-- contiguous block of it under the registry's advisory lock and gives each registered document one
-- value, used for that document's row in every table: so `seq` identifies a registered document,
-- `seq > snapshot` selects what was registered after a batch began, and a batch's rows occupy the
-- seq range recorded in registry_batches (what a rerun deletes, through the BRIN indexes).
--
-- Tiers. Every fingerprint table is LIST-partitioned on `tier` into `<table>_main` (tier 0) and
-- `<table>_recent` (tier 1). Fingerprint keys are random hashes, so a commit of 1e5 documents into one
-- big B-tree touches nearly every leaf page of it (and, after each checkpoint, writes each of those
-- pages to the WAL once): at 1e7 documents that made a commit take minutes. Commits insert into the
-- small `_recent` partitions only; `PostgresRegistry.compact()` moves `_recent` into `_main` in key
-- order when it has grown past a threshold. Queries name the parent table and read both tiers.
--
-- batch_id and doc_id use the "C" collation so that `batch_id < $1` orders exactly as Python's str
-- comparison does (the batch-ordering rule), whatever the database's default collation.

CREATE SEQUENCE registry_seq AS bigint;

CREATE TABLE registry_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
-- Identifies this registry instance: a persisted Bloom filter built for another registry (a dropped
-- and recreated schema, another database) is detected and rebuilt instead of trusted.
INSERT INTO registry_meta (key, value) VALUES
    ('registry_id', gen_random_uuid()::text),
    ('created_at', now()::text);

-- One row per batch that began or committed.
CREATE TABLE registry_batches (
    batch_id      text COLLATE "C" PRIMARY KEY,
    snapshot_seq  bigint,       -- last seq committed when the batch's run began (begin()); re-check point
    began_at      timestamptz,
    seq_lo        bigint,       -- seq block of the rows it registered (NULL: nothing registered)
    seq_hi        bigint,
    registered    integer NOT NULL DEFAULT 0,
    committed_at  timestamptz
);

-- L1: canonical-URL keys, with the content hash so that a changed page is told apart (an update).
CREATE TABLE url_keys (
    seq            bigint NOT NULL DEFAULT nextval('registry_seq'),
    url_key        bigint NOT NULL,
    content_hi     bigint NOT NULL,
    content_lo     bigint NOT NULL,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    tier           smallint NOT NULL DEFAULT 1,
    batch_id       text COLLATE "C" NOT NULL,
    doc_id         text COLLATE "C" NOT NULL
) PARTITION BY LIST (tier);
CREATE TABLE url_keys_main PARTITION OF url_keys FOR VALUES IN (0);
CREATE TABLE url_keys_recent PARTITION OF url_keys FOR VALUES IN (1);
CREATE INDEX url_keys_key ON url_keys (url_key);
CREATE INDEX url_keys_seq ON url_keys USING brin (seq) WITH (autosummarize = on);

-- Exact: 128-bit content hash as two halves. The high half alone is selective enough for the index
-- (64 random bits); the low half is compared after the index lookup, which keeps the index 8 bytes
-- per row smaller.
CREATE TABLE content_hashes (
    seq            bigint NOT NULL DEFAULT nextval('registry_seq'),
    content_hi     bigint NOT NULL,
    content_lo     bigint NOT NULL,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    tier           smallint NOT NULL DEFAULT 1,
    batch_id       text COLLATE "C" NOT NULL,
    doc_id         text COLLATE "C" NOT NULL
) PARTITION BY LIST (tier);
CREATE TABLE content_hashes_main PARTITION OF content_hashes FOR VALUES IN (0);
CREATE TABLE content_hashes_recent PARTITION OF content_hashes FOR VALUES IN (1);
CREATE INDEX content_hashes_hi ON content_hashes (content_hi);
CREATE INDEX content_hashes_seq ON content_hashes USING brin (seq) WITH (autosummarize = on);

-- L2: SimHash and its four 16-bit bands (band i = bits 16i..16i+15). Each band index carries the
-- full SimHash as a second key column: candidates are filtered by Hamming distance in an index-only
-- scan, and only the survivors' rows are read (band value + simhash equality) for doc_id/batch_id.
CREATE TABLE simhashes (
    seq            bigint NOT NULL DEFAULT nextval('registry_seq'),
    simhash        bigint NOT NULL,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    band0          smallint NOT NULL,
    band1          smallint NOT NULL,
    band2          smallint NOT NULL,
    band3          smallint NOT NULL,
    tier           smallint NOT NULL DEFAULT 1,
    batch_id       text COLLATE "C" NOT NULL,
    doc_id         text COLLATE "C" NOT NULL
) PARTITION BY LIST (tier);
CREATE TABLE simhashes_main PARTITION OF simhashes FOR VALUES IN (0);
CREATE TABLE simhashes_recent PARTITION OF simhashes FOR VALUES IN (1);
CREATE INDEX simhashes_band0 ON simhashes (band0, simhash);
CREATE INDEX simhashes_band1 ON simhashes (band1, simhash);
CREATE INDEX simhashes_band2 ON simhashes (band2, simhash);
CREATE INDEX simhashes_band3 ON simhashes (band3, simhash);
CREATE INDEX simhashes_seq ON simhashes USING brin (seq) WITH (autosummarize = on);

-- L3: MinHash signatures (num_perm uint32 values, little-endian, as bytea) ...
CREATE TABLE minhash_signatures (
    seq            bigint NOT NULL DEFAULT nextval('registry_seq'),
    registered_at  timestamptz NOT NULL DEFAULT now(),
    tier           smallint NOT NULL DEFAULT 1,
    batch_id       text COLLATE "C" NOT NULL,
    doc_id         text COLLATE "C" NOT NULL,
    signature      bytea NOT NULL,
    PRIMARY KEY (seq, tier)
) PARTITION BY LIST (tier);
CREATE TABLE minhash_signatures_main PARTITION OF minhash_signatures FOR VALUES IN (0);
CREATE TABLE minhash_signatures_recent PARTITION OF minhash_signatures FOR VALUES IN (1);
-- Signatures are random bytes: compression would only cost CPU.
ALTER TABLE minhash_signatures_main ALTER COLUMN signature SET STORAGE EXTERNAL;
ALTER TABLE minhash_signatures_recent ALTER COLUMN signature SET STORAGE EXTERNAL;

-- ... and their LSH band buckets, one row per (document, band). `seq` is the signature row's seq;
-- doc_id/batch_id live only there, which keeps these rows (bands x documents of them) narrow.
CREATE TABLE minhash_bands (
    bucket  bigint NOT NULL,
    seq     bigint NOT NULL,
    band    smallint NOT NULL,
    tier    smallint NOT NULL DEFAULT 1
) PARTITION BY LIST (tier);
CREATE TABLE minhash_bands_main PARTITION OF minhash_bands FOR VALUES IN (0);
CREATE TABLE minhash_bands_recent PARTITION OF minhash_bands FOR VALUES IN (1);
-- Bucket keys already hash the band index in (fingerprint.minhash.band_keys), so the bucket alone is
-- selective; the band is compared on the (rare) matching rows, keeping the index narrower.
CREATE INDEX minhash_bands_bucket ON minhash_bands (bucket);
CREATE INDEX minhash_bands_seq ON minhash_bands USING brin (seq) WITH (autosummarize = on);

-- Hourly batches add ~1e5 rows: the default insert threshold of autovacuum (20% of a table) would
-- leave recent pages without visibility-map bits for a long time, which turns the SimHash index-only
-- scans into heap reads. Vacuum the recent tier after every ~100k inserts instead; the main tier
-- only changes at compaction, which vacuums it.
ALTER TABLE url_keys_recent SET (autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE content_hashes_recent SET (autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE simhashes_recent SET (autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE minhash_signatures_recent SET (autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE minhash_bands_recent SET (autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000000);
