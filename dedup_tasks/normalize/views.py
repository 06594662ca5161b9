"""The two per-document views prepare builds, and code point row utilities.

The exact layer's view is one compiled pass (``hash_view``); the near-duplicate view is two,
because template lines are known only once every document's lines are: ``token_view`` writes the
token text with every line's hash and span, ``strip_template_lines`` removes template lines in place.

Outputs are allocated here with numpy and filled by the ``*_into`` kernels of ``codepoint_kernels``
(numpy's large allocations use transparent huge pages; numba's do not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dedup_tasks.normalize import codepoint_kernels as ck

BOILERPLATE_MIN_RESIDUAL = 40

Rows = tuple[np.ndarray, np.ndarray]  # code points, int64 offsets (n + 1)


def region_size(title: Rows, content: Rows) -> int:
    """Code points the views of these documents need: title + 1 + content each."""
    n = len(title[1]) - 1
    return int(title[1][-1] + content[1][-1] + n) if n else 0


def _regions(title: Rows, content: Rows, into: np.ndarray | None = None, at: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per document a region of title + 1 + content code points in one buffer: (buffer, starts).

    The buffer is ``into`` (regions from index ``at``, ``region_size`` of them) or a new one.
    """
    n = len(title[1]) - 1
    if into is None and at:
        raise ValueError("'at' places regions in a buffer given as 'into'")
    starts = title[1][:-1] + content[1][:-1] + np.arange(at, at + n, dtype=np.int64)
    if into is None:
        return np.empty(region_size(title, content) + 1, np.uint32), starts
    if at + region_size(title, content) > len(into):
        raise ValueError("the buffer given is smaller than the documents' regions")
    return into, starts


def pack(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Rows:
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint32)
    ck.pack_into(buf, starts, lengths, out, offsets)
    return out, offsets


def hash_view(
    title: Rows, content: Rows, into: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact layer's view: folded title and content, whitespace collapsed, joined by U+001F.

    Returns (buffer, starts, lengths): document d is ``buffer[starts[d]:starts[d] + lengths[d]]``.
    The buffer is ``into`` when given (``region_size`` code points; a caller hashing chunk after
    chunk reuses one), else a new one.
    """
    buf, starts = _regions(title, content, into)
    lengths = ck.hash_view_into(*title, *content, ck.SPACE_SEPARATORS, buf, starts)
    return buf, starts, lengths


@dataclass
class TokenView:
    """The near-duplicate view before template lines are known: title + content as token text,
    untruncated, at ``buffer[starts[d]:starts[d] + lengths[d]]``, and each content line with words:
    its document, hash (as ``ck.token_lines``) and span in ``buffer`` (with its joining space)."""

    buffer: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    title_ends: np.ndarray
    cjk: np.ndarray  # CJK and word-character counts of the text
    words: np.ndarray
    line_doc: np.ndarray
    line_hash: np.ndarray
    line_starts: np.ndarray
    line_ends: np.ndarray


def token_view(title: Rows, content: Rows, into: np.ndarray, at: int = 0) -> TokenView:
    """Pass 1 of the near-duplicate view of these documents, written to ``into`` from index ``at``
    (``region_size`` code points); ``strip_template_lines`` finishes it once the batch's template
    lines are known, so the folded text need not be kept between the passes."""
    buf, starts = _regions(title, content, into, at)
    line_off = ck.line_slots(*content)
    lengths, title_ends, cjk, words, has_words, line_hash, line_starts, line_ends = ck.token_view_into(
        *title, *content, ck.TOKEN_SEPARATORS, ck.CLASSES, buf, starts, line_off
    )
    line_doc = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(line_off))
    return TokenView(
        buf, starts, lengths, title_ends, cjk, words,
        line_doc[has_words], line_hash[has_words], line_starts[has_words], line_ends[has_words],
    )  # fmt: skip


def strip_template_lines(
    view: TokenView, templates: np.ndarray, min_residual: int = BOILERPLATE_MIN_RESIDUAL, max_chars: int = 100_000
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pass 2, in place: title token text + " " + ``text.strip_lines`` of the content, cut to
    ``max_chars``. Returns (lengths, truncated, CJK count, word count); document d is then
    ``view.buffer[view.starts[d]:view.starts[d] + lengths[d]]``."""
    boiler = np.isin(view.line_hash, templates) if len(templates) else np.zeros(len(view.line_hash), bool)
    span_off = np.searchsorted(view.line_doc[boiler], np.arange(len(view.starts) + 1)).astype(np.int64)
    cjk, words = view.cjk.copy(), view.words.copy()
    lengths, truncated = ck.strip_lines_in_place(
        view.buffer, view.starts, view.lengths, view.title_ends, cjk, words, span_off,
        view.line_starts[boiler], view.line_ends[boiler], ck.TOKEN_SEPARATORS, min_residual, max_chars,
    )  # fmt: skip
    return lengths, truncated, cjk, words


def encode_utf8(cp: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of each code point row ``cp[starts[i]:ends[i]]``, and int64 byte offsets."""
    byte_offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(ck.utf8_sizes(cp, starts, ends), out=byte_offsets[1:])
    out = np.empty(int(byte_offsets[-1]), np.uint8)
    ck.utf8_encode_into(cp, starts, ends, out, byte_offsets)
    return out, byte_offsets


def decode_utf8(data: np.ndarray, byte_offsets: np.ndarray) -> Rows:
    """Code points and offsets of valid UTF-8 rows ``data[byte_offsets[i]:byte_offsets[i+1]]``."""
    offsets = np.zeros(len(byte_offsets), np.int64)
    np.cumsum(ck.utf8_lengths(data, byte_offsets), out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint32)
    ck.utf8_decode_into(data, byte_offsets, out, offsets)
    return out, offsets
