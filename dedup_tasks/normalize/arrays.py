"""Arrow string columns as code point rows and back: the floor the text and hash modules stand on.

``normalize.text``, ``normalize.fold`` and ``fingerprint.hashing`` all convert between Arrow strings,
their UTF-8 bytes and uint32 code points; these helpers import nothing of the package above
``normalize.views`` (the compiled UTF-8 codecs), so the modules using them never import each other.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.normalize.views import decode_utf8, encode_utf8


def as_string_array(values: pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """One contiguous string array with nulls as empty strings."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 0:
            values = pa.array([], pa.string())
        elif values.num_chunks == 1:
            values = values.chunk(0)  # a sorted batch's slice: combine_chunks would copy the text
        else:
            values = values.combine_chunks()
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    return pc.fill_null(values, "") if values.null_count else values


def nfkc_lower(values: pa.Array) -> pa.StringArray:
    """NFKC then lower case: the width and case folding every other view starts from."""
    return pc.utf8_lower(pc.utf8_normalize(as_string_array(values), form="NFKC"))


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
    return decode_utf8(*utf8_buffers(as_string_array(values)))


def strings_from_codepoints(cp: np.ndarray, offsets: np.ndarray) -> pa.StringArray:
    """The inverse of ``codepoints``: build an Arrow string array without a per-row Python loop."""
    offsets = np.asarray(offsets, np.int64)
    return strings_from_spans(cp, offsets[:-1], offsets[1:])


def strings_from_spans(cp: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.StringArray:
    """An Arrow string array of the code point rows ``cp[starts[i]:ends[i]]``."""
    n = len(starts)
    utf8, byte_offsets = encode_utf8(np.ascontiguousarray(cp, dtype=np.uint32), np.asarray(starts, np.int64), np.asarray(ends, np.int64))
    typ = pa.string() if byte_offsets[-1] < 2**31 else pa.large_string()
    dtype = np.int32 if typ == pa.string() else np.int64
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(byte_offsets.astype(dtype)), pa.py_buffer(utf8)])


def gather_spans(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values[starts[i]:ends[i]]`` of every i, concatenated, and their int64 offsets (empty spans allowed)."""
    starts = np.asarray(starts, np.int64)
    size = np.asarray(ends, np.int64) - starts
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    within = np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], size)
    return values[np.repeat(starts, size) + within], offsets


def concat_ragged(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Two (values, offsets) collections as one: a's rows, then b's."""
    return np.concatenate([a[0], b[0]]), np.concatenate([a[1], a[1][-1] + b[1][1:]]).astype(np.int64)
