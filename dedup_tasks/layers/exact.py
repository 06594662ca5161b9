"""Exact layer: identical normalized title + content (128-bit xxh3) as an earlier document."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint.content_hash import hash128_key
from dedup_tasks.layers.base import (
    EXACT_THRESHOLD,
    Drops,
    Layer,
    LayerContext,
    add_reason,
    column_np,
    first_match_per_query,
    strings_np,
)
from dedup_tasks.layers.content import content_hash_columns, ensure_content_hash

EMPTY_REASON = "empty content: no content fingerprint, kept"


class ExactLayer(Layer):
    name = "exact"

    @property
    def threshold(self) -> float | None:
        return EXACT_THRESHOLD  # score 1.0: the key is identical (docs/decisions.md)

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        batch = ensure_content_hash(batch)
        n = batch.num_rows
        content = content_hash_columns(batch)
        empty = column_np(batch, "_empty").astype(bool)
        doc_ids = strings_np(batch, "doc_id")
        key = hash128_key(content)

        matched_doc = np.full(n, None, object)
        matched_batch = np.full(n, None, object)
        drop = np.zeros(n, bool)

        # In batch first: every later row with the same hash names the first row of that hash.
        candidates = np.flatnonzero(~empty)
        _, first_idx, inverse = np.unique(key[candidates], return_index=True, return_inverse=True)
        first_rows = candidates[first_idx]
        first_of = first_rows[inverse.ravel()]
        repeat = first_of != candidates
        drop[candidates[repeat]] = True
        matched_doc[candidates[repeat]] = doc_ids[first_of[repeat]]
        matched_batch[candidates[repeat]] = ctx.batch_id

        # Earlier batches win over the batch's own first occurrences (and so over their repeats too).
        hits = ctx.registry.lookup_content(ctx.batch_id, content[first_rows])
        if len(hits):
            best, has = first_match_per_query(hits, len(first_rows), np.ones(len(hits), bool), np.zeros(len(hits)))
            group_hit = np.full(len(first_rows), -1)
            group_hit[has] = best[has]
            row_hit = group_hit[inverse.ravel()]
            hit_rows = candidates[row_hit >= 0]
            drop[hit_rows] = True
            matched_doc[hit_rows] = hits.doc_id[row_hit[row_hit >= 0]]
            matched_batch[hit_rows] = hits.batch_id[row_hit[row_hit >= 0]]

        batch = add_reason(batch, empty, EMPTY_REASON)
        rows = np.flatnonzero(drop)
        return batch, Drops(rows, matched_doc[rows], matched_batch[rows], np.ones(len(rows)))
