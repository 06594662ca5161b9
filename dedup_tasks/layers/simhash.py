"""L2: 64-bit weighted SimHash, Hamming distance <= 3, found through four 16-bit band buckets."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.candidates import stream_simhash
from dedup_tasks.fingerprint.simhash import hamming
from dedup_tasks.layers.base import (
    Drops,
    Layer,
    LayerContext,
    add_reason,
    first_match_per_query,
    set_column,
    strings_np,
)
from dedup_tasks.layers.near import best_per_row, chunks, near_text_codepoints, record_suspects, text_lengths

SHORT_REASON = "short text: not dropped on SimHash alone"


def simhash_rows(batch: pa.Table, zh_features: str, word_ngram: int = 2) -> np.ndarray:
    jieba = zh_features == "jieba"
    out = np.zeros(batch.num_rows, np.uint64)
    for start, end in chunks(batch.num_rows):
        cp, offsets, modes = near_text_codepoints(batch.slice(start, end - start), kernels.WORDS if jieba else kernels.CHARS, jieba)
        out[start:end] = kernels.weighted_simhash(cp, offsets, modes, 2, word_ngram)
    return out


class SimHashLayer(Layer):
    name = "simhash"

    @property
    def threshold(self) -> float | None:
        return float(self.config.simhash_max_distance)

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        cfg = self.config
        n = batch.num_rows
        sims = simhash_rows(batch, cfg.simhash_zh_features, cfg.simhash_word_ngram)
        length = text_lengths(batch)
        reliable = length >= cfg.simhash_min_chars
        has = length > 0
        batch = set_column(batch, "_simhash", pa.array(sims, pa.uint64()))
        # Only reliable SimHashes are registered: the commit re-check must not drop a short text
        # that this layer itself never drops.
        batch = set_column(batch, "_has_simhash", pa.array(reliable))
        doc_ids = strings_np(batch, "doc_id")

        drop = np.zeros(n, bool)
        matched_doc = np.full(n, None, object)
        matched_batch = np.full(n, None, object)
        score = np.full(n, np.nan)
        sus_rows, sus_doc, sus_batch, sus_score = [], [], [], []

        queries = np.flatnonzero(reliable)
        hits = ctx.registry.simhash_candidates(ctx.batch_id, sims[queries])
        if len(hits):
            dist = hamming(hits.payload["simhash"], sims[queries[hits.query]])
            ok = dist <= cfg.simhash_max_distance
            best, with_hit = first_match_per_query(hits, len(queries), ok, dist)
            rows = queries[with_hit]
            drop[rows] = True
            matched_doc[rows] = hits.doc_id[best[with_hit]]
            matched_batch[rows] = hits.batch_id[best[with_hit]]
            score[rows] = dist[best[with_hit]]
            near = ~ok & (dist <= cfg.suspect_hamming_max)
            sus_rows.append(queries[hits.query[near]])
            sus_doc.append(hits.doc_id[near])
            sus_batch.append(hits.batch_id[near])
            sus_score.append(dist[near])

        local = stream_simhash(sims, reliable & ~drop, cfg.simhash_max_distance, cfg.suspect_hamming_max)
        rows = np.flatnonzero(local.matched >= 0)
        drop[rows] = True
        matched_doc[rows] = doc_ids[local.matched[rows]]
        matched_batch[rows] = ctx.batch_id
        score[rows] = local.score[rows]
        near = np.flatnonzero(local.suspect >= 0)
        sus_rows.append(near)
        sus_doc.append(doc_ids[local.suspect[near]])
        sus_batch.append(np.full(len(near), ctx.batch_id, object))
        sus_score.append(local.suspect_score[near])

        all_rows = np.concatenate(sus_rows) if sus_rows else np.empty(0, np.int64)
        all_score = np.concatenate(sus_score).astype(float) if sus_score else np.empty(0)
        keep_rows = ~drop[all_rows] if len(all_rows) else np.empty(0, bool)
        uniq, pick = best_per_row(n, all_rows[keep_rows], all_score[keep_rows])
        batch = record_suspects(
            batch,
            self.name,
            uniq,
            np.concatenate(sus_doc)[keep_rows][pick] if len(uniq) else np.empty(0, object),
            np.concatenate(sus_batch)[keep_rows][pick] if len(uniq) else np.empty(0, object),
            all_score[keep_rows][pick],
        )
        batch = add_reason(batch, has & ~reliable, SHORT_REASON)
        rows = np.flatnonzero(drop)
        return batch, Drops(rows, matched_doc[rows], matched_batch[rows], score[rows])
