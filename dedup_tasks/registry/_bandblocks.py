"""MinHash LSH band keys of the main tier packed into blocks (migration 0005).

One row per (document, band) costs PostgreSQL ~28 bytes of tuple header and line pointer before any
data, plus a B-tree entry: ~85 bytes per band key, 1.8 KB per document at 21 bands. The main tier
instead stores, per *run* (what one compaction wrote) and per *bucket* (the top `bits` bits of the
band key), one row whose `entries` bytea holds n x 8 bytes: the next 32 bits of each key and the
document's seq as an offset from the block's `seq_base` (both big-endian uint32). `bits` is chosen
per run so a block holds ~TARGET_PER_BLOCK keys; the B-tree indexes blocks, not keys.

A probe computes the bucket of its key for every run, reads those blocks (one per run and key, by
equality on the (bucket, run) index) and compares the 32 stored bits in memory. Keys are thus
compared on bits + 32 >= 40 of their 64 bits: a collision on those only adds a candidate, which the
caller verifies on the signature like any other (~1e-4 false candidates per document and run at 1e10
registered keys); a key present is never missed.

`shard` (the top SHARD_BITS bits of the key) is the partition key, so a server holding a range of
shards answers every probe of those keys: the Citus distribution column.

Since schema 6 a run also has `rem_bytes` (minhash_band_runs.rem_bytes): runs of at least
SHORT_REM_MIN_ENTRIES keys store only the next 16 bits of each key (6-byte entries, ~84 bytes per
document at 42 bands instead of ~336 + 13 of index: the 8-byte entry was 85% of the layer). A block
holds ~128 keys, so a probe meets a false 16-bit match with probability ~128 / 65536 = 0.2% per run;
such a candidate is a document whose signature the caller estimates like any other (its Jaccard is
that of two unrelated documents, ~0). Small runs keep 32 bits, where the few extra bytes do not
matter and lookups stay equal to the keys' exact matches.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from numba import njit

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)

TARGET_PER_BLOCK = 128
# A bucket with more keys (the same band key registered by many documents) is split into several
# rows of at most this many, each under PostgreSQL's 2 kB TOAST threshold: a probe reads them all.
MAX_PER_BLOCK = 240
MIN_BITS, MAX_BITS = 8, 32
SHARD_BITS = 8
ENTRY = np.dtype([("rem", ">u4"), ("off", ">u4")])
ENTRY16 = np.dtype([("rem", ">u2"), ("off", ">u4")])
REM_BYTES = (2, 4)
SHORT_REM_MIN_ENTRIES = 1 << 20


def run_rem_bytes(entries: int) -> int:
    """Stored key bytes per entry of a run of `entries` keys (2 from SHORT_REM_MIN_ENTRIES keys)."""
    return 2 if entries >= SHORT_REM_MIN_ENTRIES else 4


def run_bits(entries: int) -> int:
    """Bucket bits of a run of `entries` keys: ~TARGET_PER_BLOCK keys per bucket."""
    want = math.ceil(math.log2(max(entries, 1) / TARGET_PER_BLOCK)) if entries > TARGET_PER_BLOCK else MIN_BITS
    return int(min(MAX_BITS, max(MIN_BITS, want)))


def new_run_shape(entries: int, runs: list[tuple[int, int]]) -> tuple[int, int]:
    """(bits, rem_bytes) of a new run of `entries` keys (a compaction) beside `runs` ((bits, rem_bytes) each).

    Sized by its own key count (~TARGET_PER_BLOCK keys a block, as full as the big run's). It must keep
    >= finest + 16 key bits (finest: the most bits among the existing runs), so a later merge
    (`merged_shape`) still compares what a 2-byte run of the finest bits compares: a run with fewer bits
    than the finest stores 4 key bytes (and at least finest - 16 bits); one with as many may store 2."""
    finest = max((b for b, _ in runs), default=0)
    bits, rem_bytes = run_bits(entries), run_rem_bytes(entries)
    if bits < finest:
        bits, rem_bytes = max(bits, finest - 16), 4
    return int(min(MAX_BITS, bits)), rem_bytes


def merged_shape(entries: int, runs: list[tuple[int, int]]) -> tuple[int, int]:
    """(bits, rem_bytes) of the run merging `runs` ((bits, rem_bytes) each) into `entries` keys.

    A run stores only its keys' top bits + 8 * rem_bytes, so the merged run compares at most the fewest
    stored bits among its inputs; within that, it takes its own size's shape (`run_bits`, `run_rem_bytes`)."""
    stored = min(b + 8 * r for b, r in runs)
    rem_bytes = run_rem_bytes(entries)
    if stored - 8 * rem_bytes < run_bits(entries):  # 4 key bytes would cost bucket bits: store 2
        rem_bytes = 2
    return int(max(MIN_BITS, min(run_bits(entries), stored - 8 * rem_bytes))), rem_bytes


def split_key(keys: np.ndarray, bits: int, rem_bytes: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """(bucket, 8 * rem_bytes stored bits) of uint64 band keys for a run with `bits` bucket bits."""
    keys = np.asarray(keys, np.uint64)
    bucket = keys >> np.uint64(64 - bits)
    rem = (keys >> np.uint64(64 - bits - 8 * rem_bytes)) & np.uint64((1 << (8 * rem_bytes)) - 1)
    return bucket, rem


def truncated(keys: np.ndarray, bits: int, rem_bytes: int = 4) -> np.ndarray:
    """The top bits + 8 * rem_bytes bits of each key: what a run of `bits` compares."""
    return np.asarray(keys, np.uint64) >> np.uint64(64 - bits - 8 * rem_bytes)


def build_blocks(
    keys: np.ndarray, seqs: np.ndarray, bits: int, *, presorted: bool = False, rem_bytes: int = 4
) -> dict[str, object]:
    """Block rows (shard, bucket, seq_base, n, entries) of one run, in (bucket) order.

    presorted: `keys` are already in ascending order (the benchmark's direct load).
    rem_bytes: stored key bytes per entry (4, or 2 for large runs: `run_rem_bytes`).
    """
    if rem_bytes not in REM_BYTES:
        raise ValueError(f"rem_bytes must be one of {REM_BYTES}")
    entry = ENTRY if rem_bytes == 4 else ENTRY16
    keys = np.asarray(keys, np.uint64)
    seqs = np.asarray(seqs, np.int64)
    if not presorted:
        order = np.argsort(truncated(keys, bits), kind="stable")
        keys, seqs = keys[order], seqs[order]
    bucket, rem = split_key(keys, bits, rem_bytes)
    n = len(bucket)
    if n == 0:
        return {"shard": np.empty(0, np.int16), "bucket": np.empty(0, np.int64), "seq_base": np.empty(0, np.int64),
                "n": np.empty(0, np.int32), "entries": pa.array([], pa.large_binary())}  # fmt: skip
    new_bucket = np.r_[True, bucket[1:] != bucket[:-1]]
    # Position inside its bucket; a new block every MAX_PER_BLOCK keys of one bucket.
    bucket_start = np.flatnonzero(new_bucket)
    pos = np.arange(n) - np.repeat(bucket_start, np.diff(np.r_[bucket_start, n]))
    starts = np.flatnonzero(new_bucket | (pos % MAX_PER_BLOCK == 0))
    counts = np.diff(np.r_[starts, n])
    seq_base = np.minimum.reduceat(seqs, starts)
    off = seqs - np.repeat(seq_base, counts)
    if len(off) and int(off.max()) >= 2**32:
        raise ValueError("a block's seq range exceeds 2^32: split the registry into more servers")
    entries = np.empty(n, entry)
    entries["rem"] = rem
    entries["off"] = off
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(counts * entry.itemsize, out=offsets[1:])
    blob = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(entries.view(np.uint8))]
    )
    block_bucket = bucket[starts]
    return {
        "shard": (block_bucket >> np.uint64(bits - SHARD_BITS)).astype(np.int16),
        "bucket": block_bucket.astype(np.int64),
        "seq_base": seq_base,
        "n": counts.astype(np.int32),
        "entries": blob,
    }


