"""L1: a canonical URL seen before with the same content is a repeat; with changed content, an update."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.layers.base import (
    EXACT_THRESHOLD,
    Drops,
    Layer,
    LayerContext,
    add_reason,
    column_np,
    first_match_per_query,
    set_column,
    strings_np,
)
from dedup_tasks.layers.content import content_hash_columns, ensure_content_hash


class UrlLayer(Layer):
    name = "url"

    @property
    def threshold(self) -> float | None:
        return EXACT_THRESHOLD  # score 1.0: the key is identical (docs/decisions.md)

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        batch = ensure_content_hash(batch)
        n = batch.num_rows
        keys = column_np(batch, "_url_key").astype(np.uint64)
        valid = column_np(batch, "_url_valid").astype(bool)
        content = content_hash_columns(batch)
        doc_ids = strings_np(batch, "doc_id")

        matched_doc = np.full(n, None, object)
        matched_batch = np.full(n, None, object)
        drop = np.zeros(n, bool)
        update_of = np.full(n, None, object)

        queries = np.flatnonzero(valid)
        hits = ctx.registry.lookup_urls(ctx.batch_id, keys[queries])
        if len(hits):
            rows = queries[hits.query]
            same = (hits.payload["content_hash"] == content[rows]).all(axis=1)
            best, with_same = first_match_per_query(hits, len(queries), same, np.zeros(len(hits)))
            drop_rows = queries[with_same]
            drop[drop_rows] = True
            matched_doc[drop_rows] = hits.doc_id[best[with_same]]
            matched_batch[drop_rows] = hits.batch_id[best[with_same]]
            seen = np.zeros(n, bool)
            seen[rows] = True
            update_of[seen & ~drop] = "url seen in an earlier batch with other content: kept as an update"

        # In batch: the first row of each (url, content) pair wins; a later row of the same pair repeats it.
        candidates = np.flatnonzero(valid & ~drop)
        if len(candidates):
            order = np.lexsort((candidates, content[candidates, 1], content[candidates, 0], keys[candidates]))
            rows = candidates[order]
            k = keys[rows]
            c = content[rows]
            same_pair = np.concatenate([[False], (k[1:] == k[:-1]) & (c[1:] == c[:-1]).all(axis=1)])
            first_of_pair = np.maximum.accumulate(np.where(~same_pair, np.arange(len(rows)), 0))
            url_start = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
            group_of = np.repeat(np.arange(len(url_start)), np.diff(np.append(url_start, len(rows))))
            earliest_of_url = np.minimum.reduceat(rows, url_start)[group_of]
            repeats = rows[same_pair]
            drop[repeats] = True
            matched_doc[repeats] = doc_ids[rows[first_of_pair[same_pair]]]
            matched_batch[repeats] = ctx.batch_id
            # Any other content under a URL than its earliest row's is an update of that page.
            later_versions = rows[~same_pair & (rows != earliest_of_url)]
            update_of[later_versions] = "url seen earlier in the batch with other content: kept as an update"

        batch = add_reason(batch, ~valid, np.where(~valid, column_np(batch, "_url_reason"), None).astype(object))
        # dtype bool: an empty list would make a float array, which & cannot combine.
        is_update = np.array([u is not None for u in update_of], dtype=bool) & ~drop
        batch = add_reason(batch, is_update, update_of)
        # The near-duplicate layers hold an update to a stricter rule (layers.near.strict_rows).
        batch = set_column(batch, "_url_update", pa.array(is_update))
        rows = np.flatnonzero(drop)
        return batch, Drops(rows, matched_doc[rows], matched_batch[rows], np.ones(len(rows)))
