"""NFKC + lower case straight into code points, with Arrow's result, without Arrow's per-character cost.

Arrow's ``utf8_normalize`` (utf8proc) costs ~35 ns per non-ASCII character: for a Chinese crawl
hour it was the largest single cost of the cascade. Almost every character of real text folds on
its own, independent of its neighbours: a starter that nothing composes with, mapped to the
characters NFKC and then simple lower-casing give it (full-width letters to ASCII, the ideographic
space to a space, ``…`` to ``...``). Those go through a lookup table built from Arrow's own
functions, so the table cannot drift from the reference. A document holding any other
character (combining marks, Hangul jamo, half-width kana with voicing marks, and the few starters
that compose with a preceding character) is folded by Arrow itself. ``fold_codepoints(values)``
therefore always equals ``codepoints(nfkc_lower(values))``.

Building the table takes ~0.5 CPU-s (Arrow over every code point, unicodedata's decompositions), a
quarter of a whole CLI run's CPU. ``make install`` (``dedup_tasks.warmup``) builds it once and saves it
beside the numba cache, named by everything it is computed from (this file, the Unicode database,
pyarrow's version); a process loads that file in a millisecond, and builds and saves it itself when
it is missing or unreadable.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import unicodedata
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit, prange

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)
from dedup_tasks.normalize import codepoint_kernels as ck
from dedup_tasks.normalize.arrays import as_string_array, codepoints, nfkc_lower, utf8_buffers
from dedup_tasks.normalize.codepoint_kernels import decode_at

_TABLE_SIZE = 0x20000
# Unified ideographs above the table (extensions B to I): NFKC-invariant, caseless.
_IDEOGRAPHS_HIGH = ((0x20000, 0x2A6DF), (0x2A700, 0x2EE5D), (0x30000, 0x323AF))


def _composing_followers() -> set[int]:
    """Characters that can compose with the character before them (NFC_Quick_Check=Maybe)."""
    followers = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))  # Hangul vowel and trailing jamo
    for code in range(0x30000):  # no canonical decomposition lies above the CJK compatibility supplement
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<"):
            parts = decomposition.split()
            if len(parts) == 2:
                followers.add(int(parts[1], 16))
    return followers


def _fold_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, folded code points, context-free flag) per code point below ``_TABLE_SIZE``."""
    codes = [c for c in range(_TABLE_SIZE) if not 0xD800 <= c <= 0xDFFF]
    folded = pc.utf8_lower(pc.utf8_normalize(pa.array([chr(c) for c in codes]), form="NFKC")).to_pylist()
    followers = _composing_followers()

    def starter(ch: str) -> bool:
        return unicodedata.combining(ch) == 0 and ord(ch) not in followers

    lengths = np.zeros(_TABLE_SIZE, np.int64)
    free = np.zeros(_TABLE_SIZE, np.bool_)
    parts: list[list[int]] = [[] for _ in range(_TABLE_SIZE)]
    for code, text in zip(codes, folded, strict=True):
        if starter(chr(code)) and text and all(starter(ch) for ch in text):
            free[code] = True
            parts[code] = [ord(ch) for ch in text]
            lengths[code] = len(text)
    offsets = np.zeros(_TABLE_SIZE + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.fromiter((c for p in parts for c in p), np.uint32, count=int(offsets[-1]))
    return offsets, data, free


def _built_tables() -> tuple[np.ndarray, ...]:
    offsets, data, free = _fold_table()
    # The common case in one load: the folded character when a free character folds to exactly one.
    single = np.full(_TABLE_SIZE, 0xFFFFFFFF, np.uint32)
    one = free & (np.diff(offsets) == 1)
    single[one] = data[offsets[:-1][one]]
    return single, offsets, data, free


_TABLE_NAMES = ("single", "offsets", "data", "free")


def table_path() -> Path:
    """Where the built table is kept: ``__pycache__`` beside this file (as numba's cache), named by
    its inputs, so a new pyarrow, Python or edit of this file builds a new one."""
    key = hashlib.blake2b(Path(__file__).read_bytes(), digest_size=8)
    key.update(f"{unicodedata.unidata_version}|{pa.__version__}|{sys.version_info[:2]}".encode())
    return Path(__file__).parent / "__pycache__" / f"fold-table-{key.hexdigest()}.npz"


def _load_tables(path: Path) -> tuple[np.ndarray, ...] | None:
    try:
        with np.load(path, allow_pickle=False) as saved:
            arrays = tuple(saved[name] for name in _TABLE_NAMES)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    single, offsets, data, free = arrays
    sane = (
        single.dtype == np.uint32 and single.shape == (_TABLE_SIZE,) and offsets.dtype == np.int64
        and offsets.shape == (_TABLE_SIZE + 1,) and data.dtype == np.uint32 and len(data) == offsets[-1]
        and free.dtype == np.bool_ and free.shape == (_TABLE_SIZE,)
    )  # fmt: skip
    return arrays if sane else None


def save_tables(path: Path, tables: tuple[np.ndarray, ...]) -> bool:
    """Write the table to ``path`` (a temporary name, then a rename); False where it cannot be written."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            np.savez(fh, **dict(zip(_TABLE_NAMES, tables, strict=True)))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        return False
    for stale in path.parent.glob("fold-table-*.npz"):  # built from an earlier fold.py or pyarrow
        if stale != path:
            stale.unlink(missing_ok=True)
    return True


@functools.cache
def _tables() -> tuple[np.ndarray, ...]:
    """Loaded from ``table_path()`` on first use, or built (and saved there for the next process)."""
    path = table_path()
    tables = _load_tables(path)
    if tables is None:
        tables = _built_tables()
        save_tables(path, tables)
    return (*tables, np.array(_IDEOGRAPHS_HIGH, np.int64))


@njit(inline="always", cache=True)
def _free(table_free, high, c):
    if c < table_free.shape[0]:
        return table_free[c]
    for k in range(high.shape[0]):  # noqa: SIM110 (numba compiles no generator expressions)
        if high[k, 0] <= c <= high[k, 1]:
            return True
    return False


@njit(parallel=True, nogil=True, cache=True)
def _fold_at_bytes(data, byte_offsets, single, table_off, table_data, table_free, high, out):
    """Fold each UTF-8 row into ``out[byte_offsets[d] - byte_offsets[0]:]``, a region with room for
    as many code points as the row has bytes. Returns the folded lengths, and which rows need the
    full algorithm instead: a character the table does not fold on its own, or a row that folds to
    more code points than it has bytes (a few expansions, like U+FDFA, do)."""
    n = len(byte_offsets) - 1
    base = byte_offsets[0]
    lengths = np.zeros(n, np.int64)
    fallback = np.zeros(n, np.bool_)
    size = table_free.shape[0]
    multi = np.uint32(0xFFFFFFFF)
    for d in prange(n):
        i = byte_offsets[d]
        end = byte_offsets[d + 1]
        pos = i - base
        limit = end - base
        while i < end:
            c, width = decode_at(data, i)
            i += width
            if c < size and single[c] != multi:
                # One code point for at least one byte: never outruns the region.
                out[pos] = single[c]
                pos += 1
            elif _free(table_free, high, c):
                if c < size:
                    if pos + table_off[c + 1] - table_off[c] > limit:
                        fallback[d] = True
                        break
                    for k in range(table_off[c], table_off[c + 1]):
                        out[pos] = table_data[k]
                        pos += 1
                else:
                    out[pos] = c
                    pos += 1
            else:
                fallback[d] = True
                break
        lengths[d] = 0 if fallback[d] else pos - (byte_offsets[d] - base)
    return lengths, fallback


def fold_codepoints(values: pa.Array | pa.ChunkedArray, scratch: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Code points and offsets of NFKC + lower-cased ``values`` (nulls as empty strings).

    ``scratch``, a uint32 array of at least ``fold_scratch_size(values)`` elements, is used for the
    intermediate regions instead of a new array (a caller folding chunk after chunk reuses one).
    """
    values = as_string_array(values)
    data, byte_offsets = utf8_buffers(values)
    # One decoding pass into regions sized by bytes, then a packing copy: cheaper than measuring
    # the folded lengths in a first decoding pass.
    need = int(byte_offsets[-1] - byte_offsets[0]) + 1
    if scratch is not None and (scratch.dtype != np.uint32 or len(scratch) < need):
        raise ValueError(f"fold_codepoints: scratch must be uint32 with at least {need} elements")
    at_bytes = scratch if scratch is not None else np.empty(need, np.uint32)
    lengths, fallback = _fold_at_bytes(data, byte_offsets, *_tables(), at_bytes)
    folded_off = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=folded_off[1:])
    folded = np.empty(int(folded_off[-1]), np.uint32)
    ck.pack_into(at_bytes, byte_offsets[:-1] - byte_offsets[0], lengths, folded, folded_off)
    del at_bytes, scratch
    if not fallback.any():
        return folded, folded_off
    slow_cp, slow_off = codepoints(nfkc_lower(values.filter(pa.array(fallback))))
    return ck.replace_rows(folded, folded_off, slow_cp, slow_off, fallback)


def fold_scratch_size(values: pa.Array | pa.ChunkedArray) -> int:
    """Elements of the ``scratch`` that ``fold_codepoints(values)`` needs: the UTF-8 size + 1.

    Filling nulls with "" never grows the text, so the raw size of the string chunks bounds it.
    """
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    if not all(pa.types.is_string(c.type) or pa.types.is_large_string(c.type) for c in chunks):
        chunks = [as_string_array(values)]
    return 1 + sum(int(offsets[-1] - offsets[0]) for offsets in (utf8_buffers(c)[1] for c in chunks))
