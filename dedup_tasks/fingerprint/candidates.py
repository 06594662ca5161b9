"""In-batch near-duplicate search in batch order: the earlier *kept* document wins.

Documents are visited in batch order; each one looks up its bucket keys (SimHash bands or LSH bands)
in an index holding only the documents kept so far, scores the candidates, and is either dropped
(naming its best qualifying candidate) or inserted. This is the same streaming semantics the
registry gives across batches, and a cluster of many copies costs one comparison per copy instead of
a quadratic number of pairs. Compiled with numba; the index is a hash map from key to the newest
document in the bucket plus a per-(document, band) chain to the older ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, types
from numba.typed import Dict

_NO_SETS = np.empty(0, np.uint32)
_NO_OFFSETS = np.empty(0, np.int64)


@dataclass
class StreamResult:
    matched: np.ndarray  # int64 row of the kept document a row duplicates, -1 if kept
    score: np.ndarray  # float64 score of that match (NaN if kept)
    suspect: np.ndarray  # int64 best near-miss candidate row, -1 if none
    suspect_score: np.ndarray  # float64


@njit(cache=True)
def _exact_jaccard(sets, set_off, a, b):
    """Jaccard of two documents' sorted unique shingle hashes."""
    i = set_off[a]
    j = set_off[b]
    i_end = set_off[a + 1]
    j_end = set_off[b + 1]
    common = 0
    while i < i_end and j < j_end:
        if sets[i] == sets[j]:
            common += 1
            i += 1
            j += 1
        elif sets[i] < sets[j]:
            i += 1
        else:
            j += 1
    union = (i_end - set_off[a]) + (j_end - set_off[b]) - common
    return common / union if union > 0 else 0.0


@njit(cache=True)
def _stream(keys, active, values, is_simhash, max_distance, min_jaccard, suspect_bound, sets, set_off, exact_floor):
    n, n_bands = keys.shape
    matched = np.full(n, -1, np.int64)
    score = np.full(n, np.nan)
    suspect = np.full(n, -1, np.int64)
    suspect_score = np.full(n, np.nan)
    heads = Dict.empty(key_type=types.uint64, value_type=types.int64)
    chain = np.full((n, n_bands), -1, np.int64)
    seen_by = np.full(n, -1, np.int64)
    for d in range(n):
        if not active[d]:
            continue
        best = -1
        best_score = 0.0
        near = -1
        near_score = 0.0
        for b in range(n_bands):
            key = keys[d, b]
            if key not in heads:
                continue
            c = heads[key]
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
                        if len(set_off) > 0 and s >= exact_floor:
                            # In the batch the shingle sets are at hand: settle the estimate exactly.
                            s = _exact_jaccard(sets, set_off, d, c)
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
            key = keys[d, b]
            if key in heads:
                chain[d, b] = heads[key]
            heads[key] = d
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
        int(max_distance), 2.0, float(suspect_max_distance), _NO_SETS, _NO_OFFSETS, 2.0,
    )
    return StreamResult(*out)


def stream_minhash(
    band_keys: np.ndarray,
    signatures: np.ndarray,
    active: np.ndarray,
    threshold: float,
    suspect_min: float,
    shingle_sets: tuple[np.ndarray, np.ndarray] | None = None,
    exact_floor: float = 0.5,
) -> StreamResult:
    """Jaccard >= threshold against earlier kept rows sharing an LSH band.

    With ``shingle_sets`` (sorted unique shingle hashes and per-row offsets), a candidate whose
    estimate reaches ``exact_floor`` is judged on its exact Jaccard instead of the estimate, whose
    standard deviation at 0.8 is 0.035 with 128 permutations.
    """
    sets, set_off = shingle_sets if shingle_sets is not None else (_NO_SETS, _NO_OFFSETS)
    out = _stream(
        np.ascontiguousarray(band_keys, dtype=np.uint64), active.astype(np.bool_),
        np.ascontiguousarray(signatures), False, 0, float(threshold), float(suspect_min),
        sets, set_off, float(exact_floor),
    )
    return StreamResult(*out)
