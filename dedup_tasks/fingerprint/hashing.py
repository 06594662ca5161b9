"""Code-point views of a batch and the pure-Python reference of the kernels' span hash."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

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


def utf8_buffers(values: pa.StringArray | pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes and int64 row offsets into them of a string array (no copy of the text)."""
    if len(values) == 0:
        return np.empty(0, np.uint8), np.zeros(1, np.int64)
    offset_type = np.int64 if pa.types.is_large_string(values.type) else np.int32
    byte_offsets = np.frombuffer(values.buffers()[1], offset_type)[values.offset : values.offset + len(values) + 1]
    data = values.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    return raw, byte_offsets.astype(np.int64)


def codepoints(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """All strings of ``values`` as one uint32 code point array, and int64 offsets per row."""
    from dedup_tasks.normalize.views import decode_utf8

    return decode_utf8(*utf8_buffers(as_string_array(values)))


def strings_from_codepoints(cp: np.ndarray, offsets: np.ndarray) -> pa.StringArray:
    """The inverse of ``codepoints``: build an Arrow string array without a per-row Python loop."""
    offsets = np.asarray(offsets, np.int64)
    return strings_from_spans(cp, offsets[:-1], offsets[1:])


def strings_from_spans(cp: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.StringArray:
    """An Arrow string array of the code point rows ``cp[starts[i]:ends[i]]``."""
    from dedup_tasks.normalize.views import encode_utf8

    n = len(starts)
    utf8, byte_offsets = encode_utf8(np.ascontiguousarray(cp, dtype=np.uint32), np.asarray(starts, np.int64), np.asarray(ends, np.int64))
    typ = pa.string() if byte_offsets[-1] < 2**31 else pa.large_string()
    dtype = np.int32 if typ == pa.string() else np.int64
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(byte_offsets.astype(dtype)), pa.py_buffer(utf8)])
