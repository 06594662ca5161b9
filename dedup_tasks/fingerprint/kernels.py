"""Compiled (numba) kernels over a batch's concatenated code points.

A batch of token texts is one uint32 array of Unicode code points plus per-document offsets; every
kernel walks it once, in parallel over documents. Hashes of a span of code points are polynomial
(mod 2^64) and finished with the MurmurHash3 64-bit finalizer, so a shingle's hash depends only on
its characters: ``dedup_tasks.fingerprint.hashing.span_hash64`` is the pure-Python reference.

Modes per document: ``WORDS`` (space-separated words: English, or Chinese after jieba segmentation)
and ``CHARS`` (characters with spaces ignored: Chinese character n-grams).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

WORDS = 0
CHARS = 1

POLY = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_M32_1 = np.uint32(0x85EBCA6B)
_M32_2 = np.uint32(0xC2B2AE35)
_SPACE = np.uint32(32)


@njit(inline="always", cache=True)
def fmix64(h):
    h ^= h >> np.uint64(33)
    h *= _M1
    h ^= h >> np.uint64(33)
    h *= _M2
    h ^= h >> np.uint64(33)
    return h


@njit(inline="always", cache=True)
def fmix32(h):
    # numba widens uint32 products to 64 bits: truncate after every multiply to stay mod 2^32.
    h = np.uint32(h ^ (h >> np.uint32(16)))
    h = np.uint32(np.uint64(h) * np.uint64(_M32_1) & np.uint64(0xFFFFFFFF))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(np.uint64(h) * np.uint64(_M32_2) & np.uint64(0xFFFFFFFF))
    return np.uint32(h ^ (h >> np.uint32(16)))


@njit(inline="always", cache=True)
def _finish(h, length):
    return fmix64(h + np.uint64(length))


@njit(cache=True)
def _word_bounds(cp, start, end, starts, ends):
    """Fill word [start, end) spans of cp[start:end] (single-space separated); return the count."""
    count = 0
    i = start
    while i < end:
        while i < end and cp[i] == _SPACE:
            i += 1
        if i >= end:
            break
        j = i
        while j < end and cp[j] != _SPACE:
            j += 1
        starts[count] = i
        ends[count] = j
        count += 1
        i = j
    return count


@njit(cache=True)
def _span_hash(cp, start, end):
    h = np.uint64(0)
    for i in range(start, end):
        h = h * POLY + np.uint64(cp[i])
    return _finish(h, end - start)


@njit(cache=True)
def _count_units(cp, start, end, mode):
    count = 0
    if mode == CHARS:
        for i in range(start, end):
            if cp[i] != _SPACE:
                count += 1
    else:
        in_word = False
        for i in range(start, end):
            if cp[i] == _SPACE:
                in_word = False
            elif not in_word:
                in_word = True
                count += 1
    return count


@njit(parallel=True, cache=True)
def count_shingles(cp, offsets, modes, n_words, n_chars):
    """Number of shingles each document yields (n-grams, or 1 for a non-empty doc shorter than n)."""
    n_docs = len(offsets) - 1
    out = np.zeros(n_docs, np.int64)
    for d in prange(n_docs):
        units = _count_units(cp, offsets[d], offsets[d + 1], modes[d])
        n = n_chars if modes[d] == CHARS else n_words
        if units >= n:
            out[d] = units - n + 1
        elif units > 0:
            out[d] = 1
    return out


@njit(parallel=True, cache=True)
def shingle_hashes(cp, offsets, modes, n_words, n_chars, out_offsets):
    """64-bit hash of every shingle, documents' shingles contiguous at out_offsets."""
    n_docs = len(offsets) - 1
    out = np.empty(out_offsets[-1], np.uint64)
    for d in prange(n_docs):
        start = offsets[d]
        end = offsets[d + 1]
        pos = out_offsets[d]
        total = out_offsets[d + 1] - pos
        if total == 0:
            continue
        if modes[d] == CHARS:
            # Gather non-space code points, then hash every window of n_chars of them.
            buf = np.empty(end - start, np.uint32)
            m = 0
            for i in range(start, end):
                if cp[i] != _SPACE:
                    buf[m] = cp[i]
                    m += 1
            width = n_chars if m >= n_chars else m
            for k in range(total):
                out[pos + k] = _span_hash(buf, k, k + width)
        else:
            starts = np.empty(end - start + 1, np.int64)
            ends = np.empty(end - start + 1, np.int64)
            m = _word_bounds(cp, start, end, starts, ends)
            width = n_words if m >= n_words else m
            for k in range(total):
                out[pos + k] = _span_hash(cp, starts[k], ends[k + width - 1])
    return out


