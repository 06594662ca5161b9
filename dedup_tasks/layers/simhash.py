"""L2: 64-bit weighted SimHash, Hamming distance <= 3, found through four 16-bit band buckets."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.candidates import StreamResult, stream_simhash
from dedup_tasks.fingerprint.simhash import hamming
from dedup_tasks.layers.base import (
    Drops,
    Layer,
    LayerContext,
    NearText,
    add_reason,
    set_column,
    strings_np,
)
from dedup_tasks.layers.near import NearDupDecisions, chunks, near_text_spans, text_lengths

SHORT_REASON = "short text: not dropped on SimHash alone"


def simhash_rows(batch: pa.Table, zh_features: str, word_ngram: int = 2, cache: NearText | None = None) -> np.ndarray:
    jieba = zh_features == "jieba"
    out = np.zeros(batch.num_rows, np.uint64)
    for start, end in chunks(batch.num_rows):
        rows = batch.slice(start, end - start)
        cp, starts, ends, modes = near_text_spans(rows, kernels.WORDS if jieba else kernels.CHARS, jieba, cache)
        out[start:end] = kernels.weighted_simhash(cp, starts, ends, modes, 2, word_ngram)
    return out


class SimHashLayer(Layer):
    name = "simhash"

    @property
    def threshold(self) -> float | None:
        return float(self.config.simhash_max_distance)

    # Two hooks, so another engine (engines/spark.py) can supply fingerprints its workers computed and
    # an in-batch search over its band-join pairs while the decisions stay this layer's.
    def fingerprints(self, batch: pa.Table, ctx: LayerContext) -> np.ndarray:
        """The rows' 64-bit SimHashes."""
        return simhash_rows(batch, self.config.simhash_zh_features, self.config.simhash_word_ngram, ctx.near_text)

    def stream(self, batch: pa.Table, sims: np.ndarray, active: np.ndarray) -> StreamResult:
        """The in-batch search in batch order over the ``active`` rows."""
        return stream_simhash(sims, active, self.config.simhash_max_distance, self.config.suspect_hamming_max)

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        cfg = self.config
        n = batch.num_rows
        sims = self.fingerprints(batch, ctx)
        length = text_lengths(batch)
        reliable = length >= cfg.simhash_min_chars
        has = length > 0
        batch = set_column(batch, "_simhash", pa.array(sims, pa.uint64()))
        # Only reliable SimHashes are registered: the commit re-check must not drop a short text
        # that this layer itself never drops.
        batch = set_column(batch, "_has_simhash", pa.array(reliable))
        doc_ids = strings_np(batch, "doc_id")

        decisions = NearDupDecisions(n, ctx.batch_id, doc_ids)
        queries = np.flatnonzero(reliable)
        hits = ctx.registry.simhash_candidates(ctx.batch_id, sims[queries])
        if len(hits):
            dist = hamming(hits.payload["simhash"], sims[queries[hits.query]])
            ok = dist <= cfg.simhash_max_distance
            decisions.add_registry(queries, hits, dist, ok, ~ok & (dist <= cfg.suspect_hamming_max), dist)
        decisions.add_stream(self.stream(batch, sims, reliable & ~decisions.drop))
        batch, drops = decisions.finish(batch, self.name, higher_is_closer=False)
        return add_reason(batch, has & ~reliable, SHORT_REASON), drops
