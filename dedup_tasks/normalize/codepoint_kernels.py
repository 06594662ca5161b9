"""Compiled normalization passes over a batch's code points (see fingerprint.hashing.codepoints).

Arrow's regex kernels cost ~100 ns per character with Unicode classes; these passes are one table
lookup per character. Character classes come from ``unicodedata`` once, at import.
"""

from __future__ import annotations

import hashlib
import os
import sys
import unicodedata
import uuid
from pathlib import Path

import numpy as np
from numba import njit, prange

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)
from dedup_tasks.fingerprint.kernels import POLY, _finish, hash_slot, hash_table_size

# 0 = word character, 1 = whitespace, 2 = punctuation or symbol, 3 = line break
WORD, SPACE, PUNCT, NEWLINE = 0, 1, 2, 3
_TABLE_SIZE = 0x20000  # BMP and the symbol/emoji plane; higher planes are ideographs: word characters


def _char_classes() -> np.ndarray:
    table = np.zeros(_TABLE_SIZE, np.uint8)
    for code in range(_TABLE_SIZE):
        if 0xD800 <= code <= 0xDFFF:
            table[code] = PUNCT
            continue
        category = unicodedata.category(chr(code))
        if category[0] in "PS":
            table[code] = PUNCT
        elif category[0] == "Z" or category == "Cc" and chr(code).isspace():
            table[code] = SPACE
        elif category in ("Cc", "Cf", "Cs", "Co", "Cn") and code > 0x7F:
            table[code] = SPACE if category in ("Cc", "Cf") else WORD
    for code in (0x0A, 0x0D, 0x0B, 0x0C, 0x85, 0x2028, 0x2029):
        table[code] = NEWLINE
    for code in (0x09, 0x1C, 0x1D, 0x1E, 0x1F):
        table[code] = SPACE
    return table


def _classes_path() -> Path:
    """Where the built table is kept: ``__pycache__`` beside this file (as numba's cache and the NFKC
    fold table), named by this file and the Unicode version, so an edit or a new Python builds anew."""
    key = hashlib.blake2b(Path(__file__).read_bytes(), digest_size=8)
    key.update(f"{unicodedata.unidata_version}|{sys.version_info[:2]}".encode())
    return Path(__file__).parent / "__pycache__" / f"char-classes-{key.hexdigest()}.npy"


def _load_classes(path: Path) -> np.ndarray | None:
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    sane = table.dtype == np.uint8 and table.shape == (_TABLE_SIZE,) and int(table.max(initial=0)) <= NEWLINE
    return table if sane else None


