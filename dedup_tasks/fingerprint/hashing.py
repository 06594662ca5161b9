"""The pure-Python reference of the kernels' span hash (and the code point views it is checked on)."""

from __future__ import annotations

# Re-exported: callers convert a batch to code points and hash it from one import.
from dedup_tasks.normalize.arrays import (  # noqa: F401
    as_string_array,
    codepoints,
    strings_from_codepoints,
    strings_from_spans,
    utf8_buffers,
)

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
