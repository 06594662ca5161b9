"""In-batch candidate pairs from bucket keys, and the greedy "earlier kept document wins" resolution."""

from __future__ import annotations

import numpy as np
from numba import njit

# A bucket shared by very many documents (a template, an empty text) would yield a quadratic number
# of pairs; each document is compared with at most this many earlier members of a bucket.
MAX_EARLIER_PER_BUCKET = 64


@njit(cache=True)
def _pairs_in_sorted_groups(sorted_keys, order, max_back):
    n = len(sorted_keys)
    total = 0
    start = 0
    for i in range(1, n + 1):
        if i == n or sorted_keys[i] != sorted_keys[start]:
            for j in range(start + 1, i):
                total += min(j - start, max_back)
            start = i
    earlier = np.empty(total, np.int64)
    later = np.empty(total, np.int64)
    k = 0
    start = 0
    for i in range(1, n + 1):
        if i == n or sorted_keys[i] != sorted_keys[start]:
            for j in range(start + 1, i):
                lo = max(start, j - max_back)
                for m in range(lo, j):
                    a = order[m]
                    b = order[j]
                    earlier[k] = min(a, b)
                    later[k] = max(a, b)
                    k += 1
            start = i
    return earlier, later


def bucket_pairs(keys: np.ndarray, max_back: int = MAX_EARLIER_PER_BUCKET) -> tuple[np.ndarray, np.ndarray]:
    """Unique (earlier, later) row pairs sharing a key in any column of ``keys`` ((n,) or (n, bands))."""
    keys = keys.reshape(len(keys), -1)
    n = len(keys)
    parts_e, parts_l = [], []
    rows = np.arange(n, dtype=np.int64)
    for col in range(keys.shape[1]):
        column = np.ascontiguousarray(keys[:, col]).astype(np.uint64)
        order = np.lexsort((rows, column))
        e, l_ = _pairs_in_sorted_groups(column[order], order, max_back)
        parts_e.append(e)
        parts_l.append(l_)
    if not parts_e or sum(len(p) for p in parts_e) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    packed = np.unique(np.concatenate(parts_e) * n + np.concatenate(parts_l))
    return packed // n, packed % n


@njit(cache=True)
def _greedy(n, later, earlier, dropped_before):
    matched = np.full(n, -1, np.int64)
    which = np.full(n, -1, np.int64)
    for k in range(len(later)):
        j = later[k]
        if dropped_before[j] or matched[j] >= 0:
            continue
        e = earlier[k]
        if dropped_before[e] or matched[e] >= 0:
            continue
        matched[j] = e
        which[j] = k
    return matched, which


def resolve_earlier_wins(
    n: int, earlier: np.ndarray, later: np.ndarray, score_rank: np.ndarray, dropped_before: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy dedup in batch order over qualifying pairs.

    A document is dropped when an earlier document that is itself kept qualifies; among those it names
    the best (lowest ``score_rank``). Rows already dropped (``dropped_before``) neither drop nor match.
    Returns (matched row or -1 per row, index of the winning pair or -1).
    """
    order = np.lexsort((score_rank, later))
    matched, which = _greedy(n, later[order], earlier[order], dropped_before.astype(np.bool_))
    pair_index = np.where(which >= 0, order[np.maximum(which, 0)], -1)
    return matched, pair_index
