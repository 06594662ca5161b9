"""Compiled (numba) kernels over a batch's concatenated code points.

A batch of token texts is one uint32 array of Unicode code points plus per-document spans (start,
end), so a subset of a batch's rows is read in place; every kernel walks it once, in parallel over
documents. For packed rows with offsets the spans are ``offsets[:-1], offsets[1:]``. Hashes of a span of code points are polynomial
(mod 2^64) and finished with the MurmurHash3 64-bit finalizer, so a shingle's hash depends only on
its characters: ``dedup_tasks.fingerprint.hashing.span_hash64`` is the pure-Python reference.

Modes per document: ``WORDS`` (space-separated words: English, or Chinese after jieba segmentation)
and ``CHARS`` (characters with spaces ignored: Chinese character n-grams).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)

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


@njit(cache=True)
def hash_table_size(entries):
    """Slots for an open-addressing table of ``entries`` keys: a power of two at most two-thirds
    full, so linear probes stay short (200,000 documents x 21 bands: 8M slots)."""
    size = 16
    while 2 * size < 3 * entries:
        size *= 2
    return size


@njit(inline="always", cache=True)
def hash_slot(table_keys, table_values, key):
    """The slot of an open-addressing table holding ``key``, or the empty slot where it goes.

    ``table_values`` below 0 marks an empty slot; the caller stores the key and a value >= 0.
    """
    mask = np.uint64(len(table_keys) - 1)
    i = fmix64(key) & mask
    while table_values[i] >= 0 and table_keys[i] != key:
        i = (i + np.uint64(1)) & mask
    return i


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


@njit(parallel=True, nogil=True, cache=True)
def count_shingles(cp, starts, ends, modes, n_words, n_chars):
    """Number of shingles each document ``cp[starts[d]:ends[d]]`` yields (n-grams, or 1 for a
    non-empty doc shorter than n)."""
    n_docs = len(starts)
    out = np.zeros(n_docs, np.int64)
    for d in prange(n_docs):
        units = _count_units(cp, starts[d], ends[d], modes[d])
        n = n_chars if modes[d] == CHARS else n_words
        if units >= n:
            out[d] = units - n + 1
        elif units > 0:
            out[d] = 1
    return out


@njit(cache=True)
def _prefix_hashes(cp, start, end, skip_spaces, prefix):
    """Polynomial prefix hashes of cp[start:end] (spaces dropped if asked); returns the unit count.

    prefix[k] is the hash state after k kept code points, so the state of any span [i, j) of them is
    prefix[j] - prefix[i] * POLY^(j - i): every shingle costs O(1) whatever its length.
    """
    m = 0
    prefix[0] = np.uint64(0)
    for i in range(start, end):
        c = cp[i]
        if skip_spaces and c == _SPACE:
            continue
        prefix[m + 1] = prefix[m] * POLY + np.uint64(c)
        m += 1
    return m


# Per-document scratch (prefix hashes, word bounds) is allocated once per block of documents, sized
# for the block's longest: an allocation per document costs a malloc (an mmap and its page faults
# for long documents) per document.
SCRATCH_BLOCKS = 64


@njit(inline="always", cache=True)
def _block_scratch(doc_starts, doc_ends, n_blocks, b):
    """Block ``b``'s documents [lo, hi) and scratch sized for its longest: prefix hashes, word
    starts, word ends."""
    n_docs = len(doc_starts)
    lo = b * n_docs // n_blocks
    hi = (b + 1) * n_docs // n_blocks
    size = _longest(doc_starts, doc_ends, lo, hi) + 1
    return lo, hi, np.empty(size, np.uint64), np.empty(size, np.int64), np.empty(size, np.int64)


@njit(cache=True)
def _longest(doc_starts, doc_ends, lo, hi):
    longest = 0
    for d in range(lo, hi):
        longest = max(longest, doc_ends[d] - doc_starts[d])
    return longest


@njit(inline="always", cache=True)
def _span_from_prefix(prefix, powers, i, j):
    return _finish(prefix[j] - prefix[i] * powers[j - i], j - i)


def poly_powers(n: int) -> np.ndarray:
    """POLY^k mod 2^64 for k < n."""
    return _powers(max(int(n), 1))


@njit(cache=True)
def _powers(n):
    out = np.empty(n, np.uint64)
    out[0] = np.uint64(1)
    for k in range(1, n):
        out[k] = out[k - 1] * POLY
    return out


def shingle_hashes(cp, starts, ends, modes, n_words, n_chars, out_offsets, out=None):
    """The hash MinHash reads of every shingle of the documents ``cp[starts[d]:ends[d]]``: the top 32
    bits of its 64-bit span hash (``hashing.shingle_hash32``), each document's shingles contiguous at
    out_offsets. ``out`` (``out_offsets[-1]`` uint32 values) receives them instead of a new array."""
    # Allocated by numpy (transparent huge pages), filled by the kernel.
    out = np.empty(int(out_offsets[-1]), np.uint32) if out is None else out
    _shingle_hashes_into(cp, starts, ends, modes, n_words, n_chars, out_offsets, out)
    return out


@njit(parallel=True, nogil=True, cache=True)
def _shingle_hashes_into(cp, doc_starts, doc_ends, modes, n_words, n_chars, out_offsets, out):
    n_docs = len(doc_starts)
    powers = _powers(_longest(doc_starts, doc_ends, 0, n_docs) + 2)
    n_blocks = min(n_docs, SCRATCH_BLOCKS)
    for b in prange(n_blocks):
        lo, hi, prefix, starts, ends = _block_scratch(doc_starts, doc_ends, n_blocks, b)
        for d in range(lo, hi):
            start = doc_starts[d]
            end = doc_ends[d]
            pos = out_offsets[d]
            total = out_offsets[d + 1] - pos
            if total == 0:
                continue
            if modes[d] == CHARS:
                m = _prefix_hashes(cp, start, end, True, prefix)
                width = n_chars if m >= n_chars else m
                for k in range(total):
                    out[pos + k] = np.uint32(_span_from_prefix(prefix, powers, k, k + width) >> np.uint64(32))
            else:
                # Word shingles keep their single separating spaces: the span runs from the first
                # word's start to the last word's end in the token text.
                _prefix_hashes(cp, start, end, False, prefix)
                m = _word_bounds(cp, start, end, starts, ends)
                width = n_words if m >= n_words else m
                for k in range(total):
                    h = _span_from_prefix(prefix, powers, starts[k] - start, ends[k + width - 1] - start)
                    out[pos + k] = np.uint32(h >> np.uint64(32))


def minhash_signatures(hashes32, offsets, perm_a, perm_b):
    """datasketch 'affine32' MinHash of 32-bit shingle hashes: fmix32, a*h+b mod 2^32, min."""
    sig = np.full((len(offsets) - 1, len(perm_a)), np.uint32(0xFFFFFFFF), np.uint32)
    _minhash_into(hashes32, offsets, np.asarray(perm_a, np.uint32), np.asarray(perm_b, np.uint32), sig)
    return sig


@njit(parallel=True, nogil=True, cache=True)
def _minhash_into(hashes32, offsets, perm_a, perm_b, sig):
    for d in prange(len(offsets) - 1):
        minhash_row(sig[d], hashes32, offsets[d], offsets[d + 1], perm_a, perm_b)


@njit(inline="always", cache=True)
def minhash_row(row, hashes32, s, end, perm_a, perm_b):
    """Lower ``row`` (len(perm_a) values) to the MinHash of ``hashes32[s:end]``."""
    num_perm = len(perm_a)
    # uint32 operands (numba widens the product to 64 bits, the uint32 cast narrows it back) let
    # LLVM use 8-lane 32-bit multiplies (vpmulld) instead of 4-lane 64-bit ones; four shingles
    # per pass over the permutations load and store the row once for four minima. Same values
    # as a*h+b mod 2^32 one shingle at a time: 3x faster on the bench hour.
    while s + 4 <= end:
        h0 = fmix32(hashes32[s])
        h1 = fmix32(hashes32[s + 1])
        h2 = fmix32(hashes32[s + 2])
        h3 = fmix32(hashes32[s + 3])
        for k in range(num_perm):
            a = perm_a[k]
            b = perm_b[k]
            v01 = min(np.uint32(a * h0 + b), np.uint32(a * h1 + b))
            v23 = min(np.uint32(a * h2 + b), np.uint32(a * h3 + b))
            row[k] = min(row[k], min(v01, v23))
        s += 4
    while s < end:
        hv = fmix32(hashes32[s])
        for k in range(num_perm):
            row[k] = min(row[k], np.uint32(perm_a[k] * hv + perm_b[k]))
        s += 1


@njit(parallel=True, nogil=True, cache=True)
def covered_by_signature(sig, newer_rows, hashes32, offsets, inv_a, perm_b):
    """For each (signature, newer document) pair: the share of signature values whose recovered
    shingle (fmix32 value, see ``minhash.earlier_covered``) is in the newer document's set."""
    n = sig.shape[0]
    num_perm = sig.shape[1]
    out = np.zeros(n)
    for i in prange(n):
        r = newer_rows[i]
        lo = offsets[r]
        hi = offsets[r + 1]
        mixed = np.empty(hi - lo, np.uint32)
        for s in range(lo, hi):
            mixed[s - lo] = fmix32(hashes32[s])
        mixed.sort()
        found = 0
        total = 0
        for k in range(num_perm):
            v = sig[i, k]
            if v == np.uint32(0xFFFFFFFF):
                continue  # an empty document's value, or no draw
            total += 1
            diff = (np.uint64(v) + np.uint64(0x100000000) - np.uint64(perm_b[k])) & np.uint64(0xFFFFFFFF)
            hv = np.uint32((np.uint64(inv_a[k]) * diff) & np.uint64(0xFFFFFFFF))
            j = np.searchsorted(mixed, hv)
            if j < len(mixed) and mixed[j] == hv:
                found += 1
        out[i] = found / total if total > 0 else 0.0
    return out


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


