"""L2: 64-bit weighted SimHash, Hamming distance <= 3, found through four 16-bit band buckets.

A SimHash hit alone never drops a page (pages of one list article collide): an in-batch hit is
verified on both documents' shingle sets by L3's verifier, and a registry hit (only with
``simhash_registry_lookup``), whose shingles are not at hand, is recorded as a near miss for L4 and
the audit; L3's own registry lookup decides registered near copies.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.contract import NEAR_MISS_HAMMING_MAX
from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.candidates import stream_simhash, verify_pairs
from dedup_tasks.fingerprint.minhash import EN_CHAR_SHINGLES, EN_SHINGLE_WORDS, SHINGLE_CHARS
from dedup_tasks.fingerprint.simhash import hamming
from dedup_tasks.layers.base import (
    Drops,
    Layer,
    LayerContext,
    NearText,
    add_reason,
    fixed_text,
    set_column,
    strings_np,
)
from dedup_tasks.layers.minhash import verifier_of
from dedup_tasks.layers.near import (
    NearDupDecisions,
    chunks,
    leadins_of,
    near_text_spans,
    number_sets,
    passage_runs_of,
    shingle_sets,
    short_texts,
    strict_rows,
    text_lengths,
    verified_reason,
)

# SimHash features: word bigrams (single words let function words dominate the vote), Chinese words as
# character bigrams (no segmenter on the hot path; "jieba" segments words instead).
SIMHASH_ZH_FEATURES = "char2"
SIMHASH_WORD_NGRAM = 2
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
    def _verify(self, batch: pa.Table, result, ctx: LayerContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keep the in-batch matches L3's verifier accepts on the exact shingle sets; the others become
        near misses. Returns per row the (Jaccard, covers newer, covers earlier) of its match."""
        cfg = self.config
        n = batch.num_rows
        out = (np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan))
        rows = np.flatnonzero(result.matched >= 0)
        if not len(rows):
            return out
        ok, jac, newer, earlier = self.verify_matches(batch, rows, result.matched[rows], strict_rows(batch, cfg)[rows], ctx)
        failed = rows[~ok]
        # A rejected hit is the row's best near miss: L3 and L4 may still judge the pair.
        result.suspect[failed] = result.matched[failed]
        result.suspect_score[failed] = result.score[failed]
        result.matched[failed] = -1
        result.score[failed] = np.nan
        for values, got in zip(out, (jac, newer, earlier), strict=True):
            values[rows] = got
        return out

    # A hook, so another engine (engines/spark.py) can verify the pairs where the shingle sets are
    # (its executors, with this same verify_pairs); which hit is verified stays this layer's.
    def verify_matches(
        self, batch: pa.Table, newer: np.ndarray, earlier: np.ndarray, strict: np.ndarray, ctx: LayerContext
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """L3's verifier on the pairs (newer[i], earlier[i]) of rows: (accepted, Jaccard, covers newer, covers earlier)."""
        cfg = self.config
        involved, inverse = np.unique(np.concatenate([newer, earlier]), return_inverse=True)
        hashes, offsets = shingle_sets(
            batch, involved, SHINGLE_CHARS, EN_SHINGLE_WORDS, EN_CHAR_SHINGLES, ctx.near_text
        )
        return verify_pairs(
            hashes, offsets, inverse[: len(newer)], inverse[len(newer) :], verifier_of(cfg), strict,
            number_sets(batch, involved, ctx.near_text), passage_runs_of(batch, cfg)[newer],
            short_texts(batch, involved, cfg, ctx.near_text), leadins_of(batch)[newer],
        )  # fmt: skip

    name = "simhash"

    @property
    def threshold(self) -> float | None:
        return float(self.config.simhash_max_distance)

    # A hook, so another engine (engines/spark.py) can supply the SimHashes its workers computed with
    # the same kernel; the search and the verification stay this layer's.
    def fingerprints(self, batch: pa.Table, ctx: LayerContext) -> np.ndarray:
        """The rows' 64-bit SimHashes."""
        return simhash_rows(batch, SIMHASH_ZH_FEATURES, SIMHASH_WORD_NGRAM, ctx.near_text)

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
        if cfg.simhash_registry_lookup:
            queries = np.flatnonzero(reliable)
            hits = ctx.registry.simhash_candidates(ctx.batch_id, sims[queries])
            if len(hits):
                dist = hamming(hits.payload["simhash"], sims[queries[hits.query]])
                never = np.zeros(len(hits), bool)  # unverifiable here: L3 decides (see the module docstring)
                decisions.add_registry(queries, hits, dist, never, dist <= NEAR_MISS_HAMMING_MAX, dist)
        result = stream_simhash(sims, reliable & ~decisions.drop, cfg.simhash_max_distance, NEAR_MISS_HAMMING_MAX)
        covers = self._verify(batch, result, ctx)
        decisions.add_stream(result)
        dropped = np.flatnonzero(decisions.drop)
        decisions.covers_newer[dropped], decisions.covers_earlier[dropped] = covers[1][dropped], covers[2][dropped]
        detail = verified_reason(
            pc.binary_join_element_wise(
                "SimHash distance ", fixed_text(decisions.score[dropped], 0), f" <= {cfg.simhash_max_distance}", ""
            ),
            covers[0][dropped], covers[1][dropped], covers[2][dropped],
        )
        batch, drops = decisions.finish(batch, self.name, higher_is_closer=False, detail=detail)
        return add_reason(batch, has & ~reliable, SHORT_REASON), drops
