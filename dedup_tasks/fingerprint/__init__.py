"""Pure, vectorized fingerprint functions: content hash, SimHash, MinHash, candidates."""
