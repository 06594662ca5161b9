"""A cheap story fingerprint for L4 candidates: TF-IDF of words in a count sketch.

A rewrite of a story keeps its names, numbers and rare content words but not its word order or
most of its wording, so its shingle Jaccard is far below L3's (and no L2/L3 near miss names it).
The weighted bag of its unigrams (English words; Chinese jieba words, or character bigrams) of the
near-duplicate view (``_near_text``: folded, site boilerplate removed) still overlaps: the sketch is that bag,
weighted ``(1 + log tf) * idf`` with the document frequency of the batch (so function words and a
site's recurring phrases weigh little), hashed into ``dim`` signed buckets (a count sketch:
the inner product of two sketches estimates the inner product of the weighted bags, error about
1/sqrt(dim)) and L2-normalized; ``dim`` is ``SKETCH_DIM`` (1,024). The cosine of two sketches is a TF-IDF cosine, good enough to find the few documents worth
showing the transformer; it never drops a document on its own.

Chinese words rank a rewrite's source first far more often than character bigrams (dev crawl: 70%
against 50%, at a median cosine of 0.51 against 0.31): a bigram across
a word boundary is noise that every page shares. Words cost a jieba pass over the Chinese rows (rjieba,
about 4,000 documents/s on one core).

The sketch's error is noise that every pair shares, and the candidate margin compares a pair with its
row's neighbourhood, so the noise hides weak rewrites: Chinese rewrites of the dev crawl sit at a
third of the English cosine. At 1,024 buckets 19 of the 45 zh dev rewrites that had no candidate at
256 get one (docs/semantic.md, "Candidates"), for 4x the stored bytes.

Cost: one pass of the MinHash shingle kernel (unigrams) plus a sort of the (document, feature)
pairs; no model. ``bench/results/semantic-*.json`` reports it per document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from dedup_tasks.config import SKETCH_ZH_FEATURES, is_sketch_dim
from dedup_tasks.fingerprint import kernels

if TYPE_CHECKING:
    from dedup_tasks.layers.base import NearText

SKETCH_DIM = 1024


def sketch_model_id(zh_features: str = "jieba", dim: int = SKETCH_DIM) -> str:
    """The store's name for sketches of these features and this dimension: sketches of another feature
    space or size are never compared with them (a registry filled under ``char2`` keeps its id from
    before words existed)."""
    if zh_features not in SKETCH_ZH_FEATURES:
        raise ValueError(f"zh_features must be one of {SKETCH_ZH_FEATURES}, got {zh_features!r}")
    if not is_sketch_dim(dim):
        raise ValueError(f"a sketch dimension must be a power of two from 64 to 4096, got {dim!r}")
    return f"sketch:tfidf-uni-bi-{dim}" if zh_features == "char2" else f"sketch:tfidf-words-{dim}"


_MIX = np.uint64(0x9E3779B97F4A7C15)


def _features(batch: pa.Table, cache: NearText | None = None, zh_features: str = "jieba") -> tuple[np.ndarray, np.ndarray]:
    """(doc index, uint32 feature hash) of every English word and Chinese word (or character bigram)."""
    # Imported here: the layers package imports this module (dedup_tasks.layers.semantic).
    from dedup_tasks.layers.near import chunks, near_text_spans

    words = zh_features == "jieba"
    docs, feats = [], []
    for start, end in chunks(batch.num_rows):
        cp, starts, ends, modes = near_text_spans(
            batch.slice(start, end - start), kernels.WORDS if words else kernels.CHARS, segment_zh=words, cache=cache
        )
        per_doc = kernels.count_shingles(cp, starts, ends, modes, 1, 2)
        offsets = np.zeros(len(per_doc) + 1, np.int64)
        np.cumsum(per_doc, out=offsets[1:])
        feats.append(kernels.shingle_hashes(cp, starts, ends, modes, 1, 2, offsets))
        docs.append(np.repeat(np.arange(start, end, dtype=np.int64), per_doc))
    if not feats:
        return np.empty(0, np.int64), np.empty(0, np.uint32)
    return np.concatenate(docs), np.concatenate(feats)


def story_sketches(
    batch: pa.Table, cache: NearText | None = None, zh_features: str = "jieba", dim: int = SKETCH_DIM
) -> np.ndarray:
    """float32 (n, dim), rows L2-normalized (all zero for a row without text)."""
    sketch_model_id(zh_features, dim)  # names a bad choice before any work
    n = batch.num_rows
    out = np.zeros((n, dim), np.float32)
    doc, feat = _features(batch, cache, zh_features)
    if len(doc) == 0:
        return out
    # Distinct (document, feature) pairs with their term frequency: one sort, no Python loop.
    key = (doc.astype(np.uint64) << np.uint64(32)) | feat.astype(np.uint64)
    uniq, tf = np.unique(key, return_counts=True)
    u_doc = (uniq >> np.uint64(32)).astype(np.int64)
    u_feat = (uniq & np.uint64(0xFFFFFFFF)).astype(np.uint64)
    f_uniq, f_inv, df = np.unique(u_feat, return_inverse=True, return_counts=True)
    idf = np.log((n + 1.0) / (df + 1.0)) + 1.0
    weight = (1.0 + np.log(tf)) * idf[f_inv]
    mixed = u_feat * _MIX  # wraps mod 2^64: a multiplicative hash spreading the feature over buckets
    bucket = (mixed >> np.uint64(64 - (int(dim).bit_length() - 1))).astype(np.int64)  # the top log2(dim) bits
    sign = np.where((mixed >> np.uint64(31)) & np.uint64(1), 1.0, -1.0)
    flat = np.bincount(u_doc * dim + bucket, weights=sign * weight, minlength=n * dim)
    out[:] = flat.reshape(n, dim)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out
