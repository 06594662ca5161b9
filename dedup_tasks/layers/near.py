"""Shared by the near-duplicate layers: the shingling view of the survivors and suspect bookkeeping."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.candidates import ShortTexts
from dedup_tasks.fingerprint.hashing import codepoints
from dedup_tasks.layers.base import (
    Drops,
    NearText,
    column_np,
    first_match_per_query,
    fixed_text,
    set_column,
    strings_np,
)
from dedup_tasks.normalize.arrays import gather_spans
from dedup_tasks.normalize.tokens import segment_words

CHUNK_DOCS = 20_000


def near_text_spans(
    batch: pa.Table, zh_mode: int, segment_zh: bool = False, cache: NearText | None = None, en_mode: int = kernels.WORDS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(code points, starts, ends, per-row mode) of the rows' near-duplicate text (``_near_text``).

    The column is UTF-8 rather than a list of code points: a quarter of the bytes for every filter,
    work file and survivor copy between layers, for one decode here (or none, from ``cache``).
    """
    text = batch.column("_near_text")
    is_zh = strings_np(batch, "_lang") == "zh"
    modes = np.where(is_zh, zh_mode, en_mode).astype(np.int64)
    if cache is not None and not (segment_zh and is_zh.any()):
        return (*cache.spans(batch.column("_row").to_numpy()), modes)
    if segment_zh and is_zh.any():
        text = segment_words(text, is_zh)
    cp, offsets = codepoints(text)
    return cp, offsets[:-1], offsets[1:], modes


# The near-duplicate view's length in code points: written by prepare, or given by an engine that
# leaves the text where it was made (engines/spark.py).
NEAR_LEN = "_near_len"


def text_lengths(batch: pa.Table) -> np.ndarray:
    if NEAR_LEN in batch.column_names:
        return column_np(batch, NEAR_LEN).astype(np.int64)
    return pc.utf8_length(batch.column("_near_text")).to_numpy(zero_copy_only=False).astype(np.int64)


def chunks(n: int, size: int = CHUNK_DOCS):
    for start in range(0, n, size):
        yield start, min(n, start + size)


def record_suspects(
    batch: pa.Table, layer: str, rows: np.ndarray, doc_id: np.ndarray, batch_id: np.ndarray, score: np.ndarray
) -> pa.Table:
    """Remember, per row, the best near-miss candidate this layer saw: the L4 semantic layer's input."""
    n = batch.num_rows
    docs = np.full(n, None, object)
    batches = np.full(n, None, object)
    scores = np.full(n, np.nan)
    docs[rows] = doc_id
    batches[rows] = batch_id
    scores[rows] = score
    batch = set_column(batch, f"_suspect_{layer}_doc_id", pa.array(docs, pa.string()))
    batch = set_column(batch, f"_suspect_{layer}_batch_id", pa.array(batches, pa.string()))
    return set_column(batch, f"_suspect_{layer}_score", pa.array(scores, pa.float64(), from_pandas=True))


