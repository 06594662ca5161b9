"""MinHash signatures and LSH band keys, compatible with datasketch's MinHash (scheme "affine32").

``MinHash(num_perm=128, seed=1, hashfunc=shingle_hash32).update_batch(shingles)`` in datasketch >= 2.0
gives exactly the signature ``signatures`` computes for the same shingles.

Banding (``DedupConfig``): 42 bands x 3 rows (126 of the 128 values). A pair with Jaccard s becomes a
candidate with probability 1 - (1 - s^3)^42: 1.000 at 0.7, 0.996 at 0.5, 0.97 at 0.4, 0.68 at 0.3 and
0.04 at 0.1, so near copies down to J 0.5 reach the verifier (``candidates.Verifier``), which settles
each pair on the shingle sets (in the batch) or on the signatures (registry).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_tasks.fingerprint import kernels


@dataclass(frozen=True)
class MinHasher:
    num_perm: int = 128
    seed: int = 1
    bands: int = 42
    rows: int = 3

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


def estimated_size(sig: np.ndarray) -> np.ndarray:
    """Distinct shingles behind each signature row, from its minima alone (no extra bytes stored).

    The minimum of n uniform 32-bit values is about 2^32 / (n + 1); over k permutations the
    estimate (k - 1) / sum(-log(1 - u)) has a relative error of about 1 / sqrt(k - 2) (9% at 128).
    """
    u = np.atleast_2d(sig).astype(np.float64) / 4294967296.0
    total = -np.log1p(-np.minimum(u, 1.0 - 1e-12)).sum(axis=-1)
    return (u.shape[-1] - 1) / np.maximum(total, 1e-12)


def estimated_coverage(jaccard: np.ndarray, size_newer: np.ndarray, size_earlier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(share of the newer document's shingles in the earlier, and the reverse) from a Jaccard and
    the two set sizes: |A & B| = J (|A| + |B|) / (1 + J)."""
    common = jaccard * (size_newer + size_earlier) / (1.0 + jaccard)
    return np.minimum(1.0, common / np.maximum(size_newer, 1.0)), np.minimum(1.0, common / np.maximum(size_earlier, 1.0))


def lsh_recall(jaccard: float, bands: int, rows: int) -> float:
    """Probability that a pair of this Jaccard similarity shares at least one band."""
    return 1.0 - (1.0 - jaccard**rows) ** bands
