"""The MinHash layer's in-batch rule applied to candidate pairs found and verified elsewhere.

``candidates.stream_minhash`` visits the batch in order; each document scores the *kept* earlier
documents sharing one of its LSH bands and is dropped on the best one its verifier accepts (the
highest score, ties to the earlier row), else it is kept and remembers its best near miss (the
first of the highest scores in its visiting order: band by band, newest first). The Spark engine
finds the band-sharing pairs with joins and verifies them on the executors with the same
``verify_pairs``; what stays on the driver is this sequential pass over the pairs alone, which
depends on the batch (which rows are still active, which earlier rows were kept).

``tests/engines/test_pairs.py`` checks it against ``stream_minhash`` itself on the same documents,
so the two cannot drift apart silently.
"""

from __future__ import annotations

import numpy as np
from numba import njit

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)
from dedup_tasks.fingerprint.candidates import StreamResult


@njit(cache=True)
def _resolve(n, starts, earlier, score, ok, covers_newer, covers_earlier, active, suspect_bound):
    matched = np.full(n, -1, np.int64)
    out_score = np.full(n, np.nan)
    suspect = np.full(n, -1, np.int64)
    suspect_score = np.full(n, np.nan)
    out_new = np.full(n, np.nan)
    out_old = np.full(n, np.nan)
    kept = np.zeros(n, np.bool_)
    for d in range(n):
        if not active[d]:
            continue
        best = -1
        best_score = 0.0
        best_new = np.nan
        best_old = np.nan
        near = -1
        near_score = 0.0
        for p in range(starts[d], starts[d + 1]):
            c = earlier[p]
            if not kept[c]:
                continue
            s = score[p]
            if ok[p]:
                if best < 0 or s > best_score or (s == best_score and c < best):
                    best = c
                    best_score = s
                    best_new = covers_newer[p]
                    best_old = covers_earlier[p]
            elif s >= suspect_bound and (near < 0 or s > near_score):
                near = c
                near_score = s
        if best >= 0:
            matched[d] = best
            out_score[d] = best_score
            out_new[d] = best_new
            out_old[d] = best_old
            continue
        if near >= 0:
            suspect[d] = near
            suspect_score[d] = near_score
        kept[d] = True
    return matched, out_score, suspect, suspect_score, out_new, out_old


def resolve_pairs(
    n: int,
    newer: np.ndarray,
    earlier: np.ndarray,
    first_band: np.ndarray,
    score: np.ndarray,
    ok: np.ndarray,
    covers_newer: np.ndarray,
    covers_earlier: np.ndarray,
    active: np.ndarray,
    suspect_bound: float,
) -> StreamResult:
    """``stream_minhash``'s result from its candidate pairs: rows ``newer[i] > earlier[i]`` of a batch of
    ``n`` rows sharing LSH band ``first_band[i]`` first, the pair's score (exact Jaccard when verified,
    else the estimate), whether it is a copy (``ok``), and its coverages. Each pair once."""
    newer = np.asarray(newer, np.int64)
    earlier = np.asarray(earlier, np.int64)
    if len(newer) and not (newer > earlier).all():
        raise ValueError("a candidate pair is not (newer, earlier) in batch order")
    # The stream's visiting order for each document: band by band, and in a band the newest first.
    order = np.lexsort((-earlier, np.asarray(first_band, np.int64), newer))
    starts = np.searchsorted(newer[order], np.arange(n + 1)).astype(np.int64)
    out = _resolve(
        n, starts, earlier[order], np.asarray(score, np.float64)[order], np.asarray(ok, np.bool_)[order],
        np.asarray(covers_newer, np.float64)[order], np.asarray(covers_earlier, np.float64)[order],
        np.asarray(active, np.bool_), float(suspect_bound),
    )  # fmt: skip
    return StreamResult(*out)