def _save_classes(path: Path, table: np.ndarray) -> None:
    """A temporary name, then a rename: a reader never sees half a file. Unwritable: not saved."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            np.save(fh, table, allow_pickle=False)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        return
    for stale in path.parent.glob("char-classes-*.npy"):  # built from an earlier version of this file
        if stale != path:
            stale.unlink(missing_ok=True)


def _cached_char_classes() -> np.ndarray:
    """``_char_classes()``, loaded from ``_classes_path()``, or built and saved there: building
    takes 131,072 ``unicodedata`` lookups (~0.07 CPU-s, in every process that imports this module);
    ``make install`` (``dedup_tasks.warmup``) builds it once. A missing or bad file is rebuilt."""
    path = _classes_path()
    table = _load_classes(path)
    if table is None:
        table = _char_classes()
        _save_classes(path, table)
    return table


CLASSES = _cached_char_classes()
assert sys.maxunicode == 0x10FFFF


@njit(inline="always", cache=True)
def _cls(table, c):
    # Signed index: numba compares uint32 with int64 through float64, which is slow.
    ci = np.int64(c)
    return np.int64(table[ci]) if ci < table.shape[0] else np.int64(0)


@njit(parallel=True, nogil=True, cache=True)
def collapse(cp, offsets, table, punct_is_space):
    """Runs of whitespace (and, if asked, punctuation/symbols) become one space; ends trimmed."""
    n = len(offsets) - 1
    lengths = np.zeros(n, np.int64)
    out = np.empty(len(cp), np.uint32)
    for d in prange(n):
        pos = offsets[d]
        pending = False
        for i in range(offsets[d], offsets[d + 1]):
            k = _cls(table, cp[i])
            sep = k == 1 or k == 3 or (punct_is_space and k == 2)
            if sep:
                pending = pos > offsets[d]
            else:
                if pending:
                    out[pos] = 32
                    pos += 1
                    pending = False
                out[pos] = cp[i]
                pos += 1
        lengths[d] = pos - offsets[d]
    return _compact(out, offsets, lengths)


@njit(nogil=True, cache=True)
def _compact(buf, offsets, lengths):
    n = len(lengths)
    new_offsets = np.zeros(n + 1, np.int64)
    for d in range(n):
        new_offsets[d + 1] = new_offsets[d] + lengths[d]
    out = np.empty(new_offsets[n], np.uint32)
    for d in range(n):
        out[new_offsets[d] : new_offsets[d + 1]] = buf[offsets[d] : offsets[d] + lengths[d]]
    return out, new_offsets


# The code points CLASSES marks NEWLINE, tested by value in line_slots (checked at import below).
LINE_BREAKS = (0x0A, 0x0B, 0x0C, 0x0D, 0x85, 0x2028, 0x2029)
assert np.flatnonzero(CLASSES == NEWLINE).tolist() == list(LINE_BREAKS)


@njit(inline="always", cache=True)
def _is_break(c):
    # LINE_BREAKS as 0 or 1 in uint32 lanes: two ranges and one value, no table lookup.
    return (
        np.uint32(np.uint32(c - np.uint32(0x0A)) <= np.uint32(3))
        | np.uint32(c == np.uint32(0x85))
        | np.uint32(np.uint32(c - np.uint32(0x2028)) <= np.uint32(1))
    )


@njit(parallel=True, nogil=True, cache=True)
def line_slots(cp, offsets):
    """Offsets of one slot per line (line breaks + 1) of each document (``token_lines``, ``token_view_into``).

    Counted by value (``LINE_BREAKS``), which LLVM vectorizes, rather than through the class table."""
    n = len(offsets) - 1
    counts = np.zeros(n, np.int64)
    for d in prange(n):
        text = cp[offsets[d] : offsets[d + 1]]
        lines = np.uint32(1)
        for i in range(len(text)):
            lines += _is_break(text[i])
        counts[d] = lines
    line_off = np.zeros(n + 1, np.int64)
    for d in range(n):
        line_off[d + 1] = line_off[d] + counts[d]
    return line_off


@njit(parallel=True, nogil=True, cache=True)
def token_lines(cp, offsets, table):
    """Per non-empty input line: (document, hash of its token text, start, end) in ``cp``.

    A line's token text is its words joined by single spaces; its hash is the one ``_span_hash``
    gives those code points, computed on the fly in one pass.
    """
    n = len(offsets) - 1
    line_off = line_slots(cp, offsets)
    total = line_off[n]
    doc = np.empty(total, np.int64)
    hashes = np.empty(total, np.uint64)
    starts = np.empty(total, np.int64)
    ends = np.empty(total, np.int64)
    valid = np.zeros(total, np.bool_)
    for d in prange(n):
        m = line_off[d]
        line_start = offsets[d]
        h = np.uint64(0)
        length = 0
        pending = False
        end = offsets[d + 1]
        for i in range(offsets[d], end + 1):
            k = 3 if i == end else _cls(table, cp[i])
            if k == 3:
                if length > 0:
                    doc[m] = d
                    hashes[m] = _finish(h, length)
                    starts[m] = line_start
                    ends[m] = i
                    valid[m] = True
                m += 1
                line_start = i + 1
                h = np.uint64(0)
                length = 0
                pending = False
            elif k == 0:
                if pending and length > 0:
                    h = h * POLY + np.uint64(32)
                    length += 1
                pending = False
                h = h * POLY + np.uint64(cp[i])
                length += 1
            else:
                pending = True
    return doc[valid], hashes[valid], starts[valid], ends[valid]


@njit(nogil=True, cache=True)
def frequent_line_keys(keys, docs, min_docs):
    """Which lines have a key found in >= ``min_docs`` distinct documents (``docs`` non-decreasing).

    One pass over an open-addressing table of key -> (documents counted, last document seen): in
    document order a key's document is new exactly when it differs from the last one seen.
    """
    n = len(keys)
    size = hash_table_size(n)
    table_keys = np.zeros(size, np.uint64)
    last_doc = np.full(size, -1, np.int64)
    count = np.zeros(size, np.int64)
    slots = np.empty(n, np.int64)
    for i in range(n):
        key = keys[i]
        s = hash_slot(table_keys, last_doc, key)
        table_keys[s] = key
        if last_doc[s] != docs[i]:
            last_doc[s] = docs[i]
            count[s] += 1
        slots[i] = s
    out = np.empty(n, np.bool_)
    for i in range(n):
        out[i] = count[slots[i]] >= min_docs
    return out


@njit(nogil=True, cache=True)
def remove_spans(cp, offsets, starts, ends, doc):
    """Each document's code points without the given [start, end) spans (sorted, per document)."""
    n = len(offsets) - 1
    out = np.empty(len(cp) + n, np.uint32)
    new_offsets = np.zeros(n + 1, np.int64)
    pos = 0
    k = 0
    for d in range(n):
        i = offsets[d]
        while k < len(doc) and doc[k] < d:
            k += 1
        while i < offsets[d + 1]:
            if k < len(doc) and doc[k] == d and i >= starts[k]:
                i = ends[k]
                # the removed line's break stays a separator
                out[pos] = 10
                pos += 1
                k += 1
                continue
            out[pos] = cp[i]
            pos += 1
            i += 1
        new_offsets[d + 1] = pos
    return out[:pos], new_offsets


