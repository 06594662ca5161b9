"""Prepare a batch for the cascade: validate it against the contract, sort it into batch order and add
the per-row views every layer reads (URL keys, content hashes, the near-duplicate view, language).

This module sits below the layers: ``pipeline`` runs it before the cascade, and a layer that reads an
earlier batch's published partition back (L3's and L4's text checks) prepares those rows with it,
as their own batch prepared them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from dedup_tasks.config import DedupConfig
from dedup_tasks.contract import check_rows, conform_schema, repair_text, sort_batch
from dedup_tasks.fingerprint.content_hash import content_hashes
from dedup_tasks.io import with_template_lines
from dedup_tasks.layers.base import REASON, NearText, add_reason, escape_input_names, set_column
from dedup_tasks.layers.near import LEADIN, NEAR_LEN, leadin_column
from dedup_tasks.normalize import codepoint_kernels as ck
from dedup_tasks.normalize.arrays import strings_from_spans
from dedup_tasks.normalize.fold import fold_codepoints, fold_scratch_size
from dedup_tasks.normalize.text import lang_from_counts, site_codes_of, template_lines
from dedup_tasks.normalize.url import url_keys
from dedup_tasks.normalize.views import (
    TokenView,
    hash_view,
    region_size,
    strip_template_lines,
    token_view,
)

REPAIRED_REASON = "invalid UTF-8 replaced with U+FFFD"
LONG_REASON = "long document: near-duplicate fingerprints use the first {} characters"
MAX_NEAR_CHARS = 100_000


def prepare(table: pa.Table, config: DedupConfig, source: str = "batch", templates: np.ndarray | None = None) -> pa.Table:
    """Validate against the contract, sort into batch order, and add the per-row views all layers use.

    ``templates``: the template lines to strip (a published partition's, read back by
    ``io.read_published_rows``); None learns them over ``table``, as a batch does."""
    return prepare_with_text(table, config, source, templates)[0]


# Batches whose text would take more than this many bytes as code points (4 per character) keep
# nothing between passes and layers: pass 2 folds again, the layers decode ``_near_text``. Smaller
# batches write the near-duplicate view in pass 1 to one batch-wide buffer, strip its template
# lines in place in pass 2, and the layers read it there. The bound is decided before pass 1 from
# the UTF-8 size (a character is at least one byte), so a large batch never holds a partial
# buffer: 200,000 documents must fit in 2 GiB.
TEXT_CACHE_BYTES = 256 << 20


def prepare_with_text(
    table: pa.Table, config: DedupConfig, source: str = "batch", templates: np.ndarray | None = None
) -> tuple[pa.Table, NearText | None]:
    """``prepare``, plus the near-duplicate view as code points when the batch is within TEXT_CACHE_BYTES.

    The prepared table carries the template lines in its schema metadata (``io.with_template_lines``),
    and so does the partition the batch publishes."""
    table = escape_input_names(conform_schema(table, source))
    table, repaired = repair_text(table, source)
    check_rows(table, source)
    # The flag column travels with its row through the sort.
    table = sort_batch(table.append_column("_repaired", pa.array(repaired)))
    repaired = table.column("_repaired").to_numpy(zero_copy_only=False).astype(bool)
    n = table.num_rows
    chunks = list(_chunks(n))
    text_bytes = sum(table.column(name).nbytes for name in ("title", "content"))
    keep_text = 4 * text_bytes <= TEXT_CACHE_BYTES
    batch = table.append_column("_row", pa.array(np.arange(n), pa.int64()))
    batch = batch.append_column(REASON, pa.nulls(n, pa.string()))

    # URL canonicalization is Python (it holds the GIL); the text kernels below release it, so the
    # two run side by side on the machine's cores.
    with ThreadPoolExecutor(1, thread_name_prefix="url-keys") as pool:
        pending_keys = pool.submit(url_keys, batch.column("url"), tracking_params=config.tracking_params)
        hashes, line_doc, line_hash, view = _pass_one(batch, chunks, text_bytes if keep_text else None)
        keys = pending_keys.result()
    batch = set_column(batch, "_url_key", pa.array(keys.key, pa.uint64()))
    batch = set_column(batch, "_url_valid", pa.array(keys.valid))
    batch = set_column(batch, "_url_reason", pa.array(keys.reason, pa.string()))
    site_codes = site_codes_of(np.where(keys.valid, keys.host, "").astype(object))
    batch = set_column(batch, "_ch_hi", pa.array(hashes[:, 0], pa.uint64()))
    batch = set_column(batch, "_ch_lo", pa.array(hashes[:, 1], pa.uint64()))
    if templates is None:
        templates = template_lines(line_doc, line_hash, site_codes[line_doc])
    batch = with_template_lines(batch, templates)

    # Pass 2: the near-duplicate view, title and content without template lines.
    given = batch.column("lang") if "lang" in batch.column_names else None
    near_text = None
    if view is not None:
        # In place, in the batch-wide buffer pass 1 wrote, which the layers then read in place.
        lengths, too_long, cjk, word = strip_template_lines(view, templates, max_chars=MAX_NEAR_CHARS)
        near_text = NearText(view.buffer, view.starts, view.starts + lengths)
        near_parts = [strings_from_spans(near_text.codepoints, near_text.starts, near_text.ends)]
        lang = lang_from_counts(cjk, word, given)
    else:
        near_parts, lengths, too_long, lang = _pass_two_by_chunk(batch, chunks, templates, given)
    batch = set_column(batch, "_empty", pa.array(lengths == 0))
    # The view's length in code points, which the near layers read (layers.near.text_lengths) instead
    # of counting the UTF-8 of _near_text again in every layer.
    batch = set_column(batch, NEAR_LEN, pa.array(np.asarray(lengths, np.int64), pa.int64()))
    batch = set_column(batch, "_near_text", pa.chunked_array(near_parts, pa.string()) if near_parts else pa.array([], pa.string()))
    batch = set_column(batch, "_lang", pa.array(lang, pa.string()))
    batch = set_column(batch, LEADIN, leadin_column(batch.column("_near_text"), site_codes, keys.valid, lengths, config))
    if too_long.any():
        batch = add_reason(batch, too_long, LONG_REASON.format(MAX_NEAR_CHARS))
    return add_reason(batch, repaired, REPAIRED_REASON), near_text


# Small chunks: their code point arrays fit under glibc's mmap threshold, so each chunk reuses the
# memory the previous one freed instead of faulting in fresh pages (a first-touch page fault cost
# more than some passes over the text on the benchmark VM).
PREPARE_CHUNK_DOCS = 5_000


class _Scratch:
    """A code point buffer reused by chunk after chunk, grown (with room to spare) when a chunk needs
    more: fresh pages cost more than a pass over the text on this kind of VM."""

    def __init__(self) -> None:
        self.array = np.empty(0, np.uint32)

    def at_least(self, size: int) -> np.ndarray:
        if len(self.array) < size:
            self.array = np.empty(size + size // 4, np.uint32)
        return self.array


def _fold(rows: pa.Table, scratch: _Scratch) -> tuple[tuple, tuple]:
    """Folded title and content code points of ``rows``."""
    title, content = rows.column("title"), rows.column("content")
    buf = scratch.at_least(max(fold_scratch_size(title), fold_scratch_size(content)))
    return fold_codepoints(title, buf), fold_codepoints(content, buf)


def _pass_one(
    batch: pa.Table, chunks: list[tuple[int, int]], keep_bytes: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, TokenView | None]:
    """Pass 1 of ``prepare``, chunk by chunk: content hashes and the (document, hash) of every
    content line with words.

    Chunks bound the memory of the code point arrays (4 bytes a character) whatever the batch
    size. With ``keep_bytes`` (the batch's text size in bytes) the near-duplicate view is also
    written, up to its template lines, to one batch-wide buffer (``views.token_view``), returned
    as a batch-wide view; without, pass 2 folds the text again.
    """
    n = batch.num_rows
    hashes = np.empty((n, 2), np.uint64)
    # A character takes at least one UTF-8 byte, so this rarely grows (NFKC expansions); pages of it
    # that are never written are never faulted in.
    near_buf = np.empty(keep_bytes + n + 1, np.uint32) if keep_bytes is not None else None
    at = 0
    parts: list[TokenView] = []
    line_docs, line_hashes = [], []
    fold_scratch, view_scratch = _Scratch(), _Scratch()
    for start, end in chunks:
        title, content = _fold(batch.slice(start, end - start), fold_scratch)
        need = region_size(title, content) + 1
        hashes[start:end] = content_hashes(*hash_view(title, content, into=view_scratch.at_least(need)))
        if near_buf is None:
            doc, line_hash, _, _ = ck.token_lines(*content, ck.CLASSES)
        else:
            if at + need > len(near_buf):
                grown = np.empty(2 * (at + need), np.uint32)
                grown[:at] = near_buf[:at]
                near_buf = grown
            part = token_view(title, content, near_buf, at)
            parts.append(part)
            at += need - 1
            doc, line_hash = part.line_doc, part.line_hash
        line_docs.append(doc + start)
        line_hashes.append(line_hash)
    line_doc = np.concatenate(line_docs) if line_docs else np.empty(0, np.int64)
    line_hash = np.concatenate(line_hashes) if line_hashes else np.empty(0, np.uint64)
    return hashes, line_doc, line_hash, _joined(parts, near_buf, line_doc) if near_buf is not None else None


def _pass_two_by_chunk(
    batch: pa.Table, chunks: list[tuple[int, int]], templates: np.ndarray, given: pa.ChunkedArray | None
) -> tuple[list[pa.Array], np.ndarray, np.ndarray, np.ndarray]:
    """Pass 2 of a batch too large to keep its text: per chunk, fold again, write the view into one
    reused buffer, strip its template lines, encode it. Returns the ``_near_text`` chunks, the
    view's lengths, which were truncated, and the languages."""
    near_parts, length_parts, long_parts, lang_parts = [], [], [], []
    fold_scratch, view_scratch = _Scratch(), _Scratch()
    for start, end in chunks:
        title, content = _fold(batch.slice(start, end - start), fold_scratch)
        buf = view_scratch.at_least(region_size(title, content) + 1)
        part = token_view(title, content, buf)
        lengths, truncated, cjk, word = strip_template_lines(part, templates, max_chars=MAX_NEAR_CHARS)
        near_parts.append(strings_from_spans(buf, part.starts, part.starts + lengths))
        length_parts.append(lengths)
        long_parts.append(truncated)
        lang_parts.append(lang_from_counts(cjk, word, given.slice(start, end - start) if given is not None else None))
    if not chunks:
        return [], np.zeros(0, np.int64), np.zeros(0, bool), np.empty(0, object)
    return near_parts, np.concatenate(length_parts), np.concatenate(long_parts), np.concatenate(lang_parts)


def _joined(parts: list[TokenView], buffer: np.ndarray, line_doc: np.ndarray) -> TokenView:
    """The chunks' token views as one view over the batch-wide ``buffer`` (``line_doc`` batch-wide)."""

    def cat(name: str, dtype: type) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts]) if parts else np.empty(0, dtype)

    return TokenView(
        buffer, cat("starts", np.int64), cat("lengths", np.int64), cat("title_ends", np.int64),
        cat("cjk", np.int64), cat("words", np.int64), line_doc, cat("line_hash", np.uint64), cat("line_starts", np.int64), cat("line_ends", np.int64),
    )  # fmt: skip


def _chunks(n: int, size: int = PREPARE_CHUNK_DOCS):
    for start in range(0, n, size):
        yield start, min(n, start + size)
