"""The URL Bloom filter as a portable file for a crawler in another language (docs/seen.md).

Layout (all integers little-endian), format version 1:

    offset  size  field
    0       8     magic b"CDBLOOM\\0"
    8       2     format version (1)
    10      2     hash scheme (1: xxh64 of the canonical URL, splitmix64 double hashing; below)
    12      4     k, hash positions per key
    16      8     m, bits (a multiple of 64)
    24      8     keys added
    32      8     registry watermark (the highest registry seq the filter holds)
    40      16    registry id (UUID bytes)
    56      m/8   the bits: m/64 uint64 words; bit p is bit (p mod 64) of word p div 64
    56+m/8  4     CRC-32 (zlib/IEEE) of every byte before it

Hash scheme 1: key = xxh64(canonical URL as UTF-8, seed 0); h1 = mix(key); h2 = mix(h1 ^
0x9E3779B97F4A7C15) | 1; position i (0 <= i < k) = ((h1 + i * h2) mod 2^64) mod m, where mix is the
splitmix64 finalizer. A key is "maybe registered" when all k bits are set; otherwise never registered.
"""

from __future__ import annotations

import os
import struct
import uuid
import zlib
from pathlib import Path

import numpy as np

from dedup_tasks.registry.bloom import BloomFilter, PersistedBloom

MAGIC = b"CDBLOOM\0"
FORMAT_VERSION = 1
HASH_SCHEME = 1
HEADER = struct.Struct("<8sHHIQQq16s")  # 56 bytes
CRC = struct.Struct("<I")


class BloomFileError(ValueError):
    """An exported filter file that is not one, of another version, or corrupt; names the file."""


def export_bloom(persisted: PersistedBloom, out: Path | str) -> Path:
    """Write `persisted` to `out` in the format above: a temporary file in the same folder, fsynced, renamed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    bloom = persisted.bloom
    header = HEADER.pack(MAGIC, FORMAT_VERSION, HASH_SCHEME, bloom.k, bloom.m_bits, bloom.n_added,
                         persisted.watermark, uuid.UUID(persisted.registry_id).bytes)
    words = memoryview(np.ascontiguousarray(bloom.words, "<u8")).cast("B")
    crc = zlib.crc32(words, zlib.crc32(header))
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(header)
            fh.write(words)
            fh.write(CRC.pack(crc))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def read_exported(path: Path | str) -> PersistedBloom:
    """Read a file `export_bloom` wrote (checks magic, version, scheme, size and CRC)."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < HEADER.size + CRC.size or data[:8] != MAGIC:
        raise BloomFileError(f"{path}: not an exported URL Bloom filter")
    magic, version, scheme, k, m_bits, n_added, watermark, rid = HEADER.unpack_from(data)
    if version != FORMAT_VERSION or scheme != HASH_SCHEME:
        raise BloomFileError(f"{path}: format {version} / hash scheme {scheme}; this code reads {FORMAT_VERSION}/{HASH_SCHEME}")
    if m_bits <= 0 or m_bits % 64 or len(data) != HEADER.size + m_bits // 8 + CRC.size:
        raise BloomFileError(f"{path}: size does not match its header (m = {m_bits} bits)")
    (crc,) = CRC.unpack_from(data, len(data) - CRC.size)
    if zlib.crc32(data[: -CRC.size]) != crc:
        raise BloomFileError(f"{path}: CRC-32 mismatch (the file is corrupt)")
    words = np.frombuffer(data, "<u8", m_bits // 64, HEADER.size).astype(np.uint64)
    bloom = BloomFilter(m_bits, k, words)
    bloom.n_added = n_added
    return PersistedBloom(bloom, str(uuid.UUID(bytes=rid)), watermark)