@njit(inline="always", cache=True)
def _is_cjk(c):
    # Branch-free, like the loops that count with it: CJK ideographs, kana, hangul.
    return (
        np.int64(0x4E00 <= c <= 0x9FFF)
        | np.int64(0x3400 <= c <= 0x4DBF)
        | np.int64(0x20000 <= c <= 0x2FFFF)
        | np.int64(0x3040 <= c <= 0x30FF)
        | np.int64(0xAC00 <= c <= 0xD7AF)
        | np.int64(0xF900 <= c <= 0xFAFF)
    )


@njit(inline="always", cache=True)
def _counts(buf, start, end, table):
    """(CJK count, word-character count) of ``buf[start:end]``; ``table`` is nonzero for a non-word
    character (``CLASSES``, or a separator table); code points past its end are word characters."""
    size = table.shape[0]
    n_cjk = 0
    n_words = 0
    for i in range(start, end):
        ci = np.int64(buf[i])
        word = np.int64(ci >= size or table[ci] == 0)
        n_words += word
        n_cjk += word & _is_cjk(ci)
    return n_cjk, n_words


@njit(parallel=True, nogil=True, cache=True)
def cjk_counts(cp, offsets, table):
    """(CJK ideograph/kana/hangul count, word-character count) per document (``table`` as in ``_counts``)."""
    n = len(offsets) - 1
    cjk = np.zeros(n, np.int64)
    word = np.zeros(n, np.int64)
    for d in prange(n):
        cjk[d], word[d] = _counts(cp, offsets[d], offsets[d + 1], table)
    return cjk, word


@njit(nogil=True, cache=True)
def gather(cp, offsets, mask):
    """The documents selected by ``mask``, packed."""
    n = len(mask)
    count = 0
    total = 0
    for d in range(n):
        if mask[d]:
            count += 1
            total += offsets[d + 1] - offsets[d]
    out = np.empty(total, np.uint32)
    out_off = np.zeros(count + 1, np.int64)
    k = 0
    for d in range(n):
        if mask[d]:
            length = offsets[d + 1] - offsets[d]
            out[out_off[k] : out_off[k] + length] = cp[offsets[d] : offsets[d + 1]]
            out_off[k + 1] = out_off[k] + length
            k += 1
    return out, out_off


