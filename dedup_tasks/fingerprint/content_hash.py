"""128-bit xxh3 content hash of normalized title + content.

The hash reads the normalized text as UTF-32LE code points (the form the normalization kernels
produce): title, a U+001F separator, content (``normalize.views.hash_view``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash


def content_hashes(view_cp: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(n, 2) uint64: high and low halves of the 128-bit hash of each document's hash view
    ``view_cp[starts[d]:starts[d] + lengths[d]]`` (``views.hash_view``)."""
    n = len(lengths)
    data = memoryview(np.ascontiguousarray(view_cp, np.uint32).view(np.uint8))
    begin = (np.asarray(starts, np.int64) * 4).tolist()
    end = ((np.asarray(starts, np.int64) + lengths) * 4).tolist()
    digest = xxhash.xxh3_128_intdigest
    # One C call per document (not per token): the document-level loop is the cheap part here.
    values = [digest(data[begin[i] : end[i]]) for i in range(n)]
    out = np.empty((n, 2), np.uint64)
    if n:
        out[:, 0] = np.array([v >> 64 for v in values], np.uint64)
        out[:, 1] = np.array([v & 0xFFFFFFFFFFFFFFFF for v in values], np.uint64)
    return out


def content_hashes_of_text(title: pa.Array, content: pa.Array) -> np.ndarray:
    """Content hashes of raw title and content columns (normalizes first)."""
    from dedup_tasks.normalize.fold import fold_codepoints
    from dedup_tasks.normalize.views import hash_view

    return content_hashes(*hash_view(fold_codepoints(title), fold_codepoints(content)))


def hash128_key(hashes: np.ndarray) -> np.ndarray:
    """A sortable 1-D view of (n, 2) uint64 hashes (for joins and uniqueness)."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64).reshape(-1, 2)
    return hashes.view(np.dtype((np.void, 16))).ravel()