@njit(parallel=True, cache=True)
def minhash_signatures(hashes64, offsets, perm_a, perm_b):
    """datasketch 'affine32' MinHash: h32 = top 32 bits of the shingle hash, fmix32, a*h+b mod 2^32, min."""
    n_docs = len(offsets) - 1
    num_perm = len(perm_a)
    sig = np.full((n_docs, num_perm), np.uint32(0xFFFFFFFF), np.uint32)
    for d in prange(n_docs):
        row = sig[d]
        for s in range(offsets[d], offsets[d + 1]):
            hv = fmix32(np.uint32(hashes64[s] >> np.uint64(32)))
            for k in range(num_perm):
                v = np.uint32((np.uint64(perm_a[k]) * np.uint64(hv) + np.uint64(perm_b[k])) & np.uint64(0xFFFFFFFF))
                if v < row[k]:
                    row[k] = v
    return sig


@njit(parallel=True, cache=True)
def band_keys(sig, bands, rows):
    """One 64-bit key per LSH band: a hash of the band's `rows` signature values and the band index."""
    n_docs = sig.shape[0]
    out = np.empty((n_docs, bands), np.uint64)
    for d in prange(n_docs):
        for b in range(bands):
            h = np.uint64(b + 1)
            for r in range(rows):
                h = h * POLY + np.uint64(sig[d, b * rows + r])
            out[d, b] = fmix64(h)
    return out


@njit(parallel=True, cache=True)
def weighted_simhash(cp, offsets, modes, char_ngram, word_ngram):
    """64-bit SimHash: each word n-gram (WORDS) or character n-gram (CHARS) occurrence votes on every bit.

    Summing over occurrences makes each feature's weight its term frequency. Word n-grams rather than
    single words keep a handful of function words ("the", "of") from outvoting the content words.
    """
    n_docs = len(offsets) - 1
    out = np.zeros(n_docs, np.uint64)
    for d in prange(n_docs):
        start = offsets[d]
        end = offsets[d + 1]
        votes = np.zeros(64, np.int64)
        if modes[d] == CHARS:
            buf = np.empty(end - start, np.uint32)
            m = 0
            for i in range(start, end):
                if cp[i] != _SPACE:
                    buf[m] = cp[i]
                    m += 1
            width = char_ngram if m >= char_ngram else m
            for k in range(m - width + 1 if m > 0 else 0):
                h = _span_hash(buf, k, k + width)
                for b in range(64):
                    votes[b] += 1 if (h >> np.uint64(b)) & np.uint64(1) else -1
        else:
            starts = np.empty(end - start + 1, np.int64)
            ends = np.empty(end - start + 1, np.int64)
            m = _word_bounds(cp, start, end, starts, ends)
            width = word_ngram if m >= word_ngram else m
            for k in range(m - width + 1 if m > 0 else 0):
                h = _span_hash(cp, starts[k], ends[k + width - 1])
                for b in range(64):
                    votes[b] += 1 if (h >> np.uint64(b)) & np.uint64(1) else -1
        value = np.uint64(0)
        for b in range(64):
            if votes[b] > 0:
                value |= np.uint64(1) << np.uint64(b)
        out[d] = value
    return out


@njit(parallel=True, cache=True)
def shingle_sets(hashes64, offsets):
    """Per document, the sorted unique top-32-bit shingle hashes (what the signature is taken over)."""
    n_docs = len(offsets) - 1
    out = np.empty(len(hashes64), np.uint32)
    counts = np.zeros(n_docs, np.int64)
    for d in prange(n_docs):
        start = offsets[d]
        end = offsets[d + 1]
        if end == start:
            continue
        values = np.sort((hashes64[start:end] >> np.uint64(32)).astype(np.uint32))
        m = 1
        out[start] = values[0]
        for k in range(1, len(values)):
            if values[k] != values[k - 1]:
                out[start + m] = values[k]
                m += 1
        counts[d] = m
    new_off = np.zeros(n_docs + 1, np.int64)
    for d in range(n_docs):
        new_off[d + 1] = new_off[d] + counts[d]
    packed = np.empty(new_off[n_docs], np.uint32)
    for d in prange(n_docs):
        packed[new_off[d] : new_off[d + 1]] = out[offsets[d] : offsets[d] + counts[d]]
    return packed, new_off