@njit(nogil=True, cache=True)
def replace_rows(cp, offsets, sub_cp, sub_off, mask):
    """Documents of (cp, offsets), those in ``mask`` replaced, in order, by the packed (sub_cp, sub_off)."""
    n = len(mask)
    out_off = np.zeros(n + 1, np.int64)
    k = 0
    for d in range(n):
        if mask[d]:
            length = sub_off[k + 1] - sub_off[k]
            k += 1
        else:
            length = offsets[d + 1] - offsets[d]
        out_off[d + 1] = out_off[d] + length
    out = np.empty(out_off[n], np.uint32)
    k = 0
    for d in range(n):
        if mask[d]:
            out[out_off[d] : out_off[d + 1]] = sub_cp[sub_off[k] : sub_off[k + 1]]
            k += 1
        else:
            out[out_off[d] : out_off[d + 1]] = cp[offsets[d] : offsets[d + 1]]
    return out, out_off


# ---- UTF-8 <-> code points ----------------------------------------------------------------------
# Arrow holds strings as UTF-8; the passes above work on one uint32 per character. Going through
# Python's codecs costs two full copies and a cumulative sum; these kernels do one pass per document,
# split over the cores.
#
# Large outputs are allocated by the caller with numpy (``*_into`` kernels, see ``views``): numpy
# asks the kernel for transparent huge pages, numba's allocator does not, and first-touch page
# faults on 4 KiB pages cost more than some of the passes themselves on this VM.


@njit(inline="always", cache=True)
def decode_at(data, i):
    """(code point, byte length) of the valid UTF-8 sequence at ``data[i]``."""
    b = np.int64(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), 3
    return (
        ((b & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12) | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)
    ), 4


@njit(parallel=True, nogil=True, cache=True)
def utf8_lengths(data, byte_offsets):
    """Code point count of each valid UTF-8 row ``data[byte_offsets[i]:byte_offsets[i+1]]``."""
    n = len(byte_offsets) - 1
    lengths = np.zeros(n, np.int64)
    for d in prange(n):
        count = 0
        for i in range(byte_offsets[d], byte_offsets[d + 1]):
            count += (data[i] & 0xC0) != 0x80
        lengths[d] = count
    return lengths


@njit(parallel=True, nogil=True, cache=True)
def utf8_decode_into(data, byte_offsets, out, offsets):
    """Code points of each valid UTF-8 row at ``out[offsets[i]:]`` (counts from ``utf8_lengths``)."""
    n = len(byte_offsets) - 1
    for d in prange(n):
        pos = offsets[d]
        i = byte_offsets[d]
        end = byte_offsets[d + 1]
        while i < end:
            c, width = decode_at(data, i)
            out[pos] = c
            i += width
            pos += 1


@njit(parallel=True, nogil=True, cache=True)
def utf8_sizes(cp, starts, ends):
    """UTF-8 byte length of each code point row ``cp[starts[i]:ends[i]]``."""
    n = len(starts)
    sizes = np.zeros(n, np.int64)
    for d in prange(n):
        size = 0
        for i in range(starts[d], ends[d]):
            c = cp[i]
            size += 1 + (c >= 0x80) + (c >= 0x800) + (c >= 0x10000)
        sizes[d] = size
    return sizes


@njit(parallel=True, nogil=True, cache=True)
def utf8_encode_into(cp, starts, ends, out, byte_offsets):
    """UTF-8 of each code point row ``cp[starts[i]:ends[i]]`` at ``out[byte_offsets[i]:]`` (sizes
    from ``utf8_sizes``)."""
    n = len(starts)
    for d in prange(n):
        pos = byte_offsets[d]
        for i in range(starts[d], ends[d]):
            c = cp[i]
            if c < 0x80:
                out[pos] = c
                pos += 1
            elif c < 0x800:
                out[pos] = 0xC0 | (c >> 6)
                out[pos + 1] = 0x80 | (c & 0x3F)
                pos += 2
            elif c < 0x10000:
                out[pos] = 0xE0 | (c >> 12)
                out[pos + 1] = 0x80 | ((c >> 6) & 0x3F)
                out[pos + 2] = 0x80 | (c & 0x3F)
                pos += 3
            else:
                out[pos] = 0xF0 | (c >> 18)
                out[pos + 1] = 0x80 | ((c >> 12) & 0x3F)
                out[pos + 2] = 0x80 | ((c >> 6) & 0x3F)
                out[pos + 3] = 0x80 | (c & 0x3F)
                pos += 4


