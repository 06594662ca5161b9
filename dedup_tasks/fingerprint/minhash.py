"""MinHash signatures and LSH band keys, compatible with datasketch's MinHash (scheme "affine32").

``MinHash(num_perm=128, seed=1, hashfunc=shingle_hash32).update_batch(shingles)`` in datasketch >= 2.0
gives exactly the signature ``signatures`` computes for the same shingles.

Banding: 21 bands x 6 rows (126 of the 128 values). A pair with Jaccard s becomes a candidate with
probability 1 - (1 - s^6)^21: 0.998 at s = 0.8 (so recall >= 0.99 at the threshold), 0.984 at 0.75,
0.28 at 0.5 and 0.015 at 0.3, which keeps the candidate lists that the verification step reads short.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_tasks.fingerprint import kernels


@dataclass(frozen=True)
class MinHasher:
    num_perm: int = 128
    seed: int = 1
    bands: int = 21
    rows: int = 6

    @property
    def permutations(self) -> tuple[np.ndarray, np.ndarray]:
        # Same draw as datasketch.MinHash._init_permutations for scheme "affine32".
        gen = np.random.RandomState(self.seed)
        a = gen.randint(0, 1 << 31, self.num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        b = gen.randint(0, 1 << 32, self.num_perm, dtype=np.uint32)
        return a, b

    def signatures(self, shingle_hashes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """(n_docs, num_perm) uint32 from 64-bit shingle hashes grouped by ``offsets``."""
        a, b = self.permutations
        return kernels.minhash_signatures(shingle_hashes, offsets, a, b)

    def band_keys(self, signatures: np.ndarray) -> np.ndarray:
        """(n_docs, bands) uint64 LSH bucket keys."""
        return kernels.band_keys(np.ascontiguousarray(signatures), self.bands, self.rows)


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Row-wise share of equal signature values (datasketch's MinHash.jaccard)."""
    return (sig_a == sig_b).mean(axis=-1)


def lsh_recall(jaccard: float, bands: int, rows: int) -> float:
    """Probability that a pair of this Jaccard similarity shares at least one band."""
    return 1.0 - (1.0 - jaccard**rows) ** bands