def best_per_row(n: int, rows: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index (into rows/rank) of the lowest-rank entry per row; returns (unique rows, entry index)."""
    if len(rows) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.lexsort((rank, rows))
    r = rows[order]
    first = np.concatenate([[True], r[1:] != r[:-1]])
    return r[first], order[first]


def bool_col(batch: pa.Table, name: str) -> np.ndarray:
    return column_np(batch, name).astype(bool)


URL_UPDATE = "_url_update"  # set by L1: the row's URL was seen before with other content
# A page L1 kept as an update of a page it knew is dropped as a copy only from this Jaccard: new content
# under a known URL stays an update unless near-identical (docs/near-copies.md, "Updates").
UPDATE_JACCARD = 0.9
# In a Chinese text of at least simhash_min_chars, a run of this many 5-gram positions added on one side
# (an inserted or cut sentence) is a passage too, not only runs of candidates.LONG_RUN (20: ~16
# space-free English characters). The same content takes 0.40 of those characters in Chinese (STS-B
# train/dev and its translation; news sentences 0.32): 4 + 0.40 x 16 = 10. docs/near-copies.md.
PASSAGE_RUN_ZH = 10


def strict_rows(batch: pa.Table, cfg) -> np.ndarray:
    """Per row the plain Jaccard the verifier asks instead of its coverage rule (NaN: none): for a
    page L1 kept as an update of a page it knew, ``UPDATE_JACCARD`` (new content under a
    known URL stays an update unless near-identical); for a text under ``simhash_min_chars``, ``SHORT``: the verifier,
    with a facts check that one changed figure fails (in a flash a few changed facts leave most
    5-grams shared, and the facts check reads exactly those)."""
    from dedup_tasks.fingerprint.candidates import SHORT

    out = np.full(batch.num_rows, np.nan)
    length = text_lengths(batch)
    out[length < cfg.simhash_min_chars] = SHORT
    if URL_UPDATE in batch.column_names:
        out[bool_col(batch, URL_UPDATE)] = UPDATE_JACCARD
    return out


def passage_runs(lang: np.ndarray, length: np.ndarray, cfg) -> np.ndarray:
    """Per row the verifier's added-passage run length (5-gram positions) when the row is the newer
    of a pair: ``PASSAGE_RUN_ZH`` for a Chinese text of at least ``simhash_min_chars`` (a
    Chinese sentence takes 0.4 of the characters of an English one; only runs added on one side count,
    ``candidates._scattered``), ``LONG_RUN`` otherwise (short texts too: a flash from a template
    differs only in short runs)."""
    from dedup_tasks.fingerprint.candidates import LONG_RUN

    zh = (np.asarray(lang, object) == "zh") & (np.asarray(length, np.int64) >= cfg.simhash_min_chars)
    return np.where(zh, PASSAGE_RUN_ZH, LONG_RUN).astype(np.int64)


def passage_runs_of(batch: pa.Table, cfg) -> np.ndarray:
    """``passage_runs`` of the rows of a prepared batch."""
    return passage_runs(strings_np(batch, "_lang"), text_lengths(batch), cfg)


def shingle_sets(
    batch: pa.Table, rows: np.ndarray, zh_chars: int, en_words: int, en_chars: bool, cache: NearText | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The 32-bit shingle values (what MinHash reads) of ``rows`` of ``batch`` and their offsets."""
    sub = batch.take(pa.array(np.asarray(rows, np.int64)))
    cp, starts, ends, modes = near_text_spans(
        sub, kernels.CHARS, cache=cache, en_mode=kernels.CHARS if en_chars else kernels.WORDS
    )
    per_doc = kernels.count_shingles(cp, starts, ends, modes, en_words, zh_chars)
    offsets = np.zeros(len(per_doc) + 1, np.int64)
    np.cumsum(per_doc, out=offsets[1:])
    return kernels.shingle_hashes(cp, starts, ends, modes, en_words, zh_chars, offsets), offsets


# The short-text rule (``candidates.ShortTexts``) reads the characters of a short newer text and of
# its candidate, which may be longer: a pair whose Jaccard reaches the verifier's floor (0.5) holds no
# text over twice the other's 5-grams. A longer candidate is judged on its 5-grams.
SHORT_TEXT_FACTOR = 2
# Set by the Spark engine, whose driver holds no near-duplicate text: the view of the rows
# ``short_texts`` reads (null for the others), made by the executors.
SHORT_TEXT = "_short_text"


# Per row the code points of its site lead-in in the near view (``fingerprint.leadin``; 0: none),
# written by prepare (and by the Spark driver from the executors' short texts).
LEADIN = "_leadin"


def leadins_of(batch: pa.Table) -> np.ndarray:
    if LEADIN in batch.column_names:
        return column_np(batch, LEADIN).astype(np.int64)
    return np.zeros(batch.num_rows, np.int64)


def leadin_column(texts: pa.Array | pa.ChunkedArray, sites: np.ndarray, has_host: np.ndarray, length: np.ndarray, cfg) -> pa.Array:
    """``LEADIN`` of rows with these near views, site codes (``normalize.text.site_codes_of``), valid
    hosts and view lengths: lead-ins of the texts under ``simhash_min_chars`` of each host."""
    from dedup_tasks.fingerprint.leadin import site_leadins

    eligible = (np.asarray(length, np.int64) < cfg.simhash_min_chars) & np.asarray(has_host, bool)
    return pa.array(site_leadins(texts, sites, eligible), pa.int32())


def short_text_rows(length: np.ndarray, cfg) -> np.ndarray:
    """Whether rows of these near-view lengths carry their characters for the short-text rule."""
    return np.asarray(length, np.int64) < SHORT_TEXT_FACTOR * cfg.simhash_min_chars


def short_texts(batch: pa.Table, rows: np.ndarray, cfg, cache: NearText | None = None) -> ShortTexts:
    """The near-view code points of ``rows`` of ``batch`` that ``short_text_rows`` keeps (empty for
    the others), in that order."""
    rows = np.asarray(rows, np.int64)
    if not len(rows):
        return ShortTexts(np.zeros(0, np.int32), np.zeros(1, np.int64))
    if SHORT_TEXT in batch.column_names:
        column = batch.column(SHORT_TEXT).take(pa.array(rows))
        cp, got = codepoints(column.fill_null(""))
        return ShortTexts(np.ascontiguousarray(cp, np.int32), np.asarray(got, np.int64))
    keep = short_text_rows(text_lengths(batch)[rows], cfg)
    cp, starts, ends, _ = near_text_spans(batch.take(pa.array(rows[keep])), kernels.CHARS, cache=cache)
    # A longer row gets an empty span.
    row_starts, row_ends = np.zeros(len(rows), np.int64), np.zeros(len(rows), np.int64)
    row_starts[keep], row_ends[keep] = starts, ends
    out, offsets = gather_spans(cp, row_starts, row_ends)
    return ShortTexts(np.ascontiguousarray(out, np.int32), offsets)


def number_sets(
    batch: pa.Table, rows: np.ndarray | None = None, cache: NearText | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The numbers (``fingerprint.numbers``) of ``rows`` of ``batch`` (all rows: None), hashes + offsets.

    Read chunk by chunk (``CHUNK_DOCS``): a batch too large to keep its view as code points decodes
    one chunk of ``_near_text`` at a time instead of the whole batch at once (+780 MiB at the peak of
    a 200,000-document hour)."""
    from dedup_tasks.fingerprint.numbers import number_hashes

    sub = batch if rows is None else batch.take(pa.array(np.asarray(rows, np.int64)))
    values, offsets, at = [], [np.zeros(1, np.int64)], 0
    for start, end in chunks(sub.num_rows):
        cp, starts, ends, _ = near_text_spans(sub.slice(start, end - start), kernels.CHARS, cache=cache)
        got, got_offsets = number_hashes(cp, np.asarray(starts, np.int64), np.asarray(ends, np.int64))
        values.append(got)
        offsets.append(got_offsets[1:] + at)
        at += len(got)
    return (np.concatenate(values) if values else np.zeros(0, np.uint64)), np.concatenate(offsets)


def verified_reason(
    layer_text: str | pa.Array, jaccard: np.ndarray, covers_newer: np.ndarray, covers_earlier: np.ndarray,
    how: np.ndarray | None = None,
) -> pa.Array:
    """The reason of a verified near-duplicate drop (one per row), in one place for both layers:
    "MinHash, J~0.62, covers 0.97 of newer / 0.95 of earlier (verified)". ``how`` (per row, None: on
    the text) replaces " (verified)" where a registry candidate was judged on its signature. Built with
    Arrow's string kernels like ``drop_reasons``; a row without scores is null (the generic wording applies)."""
    tail = " (verified)" if how is None else pa.array(how, pa.string()).fill_null(" (verified)")
    return pc.binary_join_element_wise(
        layer_text, ", J~", fixed_text(jaccard, 2), ", covers ", fixed_text(covers_newer, 2), " of newer / ",
        fixed_text(covers_earlier, 2), " of earlier", tail, "",
    )


class NearDupDecisions:
    """Drops and near misses of one near-duplicate layer, from the registry and from the batch.

    ``rank`` orders candidates best first (a distance; a negated similarity). Registry matches are
    applied before the in-batch search: earlier batches win over the batch's own rows.
    """

    def __init__(self, n: int, batch_id: str, doc_ids: np.ndarray) -> None:
        self.batch_id = batch_id
        self.doc_ids = doc_ids
        self.drop = np.zeros(n, bool)
        self.matched_doc = np.full(n, None, object)
        self.matched_batch = np.full(n, None, object)
        self.score = np.full(n, np.nan)
        self.covers_newer = np.full(n, np.nan)
        self.covers_earlier = np.full(n, np.nan)
        self.how = np.full(n, None, object)  # registry drops: the evidence (verified_reason's ``how``)
        self._near: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_registry(
        self, queries: np.ndarray, hits, score: np.ndarray, ok: np.ndarray, near: np.ndarray, rank: np.ndarray,
        covers: tuple[np.ndarray, np.ndarray] | None = None, how: np.ndarray | None = None,
    ) -> None:
        """Registry candidates of rows ``queries``: drop on the best ``ok`` one, remember ``near`` ones."""
        if not len(hits):
            return
        best, with_hit = first_match_per_query(hits, len(queries), ok, rank)
        rows = queries[with_hit]
        self.drop[rows] = True
        self.matched_doc[rows] = hits.doc_id[best[with_hit]]
        self.matched_batch[rows] = hits.batch_id[best[with_hit]]
        self.score[rows] = score[best[with_hit]]
        if covers is not None:
            self.covers_newer[rows] = covers[0][best[with_hit]]
            self.covers_earlier[rows] = covers[1][best[with_hit]]
        if how is not None:
            self.how[rows] = how[best[with_hit]]
        self._near.append((queries[hits.query[near]], hits.doc_id[near], hits.batch_id[near], score[near]))

    def add_stream(self, result) -> None:
        """The in-batch search's matches and near misses (a ``StreamResult``)."""
        rows = np.flatnonzero(result.matched >= 0)
        self.drop[rows] = True
        self.matched_doc[rows] = self.doc_ids[result.matched[rows]]
        self.matched_batch[rows] = self.batch_id
        self.score[rows] = result.score[rows]
        if result.covers_newer is not None:
            self.covers_newer[rows] = result.covers_newer[rows]
            self.covers_earlier[rows] = result.covers_earlier[rows]
        near = np.flatnonzero(result.suspect >= 0)
        self._near.append(
            (near, self.doc_ids[result.suspect[near]], np.full(len(near), self.batch_id, object), result.suspect_score[near])
        )

    def finish(
        self, batch: pa.Table, layer: str, higher_is_closer: bool, detail: pa.Array | None = None
    ) -> tuple[pa.Table, Drops]:
        """Record each kept row's best near miss and return the layer's drops."""
        rows = np.concatenate([p[0] for p in self._near]) if self._near else np.empty(0, np.int64)
        docs = np.concatenate([p[1] for p in self._near]) if self._near else np.empty(0, object)
        batches = np.concatenate([p[2] for p in self._near]) if self._near else np.empty(0, object)
        scores = np.concatenate([p[3] for p in self._near]).astype(float) if self._near else np.empty(0)
        kept = ~self.drop[rows]
        uniq, pick = best_per_row(len(self.drop), rows[kept], -scores[kept] if higher_is_closer else scores[kept])
        batch = record_suspects(batch, layer, uniq, docs[kept][pick], batches[kept][pick], scores[kept][pick])
        dropped = np.flatnonzero(self.drop)
        return batch, Drops(
            dropped, self.matched_doc[dropped], self.matched_batch[dropped], self.score[dropped], detail
        )