# ---- fused views --------------------------------------------------------------------------------
# The exact layer's view and the near-duplicate view are each built in one pass per document
# (collapse, join, template removal, truncation), split over the cores.


# Separator flags per code point, for the fused views: whitespace and line breaks; and those plus
# punctuation and symbols (token text).
SPACE_SEPARATORS = ((CLASSES == SPACE) | (CLASSES == NEWLINE)).astype(np.uint8)
TOKEN_SEPARATORS = ((CLASSES == SPACE) | (CLASSES == NEWLINE) | (CLASSES == PUNCT)).astype(np.uint8)


@njit(inline="always", cache=True)
def _emit(src, start, end, out, pos, first, pending, separators):
    """Append src[start:end] collapsed (separator runs to one space) to ``out`` at ``pos``; ``first``
    is where the output document begins (leading separators are trimmed). Returns the new ``pos``.

    Branch-free: a mispredicted branch at every word boundary cost more than the loop's work. The
    stores at ``pos`` that do not advance it are overwritten later, and stay inside the document's
    region: output never outruns the input consumed.
    """
    size = separators.shape[0]
    for i in range(start, end):
        c = src[i]
        ci = np.int64(c)
        sep = np.int64(separators[ci]) if ci < size else np.int64(0)
        word = 1 - sep
        out[pos] = 32
        pos += pending & word
        out[pos] = c
        pos += word
        pending = sep & np.int64(pos > first)
    return pos


@njit(parallel=True, nogil=True, cache=True)
def pack_into(buf, starts, lengths, out, offsets):
    """Copy each document's ``buf[starts[d]:starts[d]+lengths[d]]`` to ``out[offsets[d]:offsets[d+1]]``."""
    for d in prange(len(lengths)):
        out[offsets[d] : offsets[d + 1]] = buf[starts[d] : starts[d] + lengths[d]]


@njit(parallel=True, nogil=True, cache=True)
def hash_view_into(title_cp, title_off, content_cp, content_off, separators, buf, starts):
    """Per document, at ``buf[starts[d]:]``: title and content, whitespace collapsed and trimmed,
    joined by U+001F. Each region must hold title + 1 + content code points; returns the lengths."""
    n = len(title_off) - 1
    lengths = np.empty(n, np.int64)
    for d in prange(n):
        p = _emit(title_cp, title_off[d], title_off[d + 1], buf, starts[d], starts[d], 0, separators)
        buf[p] = 0x1F
        p += 1
        p = _emit(content_cp, content_off[d], content_off[d + 1], buf, p, p, 0, separators)
        lengths[d] = p - starts[d]
    return lengths


