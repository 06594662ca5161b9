-- crawl-dedup registry, schema version 3: one SimHash band index instead of four.
--
-- SimHash lookups no longer probe a B-tree per band: a batch of 1e5 queries touches ~80% of the
-- 65536 values of every band, so the band join now runs in memory over all registered values
-- (PostgresRegistry._simhash_matches). (band0, simhash) stays: it serves the range reads of those
-- values and the fetch of the rows of the values found. The other three indexes only cost space
-- (~90 bytes per document) and three random-order insertions per registered document.
DROP INDEX simhashes_band1;
DROP INDEX simhashes_band2;
DROP INDEX simhashes_band3;