@njit(parallel=True, nogil=True, cache=True)
def weighted_simhash(cp, doc_starts, doc_ends, modes, char_ngram, word_ngram):
    """64-bit SimHash: each word n-gram (WORDS) or character n-gram (CHARS) occurrence votes on every bit.

    Documents are ``cp[doc_starts[d]:doc_ends[d]]``. Summing over occurrences makes each feature's
    weight its term frequency. Word n-grams rather than single words keep a handful of function
    words ("the", "of") from outvoting the content words.
    """
    n_docs = len(doc_starts)
    out = np.zeros(n_docs, np.uint64)
    powers = _powers(_longest(doc_starts, doc_ends, 0, n_docs) + 2)
    n_blocks = min(n_docs, SCRATCH_BLOCKS)
    for blk in prange(n_blocks):
        lo, hi, prefix, starts, ends = _block_scratch(doc_starts, doc_ends, n_blocks, blk)
        votes = np.zeros(64, np.int64)
        for d in range(lo, hi):
            start = doc_starts[d]
            end = doc_ends[d]
            votes[:] = 0
            if modes[d] == CHARS:
                m = _prefix_hashes(cp, start, end, True, prefix)
                width = char_ngram if m >= char_ngram else m
                for k in range(m - width + 1 if m > 0 else 0):
                    h = _span_from_prefix(prefix, powers, k, k + width)
                    for b in range(64):
                        votes[b] += np.int64((h >> np.uint64(b)) & np.uint64(1)) * 2 - 1
            else:
                _prefix_hashes(cp, start, end, False, prefix)
                m = _word_bounds(cp, start, end, starts, ends)
                width = word_ngram if m >= word_ngram else m
                for k in range(m - width + 1 if m > 0 else 0):
                    h = _span_from_prefix(prefix, powers, starts[k] - start, ends[k + width - 1] - start)
                    for b in range(64):
                        votes[b] += np.int64((h >> np.uint64(b)) & np.uint64(1)) * 2 - 1
            value = np.uint64(0)
            for b in range(64):
                if votes[b] > 0:
                    value |= np.uint64(1) << np.uint64(b)
            out[d] = value
    return out
