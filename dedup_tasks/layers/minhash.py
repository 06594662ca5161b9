"""L3: MinHash (datasketch-compatible) + LSH band buckets down to Jaccard 0.5, every candidate verified.

In the batch the verifier (``candidates.Verifier``) reads the exact shingle sets of both documents.
A registered candidate estimated in [VERIFY_FLOOR, minhash_registry_threshold) is verified like an
in-batch one, on the exact 5-gram sets: the earlier document's text is read back from its published
partition (``<root>/deduped/<partition of its batch>``, as L4 does; one read per earlier batch
touched). A candidate stored as a b-bit signature (``registry_signature_bits`` < 32, schema 9) is
verified on its text from its floor up (``bbit_text_floor``: 0.21 for 1 bit, 0.28 for 2), whatever its estimate, and kept where that text is not
there (``TEXT_UNVERIFIED_REASON``): a b-bit value cannot be inverted. For lossless signatures (rows of
schema <= 8), where the text is not there (partition deleted, document missing) and for estimates from
minhash_registry_threshold up, the signature decides: every value recovers one of the earlier's
shingles (a uniform draw), looked up in the newer document's full set, gives the share of the earlier
covered by the newer, and with the estimated Jaccard the reverse share, under a stricter rule
(``registry_verifier_of``). The reason of each drop says which evidence decided it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dedup_tasks.contract import NEAR_MISS_JACCARD_MIN
from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.candidates import SHORT, ShortTexts, Verifier, stream_minhash, verify_pairs
from dedup_tasks.fingerprint.minhash import (
    EN_CHAR_SHINGLES,
    EN_SHINGLE_WORDS,
    MINHASH_SEED,
    SHINGLE_CHARS,
    MinHasher,
    coverage_from_jaccard,
    earlier_covered,
    estimate_sd,
    estimated_jaccard,
)
from dedup_tasks.fingerprint.numbers import FACTS_MAX_JACCARD, FACTS_MIN_SHARE
from dedup_tasks.fingerprint.stoplist import (
    AUTO_STOPLIST,
    Stoplist,
    check_stoplist_setting,
    configured_stoplist,
    learned_name,
    propose_stoplist,
    registry_band_keys,
)
from dedup_tasks.layers.base import (
    Drops,
    Layer,
    LayerContext,
    LayerOutput,
    NearText,
    add_reason,
    set_column,
    strings_np,
)
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
from dedup_tasks.normalize.arrays import concat_ragged, gather_spans

log = logging.getLogger(__name__)

NO_SHINGLES_REASON = "no text to shingle: MinHash not applied"
# Candidates estimated below this Jaccard are not verified: at 128 permutations an estimate of 0.4
# hides a true 0.5 with probability ~0.02.
VERIFY_FLOOR = 0.4
# The verifier accepts no copy under J 0.45. A b-bit estimate is noisy (1 bit, 128 values: +-0.079 at
# 0.45), so b-bit registry candidates are read back from this many standard deviations under 0.45 (1 bit:
# 0.21): a copy at J 0.45 falls under it 0.13% of the time, where VERIFY_FLOOR 0.4 lost a quarter of those.
LOWEST_COPY_JACCARD = 0.45
BBIT_FLOOR_SDS = 3.0
# How a registry candidate was judged, at the end of its drop's reason.
ON_TEXT = " (verified)"
ON_SIGNATURE = " (verified on its signature)"
TEXT_MISSING_REASON = (
    "MinHash: a registered candidate's published partition or row was not found; judged on its signature only"
)
# A registered candidate stored as a b-bit signature (schema 9) can only be estimated, never verified on
# it: without its text it is not dropped.
TEXT_UNVERIFIED_REASON = (
    "MinHash: a registered candidate's published partition or row was not found; its b-bit signature cannot verify it: kept"
)


# The verifier's rule (fingerprint.candidates.Verifier; docs/near-copies.md), read on the bench's train
# crawl with margins to the closest must-keep pairs. Named constants, not settings: no benchmark showed a
# user would move them (the thresholds a user tunes, minhash_threshold and the coverages the audit's
# what-if replays, stay in DedupConfig).
# Lowest Jaccard of a truncation (the earlier covers minhash_min_coverage of the newer) and of an
# addition (the newer covers the earlier); 0.45 for additions dropped a template page.
VERIFY_MIN_JACCARD = 0.45
ADDITIONS_MIN_JACCARD = 0.5
# The passage rule: at most this share of either text differs in short runs (list pages differ everywhere).
MAX_SCATTERED = 0.15
# Inside a sentence one text has and the other lacks, the language's common 5-grams ("ofthe", "ation")
# occur in the other text by chance: a shared stretch shorter than this between two misses is part of
# the miss, so an inserted or cut sentence stays one passage (English copies at J 0.5-0.7).
PASSAGE_BRIDGE = 2
# What the two texts share must itself come in passages: this share of each one's shared positions in
# stretches of candidates.LONG_RUN (a retelling shares phrases between its own wording).
PASSAGE_MIN_SHARED = 0.85
# A miss this short (5-gram positions) is a typo, not a replaced passage.
PASSAGE_TYPO_RUN = 5
# A short text doubled by an inserted sentence: the newer covers this much of the earlier (a typo breaks
# at most 5 5-grams: ~0.6% of characters mistyped) and the pair is a copy from this Jaccard when the
# passage rule holds (what is added is whole passages).
ADDITIONS_PASSAGE_MIN_JACCARD = 0.45
ADDITIONS_PASSAGE_MIN_COVERAGE = 0.97
# The facts check refuses a pair where this many of the newer's numbers stand where the earlier states
# another figure (numbers.changed_in_place): a copy keeps the figures of the sentences it keeps.
FACTS_MIN_IN_PLACE = 1
# A registered document is judged on signature estimates (+-0.04): its Jaccard floors are raised by this.
REGISTRY_MARGIN = 0.1
# A short text (under simhash_min_chars) judged on a registered signature alone, where no figure can be
# checked, needs this plain Jaccard.
SHORT_SIGNATURE_JACCARD = 0.8
# A document of the registry's main tier (older than the last compaction) is a candidate only when this
# many of its bands agree with the query (the recent tier needs one): two leave 1.2e-7 chance candidates
# per registered English document with the built-in stoplist instead of 2.6e-4 on one band of the plain
# signature (docs/registry.md).
MAIN_MIN_BANDS = 2


def registry_verifier_of(cfg) -> Verifier:
    """The rule for a registered document, read through its signature (see DedupConfig)."""
    m = REGISTRY_MARGIN
    return Verifier(
        cfg.minhash_registry_threshold, VERIFY_MIN_JACCARD + m, cfg.minhash_registry_min_coverage,
        ADDITIONS_MIN_JACCARD + m,
    )  # fmt: skip


def verifier_of(cfg) -> Verifier:
    return Verifier(
        cfg.minhash_threshold, VERIFY_MIN_JACCARD, cfg.minhash_min_coverage,
        ADDITIONS_MIN_JACCARD, cfg.minhash_passage_min_coverage, MAX_SCATTERED,
        cfg.minhash_facts_min_new, FACTS_MIN_SHARE, FACTS_MAX_JACCARD,
        FACTS_MIN_IN_PLACE, ADDITIONS_PASSAGE_MIN_JACCARD,
        ADDITIONS_PASSAGE_MIN_COVERAGE, PASSAGE_BRIDGE, PASSAGE_MIN_SHARED,
        PASSAGE_TYPO_RUN,
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


def matrix_column(values: np.ndarray) -> pa.Array:
    """A 2-D array as a column of fixed-size lists, one row each (its dtype kept)."""
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(values).ravel()), values.shape[1])


def matrix_of(batch: pa.Table, name: str) -> np.ndarray:
    """A ``matrix_column`` of the batch back as a 2-D array."""
    column = batch.column(name).combine_chunks()
    return column.flatten().to_numpy().reshape(-1, column.type.list_size)


def signature_column(sig: np.ndarray) -> pa.Array:
    return matrix_column(np.asarray(sig, np.uint32))


def signatures_of(batch: pa.Table) -> np.ndarray:
    return matrix_of(batch, "_minhash")


def registry_band_keys_of(batch: pa.Table) -> np.ndarray | None:
    """The ``_registry_bands`` column the layer wrote, as (n, bands) uint64 (None where it is absent)."""
    return matrix_of(batch, "_registry_bands") if "_registry_bands" in batch.column_names else None


def bbit_text_floor(bits: np.ndarray | int, num_perm: int) -> np.ndarray:
    """The estimate from which a b-bit registry candidate is verified on its text (never above VERIFY_FLOOR)."""
    return np.minimum(VERIFY_FLOOR, LOWEST_COPY_JACCARD - BBIT_FLOOR_SDS * estimate_sd(LOWEST_COPY_JACCARD, bits, num_perm))


@dataclass
class EarlierText:
    """Shingle sets of registered documents read back from their published partitions.

    ``index[i]`` is candidate i's document in ``offsets`` (-1: its text was not found, ``why[i]``
    says why, and the signature rule decides)."""

    hashes: np.ndarray
    offsets: np.ndarray
    index: np.ndarray
    why: np.ndarray
    numbers: tuple[np.ndarray, np.ndarray]
    texts: ShortTexts  # the short ones' characters (``near.short_texts``), same indexing
    partitions_read: int = 0
    seconds: float = 0.0
    row_groups_read: int = 0


def published_shingle_sets(cfg, doc_ids: np.ndarray, batch_ids: np.ndarray) -> EarlierText:
    """The 5-gram sets of registered documents (doc_ids[i] of batch_ids[i]), read back from each batch's
    published partition: only the row groups holding them, prepared with the template lines their
    batch stripped (kept beside the partition's files, ``io.read_published_rows``). A partition
    published without them is read whole and its template lines learned over its kept rows, as before."""
    from dedup_tasks.io import partition_of, read_published_rows
    from dedup_tasks.prepare import prepare

    started = time.perf_counter()
    doc_ids = np.asarray(doc_ids, object).astype(str)
    batch_ids = np.asarray(batch_ids, object).astype(str)
    index = np.full(len(doc_ids), -1, np.int64)
    why = np.full(len(doc_ids), None, object)
    parts, sizes, read, groups = [], [], 0, 0
    num_parts, num_sizes, text_parts = [], [], []
    done = 0
    batches = np.unique(batch_ids)[::-1]  # the most recent first
    for b in batches[cfg.minhash_text_max_partitions :]:
        why[batch_ids == b] = f"partition of batch {b} not read, over minhash_text_max_partitions"
    for b in batches[: cfg.minhash_text_max_partitions]:
        idx = np.flatnonzero(batch_ids == b)
        path = Path(cfg.root) / "deduped" / partition_of(b)
        try:
            published = read_published_rows(path, doc_ids[idx])
            read += 1
            groups += published.row_groups_read
            if published.table.num_rows == 0:
                why[idx] = f"doc not in the published partition of batch {b}"
                continue
            prepared = prepare(published.table, cfg, source=f"published partition {partition_of(b)}", templates=published.templates)
        except (FileNotFoundError, OSError, ValueError) as exc:
            # A deleted or unreadable partition must not stop the batch: its candidates fall back to
            # the signature rule, and their reasons say so.
            log.warning("minhash: published partition %s of batch %s not readable (%s); signature rule", path, b, exc)
            why[idx] = f"published partition of batch {b} not found"
            continue
        row_of = {d: i for i, d in enumerate(prepared.column("doc_id").cast(pa.string()).to_pylist())}
        rows = np.array([row_of.get(d, -1) for d in doc_ids[idx]], np.int64)
        missing = rows < 0
        why[idx[missing]] = f"doc not in the published partition of batch {b}"
        found = idx[~missing]
        uniq, inverse = np.unique(rows[~missing], return_inverse=True)
        if len(uniq):
            hashes, offsets = shingle_sets(
                prepared, uniq, SHINGLE_CHARS, EN_SHINGLE_WORDS, EN_CHAR_SHINGLES
            )
            parts.append(hashes)
            sizes.append(np.diff(offsets))
            nums, num_off = number_sets(prepared, uniq)
            num_parts.append(nums)
            num_sizes.append(np.diff(num_off))
            text_parts.append(short_texts(prepared, uniq, cfg))
            index[found] = done + inverse
            done += len(uniq)
    hashes, offsets = _concat_sets(parts, sizes)
    numbers = _concat_sets(num_parts, num_sizes, np.uint64)
    texts = ShortTexts(*_concat_sets([t.cp for t in text_parts], [np.diff(t.offsets) for t in text_parts], np.int32))
    return EarlierText(hashes, offsets, index, why, numbers, texts, read, time.perf_counter() - started, groups)


def _concat_sets(parts: list[np.ndarray], sizes: list[np.ndarray], dtype=np.uint32) -> tuple[np.ndarray, np.ndarray]:
    size = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(size, out=offsets[1:])
    return np.concatenate([np.empty(0, dtype), *parts]).astype(dtype, copy=False), offsets


def _gather(sets: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sets of ``rows`` (values + offsets), in that order."""
    values, offsets = sets
    return gather_spans(values, offsets[rows], offsets[rows + 1])


def verify_on_text(
    row_sets: tuple[np.ndarray, np.ndarray], numbers: tuple[np.ndarray, np.ndarray], rows: np.ndarray,
    earlier: EarlierText, verifier: Verifier, strict: np.ndarray, runs: np.ndarray | None = None,
    row_texts: ShortTexts | None = None, leadin: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The in-batch verifier on (batch row rows[i], earlier document earlier.index[i]) pairs whose
    earlier text was found: (accepted, Jaccard, covers newer, covers earlier). ``row_sets`` are the
    shingle sets of ``np.unique(rows)`` in that order, ``numbers`` the batch rows' number sets, ``runs``
    the passage run length of each pair (its batch row's), ``row_texts`` the short characters of
    ``np.unique(rows)`` (None: the short-text rule reads 5-grams), ``leadin`` each pair's batch row's
    site lead-in (``near.leadins_of``)."""
    uniq, inverse = np.unique(rows, return_inverse=True)
    hashes, offsets = concat_ragged(row_sets, (earlier.hashes, earlier.offsets))
    nums = concat_ragged(_gather(numbers, uniq), earlier.numbers)
    earlier_rows = len(uniq) + earlier.index[earlier.index >= 0]
    texts = None if row_texts is None else row_texts.join(earlier.texts)
    return verify_pairs(hashes, offsets, inverse, earlier_rows, verifier, strict, nums, runs, texts, leadin)


class MinHashLayer(Layer):
    name = "minhash"

    def __init__(self, config) -> None:
        super().__init__(config)
        self._stats: dict = {}

    @property
    def threshold(self) -> float | None:
        return float(self.config.minhash_threshold)

    # A hook, so another engine (engines/spark.py) can supply the signatures and shingle sets its
    # workers computed with these same kernels; the search and the verifier stay this layer's.
    def fingerprints(
        self, batch: pa.Table, ctx: LayerContext, hasher: MinHasher
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Signatures, shingle counts and the shingle sets (hashes, offsets) of the rows."""
        return minhash_rows(
            batch, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, ctx.near_text, EN_CHAR_SHINGLES
        )

    # Hooks for another engine (engines/spark.py), whose shingle sets stay on its executors: the
    # registry coverage of the rows with registry hits, and the in-batch search, fed by pairs that the
    # executors verified with this layer's verifier and resolved by this layer's rule.
    def registry_covered(
        self, sig_earlier: np.ndarray, rows: np.ndarray, sets: tuple[np.ndarray, np.ndarray], hasher: MinHasher, batch: pa.Table
    ) -> np.ndarray:
        """``earlier_covered`` of registered signatures by the batch's ``rows``."""
        return earlier_covered(sig_earlier, rows, *sets, hasher)

    def registry_keys(
        self, batch: pa.Table, sig: np.ndarray, sets: tuple[np.ndarray, np.ndarray], hasher: MinHasher,
        stoplist: Stoplist | None,
    ) -> np.ndarray:
        """The rows' registry band keys (``fingerprint.stoplist.registry_band_keys``)."""
        return registry_band_keys(sig, sets, hasher, self.config.registry_bands, stoplist)

    def index_stoplist(
        self, batch: pa.Table, ctx: LayerContext, counts: np.ndarray, sets: tuple[np.ndarray, np.ndarray]
    ) -> Stoplist | None:
        """The stoplist of the registry's index signature: the configured one, or with "auto" the
        registry's own, which a new registry learns from this batch's English pages."""
        cfg = self.config
        if cfg.minhash_registry_stoplist != AUTO_STOPLIST:
            configured = configured_stoplist(cfg.minhash_registry_stoplist)
            # A new registry records it with its hashes, so that "auto" can follow it later; one keyed
            # otherwise refuses these keys at the lookup (the registry's key-space check).
            ctx.registry.band_key_stoplist(lambda: configured)
            return configured

        def propose() -> Stoplist:
            english = (strings_np(batch, "_lang") == "en") & (counts > 0)
            return propose_stoplist(
                learned_name(ctx.batch_id), sets[0], sets[1], english
            )

        return ctx.registry.band_key_stoplist(propose)

    def sets_of(self, rows: np.ndarray, sets: tuple[np.ndarray, np.ndarray], batch: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """The shingle sets (hashes, offsets) of the batch's ``rows`` (sorted, unique), in that order."""
        return _gather(sets, rows)

    def numbers_of(self, batch: pa.Table, ctx: LayerContext) -> tuple[np.ndarray, np.ndarray]:
        """The rows' number sets (``fingerprint.numbers``), for the facts check."""
        return number_sets(batch, cache=ctx.near_text)

    def in_batch(
        self, keys: np.ndarray, sig: np.ndarray, active: np.ndarray, sets: tuple[np.ndarray, np.ndarray],
        verifier: Verifier, strict: np.ndarray, batch: pa.Table, numbers: tuple[np.ndarray, np.ndarray],
        texts: ShortTexts | None = None,
    ):  # fmt: skip
        """The in-batch search in batch order (a ``StreamResult``): the earlier kept document wins."""
        cfg = self.config
        return stream_minhash(
            keys, sig, active, cfg.minhash_threshold, NEAR_MISS_JACCARD_MIN, sets,
            exact_floor=VERIFY_FLOOR, verifier=verifier, strict=strict, numbers=numbers, runs=passage_runs_of(batch, cfg),
            texts=texts, leadin=leadins_of(batch),
        )  # fmt: skip

    def run(self, batch: pa.Table, ctx: LayerContext) -> LayerOutput:
        out = super().run(batch, ctx)
        out.stats.extra.update(self._stats)
        return out

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        cfg = self.config
        n = batch.num_rows
        hasher = MinHasher(cfg.minhash_num_perm, MINHASH_SEED, cfg.minhash_bands, cfg.minhash_rows)
        sig, counts, sets = self.fingerprints(batch, ctx, hasher)
        verifier = verifier_of(cfg)
        strict = strict_rows(batch, cfg)
        has = counts > 0
        keys = hasher.band_keys(sig)
        batch = set_column(batch, "_minhash", signature_column(sig))
        batch = set_column(batch, "_has_minhash", pa.array(has))
        doc_ids = strings_np(batch, "doc_id")
        numbers = self.numbers_of(batch, ctx)
        # Only where a short row can be the newer of a pair: the rule reads both texts' characters.
        texts = short_texts(batch, np.arange(n), cfg, ctx.near_text) if (strict == SHORT).any() else None

        decisions = NearDupDecisions(n, ctx.batch_id, doc_ids)
        queries = np.flatnonzero(has)
        # The registry stores and probes the index signature's first registry_bands bands (the batch
        # uses all of the product signature's): fingerprint.stoplist. A registry that dies with the
        # process never meets the chance agreements the index signature is for: it takes the plain
        # signature's, which the batch has already (~10% of a --no-registry run's CPU saved).
        if ctx.registry.plain_band_keys:
            check_stoplist_setting(cfg.minhash_registry_stoplist)
            registry_keys = np.ascontiguousarray(keys[:, : cfg.registry_bands])
        else:
            registry_keys = self.registry_keys(batch, sig, sets, hasher, self.index_stoplist(batch, ctx, counts, sets))
        batch = set_column(batch, "_registry_bands", matrix_column(registry_keys))
        hits = ctx.registry.minhash_candidates(
            ctx.batch_id, registry_keys[queries], main_min_bands=MAIN_MIN_BANDS
        )
        self._stats = {}
        unverified = np.zeros(n, bool)  # rows with a candidate in the text band whose text was not found
        unchecked = np.zeros(n, bool)  # rows with a b-bit candidate whose text was not found (kept)
        if len(hits):
            rows = queries[hits.query]
            # Each row's stored bits: 32 for lossless signatures (schema <= 8 rows, or
            # registry_signature_bits 32), fewer for b-bit rows, whose values hold only their low bits.
            bits = np.asarray(hits.payload.get("minhash_bits", np.full(len(hits), 32)), np.int64)
            full = bits >= 32
            jac = estimated_jaccard(hits.payload["minhash"], sig[rows], bits)
            # earlier_covered inverts full 32-bit values: only lossless rows have it.
            old_in_new = np.zeros(len(hits))
            if full.any():
                old_in_new[full] = self.registry_covered(hits.payload["minhash"][full], rows[full], sets, hasher, batch)
            covers = (coverage_from_jaccard(jac, old_in_new), old_in_new)
            # On the signature alone there are no figures to check: a short text keeps the plain rule.
            on_signature = np.where(strict[rows] < 0, SHORT_SIGNATURE_JACCARD, strict[rows])
            ok = registry_verifier_of(cfg).accepts(jac, *covers, on_signature) & (jac >= VERIFY_FLOOR) & full
            how = np.full(len(hits), ON_SIGNATURE, object)
            # A b-bit signature only estimates J: every such candidate from its floor up (under
            # VERIFY_FLOOR by the estimate's noise) is settled on the earlier text, as lossless ones are
            # in [VERIFY_FLOOR, registry threshold).
            floor = np.where(full, VERIFY_FLOOR, bbit_text_floor(bits, cfg.minhash_num_perm))
            band = np.flatnonzero((jac >= floor) & ((jac < cfg.minhash_registry_threshold) | ~full))
            if len(band):
                # The signature alone cannot tell a truncated copy from a page of the same template
                # in this band (docs/near-copies.md): the earlier text settles it.
                earlier = published_shingle_sets(cfg, hits.doc_id[band], hits.batch_id[band])
                got = band[earlier.index >= 0]
                if len(got):
                    ok_t, jac_t, new_t, old_t = verify_on_text(
                        self.sets_of(np.unique(rows[got]), sets, batch), numbers, rows[got], earlier, verifier, strict[rows[got]],
                        passage_runs_of(batch, cfg)[rows[got]], None if texts is None else texts.take(np.unique(rows[got])),
                        leadins_of(batch)[rows[got]],
                    )
                    ok[got], jac[got], covers[0][got], covers[1][got] = ok_t, jac_t, new_t, old_t
                    how[got] = ON_TEXT
                missing = earlier.index < 0
                lost = band[missing]
                lost_full = full[lost]
                how[lost] = [
                    f" (signature only: {w})" if f else f" (not verified: {w})" for w, f in zip(earlier.why[missing], lost_full, strict=True)
                ]
                # A b-bit candidate without its text is never dropped (ok stays False): kept, with a reason.
                unverified[rows[lost[lost_full]]] = True
                unchecked[rows[lost[~lost_full]]] = True
                self._stats = {
                    "registry_verified_on_text": len(got), "registry_text_missing": len(lost),
                    "registry_bbit_unverified": int((~lost_full).sum()),
                    "partitions_read": earlier.partitions_read, "row_groups_read": earlier.row_groups_read,
                    "text_read_seconds": round(earlier.seconds, 3),
                }  # fmt: skip
            decisions.add_registry(queries, hits, jac, ok, ~ok & (jac >= NEAR_MISS_JACCARD_MIN), -jac, covers, how)
        decisions.add_stream(self.in_batch(keys, sig, has & ~decisions.drop, sets, verifier, strict, batch, numbers, texts))
        dropped = np.flatnonzero(decisions.drop)
        detail = verified_reason(
            "MinHash", decisions.score[dropped], decisions.covers_newer[dropped], decisions.covers_earlier[dropped],
            decisions.how[dropped],
        )
        batch, drops = decisions.finish(batch, self.name, higher_is_closer=True, detail=detail)
        empty = np.asarray(batch.column("_empty").to_numpy(), bool)
        batch = add_reason(batch, unverified & ~decisions.drop, TEXT_MISSING_REASON)
        batch = add_reason(batch, unchecked & ~decisions.drop, TEXT_UNVERIFIED_REASON)
        return add_reason(batch, ~has & ~empty, NO_SHINGLES_REASON), drops