@njit(cache=True)
def _be8(buf, pos):
    v = np.uint64(0)
    for i in range(8):
        v = (v << np.uint64(8)) | np.uint64(buf[pos + i])
    return v


@njit(cache=True)
def _be4(buf, pos):
    return (np.uint64(buf[pos]) << np.uint64(24)) | (np.uint64(buf[pos + 1]) << np.uint64(16)) | (
        np.uint64(buf[pos + 2]) << np.uint64(8)) | np.uint64(buf[pos + 3])


# Binary COPY rows of (int8 tag, int8 key, int8 run, int8 bucket, int8 seq_base[, int8 rem_bytes],
# bytea entries): a field is a 4-byte length and the value; a row starts with a 2-byte field count.
_HEAD = 2 + 5 * 12


@njit(cache=True)
def _count(buf, rem_bytes, with_width):
    pos = 19
    end = len(buf) - 2
    n = 0
    while pos < end:
        width = rem_bytes + 4
        if with_width:
            width = np.int64(_be8(buf, pos + _HEAD + 4)) + 4
            pos += 12
        pos += _HEAD
        length = np.int64(_be4(buf, pos))
        pos += 4 + length
        n += length // width
    return n


@njit(cache=True)
def _decode(buf, tag, key, run, tkey, seq, rem_bytes, with_width):
    pos = 19
    end = len(buf) - 2
    k = 0
    while pos < end:
        t = np.int64(_be8(buf, pos + 6))
        q = _be8(buf, pos + 18)
        r = np.int64(_be8(buf, pos + 30))
        b = _be8(buf, pos + 42)
        base = np.int64(_be8(buf, pos + 54))
        rb = rem_bytes
        if with_width:
            rb = np.int64(_be8(buf, pos + _HEAD + 4))
            pos += 12
        pos += _HEAD
        length = np.int64(_be4(buf, pos))
        pos += 4
        width = rb + 4
        for j in range(length // width):
            at = pos + width * j
            rem = np.uint64(0)
            for i in range(rb):
                rem = (rem << np.uint64(8)) | np.uint64(buf[at + i])
            tag[k] = t
            key[k] = q
            run[k] = r
            tkey[k] = (b << np.uint64(8 * rb)) | rem
            seq[k] = base + np.int64(_be4(buf, at + rb))
            k += 1
        pos += length


def decode_copy(raw: memoryview | bytes, rem_bytes: int = 4, *, with_width: bool = False) -> dict[str, np.ndarray]:
    """Every entry of the blocks in a binary COPY of
    `SELECT tag, key, run, bucket, seq_base, entries` (all int8 but entries): per entry the row's tag
    and key (what the caller probed with), the run, the stored truncated key and the seq.

    Entries of `rem_bytes` stored key bytes; with_width: each row has an int8 `rem_bytes` column
    before `entries` (rows of runs with different widths in one COPY)."""
    buf = np.frombuffer(raw, np.uint8)
    n = _count(buf, rem_bytes, with_width) if len(buf) > 21 else 0
    out = {
        "tag": np.empty(n, np.int64),
        "key": np.empty(n, np.uint64),
        "run": np.empty(n, np.int64),
        "tkey": np.empty(n, np.uint64),
        "seq": np.empty(n, np.int64),
    }
    if n:
        _decode(buf, out["tag"], out["key"], out["run"], out["tkey"], out["seq"], rem_bytes, with_width)
    return out


# ---- the recent tier (schema 7): one run of whole keys per commit ------------------------------------
# A commit's band keys: rows of (shard, seq_base, n, entries), entries n x 12 bytes (the full 64-bit key
# and the seq as an offset from seq_base), at most RECENT_MAX_PER_ROW keys a row, in key order. No
# index on the keys: a lookup reads the recent tier whole and joins it in memory (`SortedProbes`).
RECENT_ENTRY = np.dtype([("key", ">u8"), ("off", ">u4")])
RECENT_MAX_PER_ROW = 8192


def recent_rows(keys: np.ndarray, seqs: np.ndarray) -> dict[str, object]:
    """Rows (shard, seq_base, n, entries) of the minhash_bands_recent run of these band keys."""
    keys = np.asarray(keys, np.uint64).ravel()
    seqs = np.asarray(seqs, np.int64).ravel()
    n = len(keys)
    if n == 0:
        return {"shard": np.empty(0, np.int16), "seq_base": np.empty(0, np.int64), "n": np.empty(0, np.int32),
                "entries": pa.array([], pa.large_binary())}  # fmt: skip
    order = np.argsort(keys)  # not stable: the order of equal keys does not matter (3-4x faster)
    keys, seqs = keys[order], seqs[order]
    shard = (keys >> np.uint64(64 - SHARD_BITS)).astype(np.int16)
    new_shard = np.r_[True, shard[1:] != shard[:-1]]
    shard_start = np.flatnonzero(new_shard)
    pos = np.arange(n) - np.repeat(shard_start, np.diff(np.r_[shard_start, n]))
    starts = np.flatnonzero(new_shard | (pos % RECENT_MAX_PER_ROW == 0))
    counts = np.diff(np.r_[starts, n])
    seq_base = np.minimum.reduceat(seqs, starts)
    off = seqs - np.repeat(seq_base, counts)
    if int(off.max()) >= 2**32:
        raise ValueError("a commit's seq range exceeds 2^32")
    entries = np.empty(n, RECENT_ENTRY)
    entries["key"] = keys
    entries["off"] = off
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(counts * RECENT_ENTRY.itemsize, out=offsets[1:])
    blob = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(entries.view(np.uint8))]
    )
    return {"shard": shard[starts], "seq_base": seq_base, "n": counts.astype(np.int32), "entries": blob}


