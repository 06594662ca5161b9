"""Bloom filter of registered URL keys in front of `lookup_urls`.

Most URLs of an hourly crawl are new: the filter answers "never registered" for them without a
database round trip. A "maybe" is always confirmed exactly in PostgreSQL, so the filter can cause
neither a false drop nor a missed duplicate, as long as it holds every registered key. That is kept
true by (a) building it only from the registry's own rows and (b) before every use, adding the rows
with `seq` above the watermark it covers (commits allocate `seq` in order under the registry lock).

Sizing: m = -n ln p / (ln 2)^2 bits and k = (m / n) ln 2 hash positions; for n = 100 million URLs at
p = 0.1%: m = 1.44e9 bits = 180 MB, k = 10. Positions come from the 64-bit key by double hashing
(Kirsch-Mitzenmacher: h1 + i*h2 mod m) after a 64-bit mix, vectorized over whole key arrays.
"""

from __future__ import annotations

import math
import os
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_CAPACITY = 100_000_000
DEFAULT_FP_RATE = 0.001

_MAGIC = 0x4D4F4F4C42505544  # "DUPBLOOM" little-endian: marks our .npy layout
# Format 2 adds a CRC-32 of the header and the bit words: a file is no longer trusted by its header
# alone (zeroed or flipped bits would hide registered URLs, so L1 would keep their duplicates). A file
# that fails the check, or a format-1 file that has none, is rebuilt from the registry, which is the
# truth the filter only caches (docs/registry.md, "URL Bloom filter").
_FORMAT = 2
_HEADER_WORDS = 9  # magic, format, m_bits, k, watermark, n_added, registry id (2 words), checksum
_CHUNK = 1 << 20  # keys per vectorized step: bounds the (chunk, k) position temporaries to ~80 MB


def bloom_parameters(capacity: int, fp_rate: float) -> tuple[int, int]:
    """(m bits rounded up to whole 64-bit words, k) for `capacity` items at false-positive rate `fp_rate`."""
    if capacity <= 0 or not 0.0 < fp_rate < 1.0:
        raise ValueError("capacity must be > 0 and fp_rate in (0, 1)")
    m = math.ceil(-capacity * math.log(fp_rate) / math.log(2) ** 2)
    m = (m + 63) // 64 * 64
    k = max(1, round(m / capacity * math.log(2)))
    return m, k