@njit(parallel=True, nogil=True, cache=True)
def token_view_into(title_cp, title_off, content_cp, content_off, separators, table, buf, starts, line_off):
    """Pass 1 of the near-duplicate view, before the batch's template lines are known.

    Per document, at ``buf[starts[d]:]`` (regions as in ``hash_view_into``): title and content as
    token text (punctuation and whitespace runs as one space) joined by a space, untruncated. Per
    content line (``line_off[d]:line_off[d+1]``, one slot per line break + 1): whether
    it has words, the hash ``token_lines`` gives it, and its span in ``buf``, which includes the
    space joining it to the text before it. Returns (lengths, title ends, CJK count, word count,
    has words, hashes, line starts, line ends); ``strip_lines_in_place`` later removes template
    lines by these spans.
    """
    n = len(title_off) - 1
    size = separators.shape[0]
    lengths = np.empty(n, np.int64)
    title_ends = np.empty(n, np.int64)
    cjk = np.zeros(n, np.int64)
    words = np.zeros(n, np.int64)
    total = line_off[n]
    valid = np.zeros(total, np.bool_)
    hashes = np.zeros(total, np.uint64)
    line_starts = np.zeros(total, np.int64)
    line_ends = np.zeros(total, np.int64)
    for d in prange(n):
        first = starts[d]
        p = _emit(title_cp, title_off[d], title_off[d + 1], buf, first, first, 0, separators)
        title_ends[d] = p
        n_cjk, n_words = _counts(buf, first, p, separators)
        pending = np.int64(p > first)
        m = line_off[d]
        line_start = p
        end = content_off[d + 1]
        for i in range(content_off[d], end + 1):
            ci = np.int64(content_cp[i]) if i < end else np.int64(10)
            k = np.int64(table[ci]) if ci < table.shape[0] else np.int64(0)
            if k == 3:
                # A line break (or the end): close the line; a line without words leaves no text.
                if p > line_start:
                    tok = line_start + (1 if buf[line_start] == 32 else 0)
                    h = np.uint64(0)
                    for j in range(tok, p):
                        h = h * POLY + np.uint64(buf[j])
                    valid[m] = True
                    hashes[m] = _finish(h, p - tok)
                    line_starts[m] = line_start
                    line_ends[m] = p
                m += 1
                line_start = p
                if i == end:
                    break
            sep = np.int64(separators[ci]) if ci < size else np.int64(0)
            word = 1 - sep
            buf[p] = 32
            p += pending & word
            buf[p] = content_cp[i]
            p += word
            pending = sep & np.int64(p > first)
            n_words += word
            n_cjk += word & _is_cjk(ci)
        lengths[d] = p - first
        cjk[d] = n_cjk
        words[d] = n_words
    return lengths, title_ends, cjk, words, valid, hashes, line_starts, line_ends


@njit(inline="always", cache=True)
def _without_spans(buf, first, title_end, doc_end, span_starts, span_ends, k0, k1, write):
    """Length of the document at ``buf[first:doc_end]`` without the spans k0..k1 (sorted, after
    ``title_end``); with ``write``, moves the kept text left in place. A kept line that would now
    open the document loses its joining space."""
    p = title_end
    src = title_end
    for k in range(k0, k1 + 1):
        seg_end = span_starts[k] if k < k1 else doc_end
        if seg_end > src:
            if p == first and buf[src] == 32:
                src += 1
            if write:
                for j in range(src, seg_end):
                    buf[p + j - src] = buf[j]
            p += seg_end - src
        if k < k1:
            src = span_ends[k]
    return p


@njit(parallel=True, nogil=True, cache=True)
def strip_lines_in_place(
    buf, starts, lengths, title_ends, cjk, words, span_off, span_starts, span_ends, separators, min_residual, max_chars
):
    """Pass 2: remove each document's template line spans ``span_off[d]:span_off[d+1]`` (from
    ``token_view_into``) from its text in ``buf``, unless that leaves content shorter than
    ``min_residual``; cut to ``max_chars``. Updates the
    documents' CJK and word counts in place; returns (lengths, truncated)."""
    n = len(starts)
    out = np.empty(n, np.int64)
    truncated = np.zeros(n, np.bool_)
    for d in prange(n):
        first = starts[d]
        title_end = title_ends[d]
        doc_end = first + lengths[d]
        p = doc_end
        k0 = span_off[d]
        k1 = span_off[d + 1]
        if k1 > k0:
            kept = _without_spans(buf, first, title_end, doc_end, span_starts, span_ends, k0, k1, False)
            residual = kept - title_end - (1 if title_end > first and kept > title_end else 0)
            if residual >= min_residual:
                for k in range(k0, k1):
                    removed_cjk, removed_words = _counts(buf, span_starts[k], span_ends[k], separators)
                    cjk[d] -= removed_cjk
                    words[d] -= removed_words
                p = _without_spans(buf, first, title_end, doc_end, span_starts, span_ends, k0, k1, True)
        length = p - first
        if length > max_chars:
            truncated[d] = True
            length = max_chars
            cjk[d], words[d] = _counts(buf, first, first + length, separators)
        out[d] = length
    return out, truncated

