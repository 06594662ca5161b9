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

# The permutations' seed. It is part of the registry's key space (every registered signature and band
# key was drawn with it), so it is a constant, not a setting.
MINHASH_SEED = 1
# What L2's verification and L3 shingle: character 5-grams in both languages (spaces dropped in English).
# English reads characters, not words: a typo breaks five 5-grams instead of every word 3-gram holding
# the word; with 2% of letters mistyped a copy keeps J >= 0.75 on characters and <= 0.65 on word
# 3-grams (tests/layers/test_near_copies.py, test_english_char_shingles_survive_typos_where_word_trigrams_break).
SHINGLE_CHARS = 5
EN_CHAR_SHINGLES = True
EN_SHINGLE_WORDS = 3  # the word n-gram of English shingles when EN_CHAR_SHINGLES is off


@dataclass(frozen=True)
class MinHasher:
    num_perm: int = 128
    seed: int = MINHASH_SEED
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


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray, bits: np.ndarray | int | None = None) -> np.ndarray:
    """Row-wise share of equal signature values (datasketch's MinHash.jaccard).

    With ``bits`` (per row or one value, < 32) the values are compared on their low ``bits`` bits only
    (b-bit MinHash, Li & Koenig 2010: a registered signature of schema 9 keeps only those): two values
    of different minima still agree there with probability 2^-b, so the share m of equal b-bit values
    estimates m = J + (1 - J) 2^-b, i.e. J = (m - 2^-b) / (1 - 2^-b), clipped to [0, 1]. 32 bits (the
    lossless layouts) give the plain share."""
    if bits is None:
        return (sig_a == sig_b).mean(axis=-1)
    b = np.asarray(bits, np.int64)
    mask = np.where(b >= 32, 0xFFFFFFFF, (np.int64(1) << np.minimum(b, 31)) - 1).astype(np.uint32)
    if mask.ndim:
        mask = mask[:, None]
    m = ((sig_a & mask) == (sig_b & mask)).mean(axis=-1)
    chance = np.where(b >= 32, 0.0, 2.0 ** -np.minimum(b, 31).astype(np.float64))
    return np.clip((m - chance) / (1.0 - chance), 0.0, 1.0)


def estimate_sd(jaccard: float, bits: np.ndarray | int, num_perm: int) -> np.ndarray:
    """Standard deviation of ``estimated_jaccard`` for a pair of true Jaccard ``jaccard`` on ``bits``-bit
    values (binomial over ``num_perm`` values): 0.044 at J 0.45 with 32 bits and 128 values, 0.079 with
    1 bit."""
    b = np.minimum(np.asarray(bits, np.int64), 31).astype(np.float64)
    chance = np.where(np.asarray(bits) >= 32, 0.0, 2.0**-b)
    m = chance + (1.0 - chance) * jaccard
    return np.sqrt(m * (1.0 - m) / num_perm) / (1.0 - chance)


def truncate_signatures(sig: np.ndarray, bits: int) -> np.ndarray:
    """The low ``bits`` bits of each value (what a schema-9 registry stores); 32 or more: unchanged."""
    sig = np.asarray(sig, np.uint32)
    return sig if bits >= 32 else sig & np.uint32((1 << bits) - 1)


def earlier_covered(
    sig_earlier: np.ndarray, newer_rows: np.ndarray, hashes: np.ndarray, offsets: np.ndarray, hasher: MinHasher
) -> np.ndarray:
    """Share of the earlier document's shingles found in the newer, from the earlier's signature alone.

    Each signature value is the minimum of a bijection (fmix32, then an odd affine map mod 2^32) over
    the earlier's shingles, so inverting the affine map recovers the fmix32 of one shingle, a
    uniform draw from the earlier's set: ``num_perm`` draws, each looked up in the newer's full set
    (``hashes[offsets[r]:offsets[r + 1]]`` for ``r = newer_rows[i]``). 128 draws: +-0.035 at 0.85.
    The registry stores nothing for this beyond the signature.
    """
    a, b = hasher.permutations
    return kernels.covered_by_signature(
        np.ascontiguousarray(sig_earlier, np.uint32), np.asarray(newer_rows, np.int64),
        np.ascontiguousarray(hashes, np.uint32), np.asarray(offsets, np.int64), _inverse_odd(a), b,
    )  # fmt: skip


def _inverse_odd(a: np.ndarray) -> np.ndarray:
    """Multiplicative inverses mod 2^32 of odd uint32 values (Newton: each step doubles the bits)."""
    a64 = a.astype(np.uint64)
    x = a64.copy()
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(5):
        x = (x * ((np.uint64(2) - a64 * x) & mask)) & mask
    return x.astype(np.uint32)


def coverage_from_jaccard(jaccard: np.ndarray, earlier_covered: np.ndarray) -> np.ndarray:
    """Share of the newer document's shingles found in the earlier, from J and the reverse share x:
    with |A & B| = x |A| (A earlier), J = |A & B| / (|A| + |B| - |A & B|) gives |A & B| / |B| = J / (1 + J - J / x)."""
    x = np.maximum(earlier_covered, 1e-9)
    denom = 1.0 + jaccard - jaccard / x
    # Estimates that contradict each other (J too high for x) say nothing: no coverage, no drop.
    return np.where(denom > 0, np.clip(jaccard / np.maximum(denom, 1e-9), 0.0, 1.0), 0.0)


def lsh_recall(jaccard: float, bands: int, rows: int) -> float:
    """Probability that a pair of this Jaccard similarity shares at least one band."""
    return 1.0 - (1.0 - jaccard**rows) ** bands
