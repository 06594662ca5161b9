"""The in-batch search of ``fingerprint.candidates`` over candidate *pairs* instead of a streamed index.

A distributed engine cannot stream the batch through one hash table: it finds the pairs sharing a
band with a join, scores them where the data lives, and hands the scored pairs back. ``resolve``
then applies the same rule as ``candidates._stream`` (documents visited in batch order; a document
is compared only with the earlier documents that were kept; the best qualifying candidate wins,
ties to the earlier row; otherwise the best near miss is remembered and the document is kept), so
chains (A ~ B ~ C with A !~ C) resolve exactly as they do on one node. Candidates are visited in the
stream's order too (lowest shared band first, newest first within a band), which decides which of
two equally close near misses is remembered.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from dedup_tasks.fingerprint.candidates import StreamResult, _exact_jaccard


@njit(cache=True)
def _resolve(n, later, earlier, score, starts, active, is_simhash, max_distance, min_jaccard, suspect_bound):
    matched = np.full(n, -1, np.int64)
    best_scores = np.full(n, np.nan)
    suspect = np.full(n, -1, np.int64)
    suspect_score = np.full(n, np.nan)
    inserted = np.zeros(n, np.bool_)
    for d in range(n):
        if not active[d]:
            continue
        best = -1
        best_score = 0.0
        near = -1
        near_score = 0.0
        for p in range(starts[d], starts[d + 1]):
            c = earlier[p]
            if not inserted[c]:
                continue
            s = score[p]
            if is_simhash:
                if s <= max_distance:
                    if best < 0 or s < best_score or (s == best_score and c < best):
                        best = c
                        best_score = s
                elif s <= suspect_bound and (near < 0 or s < near_score):
                    near = c
                    near_score = s
            else:
                if s >= min_jaccard:
                    if best < 0 or s > best_score or (s == best_score and c < best):
                        best = c
                        best_score = s
                elif s >= suspect_bound and (near < 0 or s > near_score):
                    near = c
                    near_score = s
        if best >= 0:
            matched[d] = best
            best_scores[d] = best_score
            continue
        if near >= 0:
            suspect[d] = near
            suspect_score[d] = near_score
        inserted[d] = True
    return matched, best_scores, suspect, suspect_score


def resolve(
    n: int,
    row_a: np.ndarray,
    row_b: np.ndarray,
    band: np.ndarray,
    score: np.ndarray,
    active: np.ndarray,
    simhash: bool,
    threshold: float,
    suspect_bound: float,
) -> StreamResult:
    """The stream's decisions from scored candidate pairs of rows ``0..n-1`` (batch order).

    ``row_a``/``row_b`` are the two rows of each pair in either order, ``band`` the lowest band they
    share, ``score`` a Hamming distance (``simhash``) or a Jaccard. ``threshold`` is the maximum
    distance or the minimum Jaccard of a drop, ``suspect_bound`` that of a remembered near miss.
    """
    row_a = np.asarray(row_a, np.int64)
    row_b = np.asarray(row_b, np.int64)
    later = np.maximum(row_a, row_b)
    earlier = np.minimum(row_a, row_b)
    order = np.lexsort((-earlier, np.asarray(band, np.int64), later))
    later, earlier, score = later[order], earlier[order], np.asarray(score, np.float64)[order]
    starts = np.searchsorted(later, np.arange(n + 1)).astype(np.int64)
    out = _resolve(
        n, later, earlier, score, starts, np.asarray(active, np.bool_), simhash,
        float(threshold), float(threshold), float(suspect_bound),
    )  # fmt: skip
    return StreamResult(*out)


@njit(cache=True)
def _pair_jaccard(hashes, offsets, a, b, estimate, floor, ceiling):
    sorted32 = np.empty(len(hashes), np.uint32)
    ready = np.zeros(len(offsets) - 1, np.bool_)
    out = estimate.copy()
    for p in range(len(a)):
        if floor <= estimate[p] < ceiling:
            out[p] = _exact_jaccard(hashes, offsets, sorted32, ready, a[p], b[p])
    return out


def minhash_pair_scores(
    sig_a: np.ndarray,
    sig_b: np.ndarray,
    sets_a: tuple[np.ndarray, np.ndarray],
    sets_b: tuple[np.ndarray, np.ndarray],
    exact_floor: float = 0.65,
    exact_ceiling: float = 0.9,
) -> np.ndarray:
    """The stream's MinHash score of each pair: the estimate, or the exact Jaccard of the two shingle
    sets (32-bit values + offsets, one entry per pair) where the estimate is in [floor, ceiling)."""
    estimate = (np.asarray(sig_a) == np.asarray(sig_b)).sum(axis=1) / sig_a.shape[1]
    n = len(estimate)
    values_a, off_a = sets_a
    values_b, off_b = sets_b
    # Both sides in one offsets space: pair p's first set is document p, its second document n + p.
    hashes = np.concatenate([values_a, values_b]).astype(np.uint32)
    offsets = np.concatenate([off_a[:-1], off_b + off_a[-1]]).astype(np.int64)
    idx = np.arange(n, dtype=np.int64)
    return _pair_jaccard(hashes, offsets, idx, idx + n, estimate.astype(np.float64), float(exact_floor), float(exact_ceiling))
