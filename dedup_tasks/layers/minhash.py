"""L3: MinHash (datasketch-compatible) + LSH band buckets down to Jaccard 0.5, every candidate verified.

In the batch the verifier (``candidates.Verifier``) reads the exact shingle sets of both documents.
For a registered document it reads its signature: every value recovers one of its shingles (a
uniform draw), looked up in the newer document's full set, gives the share of the earlier covered by
the newer, and with the estimated Jaccard the reverse share; the registry stores nothing more.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.candidates import Verifier, stream_minhash
from dedup_tasks.fingerprint.minhash import (
    MinHasher,
    coverage_from_jaccard,
    earlier_covered,
    estimated_jaccard,
)
from dedup_tasks.layers.base import (
    Drops,
    Layer,
    LayerContext,
    NearText,
    add_reason,
    set_column,
    strings_np,
)
from dedup_tasks.layers.near import (
    NearDupDecisions,
    chunks,
    near_text_spans,
    strict_rows,
    text_lengths,
    verified_reason,
)

NO_SHINGLES_REASON = "no text to shingle: MinHash not applied"
# Candidates estimated below this Jaccard are not verified: at 128 permutations an estimate of 0.4
# hides a true 0.5 with probability ~0.02.
VERIFY_FLOOR = 0.4


def registry_verifier_of(cfg) -> Verifier:
    """The rule for a registered document, read through its signature (see DedupConfig)."""
    m = cfg.minhash_registry_margin
    return Verifier(
        cfg.minhash_registry_threshold, cfg.minhash_verify_min_jaccard + m, cfg.minhash_registry_min_coverage,
        cfg.minhash_additions_min_jaccard + m,
    )  # fmt: skip


def verifier_of(cfg) -> Verifier:
    return Verifier(
        cfg.minhash_threshold, cfg.minhash_verify_min_jaccard, cfg.minhash_min_coverage,
        cfg.minhash_additions_min_jaccard, cfg.minhash_passage_min_coverage, cfg.minhash_max_scattered,
    )  # fmt: skip


def minhash_rows(
    batch: pa.Table, hasher: MinHasher, zh_chars: int, en_words: int, cache: NearText | None = None, en_chars: bool = False
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Signatures (n, num_perm) uint32, shingle count per row, and the rows' 32-bit shingle hashes
    (what the signature is taken over, and what the exact check of in-batch candidates reads) + offsets.
    """
    n = batch.num_rows
    sig = np.empty((n, hasher.num_perm), np.uint32)
    counts = np.zeros(n, np.int64)
    # Every chunk's shingles go straight into one array, sized by the text's code points (a shingle
    # starts at a character): its untouched tail never becomes resident. Concatenating per-chunk
    # parts held the sets twice at the layer's peak (+340 MB at 200,000 documents).
    all_sets = np.empty(int(text_lengths(batch).sum()) + 1, np.uint32)
    set_offsets = np.zeros(n + 1, np.int64)
    at = 0
    for start, end in chunks(n):
        cp, starts, ends, modes = near_text_spans(
            batch.slice(start, end - start), kernels.CHARS, cache=cache, en_mode=kernels.CHARS if en_chars else kernels.WORDS
        )
        per_doc = kernels.count_shingles(cp, starts, ends, modes, en_words, zh_chars)
        out_offsets = np.zeros(len(per_doc) + 1, np.int64)
        np.cumsum(per_doc, out=out_offsets[1:])
        total = int(out_offsets[-1])
        if at + total > len(all_sets):  # cannot happen (see above); kept correct regardless
            all_sets = np.concatenate([all_sets[:at], np.empty(total, np.uint32)])
        hashes = kernels.shingle_hashes(cp, starts, ends, modes, en_words, zh_chars, out_offsets, all_sets[at : at + total])
        sig[start:end] = hasher.signatures(hashes, out_offsets)
        counts[start:end] = per_doc
        set_offsets[start + 1 : end + 1] = at + out_offsets[1:]
        at += total
    return sig, counts, (all_sets[:at], set_offsets)


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

    # A hook, so another engine (engines/spark.py) can supply the signatures and shingle sets its
    # workers computed with these same kernels; the search and the verifier stay this layer's.
    def fingerprints(
        self, batch: pa.Table, ctx: LayerContext, hasher: MinHasher
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Signatures, shingle counts and the shingle sets (hashes, offsets) of the rows."""
        cfg = self.config
        return minhash_rows(
            batch, hasher, cfg.zh_shingle_chars, cfg.en_shingle_words, ctx.near_text, cfg.en_shingles == "chars"
        )

    # Hooks for another engine (engines/spark.py), whose shingle sets stay on its executors: the
    # registry coverage of the rows with registry hits, and the in-batch search, fed by pairs that the
    # executors verified with this layer's verifier and resolved by this layer's rule.
    def registry_covered(
        self, sig_earlier: np.ndarray, rows: np.ndarray, sets: tuple[np.ndarray, np.ndarray], hasher: MinHasher, batch: pa.Table
    ) -> np.ndarray:
        """``earlier_covered`` of registered signatures by the batch's ``rows``."""
        return earlier_covered(sig_earlier, rows, *sets, hasher)

    def in_batch(
        self, keys: np.ndarray, sig: np.ndarray, active: np.ndarray, sets: tuple[np.ndarray, np.ndarray],
        verifier: Verifier, strict: np.ndarray, batch: pa.Table,
    ):  # fmt: skip
        """The in-batch search in batch order (a ``StreamResult``): the earlier kept document wins."""
        cfg = self.config
        return stream_minhash(
            keys, sig, active, cfg.minhash_threshold, cfg.suspect_jaccard_min, sets,
            exact_floor=VERIFY_FLOOR, verifier=verifier, strict=strict,
        )  # fmt: skip

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        cfg = self.config
        n = batch.num_rows
        hasher = MinHasher(cfg.minhash_num_perm, cfg.minhash_seed, cfg.minhash_bands, cfg.minhash_rows)
        sig, counts, sets = self.fingerprints(batch, ctx, hasher)
        verifier = verifier_of(cfg)
        strict = strict_rows(batch, cfg)
        has = counts > 0
        keys = hasher.band_keys(sig)
        batch = set_column(batch, "_minhash", signature_column(sig))
        batch = set_column(batch, "_has_minhash", pa.array(has))
        doc_ids = strings_np(batch, "doc_id")

        decisions = NearDupDecisions(n, ctx.batch_id, doc_ids)
        queries = np.flatnonzero(has)
        hits = ctx.registry.minhash_candidates(ctx.batch_id, keys[queries])
        if len(hits):
            rows = queries[hits.query]
            jac = estimated_jaccard(hits.payload["minhash"], sig[rows])
            old_in_new = self.registry_covered(hits.payload["minhash"], rows, sets, hasher, batch)
            covers = (coverage_from_jaccard(jac, old_in_new), old_in_new)
            ok = registry_verifier_of(cfg).accepts(jac, *covers, strict[rows]) & (jac >= VERIFY_FLOOR)
            decisions.add_registry(queries, hits, jac, ok, ~ok & (jac >= cfg.suspect_jaccard_min), -jac, covers)
        decisions.add_stream(self.in_batch(keys, sig, has & ~decisions.drop, sets, verifier, strict, batch))
        dropped = np.flatnonzero(decisions.drop)
        detail = verified_reason(
            "MinHash", decisions.score[dropped], decisions.covers_newer[dropped], decisions.covers_earlier[dropped]
        )
        batch, drops = decisions.finish(batch, self.name, higher_is_closer=True, detail=detail)
        empty = np.asarray(batch.column("_empty").to_numpy(), bool)
        return add_reason(batch, ~has & ~empty, NO_SHINGLES_REASON), drops
