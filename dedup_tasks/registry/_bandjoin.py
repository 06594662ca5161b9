"""SimHash band join in memory: which registered SimHashes share a 16-bit band with a query.

With 4 bands of 16 bits, a registered SimHash shares band b with a query for ~N/65536 queries per
band value; for a 100k-document batch against 1e7 documents that is ~6e7 (query, registered) pairs to
test. Done in PostgreSQL (an index-only scan per band with a bit_count filter) each test costs a few
function calls and an allocation (int8send): ~20 s. Here the registered values are sorted by each
band once (a radix sort of 16-bit keys) and a compiled loop tests the pairs with a 64-bit popcount,
~1 ns each. The result is exact: every pair sharing a band and within the distance, each once.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_MASK16 = np.uint64(0xFFFF)


@njit(inline="always", cache=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@njit(inline="always", cache=True)
def _shares_lower_band(x, band):
    # x = query ^ candidate: a pair that shares an earlier band was already reported there.
    for lower in range(band):  # noqa: SIM110 - numba compiles loops, not generator expressions
        if (x >> np.uint64(16 * lower)) & _MASK16 == np.uint64(0):
            return True
    return False


@njit(parallel=True, cache=True)
def _count(sorted_values, starts, query, band, max_distance):
    counts = np.zeros(len(query), np.int64)
    shift = np.uint64(16 * band)
    for i in prange(len(query)):
        q = query[i]
        key = np.int64((q >> shift) & _MASK16)
        c = 0
        for j in range(starts[key], starts[key + 1]):
            x = q ^ sorted_values[j]
            if (max_distance < 0 or _popcount(x) <= max_distance) and not _shares_lower_band(x, band):
                c += 1
        counts[i] = c
    return counts


@njit(parallel=True, cache=True)
def _fill(sorted_values, starts, query, band, max_distance, offsets, out_query, out_value):
    shift = np.uint64(16 * band)
    for i in prange(len(query)):
        q = query[i]
        key = np.int64((q >> shift) & _MASK16)
        k = offsets[i]
        for j in range(starts[key], starts[key + 1]):
            v = sorted_values[j]
            x = q ^ v
            if (max_distance < 0 or _popcount(x) <= max_distance) and not _shares_lower_band(x, band):
                out_query[k] = i
                out_value[k] = v
                k += 1


def band_join(registered: np.ndarray, query: np.ndarray, max_distance: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(query index, registered value) for every registered value sharing a 16-bit band with a query.

    Within Hamming distance `max_distance` when given (None: every band-sharing pair). A registered
    value shared by several bands is reported once per query; equal registered values (several
    documents with one SimHash) once per occurrence.
    """
    registered = np.ascontiguousarray(registered, dtype=np.uint64)
    query = np.ascontiguousarray(query, dtype=np.uint64)
    limit = -1 if max_distance is None else int(max_distance)
    queries: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for band in range(4):
        keys = ((registered >> np.uint64(16 * band)) & _MASK16).astype(np.uint16)
        order = np.argsort(keys, kind="stable")  # a radix sort for 16-bit keys
        sorted_values = registered[order]
        starts = np.zeros(65537, np.int64)
        np.cumsum(np.bincount(keys, minlength=65536), out=starts[1:])
        del keys, order
        counts = _count(sorted_values, starts, query, band, limit)
        offsets = np.zeros(len(query) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        out_query = np.empty(int(offsets[-1]), np.int64)
        out_value = np.empty(int(offsets[-1]), np.uint64)
        _fill(sorted_values, starts, query, band, limit, offsets, out_query, out_value)
        queries.append(out_query)
        values.append(out_value)
    return np.concatenate(queries), np.concatenate(values)
