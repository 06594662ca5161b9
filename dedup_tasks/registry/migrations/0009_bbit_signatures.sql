-- crawl-dedup registry, schema version 9: b-bit MinHash signatures and K registry bands (issue #14).
--
-- No table changes: `documents.signature` may now also hold a b-bit signature (the low b bits of each
-- of the num_perm values, num_perm * b / 8 bytes, no header: DedupConfig.registry_signature_bits < 32),
-- told from the lossless rows of schemas 6-8 (odd length) and the raw rows of schema <= 5 (4 * num_perm
-- bytes) by its even length alone (dedup_tasks/registry/_sigpack.py), and a document may register only
-- the first K of its band keys (DedupConfig.minhash_registry_bands). Rows written before stay as they
-- are and are read as before.
--
-- The version is bumped so that code of schema 8, which cannot read a b-bit row, refuses this registry
-- when it opens it (check_version) instead of failing in the middle of a batch's lookup.
COMMENT ON COLUMN documents.signature IS
    'MinHash signature: b-bit (even length num_perm*b/8, schema 9), bit-packed lossless (odd length, schema 6-8) or raw (4*num_perm bytes, schema <= 5); NULL: none';