def decode_recent(raw: memoryview | bytes) -> tuple[np.ndarray, np.ndarray]:
    """(keys uint64, seqs int64) of a binary COPY of `SELECT seq_base, entries FROM minhash_bands_recent`."""
    buf = memoryview(raw)
    keys: list[np.ndarray] = []
    seqs: list[np.ndarray] = []
    pos = 19  # signature, flags, header extension length (0)
    end = len(buf)
    while pos + 2 <= end:
        if int.from_bytes(buf[pos : pos + 2], "big", signed=True) == -1:
            break
        pos += 2 + 4  # field count, length of seq_base (8)
        base = int.from_bytes(buf[pos : pos + 8], "big", signed=True)
        pos += 8
        length = int.from_bytes(buf[pos : pos + 4], "big")
        pos += 4
        e = np.frombuffer(buf[pos : pos + length], RECENT_ENTRY)
        pos += length
        keys.append(e["key"].astype(np.uint64))
        seqs.append(e["off"].astype(np.int64) + base)
    if not keys:
        return np.empty(0, np.uint64), np.empty(0, np.int64)
    return np.concatenate(keys), np.concatenate(seqs)


# Top bits of a key indexing the prefilter of `SortedProbes.join` (2^26 bools, 64 MB: a 1e5-document
# batch's 4.2M keys fill 6% of it, so ~6% of the recent keys reach the binary search).
_FILTER_BITS = 26


