"""Code-point views of a batch and the pure-Python reference of the kernels' span hash."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.normalize.text import as_string_array

_MASK64 = (1 << 64) - 1
_POLY = 0x9E3779B97F4A7C15


def fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK64
    return h ^ (h >> 33)


def span_hash64(text: str) -> int:
    """64-bit hash of a shingle's characters; equals what the compiled kernels compute."""
    h = 0
    for ch in text:
        h = (h * _POLY + ord(ch)) & _MASK64
    return fmix64((h + len(text)) & _MASK64)


def shingle_hash32(data: bytes | str) -> int:
    """32-bit shingle hash for datasketch: ``MinHash(hashfunc=shingle_hash32)`` reproduces our signatures.

    Takes the shingle as UTF-8 bytes (as datasketch passes them) or as str.
    """
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    return span_hash64(text) >> 32


def codepoints(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """All strings of ``values`` as one uint32 code point array, and int64 offsets per row."""
    values = as_string_array(values)
    lengths = pc.utf8_length(values).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(values) == 0 or offsets[-1] == 0:
        return np.empty(0, np.uint32), offsets
    byte_offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset : values.offset + len(values) + 1]
    data = values.buffers()[2]
    raw = memoryview(data)[byte_offsets[0] : byte_offsets[-1]]
    text = bytes(raw).decode("utf-8")
    cp = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    return cp, offsets


def strings_from_codepoints(cp: np.ndarray, offsets: np.ndarray) -> pa.StringArray:
    """The inverse of ``codepoints``: build an Arrow string array without a per-row Python loop."""
    n = len(offsets) - 1
    cp = np.ascontiguousarray(cp, dtype=np.uint32)
    utf8 = cp.tobytes().decode("utf-32-le").encode("utf-8")
    widths = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    cumulative = np.zeros(len(cp) + 1, np.int64)
    np.cumsum(widths, out=cumulative[1:])
    byte_offsets = cumulative[offsets]
    typ = pa.string() if byte_offsets[-1] < 2**31 else pa.large_string()
    dtype = np.int32 if typ == pa.string() else np.int64
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(byte_offsets.astype(dtype)), pa.py_buffer(utf8)])
