"""128-bit xxh3 content hash of normalized title + content."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash

from dedup_tasks.normalize.text import as_string_array


def content_hashes(title: pa.Array, content: pa.Array) -> np.ndarray:
    """(n, 2) uint64: high and low halves of xxh3_128(title + "\\x1f" + content), both already normalized."""
    joined = pa.compute.binary_join_element_wise(as_string_array(title), as_string_array(content), "\x1f")
    out = np.empty((len(joined), 2), np.uint64)
    digest = xxhash.xxh3_128_intdigest
    # One C call per document (not per token): a document-level loop is the cheap part of this layer.
    for i, text in enumerate(joined.to_pylist()):
        value = digest(text.encode("utf-8"))
        out[i, 0] = value >> 64
        out[i, 1] = value & 0xFFFFFFFFFFFFFFFF
    return out


def hash128_key(hashes: np.ndarray) -> np.ndarray:
    """A sortable 1-D view of (n, 2) uint64 hashes (for joins and uniqueness)."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64).reshape(-1, 2)
    return hashes.view(np.dtype((np.void, 16))).ravel()