class SortedProbes:
    """The (key, query) pairs of a lookup sorted by key, for joining recent keys against them."""

    def __init__(self, keys: np.ndarray, query: np.ndarray) -> None:
        keys = np.asarray(keys, np.uint64).ravel()
        order = np.argsort(keys)  # not stable: the order of equal keys does not matter (3-4x faster)
        self.keys = keys[order]
        self.query = np.asarray(query, np.int64).ravel()[order]
        self.bitmap = np.zeros(1 << _FILTER_BITS, bool)
        self.bitmap[self.keys >> np.uint64(64 - _FILTER_BITS)] = True

    def join(self, keys: np.ndarray, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query, seq) of every registered (key, seq) whose key equals a probe's key: exact, all 64 bits."""
        if len(keys) == 0 or len(self.keys) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        maybe = np.flatnonzero(self.bitmap[keys >> np.uint64(64 - _FILTER_BITS)])
        k = keys[maybe]
        lo = np.searchsorted(self.keys, k, "left")
        hi = np.searchsorted(self.keys, k, "right")
        count = hi - lo
        hit = np.flatnonzero(count)
        if len(hit) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        c = count[hit]
        first = np.repeat(lo[hit], c) + (np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c))
        return self.query[first], np.repeat(seqs[maybe[hit]], c)

    def join_copy(self, raw: memoryview | bytes) -> tuple[np.ndarray, np.ndarray]:
        """`join(*decode_recent(raw))` in one pass over the COPY bytes, without decoding every entry."""
        buf = np.frombuffer(raw, np.uint8)
        if len(buf) <= 21 or len(self.keys) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return _pairs(lambda out_q, out_s: _join_copy(buf, self.bitmap, self.keys, self.query, out_q, out_s))

    def join_blocks_copy(self, raw: memoryview | bytes, bits: int, rem_bytes: int) -> tuple[np.ndarray, np.ndarray]:
        """(query, seq) of every entry of a main-tier run's blocks in a binary COPY of
        `SELECT bucket, seq_base, entries` whose stored bits (the top bits + 8 * rem_bytes of its key)
        equal a probe key's: what probing the run block by block returns, read whole instead."""
        buf = np.frombuffer(raw, np.uint8)
        if len(buf) <= 21 or len(self.keys) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        shift = 64 - bits - 8 * rem_bytes
        mask = ~np.uint64((1 << shift) - 1)
        skeys = self.keys & mask  # still sorted: masking keeps the order
        bitmap = self.bitmap
        if bits + 8 * rem_bytes < _FILTER_BITS:
            bitmap = np.zeros(1 << _FILTER_BITS, bool)
            bitmap[skeys >> np.uint64(64 - _FILTER_BITS)] = True
        return _pairs(lambda out_q, out_s: _join_blocks_copy(buf, rem_bytes, shift, bitmap, skeys, self.query, out_q, out_s))


