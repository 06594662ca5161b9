"""MinHash signatures stored bit-packed, losslessly (migration 0006).

A signature value is the minimum of `n` affine-permuted 32-bit shingle hashes, so it is ~2^32 / n:
for a document of 3,000 shingles all 128 values fit in ~23 bits, i.e. the top 9 bits of every
stored uint32 are zero. Each signature is stored as one byte `w` (the bit length of its largest
value) followed by its values in `w` bits each, big-endian bit order, padded to an even number of
bytes: 1 + 2 * ceil(num_perm * w / 16) bytes, always odd. The raw layout of schema <= 5 (num_perm
little-endian uint32, 4 * num_perm bytes) is always even, so both read back through `unpack` and a
registry migrated from schema 5 needs no rewrite of its signature rows.

Lossless on purpose: the verifier's Jaccard estimate and `minhash.earlier_covered` (which inverts
the full 32-bit values) see exactly the values the batch computed, so no decision changes.

Schema 9 (`DedupConfig.registry_signature_bits` b < 32): b-bit MinHash, only the low `b` bits of each
value, `num_perm * b / 8` bytes with no header (`pack_bits`; the config requires num_perm * b to be a
multiple of 16). That length is even and never `4 * num_perm`, so a row's layout is told by its length
alone: odd = lossless (schema 6-8), `4 * num_perm` = raw (schema <= 5), any other even length = b-bit
with b = 8 * length / num_perm. `unpack_bits` returns each row's bits (32 for the lossless layouts), so
a reader knows which rows can only be estimated (`minhash.estimated_jaccard` with bits) and which can
still be inverted (`minhash.earlier_covered`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)


def packed_size(num_perm: int, w: np.ndarray) -> np.ndarray:
    """Bytes of a packed signature whose largest value has `w` bits."""
    return 1 + 2 * ((num_perm * np.asarray(w, np.int64) + 15) // 16)


@njit(cache=True)
def _widths(sig):
    n, p = sig.shape
    out = np.empty(n, np.int64)
    for i in range(n):
        m = np.uint32(0)
        for j in range(p):
            m |= sig[i, j]
        w = 1
        while w < 32 and (m >> np.uint32(w)) != 0:
            w += 1
        out[i] = w
    return out


@njit(cache=True)
def _pack(sig, widths, offsets, out):
    n, p = sig.shape
    for i in range(n):
        w = widths[i]
        pos = offsets[i]
        out[pos] = w
        byte = pos + 1
        acc = np.uint64(0)
        nbits = 0
        for j in range(p):
            acc = (acc << np.uint64(w)) | np.uint64(sig[i, j])
            nbits += w
            while nbits >= 8:
                nbits -= 8
                out[byte] = (acc >> np.uint64(nbits)) & np.uint64(0xFF)
                byte += 1
        if nbits > 0:
            out[byte] = (acc << np.uint64(8 - nbits)) & np.uint64(0xFF)
            byte += 1
        while byte < offsets[i + 1]:
            out[byte] = 0
            byte += 1


def pack(sig: np.ndarray) -> pa.LargeBinaryArray:
    """Packed signatures of a (n, num_perm) uint32 array, one binary value per row."""
    sig = np.ascontiguousarray(sig, np.uint32)
    n, p = sig.shape
    widths = _widths(sig)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(packed_size(p, widths), out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    if n:
        _pack(sig, widths, offsets, out)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


FULL_BITS = 32


def bbit_size(num_perm: int, bits: int) -> int:
    """Bytes of a b-bit signature (schema 9); ValueError where that length would not be recognisable."""
    if not 1 <= bits < FULL_BITS or (num_perm * bits) % 16:
        raise ValueError(f"b-bit signatures need 1 <= bits < 32 and num_perm * bits a multiple of 16 (num_perm={num_perm}, bits={bits})")
    return num_perm * bits // 8


@njit(cache=True)
def _pack_bits(sig, w, out):
    n, p = sig.shape
    row = p * w // 8
    mask = (np.uint64(1) << np.uint64(w)) - np.uint64(1)
    for i in range(n):
        byte = i * row
        acc = np.uint64(0)
        nbits = 0
        for j in range(p):
            acc = (acc << np.uint64(w)) | (np.uint64(sig[i, j]) & mask)
            nbits += w
            while nbits >= 8:
                nbits -= 8
                out[byte] = (acc >> np.uint64(nbits)) & np.uint64(0xFF)
                byte += 1


def pack_bits(sig: np.ndarray, bits: int) -> pa.LargeBinaryArray:
    """b-bit signatures (the low `bits` bits of each value) of a (n, num_perm) uint32 array, one binary
    value per row; `bits` >= 32 packs losslessly (``pack``)."""
    if bits >= FULL_BITS:
        return pack(sig)
    sig = np.ascontiguousarray(sig, np.uint32)
    n, p = sig.shape
    size = bbit_size(p, bits)
    out = np.empty(n * size, np.uint8)
    if n:
        _pack_bits(sig, bits, out)
    offsets = np.arange(n + 1, dtype=np.int64) * size
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


@njit(inline="always", cache=True)
def _read_values(data, byte, w, p, out, i):
    """``p`` values of ``w`` bits each, most significant bit first, from ``data[byte:]`` into ``out[i]``."""
    mask = (np.uint64(1) << np.uint64(w)) - np.uint64(1)
    acc = np.uint64(0)
    nbits = 0
    for j in range(p):
        while nbits < w:
            acc = ((acc << np.uint64(8)) | np.uint64(data[byte])) & np.uint64(0xFFFFFFFFFFFF)
            byte += 1
            nbits += 8
        nbits -= w
        out[i, j] = np.uint32((acc >> np.uint64(nbits)) & mask)


@njit(cache=True)
def _unpack(data, offsets, p, out):
    for i in range(len(offsets) - 1):
        pos = offsets[i]
        length = offsets[i + 1] - pos
        if length % 2 == 0 and length != 4 * p:  # schema 9: b-bit, no header
            _read_values(data, pos, np.int64(8 * length // p), p, out, i)
        elif length == 4 * p:  # schema <= 5: raw little-endian uint32
            for j in range(p):
                b = pos + 4 * j
                out[i, j] = (np.uint32(data[b]) | (np.uint32(data[b + 1]) << np.uint32(8))
                             | (np.uint32(data[b + 2]) << np.uint32(16)) | (np.uint32(data[b + 3]) << np.uint32(24)))
        else:  # schemas 6-8: one byte of width, then the values
            _read_values(data, pos + 1, np.int64(data[pos]), p, out, i)


def unpack(column: pa.Array | pa.ChunkedArray, num_perm: int) -> np.ndarray:
    """(n, num_perm) uint32 from a binary column of packed (or schema-5 raw, or b-bit) signatures."""
    return unpack_bits(column, num_perm)[0]


def unpack_bits(column: pa.Array | pa.ChunkedArray, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, num_perm) uint32 values and (n,) uint8 bits per row (32: lossless, fewer: b-bit, whose
    values hold only their low bits) from a binary column of stored signatures of any schema."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    arr = arr.cast(pa.large_binary())
    n = len(arr)
    out = np.empty((n, num_perm), np.uint32)
    if n == 0:
        return out, np.zeros(0, np.uint8)
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + n + 1]
    data = np.frombuffer(arr.buffers()[2], np.uint8)
    lengths = np.diff(offsets)
    w = np.zeros(n, np.int64)
    w[lengths > 0] = data[offsets[:-1][lengths > 0]]
    raw = lengths == 4 * num_perm
    bbit = (lengths % 2 == 0) & ~raw
    b = 8 * lengths // num_perm
    bad = ~raw & ~bbit & ((w < 1) | (w > 32) | (lengths != packed_size(num_perm, w)))
    bad |= bbit & ((lengths == 0) | ((8 * lengths) % num_perm != 0) | (b < 1) | (b >= FULL_BITS))
    if bad.any():
        raise ValueError(f"{int(bad.sum())} stored signatures are neither packed, raw nor b-bit for num_perm={num_perm}")
    _unpack(data, np.ascontiguousarray(offsets), num_perm, out)
    return out, np.where(bbit, b, FULL_BITS).astype(np.uint8)
