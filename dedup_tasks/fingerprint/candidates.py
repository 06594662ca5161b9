"""In-batch near-duplicate search in batch order: the earlier *kept* document wins.

Documents are visited in batch order; each one looks up its bucket keys (SimHash bands or LSH bands)
in an index holding only the documents kept so far, scores the candidates, and is either dropped
(naming its best qualifying candidate) or inserted. This is the same streaming semantics the
registry gives across batches, and a cluster of many copies costs one comparison per copy instead of
a quadratic number of pairs. Compiled with numba; the index is an open-addressing hash table from
key to the newest document in the bucket plus a per-(document, band) chain to the older ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from dedup_tasks.fingerprint.kernels import hash_slot, hash_table_size

_NO_SETS = np.empty(0, np.uint32)
_NO_OFFSETS = np.empty(0, np.int64)


@dataclass
class StreamResult:
    matched: np.ndarray  # int64 row of the kept document a row duplicates, -1 if kept
    score: np.ndarray  # float64 score of that match (NaN if kept)
    suspect: np.ndarray  # int64 best near-miss candidate row, -1 if none
    suspect_score: np.ndarray  # float64


@njit(cache=True)
def _ensure_sorted(hashes, offsets, sorted32, ready, d):
    if not ready[d]:
        a = offsets[d]
        b = offsets[d + 1]
        sorted32[a:b] = np.sort(hashes[a:b])
        ready[d] = True


@njit(cache=True)
def _exact_jaccard(hashes, offsets, sorted32, ready, a, b):
    """Jaccard of two documents' shingle sets (the 32-bit values their signatures are taken over).

    Sorted on first use only: the few documents that reach an exact check pay for it.
    """
    _ensure_sorted(hashes, offsets, sorted32, ready, a)
    _ensure_sorted(hashes, offsets, sorted32, ready, b)
    i = offsets[a]
    j = offsets[b]
    i_end = offsets[a + 1]
    j_end = offsets[b + 1]
    common = 0
    size_a = 0
    size_b = 0
    while i < i_end or j < j_end:
        if j >= j_end or (i < i_end and sorted32[i] < sorted32[j]):
            v = sorted32[i]
            size_a += 1
            while i < i_end and sorted32[i] == v:
                i += 1
        elif i >= i_end or sorted32[j] < sorted32[i]:
            v = sorted32[j]
            size_b += 1
            while j < j_end and sorted32[j] == v:
                j += 1
        else:
            v = sorted32[i]
            common += 1
            size_a += 1
            size_b += 1
            while i < i_end and sorted32[i] == v:
                i += 1
            while j < j_end and sorted32[j] == v:
                j += 1
    union = size_a + size_b - common
    return common / union if union > 0 else 0.0


@njit(cache=True)
def _stream(
    keys, active, values, is_simhash, max_distance, min_jaccard, suspect_bound, hashes, hash_off, exact_floor, exact_ceiling
):
    n, n_bands = keys.shape
    sorted32 = np.empty(len(hashes), np.uint32)
    ready = np.zeros(n, np.bool_)
    matched = np.full(n, -1, np.int64)
    score = np.full(n, np.nan)
    suspect = np.full(n, -1, np.int64)
    suspect_score = np.full(n, np.nan)
    # Key -> newest kept document with it. A numba typed Dict costs several times more per
    # operation, and the stream does one lookup and one insert per (document, band).
    table_keys = np.zeros(hash_table_size(int(active.sum()) * n_bands), np.uint64)
    table_docs = np.full(len(table_keys), -1, np.int32)
    chain = np.full((n, n_bands), -1, np.int32)
    seen_by = np.full(n, -1, np.int64)
    for d in range(n):
        if not active[d]:
            continue
        best = -1
        best_score = 0.0
        near = -1
        near_score = 0.0
        for b in range(n_bands):
            c = table_docs[hash_slot(table_keys, table_docs, keys[d, b])]
            while c >= 0:
                if seen_by[c] != d:
                    seen_by[c] = d
                    if is_simhash:
                        x = values[d, 0] ^ values[c, 0]
                        dist = 0
                        while x:
                            x &= x - np.uint64(1)
                            dist += 1
                        s = float(dist)
                        if dist <= max_distance:
                            if best < 0 or s < best_score or (s == best_score and c < best):
                                best = c
                                best_score = s
                        elif dist <= suspect_bound and (near < 0 or s < near_score):
                            near = c
                            near_score = s
                    else:
                        eq = 0
                        width = values.shape[1]
                        for k in range(width):
                            if values[d, k] == values[c, k]:
                                eq += 1
                        s = eq / width
                        if len(hash_off) > 0 and exact_floor <= s < exact_ceiling:
                            # In the batch the shingle sets are at hand: settle the estimate exactly.
                            s = _exact_jaccard(hashes, hash_off, sorted32, ready, d, c)
                        if s >= min_jaccard:
                            if best < 0 or s > best_score or (s == best_score and c < best):
                                best = c
                                best_score = s
                        elif s >= suspect_bound and (near < 0 or s > near_score):
                            near = c
                            near_score = s
                c = chain[c, b]
        if best >= 0:
            matched[d] = best
            score[d] = best_score
            continue
        if near >= 0:
            suspect[d] = near
            suspect_score[d] = near_score
        for b in range(n_bands):
            i = hash_slot(table_keys, table_docs, keys[d, b])
            chain[d, b] = table_docs[i]
            table_keys[i] = keys[d, b]
            table_docs[i] = d
    return matched, score, suspect, suspect_score


def stream_simhash(
    simhash: np.ndarray, active: np.ndarray, max_distance: int, suspect_max_distance: int
) -> StreamResult:
    """Hamming <= max_distance against earlier kept rows sharing one of the four 16-bit bands."""
    simhash = np.ascontiguousarray(simhash, dtype=np.uint64)
    shifts = np.arange(4, dtype=np.uint64) * np.uint64(16)
    keys = ((simhash[:, None] >> shifts) & np.uint64(0xFFFF)) | (np.arange(4, dtype=np.uint64) << np.uint64(16))
    out = _stream(
        np.ascontiguousarray(keys), active.astype(np.bool_), simhash.reshape(-1, 1), True,
        int(max_distance), 2.0, float(suspect_max_distance), _NO_SETS, _NO_OFFSETS, 2.0, 2.0,
    )
    return StreamResult(*out)


def stream_minhash(
    band_keys: np.ndarray,
    signatures: np.ndarray,
    active: np.ndarray,
    threshold: float,
    suspect_min: float,
    shingles: tuple[np.ndarray, np.ndarray] | None = None,
    exact_floor: float = 0.65,
    exact_ceiling: float = 0.9,
) -> StreamResult:
    """Jaccard >= threshold against earlier kept rows sharing an LSH band.

    With ``shingles`` (the rows' 32-bit shingle values and per-row offsets), a candidate whose
    estimate falls in [exact_floor, exact_ceiling) is judged on its exact Jaccard instead: with 128
    permutations the estimate's standard deviation near 0.8 is 0.035, so a true 0.8 lands anywhere in
    about 0.7-0.9 while outside that band the estimate alone is reliable.
    """
    sets, set_off = shingles if shingles is not None else (_NO_SETS, _NO_OFFSETS)
    out = _stream(
        np.ascontiguousarray(band_keys, dtype=np.uint64), active.astype(np.bool_),
        np.ascontiguousarray(signatures), False, 0, float(threshold), float(suspect_min),
        sets, set_off, float(exact_floor), float(exact_ceiling),
    )
    return StreamResult(*out)