def _pairs(kernel) -> tuple[np.ndarray, np.ndarray]:
    """(query, seq) pairs of a join kernel that writes at most len(out_q) of them and returns how many
    there are: a second call with room for all when the first buffers were too small."""
    cap = 1 << 16
    while True:
        out_q, out_s = np.empty(cap, np.int64), np.empty(cap, np.int64)
        n = kernel(out_q, out_s)
        if n <= cap:
            return out_q[:n], out_s[:n]
        cap = n


@njit(cache=True)
def _join_blocks_copy(buf, rem_bytes, shift, bitmap, skeys, squery, out_q, out_s):
    """Rows (int8 bucket, int8 seq_base, bytea entries) of a binary COPY of one run's blocks: every
    (query, seq) of an entry whose key, shifted back to 64 bits, is in skeys (sorted, masked alike).

    The search and the output loop are written out here and in `_join_copy` on purpose: the same code
    as one shared jitted function measured 8-35% slower in these per-entry loops (numba 0.68.1, x86-64, review of 2026-12-04)."""
    pos = 19
    end = len(buf) - 2
    m = len(skeys)
    k = 0
    fshift = np.uint64(64 - _FILTER_BITS)
    kshift = np.uint64(shift)
    width = rem_bytes + 4
    rb8 = np.uint64(8 * rem_bytes)
    while pos < end:
        pos += 2 + 4
        bucket = _be8(buf, pos)
        pos += 8 + 4
        base = np.int64(_be8(buf, pos))
        pos += 8
        length = np.int64(_be4(buf, pos))
        pos += 4
        for j in range(length // width):
            at = pos + width * j
            rem = np.uint64(0)
            for i in range(rem_bytes):
                rem = (rem << np.uint64(8)) | np.uint64(buf[at + i])
            key = ((bucket << rb8) | rem) << kshift
            if not bitmap[key >> fshift]:
                continue
            lo, hi = 0, m
            while lo < hi:
                mid = (lo + hi) >> 1
                if skeys[mid] < key:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < m and skeys[lo] == key:
                seq = base + np.int64(_be4(buf, at + rem_bytes))
                while lo < m and skeys[lo] == key:
                    if k < len(out_q):
                        out_q[k] = squery[lo]
                        out_s[k] = seq
                    k += 1
                    lo += 1
        pos += length
    return k


@njit(cache=True)
def _join_copy(buf, bitmap, skeys, squery, out_q, out_s):
    """Rows (int8 seq_base, bytea entries) of a binary COPY: every (query, seq) of an entry whose key is
    in skeys (sorted). Writes at most len(out_q) pairs; returns how many there are."""
    pos = 19
    end = len(buf) - 2
    m = len(skeys)
    k = 0
    shift = np.uint64(64 - _FILTER_BITS)
    while pos < end:
        pos += 2 + 4  # field count, length of seq_base
        base = np.int64(_be8(buf, pos))
        pos += 8
        length = np.int64(_be4(buf, pos))
        pos += 4
        for j in range(length // 12):
            at = pos + 12 * j
            key = _be8(buf, at)
            if not bitmap[key >> shift]:
                continue
            lo, hi = 0, m
            while lo < hi:
                mid = (lo + hi) >> 1
                if skeys[mid] < key:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < m and skeys[lo] == key:
                seq = base + np.int64(_be4(buf, at + 8))
                while lo < m and skeys[lo] == key:
                    if k < len(out_q):
                        out_q[k] = squery[lo]
                        out_s[k] = seq
                    k += 1
                    lo += 1
        pos += length
    return k
