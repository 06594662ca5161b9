"""128-bit xxh3 content hash of normalized title + content.

The hash reads the normalized text as UTF-32LE code points (the form the normalization kernels
produce): title, a U+001F separator, content.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash

_SEPARATOR = np.array([0x1F], np.uint32).tobytes()


def content_hashes(title_cp: np.ndarray, title_off: np.ndarray, content_cp: np.ndarray, content_off: np.ndarray) -> np.ndarray:
    """(n, 2) uint64: high and low halves of the 128-bit hash per document."""
    n = len(title_off) - 1
    out = np.empty((n, 2), np.uint64)
    title = memoryview(np.ascontiguousarray(title_cp, np.uint32).view(np.uint8))
    content = memoryview(np.ascontiguousarray(content_cp, np.uint32).view(np.uint8))
    t_off = (title_off * 4).tolist()
    c_off = (content_off * 4).tolist()
    digest = xxhash.xxh3_128_intdigest
    high = np.empty(n, object)
    # One C call per document (not per token): the document-level loop is the cheap part here.
    values = [
        digest(b"".join((title[t_off[i] : t_off[i + 1]], _SEPARATOR, content[c_off[i] : c_off[i + 1]]))) for i in range(n)
    ]
    high = np.array([v >> 64 for v in values], np.uint64) if n else np.empty(0, np.uint64)
    low = np.array([v & 0xFFFFFFFFFFFFFFFF for v in values], np.uint64) if n else np.empty(0, np.uint64)
    out[:, 0] = high
    out[:, 1] = low
    return out


def content_hashes_of_text(title: pa.Array, content: pa.Array) -> np.ndarray:
    """Content hashes of raw title and content columns (normalizes first)."""
    from dedup_tasks.fingerprint.hashing import codepoints
    from dedup_tasks.normalize.text import collapse_codepoints, nfkc_lower

    t = collapse_codepoints(*codepoints(nfkc_lower(title)), punctuation=False)
    c = collapse_codepoints(*codepoints(nfkc_lower(content)), punctuation=False)
    return content_hashes(*t, *c)


def hash128_key(hashes: np.ndarray) -> np.ndarray:
    """A sortable 1-D view of (n, 2) uint64 hashes (for joins and uniqueness)."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64).reshape(-1, 2)
    return hashes.view(np.dtype((np.void, 16))).ravel()