def _mix64(x: np.ndarray) -> np.ndarray:
    # splitmix64 finalizer: URL keys are already xxh64 values, but mixing makes the two halves used
    # below independent even for structured keys (tests, synthetic data).
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class BloomFilter:
    """A bit-packed Bloom filter over uint64 keys (numpy uint64 words)."""

    def __init__(self, m_bits: int, k: int, words: np.ndarray | None = None) -> None:
        if m_bits <= 0 or m_bits % 64 or k <= 0:
            raise ValueError("m_bits must be a positive multiple of 64 and k positive")
        self.m_bits = int(m_bits)
        self.k = int(k)
        self.words = np.zeros(m_bits // 64, np.uint64) if words is None else words
        if self.words.shape != (m_bits // 64,) or self.words.dtype != np.uint64:
            raise ValueError("words do not match m_bits")
        self.n_added = 0

    @classmethod
    def for_capacity(cls, capacity: int = DEFAULT_CAPACITY, fp_rate: float = DEFAULT_FP_RATE) -> BloomFilter:
        return cls(*bloom_parameters(capacity, fp_rate))

    @property
    def nbytes(self) -> int:
        return int(self.words.nbytes)

    def _positions(self, keys: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = _mix64(np.ascontiguousarray(keys, dtype=np.uint64))
            h1 = h
            # An odd step visits k distinct positions whenever m is a power of two, and is harmless otherwise.
            h2 = _mix64(h ^ np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
            i = np.arange(self.k, dtype=np.uint64)
            return (h1[:, None] + i[None, :] * h2[:, None]) % np.uint64(self.m_bits)

    def add(self, keys: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.uint64).ravel()
        for start in range(0, len(keys), _CHUNK):
            pos = self._positions(keys[start : start + _CHUNK]).ravel()
            np.bitwise_or.at(self.words, pos >> np.uint64(6), np.uint64(1) << (pos & np.uint64(63)))
        self.n_added += len(keys)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """bool per key: False = certainly never added; True = maybe added."""
        keys = np.asarray(keys, dtype=np.uint64).ravel()
        out = np.empty(len(keys), bool)
        for start in range(0, len(keys), _CHUNK):
            pos = self._positions(keys[start : start + _CHUNK])
            bits = (self.words[pos >> np.uint64(6)] >> (pos & np.uint64(63))) & np.uint64(1)
            out[start : start + len(pos)] = bits.all(axis=1)
        return out

    def expected_fp_rate(self) -> float:
        """(1 - e^(-kn/m))^k for the keys added so far."""
        return float((1.0 - math.exp(-self.k * self.n_added / self.m_bits)) ** self.k)

    def fill_ratio(self) -> float:
        return float(np.bitwise_count(self.words).sum()) / self.m_bits


class PersistedBloom:
    """A BloomFilter plus what it covers: the registry it was built from and the highest `seq` added.

    Stored as one .npy file of uint64 words (a small header, then the bit words) so the filter and its
    watermark are always written together; written to a temporary name and renamed into place, so a
    reader sees either the old or the new file, never a torn one.
    """

    def __init__(self, bloom: BloomFilter, registry_id: str, watermark: int) -> None:
        self.bloom = bloom
        self.registry_id = registry_id
        self.watermark = int(watermark)
        self.dirty = False

    def save(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        rid = uuid.UUID(self.registry_id).int
        header = np.array(
            [
                _MAGIC,
                _FORMAT,
                self.bloom.m_bits,
                self.bloom.k,
                self.watermark & 0xFFFFFFFFFFFFFFFF,
                self.bloom.n_added,
                rid >> 64,
                rid & 0xFFFFFFFFFFFFFFFF,
                0,
            ],
            dtype=np.uint64,
        )
        words = self.bloom.words.astype("<u8", copy=False)
        header[-1] = _checksum(header[:-1], words)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            with open(tmp, "wb") as fh:
                # One array on disk: header words then the filter, written without concatenating copies.
                np.lib.format.write_array_header_1_0(
                    fh,
                    {
                        "descr": "<u8",
                        "fortran_order": False,
                        "shape": (_HEADER_WORDS + len(self.bloom.words),),
                    },
                )
                fh.write(header.astype("<u8").tobytes())
                fh.write(memoryview(words).cast("B"))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        self.dirty = False

    @classmethod
    def load(cls, path: Path) -> PersistedBloom | None:
        """The filter stored at `path`, or None when there is none or it fails a check (then it is rebuilt)."""
        return cls.load_checked(path)[0]

    @classmethod
    def load_checked(cls, path: Path) -> tuple[PersistedBloom | None, str]:
        """(the filter at `path`, "ok") or (None, why it is not used: missing, unreadable, corrupt...)."""
        path = Path(path)
        if not path.exists():
            return None, "missing"
        try:
            data = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            return None, f"unreadable ({exc})"
        if data.dtype != np.uint64 or data.ndim != 1 or len(data) < 2:
            return None, "not a Bloom filter file"
        magic, fmt = int(data[0]), int(data[1])
        if magic != _MAGIC:
            return None, "not a Bloom filter file"
        if fmt != _FORMAT:
            return None, f"format {fmt} (this code writes format {_FORMAT}, with a checksum)"
        if len(data) < _HEADER_WORDS:
            return None, "corrupt: truncated header"
        header = [int(x) for x in data[:_HEADER_WORDS]]
        _, _, m_bits, k, watermark, n_added, rid_hi, rid_lo, checksum = header
        if m_bits <= 0 or m_bits % 64 or k <= 0 or len(data) != _HEADER_WORDS + m_bits // 64:
            return None, "corrupt: size does not match its header"
        words = np.array(data[_HEADER_WORDS:], dtype=np.uint64)  # a private, writable copy
        if _checksum(np.asarray(data[: _HEADER_WORDS - 1], np.uint64), words) != checksum:
            return None, "corrupt: checksum mismatch"
        bloom = BloomFilter(m_bits, k, words)
        bloom.n_added = n_added
        if watermark >= 1 << 63:
            watermark -= 1 << 64
        return cls(bloom, str(uuid.UUID(int=(rid_hi << 64) | rid_lo)), watermark), "ok"


def _checksum(header: np.ndarray, words: np.ndarray) -> int:
    """CRC-32 of the header words (without the checksum) and the bit words, as stored (little-endian).

    CRC-32 runs at several GB/s (~0.05 CPU-s for the 180 MB default filter): cheap next to the load.
    """
    crc = zlib.crc32(memoryview(np.ascontiguousarray(header, "<u8")).cast("B"))
    return zlib.crc32(memoryview(np.ascontiguousarray(words, "<u8")).cast("B"), crc)


# ---- keeping the filter equal to the registry ---------------------------------------------------
# These take a cursor whose search_path points at the registry schema, inside a REPEATABLE READ
# transaction, so the watermark and the rows added come from one snapshot.

_SCAN_STEP = 5_000_000  # seq values per catch-up query: bounds the transfer buffer (~140 MB)


def registry_id(cur: Any) -> str:
    cur.execute("SELECT value FROM registry_meta WHERE key = 'registry_id'")
    return str(cur.fetchone()[0])


def last_seq(cur: Any) -> int:
    """The last seq handed out (committed or not): an upper bound for scans, never a watermark."""
    cur.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM registry_seq")
    return int(cur.fetchone()[0])


def catch_up(cur: Any, persisted: PersistedBloom) -> int:
    """Add the URL keys registered above the watermark; return how many were added.

    The new watermark is the highest seq actually read, not the sequence's position: a commit still in
    flight holds the highest seq block (commits are serialized), so nothing below the rows read can
    become visible later.
    """
    from dedup_tasks.registry._pgio import copy_out_int8

    upper = last_seq(cur)
    added = 0
    start = persisted.watermark
    while start < upper:
        stop = min(start + _SCAN_STEP, upper)
        rows = copy_out_int8(
            cur, "SELECT seq, url_key FROM documents WHERE seq > %s AND seq <= %s AND url_key IS NOT NULL", (start, stop), 2
        )
        if len(rows):
            persisted.bloom.add(rows[:, 1].view(np.uint64))
            persisted.watermark = max(persisted.watermark, int(rows[:, 0].max()))
            persisted.dirty = True
            added += len(rows)
        start = stop
    return added


def rebuild(cur: Any, capacity: int = DEFAULT_CAPACITY, fp_rate: float = DEFAULT_FP_RATE) -> PersistedBloom:
    """A new filter holding every URL key of the registry."""
    persisted = PersistedBloom(BloomFilter.for_capacity(capacity, fp_rate), registry_id(cur), 0)
    catch_up(cur, persisted)
    persisted.dirty = True
    return persisted


def load_synced(
    cur: Any, path: Path, capacity: int = DEFAULT_CAPACITY, fp_rate: float = DEFAULT_FP_RATE
) -> tuple[PersistedBloom, str]:
    """The filter at `path` caught up with the registry, or a rebuilt one; and what was done.

    A file for another registry, one whose watermark is ahead of the registry (the schema was
    recreated), or one that fails its checksum is not trusted: it could lack registered keys, which
    would hide duplicates. It is rebuilt from the registry (and saved by the caller), never refused:
    the registry holds every key the filter may hold.
    """
    persisted, why = PersistedBloom.load_checked(path)
    if persisted is None:
        return rebuild(cur, capacity, fp_rate), "built" if why == "missing" else f"rebuilt (file {why})"
    if persisted.registry_id != registry_id(cur) or persisted.watermark > last_seq(cur):
        return rebuild(cur, capacity, fp_rate), "rebuilt (file belongs to another registry)"
    catch_up(cur, persisted)
    return persisted, "loaded"
