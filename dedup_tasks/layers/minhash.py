"""L3: MinHash (datasketch-compatible) + LSH band buckets, verified by estimated Jaccard >= 0.8."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.candidates import StreamResult, stream_minhash
from dedup_tasks.fingerprint.minhash import MinHasher, estimated_jaccard
from dedup_tasks.layers.base import (
    Drops,
    Layer,
    LayerContext,
    NearText,
    add_reason,
    set_column,
    strings_np,
)
from dedup_tasks.layers.near import NearDupDecisions, chunks, near_text_spans

NO_SHINGLES_REASON = "no text to shingle: MinHash not applied"


def minhash_rows(
    batch: pa.Table, hasher: MinHasher, zh_chars: int, en_words: int, cache: NearText | None = None
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Signatures (n, num_perm) uint32, shingle count per row, and the rows' 32-bit shingle hashes
    (what the signature is taken over, and what the exact check of in-batch candidates reads) + offsets.
    """
    sig = np.empty((batch.num_rows, hasher.num_perm), np.uint32)
    counts = np.zeros(batch.num_rows, np.int64)
    set_parts, set_counts = [], []
    for start, end in chunks(batch.num_rows):
        cp, starts, ends, modes = near_text_spans(batch.slice(start, end - start), kernels.CHARS, cache=cache)
        per_doc = kernels.count_shingles(cp, starts, ends, modes, en_words, zh_chars)
        out_offsets = np.zeros(len(per_doc) + 1, np.int64)
        np.cumsum(per_doc, out=out_offsets[1:])
        hashes = kernels.shingle_hashes(cp, starts, ends, modes, en_words, zh_chars, out_offsets)
        sig[start:end] = hasher.signatures(hashes, out_offsets)
        counts[start:end] = per_doc
        set_parts.append(hashes)
        set_counts.append(per_doc)
    sizes = np.concatenate(set_counts) if set_counts else np.zeros(0, np.int64)
    set_offsets = np.zeros(batch.num_rows + 1, np.int64)
    np.cumsum(sizes, out=set_offsets[1:])
    # One chunk (up to CHUNK_DOCS rows) is used as it is: concatenate would copy it.
    all_sets = set_parts[0] if len(set_parts) == 1 else np.concatenate([np.empty(0, np.uint32), *set_parts])
    return sig, counts, (all_sets, set_offsets)


def signature_column(sig: np.ndarray) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(sig.ravel(), pa.uint32()), sig.shape[1])


def signatures_of(batch: pa.Table) -> np.ndarray:
    column = batch.column("_minhash").combine_chunks()
    width = column.type.list_size
    return column.values.to_numpy().reshape(-1, width)


class MinHashLayer(Layer):
    name = "minhash"

    @property
    def threshold(self) -> float | None:
        return float(self.config.minhash_threshold)

    # Two hooks, so another engine (engines/spark.py) can supply signatures its workers computed and
    # an in-batch search over its band-join pairs while the decisions stay this layer's.
    def fingerprints(
        self, batch: pa.Table, ctx: LayerContext, hasher: MinHasher
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
        """Signatures, shingle counts and (for the in-batch exact check) the shingle sets of the rows."""
        cfg = self.config
        return minhash_rows(batch, hasher, cfg.zh_shingle_chars, cfg.en_shingle_words, ctx.near_text)

    def stream(
        self, batch: pa.Table, keys: np.ndarray, sig: np.ndarray, active: np.ndarray, sets: tuple[np.ndarray, np.ndarray] | None
    ) -> StreamResult:
        """The in-batch search in batch order over the ``active`` rows."""
        return stream_minhash(keys, sig, active, self.config.minhash_threshold, self.config.suspect_jaccard_min, sets)

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        cfg = self.config
        n = batch.num_rows
        hasher = MinHasher(cfg.minhash_num_perm, cfg.minhash_seed, cfg.minhash_bands, cfg.minhash_rows)
        sig, counts, sets = self.fingerprints(batch, ctx, hasher)
        has = counts > 0
        keys = hasher.band_keys(sig)
        batch = set_column(batch, "_minhash", signature_column(sig))
        batch = set_column(batch, "_has_minhash", pa.array(has))
        doc_ids = strings_np(batch, "doc_id")

        decisions = NearDupDecisions(n, ctx.batch_id, doc_ids)
        queries = np.flatnonzero(has)
        hits = ctx.registry.minhash_candidates(ctx.batch_id, keys[queries])
        if len(hits):
            jac = estimated_jaccard(hits.payload["minhash"], sig[queries[hits.query]])
            ok = jac >= cfg.minhash_threshold
            decisions.add_registry(queries, hits, jac, ok, ~ok & (jac >= cfg.suspect_jaccard_min), -jac)
        decisions.add_stream(self.stream(batch, keys, sig, has & ~decisions.drop, sets))
        batch, drops = decisions.finish(batch, self.name, higher_is_closer=True)
        empty = np.asarray(batch.column("_empty").to_numpy(), bool)
        return add_reason(batch, ~has & ~empty, NO_SHINGLES_REASON), drops
