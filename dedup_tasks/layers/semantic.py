"""L4 semantic layer: cosine similarity of document embeddings, drop at >= semantic_threshold.

``suspects`` mode (default): rows that L2/L3 flagged as near misses (a candidate at SimHash
distance in (max_distance, SUSPECT_HAMMING_MAX] or estimated Jaccard in [SUSPECT_JACCARD_MIN,
threshold)) are embedded, together with their candidates; and (``semantic_sketch``, on by default)
every row's story sketch names its rewrite candidates, confirmed sentence by sentence
(``embed.aligned``) at ``semantic_sketch_threshold_<lang>``; docs/semantic.md. A suspect is dropped when its named
candidate, or an earlier embedded row of this batch (exact IndexFlatIP search), is at cosine >=
threshold. Rows without suspects cost nothing: no model is loaded for a batch without suspects.

``full`` mode: every row is embedded and searched against an HNSW index of every kept document of
earlier batches (``<root>/registry/faiss/<model_id>_kept.index``, mirroring the store's
``<model_id>#kept`` rows) and against the earlier rows of the batch; the rows it keeps are added to both.

Candidates from earlier batches are embedded from their published partition
(``<root>/deduped/<partition>``) once per model; their vectors are cached in the registry's
EmbeddingStore (see ``dedup_tasks.registry.embeddings.store_for``). A candidate of this batch that a
later layer dropped is not a kept document and is never matched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.contract import CROSS_LOGIT, CROSS_PROB_COS
from dedup_tasks.embed.cross_encoder import get_cross_encoder
from dedup_tasks.embed.embedders import document_text, get_embedder, model_id_for
from dedup_tasks.embed.faiss_index import PersistentIndex
from dedup_tasks.embed.sketch import sketch_model_id, story_sketches
from dedup_tasks.embed.stored import StoredEncoder, sentence_model_id
from dedup_tasks.fingerprint.numbers import FACTS_MIN_SHARE, pair_facts_differ, pair_values_differ
from dedup_tasks.io import partition_of, template_lines_of
from dedup_tasks.layers.base import (
    Drops,
    Layer,
    LayerContext,
    LayerOutput,
    add_reason,
    fixed_text,
    strings_np,
)
from dedup_tasks.layers.near import URL_UPDATE, bool_col, number_sets, text_lengths
from dedup_tasks.normalize.text import story_lengths
from dedup_tasks.registry.embeddings import EmbeddingStore, store_for

log = logging.getLogger(__name__)

FLAT_NEIGHBOURS = 16
# A rewrite candidate whose newer story is shorter than this (characters of its own text, template
# lines out) is refused when it states any value its candidate never states: two flashes of one
# template differ only in their figures (the planted crawl's short pages scored 0.96 aligned).
SHORT_STORY_CHARS = 200
# L2/L3 near misses L4 embeds (inside the recorded suspect_* bands): wider bands embed more documents
# for few extra duplicates (SimHash 7-12 near misses are mostly distinct pages); at these ~4% of a
# synthetic-crawl batch is embedded (docs/semantic.md).
SUSPECT_HAMMING_MAX = 5
SUSPECT_JACCARD_MIN = 0.75
# What L4 embeds of a document: its head of EMBED_MAX_TOKENS tokens, from at most EMBED_MAX_CHARS
# characters of the near-duplicate view. 128 tokens halve the cost of 256; on the reworded dev stories
# 64 lose a third of the en recall at 0.96 (docs/semantic.md).
EMBED_MAX_CHARS = 2000
EMBED_MAX_TOKENS = 128
# The opt-in cross-encoder (semantic_cross_encoder_<lang>): its threshold reads the mean logit over the
# aligned sentences, and a pair whose aligned cosine is under CROSS_MIN_COS is never read by it (cheapest
# test first: most sketch candidates are other stories).
CROSS_SCORE = "logit"
CROSS_MIN_COS = 0.85
# Rewrite candidates (``sketch_pairs``): a row's SKETCH_NEIGHBOURS nearest earlier sketches at cosine
# >= its language's floor and >= its language's margin times the mean cosine of its SKETCH_MARGIN_NEIGHBOURS
# nearest sketches (the ratio margin of bitext mining, Artetxe & Schwenk 2019: the pairs read stay
# flat as history fills the space). English rewrites stand far out of their neighbourhood (every dev
# rewrite's source at 1.5x), Chinese ones barely; an English floor of 0.5 keeps 99% of the dev rewrites
# and 10% of the other pairs, a Chinese one would lose half the rewrites (docs/semantic.md, "Candidates").
SKETCH_MIN_DEFAULT = 0.3
SKETCH_MIN = {"en": 0.5}
SKETCH_NEIGHBOURS = 2
SKETCH_MARGIN_DEFAULT = 1.1
SKETCH_MARGIN = {"en": 1.5}
SKETCH_MARGIN_NEIGHBOURS = 4
# HNSW's search list over the earlier batches' sketches once they are more than 50,000 (below, exact).
SKETCH_EF_SEARCH = 256
# A rewrite candidate is refused before anything is embedded when the newer states at least this many
# distinct values (figures, dates), and this share of its own, that the earlier never states (0: off).
SKETCH_FACTS_MIN_NEW = 2
SKETCH_FACTS_MIN_SHARE = 0.5
# The note on a kept row whose rewrite candidates were not read (semantic_sketch_pair_budget).
OVER_BUDGET_REASON = (
    "rewrite candidate not confirmed: over the batch's budget of {} sketch pairs (semantic_sketch_pair_budget)"
)


def input_rows(batch: pa.Table, rows: np.ndarray, ctx: LayerContext | None) -> pa.Table | None:
    """The input text (title, content) of these rows: the batch's own columns where it carries them,
    else ``ctx.inputs`` by ``_row`` (the layers' view carries no input text); None without either."""
    take = pa.array(rows, pa.int64())
    if "content" not in batch.column_names and ctx is not None and ctx.inputs is not None and "_row" in batch.column_names:
        return ctx.inputs.take(batch.column("_row").take(take))
    return batch.take(take) if "content" in batch.column_names or "title" in batch.column_names else None


def kept_model_id(model_id: str) -> str:
    """The store's id for the ``full`` mode's kept documents of ``model_id`` (what its index mirrors)."""
    return f"{model_id}#kept"


def neighbourhood_cosine(cosines: np.ndarray, m: int) -> np.ndarray:
    """Per row, the mean of its ``m`` largest cosines (-inf: no neighbour there, counted as 0; a
    negative cosine counts 0 too): how crowded the space around a row is, the denominator of the
    sketch candidates' ratio margin."""
    top = -np.sort(-cosines, axis=1)[:, :m]
    padded = np.zeros((len(cosines), m))
    padded[:, : top.shape[1]] = np.maximum(top, 0.0)
    return padded.mean(axis=1)


def per_language(langs: np.ndarray, value_for: Callable[[str | None], float]) -> np.ndarray:
    """``value_for(lang)`` of each row's language, asked once per distinct language (a missing language
    reads as "None", which the config's per-language settings answer with their default)."""
    names, inverse = np.unique(np.asarray(langs, object).astype(str), return_inverse=True)
    return np.array([value_for(name) for name in names], float)[inverse.reshape(-1)]


@dataclass
class SentenceScores:
    """Per candidate pair, what its confirmation scored: the score (a cosine, or where ``cross`` the
    cross-encoder's, whose ``kind`` says which), the threshold a cross pair is held to (NaN: the
    cosine's), how many newer sentences the cross-encoder averaged and its model id."""

    score: np.ndarray
    cross: np.ndarray
    threshold: np.ndarray
    sentences: np.ndarray
    model_id: np.ndarray
    kind: np.ndarray

    @classmethod
    def of(cls, cos: np.ndarray) -> SentenceScores:
        n = len(cos)
        return cls(np.array(cos, float), np.zeros(n, bool), np.full(n, np.nan), np.zeros(n, np.int64),
                   np.full(n, None, object), np.full(n, None, object))


# A cross-encoder score's score_kind and its words in a drop's reason, by what it pools.
CROSS_KIND = {"logit": CROSS_LOGIT, "prob_cos": CROSS_PROB_COS}
_CROSS_WORDS = {CROSS_LOGIT: "cross-encoder logit ", CROSS_PROB_COS: "cross-encoder probability and cosine "}


def cross_details(
    by_cross: np.ndarray, score: np.ndarray, threshold: np.ndarray, sentences: np.ndarray, model_id: np.ndarray,
    kind: np.ndarray,
) -> pa.Array:
    """The reason of each cross-encoder drop ("cross-encoder logit 3.12 >= 2.37 over 5 aligned
    sentences (model cross-e5-...)", or "cross-encoder probability and cosine 0.74 >= 0.72 ..." where
    ``kind`` is ``cross_prob_cos``; the matched doc is appended by ``drop_reasons``); null elsewhere."""
    words = pa.array(np.where(np.asarray(kind, object) == CROSS_PROB_COS, _CROSS_WORDS[CROSS_PROB_COS], _CROSS_WORDS[CROSS_LOGIT]), pa.string())
    text = pc.binary_join_element_wise(
        words, fixed_text(score, 2), " >= ", fixed_text(threshold, 2), " over ",
        pa.array(sentences).cast(pa.string()), " aligned sentences (model ", pa.array(model_id, pa.string()), ")", "",
    )
    return pc.if_else(pa.array(np.asarray(by_cross, bool)), text, pa.scalar(None, pa.string()))


class SemanticLayer(Layer):
    name = "semantic"

    def __init__(self, config) -> None:
        super().__init__(config)
        self._stats: dict = {}
        self._drop_thresholds = np.empty(0)
        self._partitions: dict[str, tuple[pa.Table, dict[str, int]] | None] = {}
        self._whole_partitions: set[str] = set()
        self._asked: dict[str, set[str]] = {}

    @property
    def threshold(self) -> float | None:
        return float(self.config.semantic_threshold)

    def run(self, batch: pa.Table, ctx: LayerContext) -> LayerOutput:
        self._drop_thresholds = np.empty(0)
        cpu = time.process_time()
        out = super().run(batch, ctx)
        # CPU seconds of the whole process while L4 ran (every thread): the machine-load-proof cost.
        self._stats["cpu_seconds"] = round(time.process_time() - cpu, 3)
        # summary.json's "documents embedded" comes from here (the pipeline reads stats.extra).
        out.stats.extra.update(self._stats)
        return out

    def drop_thresholds(self, n: int) -> np.ndarray:
        # Thresholds are per language: each decision row names the one it was judged by.
        if len(self._drop_thresholds) == n:
            return np.asarray(self._drop_thresholds, float)
        return super().drop_thresholds(n)

    def model_id(self) -> str | None:
        return self._stats.get("model_id")

    def _row_thresholds(self, batch: pa.Table) -> np.ndarray:
        """The drop cosine of every row, by its language (``_lang``, else ``lang``)."""
        col = "_lang" if "_lang" in batch.column_names else ("lang" if "lang" in batch.column_names else None)
        if col is None:
            return np.full(batch.num_rows, float(self.config.semantic_threshold))
        return per_language(strings_np(batch, col), self.config.semantic_threshold_for)

    def _embedder(self):
        cfg = self.config
        return get_embedder(cfg.embedder, max_tokens=EMBED_MAX_TOKENS, threads=cfg.embed_threads, device=cfg.embed_device)

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        self._stats = {"embedded": 0, "suspects": 0, "model_id": None, "cached": 0}
        self._partitions: dict[str, tuple[pa.Table, dict[str, int]] | None] = {}
        self._whole_partitions: set[str] = set()
        self._asked: dict[str, set[str]] = {}
        self._unread_rows = np.empty(0, np.int64)
        if batch.num_rows == 0:
            return batch, Drops.none()
        if self.config.semantic_mode == "full":
            return batch, self._full(batch, ctx)
        drops = self._suspects(batch, ctx)
        unread = np.zeros(batch.num_rows, bool)
        unread[self._unread_rows] = True
        unread[drops.rows] = False
        if unread.any():
            budget, rows = self.config.semantic_sketch_pair_budget, int(unread.sum())
            self._stats["rows_unread_over_budget"] = rows
            # In the task's log, so an operator sees the budget bite without opening summary.json.
            log.warning(
                "semantic: %d rewrite candidate pairs over the batch's budget of %d (semantic_sketch_pair_budget) "
                "were not confirmed; %d rows kept unread, each with a note (rerun the hour with a larger budget "
                "to judge them)", self._stats.get("sketch_pairs_over_budget", 0), budget, rows,
            )
            batch = add_reason(batch, unread, OVER_BUDGET_REASON.format(budget))
        return batch, drops

    # ---- shared -------------------------------------------------------------------------------
    def _texts(self, batch: pa.Table, rows: np.ndarray) -> list[str]:
        """Texts to embed: the near-duplicate view (``_near_text``) when the batch has it.

        That view has the site boilerplate (menus, related links, copyright lines learned per site over
        the batch) removed. Raw title + content of two articles of one heavily templated site can share
        their whole first 256 tokens, which is all MiniLM reads: every such pair scored cosine 1.0.
        """
        sub = batch.take(pa.array(rows, pa.int64()))
        if "_near_text" in sub.column_names:
            limit = EMBED_MAX_CHARS
            return [(t or "")[:limit] if limit and limit > 0 else (t or "") for t in sub.column("_near_text").to_pylist()]
        titles = sub.column("title").to_pylist() if "title" in sub.column_names else [None] * len(rows)
        contents = sub.column("content").to_pylist() if "content" in sub.column_names else [None] * len(rows)
        return [document_text(t, c, EMBED_MAX_CHARS) for t, c in zip(titles, contents, strict=True)]

    def _sentence_texts(self, batch: pa.Table, rows: np.ndarray, ctx: LayerContext | None = None) -> list[str]:
        """Texts the aligned score cuts into sentences: raw lines, punctuation kept, template lines
        out (``embed.aligned.punctuated_text``); the folded ``_near_text`` has no sentence ends.

        The layers' view carries no input text: it comes from ``ctx.inputs`` by ``_row`` (a published
        partition, prepared again, has its own). Without either, the folded view is all there is."""
        from dedup_tasks.embed.aligned import punctuated_text

        sub = batch.take(pa.array(rows, pa.int64()))
        raw = input_rows(batch, rows, ctx)

        def col(table: pa.Table, name: str) -> list:
            return table.column(name).to_pylist() if name in table.column_names else [None] * len(rows)

        if raw is None:
            return [t or "" for t in col(sub, "_near_text")]

        return [punctuated_text(t, c, v, EMBED_MAX_CHARS)
                for t, c, v in zip(col(raw, "title"), col(raw, "content"), col(sub, "_near_text"), strict=True)]

    def _vectors(
        self, store: EmbeddingStore, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray, texts_of
    ) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of these documents: from the store, else embedded (and stored). texts_of(missing idx) -> texts.

        Returns (available mask, vectors). A document whose text cannot be found is unavailable.
        """
        found, cached = store.get(model_id, doc_ids, batch_ids)
        self._stats["cached"] += int(found.sum())
        missing = np.flatnonzero(~found)
        texts = texts_of(missing) if len(missing) else []
        have = np.array([t is not None for t in texts], bool)
        todo = missing[have]
        dim = cached.shape[1] if cached.size else 0
        new = np.zeros((0, dim), np.float32)
        if len(todo):
            embedder = self._embedder()
            started = time.perf_counter()
            new = embedder.encode([t for t in texts if t is not None])
            self._tally({"embed_seconds": time.perf_counter() - started})
            self._stats["embedded"] += len(todo)
            store.put(model_id, doc_ids[todo], batch_ids[todo], new)
            dim = new.shape[1]
        out = np.zeros((len(doc_ids), dim), np.float32)
        if found.any():
            out[found] = cached[found]
        if len(todo):
            out[todo] = new
        ok = found.copy()
        ok[todo] = True
        return ok, out

    def _published_texts(
        self, ctx: LayerContext, doc_ids: np.ndarray, batch_ids: np.ndarray, sentence_view: bool = False
    ) -> list[str | None]:
        """Texts of earlier batches' kept documents, read back from their published partitions
        (``sentence_view``: as ``_sentence_texts`` gives them)."""
        texts_of = self._sentence_texts if sentence_view else self._texts
        out: list[str | None] = [None] * len(doc_ids)
        for b in np.unique(batch_ids.astype(str)):
            idx = np.flatnonzero(batch_ids.astype(str) == b)
            part = self._partition(b, doc_ids[idx])
            if part is None:
                continue
            prepared, row_of = part
            rows = np.array([row_of.get(str(doc_ids[i]), -1) for i in idx], np.int64)
            texts = texts_of(prepared, rows[rows >= 0]) if (rows >= 0).any() else []
            for i, t in zip(idx[rows >= 0], texts, strict=True):
                out[i] = t
        return out

    def _partition(self, batch_id: str, doc_ids: np.ndarray) -> tuple[pa.Table, dict[str, int]] | None:
        """Rows of an earlier batch's published partition, prepared as its own batch prepared them (None:
        not found), with doc_id -> row; at least the rows of ``doc_ids`` that the partition holds.
        Candidate texts and the facts check share what one L4 run has read.

        Only the row groups holding the documents are read, stripped of the template lines their batch
        stripped (kept beside the partition's files, ``io.read_published_rows``). A partition published
        without them is read whole once and its template lines learned over its kept rows. Afterwards
        the vectors come from the store.
        """
        from dedup_tasks.contract import ContractError
        from dedup_tasks.io import read_published_rows
        from dedup_tasks.prepare import prepare

        cached = self._partitions.get(batch_id, ())
        if cached is None or batch_id in self._whole_partitions:
            return cached
        asked = self._asked.setdefault(batch_id, set())
        wanted = sorted({str(d) for d in doc_ids} - asked)  # a document the partition lacks is asked once
        asked.update(wanted)
        if not wanted:
            return cached or None
        path = Path(self.config.root) / "deduped" / partition_of(batch_id)
        try:
            published = read_published_rows(path, wanted)
        except (FileNotFoundError, OSError, ValueError) as exc:
            if not cached:
                log.warning("semantic: published partition %s of candidate batch %s not found (%s); its candidates are skipped", path, batch_id, exc)
                self._partitions[batch_id] = None
            return cached or None
        if published.templates is None:
            self._whole_partitions.add(batch_id)
        elif published.table.num_rows == 0:
            return cached or None
        try:
            prepared = prepare(published.table, self.config, source="published partition", templates=published.templates)
        except ContractError:
            # Not a contract table (e.g. written by another tool): embed the raw title + content.
            prepared = published.table
        if cached:
            prepared = pa.concat_tables([cached[0], prepared], promote_options="permissive")
        ids = prepared.column("doc_id").cast(pa.string()).to_pylist()
        part = (prepared, {d: i for i, d in enumerate(ids)})
        self._partitions[batch_id] = part
        return part

    def _published_numbers(self, doc_ids: np.ndarray, batch_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(number hashes, offsets, index): the number sets of earlier batches' documents, read from
        their published partitions; document i's set is entry index[i] (-1: its text was not found)."""
        index = np.full(len(doc_ids), -1, np.int64)
        values, sizes, done = [np.empty(0, np.uint64)], [np.empty(0, np.int64)], 0
        for b in np.unique(batch_ids.astype(str)):
            idx = np.flatnonzero(batch_ids.astype(str) == b)
            part = self._partition(b, doc_ids[idx])
            if part is None or "_near_text" not in part[0].column_names:
                continue
            prepared, row_of = part
            rows = np.array([row_of.get(str(doc_ids[i]), -1) for i in idx], np.int64)
            if (rows >= 0).any():
                nums, off = number_sets(prepared, rows[rows >= 0])
                values.append(nums)
                sizes.append(np.diff(off))
                index[idx[rows >= 0]] = done + np.arange(int((rows >= 0).sum()))
                done += int((rows >= 0).sum())
        size = np.concatenate(sizes)
        offsets = np.zeros(len(size) + 1, np.int64)
        np.cumsum(size, out=offsets[1:])
        return np.concatenate(values).astype(np.uint64), offsets, index

    # ---- suspects mode ------------------------------------------------------------------------
    def suspect_pairs(self, batch: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, candidate doc_id, candidate batch_id) of every near miss recorded by L2/L3."""
        cfg = self.config
        rows, docs, batches = [], [], []
        for layer in ("simhash", "minhash"):
            col = f"_suspect_{layer}_doc_id"
            if col not in batch.column_names:
                continue
            doc = batch.column(col).to_numpy(zero_copy_only=False)
            bid = batch.column(f"_suspect_{layer}_batch_id").to_numpy(zero_copy_only=False)
            score = batch.column(f"_suspect_{layer}_score").to_numpy(zero_copy_only=False).astype(float)
            has = np.array([d is not None for d in doc], bool)
            with np.errstate(invalid="ignore"):
                if layer == "simhash":
                    near = (score > cfg.simhash_max_distance) & (score <= SUSPECT_HAMMING_MAX)
                else:
                    # Up to the registry's Jaccard rule (0.8): in the batch L3's verifier settles 0.45-0.8
                    # on the text, so the band holds registry near misses and pairs the verifier refused.
                    upper = max(cfg.minhash_threshold, cfg.minhash_registry_threshold)
                    near = (score >= SUSPECT_JACCARD_MIN) & (score < upper)
            r = np.flatnonzero(has & near)
            rows.append(r)
            docs.append(doc[r].astype(object))
            batches.append(bid[r].astype(object))
        if not rows:
            return np.empty(0, np.int64), np.empty(0, object), np.empty(0, object)
        return np.concatenate(rows), np.concatenate(docs), np.concatenate(batches)

    def sketch_pairs(
        self, batch: pa.Table, ctx: LayerContext, store: EmbeddingStore, sketches: np.ndarray,
        history: PersistentIndex | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(row, candidate doc_id, candidate batch_id, sketch cosine) of every rewrite candidate.

        A row's candidates are its ``SKETCH_NEIGHBOURS`` nearest story sketches among the earlier rows
        of this batch and the kept documents of earlier batches (their sketches are in the store,
        written once when their batch ran), at cosine >= its language's floor (``SKETCH_MIN``) and >= its language's margin
        (``SKETCH_MARGIN``) times the mean cosine of its ``SKETCH_MARGIN_NEIGHBOURS`` nearest sketches
        anywhere (``neighbourhood_cosine``).
        Nothing here depends on a lexical near miss: a rewrite shares its names and content words, not
        its shingles.

        The earlier batches' sketches are searched through ``history`` (``sketch_history``: an HNSW
        index mirroring the store), so the cost of an hour grows with the log of the history, not with it.
        """
        from dedup_tasks.embed.faiss_index import search_flat

        k = SKETCH_NEIGHBOURS
        doc_ids = strings_np(batch, "doc_id")
        valid = np.flatnonzero(np.abs(sketches).sum(axis=1) > 0)
        langs = strings_np(batch, "_lang")[valid] if "_lang" in batch.column_names else np.full(len(valid), None, object)
        bar = per_language(langs, lambda lang: SKETCH_MIN.get(str(lang), SKETCH_MIN_DEFAULT))[:, None]  # per searching row
        margin = per_language(langs, lambda lang: SKETCH_MARGIN.get(str(lang), SKETCH_MARGIN_DEFAULT))
        m = SKETCH_MARGIN_NEIGHBOURS
        # Per search: each row's neighbours' cosines (-inf where none), which of them may be candidates,
        # their index into that search's doc_ids / batch_ids, and those.
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        if len(valid) > 1:
            # + 1: the row finds itself first.
            scores, idx = search_flat(sketches[valid], sketches[valid], max(k, m) + 1)
            cand = np.where(idx >= 0, valid[np.maximum(idx, 0)], -1)
            other = (idx >= 0) & (cand != valid[:, None])
            earlier = other & (cand < valid[:, None]) & (np.arange(idx.shape[1]) <= k)
            found.append((np.where(other, scores, -np.inf), earlier, cand, doc_ids, np.full(len(doc_ids), ctx.batch_id, object)))
        history = self.sketch_history(store, sketches.shape[1]) if history is None else history
        if len(history) and len(valid):
            scores, idx = history.neighbours(sketches[valid], max(k, m), ctx.batch_id, SKETCH_EF_SEARCH)
            hit = idx >= 0
            found.append((scores, hit & (np.arange(idx.shape[1]) < k), idx, history.doc_id, history.batch_id))
        if not found:
            return np.empty(0, np.int64), np.empty(0, object), np.empty(0, object), np.empty(0)
        if m:
            around = neighbourhood_cosine(np.concatenate([f[0] for f in found], axis=1), m)
            bar = np.where(margin[:, None] > 0, np.maximum(bar, (margin * around)[:, None]), bar)
        parts = []
        for scores, is_candidate, index, docs, batches in found:
            q, j = np.nonzero(is_candidate & (scores >= bar))
            at = index[q, j]
            parts.append((valid[q], docs[at].astype(object), batches[at].astype(object), scores[q, j]))
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(4))  # type: ignore[return-value]

    def _sketch_model_id(self) -> str:
        return sketch_model_id()

    def sketch_history(self, store: EmbeddingStore, dim: int) -> PersistentIndex:
        """The kept documents' story sketches of earlier batches, as the index that mirrors the store."""
        return PersistentIndex.mirror(self.config.root, self._sketch_model_id(), dim, store)

    def _suspects(self, batch: pa.Table, ctx: LayerContext) -> Drops:
        sus_row, cand_doc, cand_batch = self.suspect_pairs(batch)
        store = store_for(ctx.registry)
        if not self.config.semantic_sketch or "_near_text" not in batch.column_names:
            # The sketch reads the prepared near-duplicate view; a batch without it (not prepared by
            # the pipeline) has only the L2/L3 near misses as candidates.
            return self._confirm(batch, ctx, store, sus_row, cand_doc, cand_batch)
        started = time.perf_counter()
        sketches = story_sketches(batch, ctx.near_text)
        built = time.perf_counter()
        history = self.sketch_history(store, sketches.shape[1])
        s_row, s_doc, s_batch, s_cos = self.sketch_pairs(batch, ctx, store, sketches, history)
        self._stats["sketch_seconds"] = round(time.perf_counter() - started, 3)
        # Of which: the sketches themselves (words, weights, the length floor) and the search.
        self._stats["sketch_build_seconds"] = round(built - started, 3)
        self._stats["sketch_pairs"] = len(s_row)
        # Near-miss pairs at their language's threshold, sketch pairs at the sketch threshold.
        langs = strings_np(batch, "_lang") if "_lang" in batch.column_names else np.full(batch.num_rows, None, object)
        pair_min = np.concatenate([np.full(len(sus_row), np.nan), per_language(langs[s_row], self.config.semantic_sketch_threshold_for)])
        drops = self._confirm(
            batch, ctx, store, np.concatenate([sus_row, s_row]).astype(np.int64),
            np.concatenate([cand_doc, s_doc]).astype(object), np.concatenate([cand_batch, s_batch]).astype(object),
            pair_min, np.concatenate([np.zeros(len(sus_row), bool), np.ones(len(s_row), bool)]),
            np.concatenate([np.full(len(sus_row), np.nan), s_cos]),
        )
        # The story sketch of every document this layer keeps, stored once: later batches search them.
        kept = np.ones(batch.num_rows, bool)
        kept[drops.rows] = False
        kept &= np.abs(sketches).sum(axis=1) > 0
        rows = np.flatnonzero(kept)
        model_id = self._sketch_model_id()
        kept_docs, kept_batch = strings_np(batch, "doc_id")[rows], np.full(len(rows), ctx.batch_id, object)
        store.put(model_id, kept_docs, kept_batch, sketches[rows])
        history.follow(store, model_id, kept_docs, kept_batch, sketches[rows])
        return drops

    def _confirm(
        self, batch: pa.Table, ctx: LayerContext, store: EmbeddingStore,
        sus_row: np.ndarray, cand_doc: np.ndarray, cand_batch: np.ndarray, pair_min: np.ndarray | None = None,
        sketch: np.ndarray | None = None, sketch_cos: np.ndarray | None = None,
    ) -> Drops:
        """The transformer's verdict on candidate pairs: drop a row at cosine >= its language's threshold
        (``pair_min``: per pair, a threshold of its own; NaN: the language's), unless the lexical
        evidence objects (``_pair_objections``, ``_hit_objections``). ``sketch`` marks the rewrite
        candidates: the facts check reads their values (``SKETCH_FACTS_MIN_NEW``), and their sentences
        are scored (``_aligned``) instead of the heads.
        Of those the facts check leaves open, ``semantic_sketch_pair_budget`` are confirmed, highest
        sketch cosine (``sketch_cos``) first (``_over_budget``).

        Cheapest test first: the objections overrule any cosine, so a named pair they refuse is settled
        before anything is embedded, and a text that only refused pairs need is never embedded."""
        if len(sus_row) == 0:
            return Drops.none()
        n = batch.num_rows
        doc_ids = strings_np(batch, "doc_id")
        row_of = {d: i for i, d in enumerate(doc_ids)}
        in_batch = cand_batch.astype(str) == ctx.batch_id
        cand_row = np.array([row_of.get(str(d), -1) if ib else -1 for d, ib in zip(cand_doc, in_batch, strict=True)], np.int64)
        # A same-batch candidate missing from the survivors was dropped by a later layer: not kept, skip.
        usable = ~in_batch | (cand_row >= 0)
        sus_row, cand_doc, cand_batch, cand_row, in_batch = (
            a[usable] for a in (sus_row, cand_doc, cand_batch, cand_row, in_batch)
        )
        pair_min = None if pair_min is None else np.asarray(pair_min, float)[usable]
        sketch = np.zeros(len(sus_row), bool) if sketch is None else np.asarray(sketch, bool)[usable]
        sketch_cos = np.full(len(sus_row), np.nan) if sketch_cos is None else np.asarray(sketch_cos, float)[usable]
        aligned = sketch.copy()
        self._stats["suspects"] = len(np.unique(sus_row))
        if len(sus_row) == 0:
            return Drops.none()
        model_id = model_id_for(self.config.embedder)
        self._stats["model_id"] = model_id

        # Earlier batches' candidates, one entry per document, in (doc_id, batch_id) order ("\x01" sorts
        # before any character of an id, so the joined keys sort as the pairs do).
        ext = np.flatnonzero(~in_batch)
        keys = np.char.add(np.char.add(cand_doc[ext].astype(str), "\x01"), cand_batch[ext].astype(str))
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        ext_doc = cand_doc[ext][first].astype(str).astype(object)
        ext_bat = cand_batch[ext][first].astype(str).astype(object)
        ext_of_pair = np.full(len(sus_row), -1, np.int64)
        ext_of_pair[ext] = inverse.reshape(-1)

        facts = self._fact_sets(batch, ctx, np.unique(np.concatenate([sus_row, cand_row[in_batch]])), ext_doc, ext_bat)
        live = ~self._pair_objections(batch, facts, sus_row, cand_row, in_batch, ext_of_pair, sketch, ctx)
        self._stats["pairs_refused_unembedded"] = int((~live).sum())
        unread = self._over_budget(live & sketch, sketch_cos)
        if len(unread):
            live[unread] = False
            self._unread_rows = np.unique(sus_row[unread])
            self._stats["sketch_pairs_over_budget"] = len(unread)
        if not live.any():
            return Drops.none()

        # Pairs scored on their sentences need no head vector: their heads are never embedded.
        headless = aligned
        headed = live & ~headless
        # This batch's rows of the pairs still open: the suspects and their same-batch candidates, once each.
        rows = np.unique(np.concatenate([sus_row[headed], cand_row[headed & in_batch]]))
        ok_rows, row_vec = self._vectors(
            store, model_id, doc_ids[rows], np.full(len(rows), ctx.batch_id, object),
            lambda missing: self._texts(batch, rows[missing]),
        )
        # Earlier batches' candidates of those pairs: store first, else their published partition.
        need = np.unique(ext_of_pair[headed & ~in_batch])
        ok_need, need_vec = self._vectors(
            store, model_id, ext_doc[need], ext_bat[need],
            lambda missing: self._published_texts(ctx, ext_doc[need[missing]], ext_bat[need[missing]]),
        )
        ok_ext = np.zeros(len(ext_doc), bool)
        ok_ext[need] = ok_need
        ext_vec = np.zeros((len(ext_doc), need_vec.shape[1]), np.float32)
        ext_vec[need] = need_vec
        dim = max(row_vec.shape[1], ext_vec.shape[1])
        pos_of_row = np.full(n, -1, np.int64)
        pos_of_row[rows] = np.arange(len(rows))

        # Named candidates: cosine of each (suspect, candidate) pair still open; a head-less pair passes
        # any head gate (+inf), its sentences decide.
        cos = np.where(live & headless, np.inf, -np.inf)
        s_pos = pos_of_row[sus_row]
        for i in np.flatnonzero(headed):
            if not ok_rows[s_pos[i]]:
                continue
            if in_batch[i]:
                c = pos_of_row[cand_row[i]]
                if ok_rows[c]:
                    cos[i] = float(row_vec[s_pos[i]] @ row_vec[c])
            elif ok_ext[ext_of_pair[i]] and ext_vec.shape[1] == dim:
                cos[i] = float(row_vec[s_pos[i]] @ ext_vec[ext_of_pair[i]])

        row_threshold = self._row_thresholds(batch)
        # A pair's drop cosine: its own (sketch pairs may have theirs) else its row's language threshold.
        pair_threshold = row_threshold[sus_row] if pair_min is None else np.where(np.isnan(pair_min), row_threshold[sus_row], pair_min)
        # In-batch search: each embedded suspect against every embedded row of this batch (IndexFlatIP),
        # so a paraphrase of another suspect's text is found even when L2/L3 named a different candidate.
        flat_row, flat_cand, flat_cos = np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
        if ok_rows.sum() > 1:
            from dedup_tasks.embed.faiss_index import search_flat

            valid = np.flatnonzero(ok_rows)
            # Rows whose candidates are judged by their sentences are not searched by head cosine:
            # that would bypass the aligned score (same-topic zh texts reach 0.97+ head to head).
            suspects = np.unique(sus_row[live & ~aligned])
            q = suspects[ok_rows[pos_of_row[suspects]]]
            scores, idx = search_flat(row_vec[valid], row_vec[pos_of_row[q]], FLAT_NEIGHBOURS)
            hit_row = np.broadcast_to(q[:, None], idx.shape)
            hit_cand = np.where(idx >= 0, rows[valid[np.maximum(idx, 0)]], n)
            keep = (idx >= 0) & (hit_cand < hit_row) & (scores >= row_threshold[hit_row])
            flat_row, flat_cand, flat_cos = hit_row[keep], hit_cand[keep], scores[keep].astype(float)

        confirmed = (self._aligned(batch, ctx, store, cos, aligned, sus_row, cand_row, in_batch, cand_doc, cand_batch)
                     if aligned.any() else SentenceScores.of(cos))
        cos, cross = confirmed.score, confirmed.cross
        pair_threshold = np.where(cross, confirmed.threshold, pair_threshold)
        usable_pair = live & (cos >= pair_threshold)
        flat_veto = self._hit_objections(batch, facts, flat_row, flat_cand)
        flat_hits: dict[int, list[tuple[float, int]]] = {}
        for r, c, sc in zip(flat_row[~flat_veto], flat_cand[~flat_veto], flat_cos[~flat_veto], strict=True):
            flat_hits.setdefault(int(r), []).append((float(sc), int(c)))

        # Decide in batch order: the earlier document wins, and a row this layer dropped is not kept. A
        # cosine match is preferred to a cross-encoder one (a cross-encoder's score and a cosine do not
        # compare), then the higher score.
        dropped = np.zeros(n, bool)
        out_rows, out_doc, out_batch, out_score, out_threshold, out_pair = [], [], [], [], [], []
        order = np.argsort(sus_row, kind="stable")
        bounds = np.flatnonzero(np.concatenate([[True], np.diff(sus_row[order]) != 0, [True]]))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            group = order[a:b]
            r = int(sus_row[group[0]])
            best = ((False, -np.inf), None, None, row_threshold[r], -1)
            for i in group:
                key = (not cross[i], cos[i])
                if usable_pair[i] and not (in_batch[i] and dropped[cand_row[i]]) and key > best[0]:
                    best = (key, cand_doc[i], cand_batch[i], pair_threshold[i], i)
            for sc, c in flat_hits.get(r, []):
                if not dropped[c] and (True, sc) > best[0]:
                    best = ((True, sc), doc_ids[c], ctx.batch_id, row_threshold[r], -1)
            if best[1] is not None:
                dropped[r] = True
                out_rows.append(r)
                out_doc.append(best[1])
                out_batch.append(best[2])
                out_score.append(best[0][1])
                out_threshold.append(best[3])
                out_pair.append(best[4])
        if not out_rows:
            return Drops.none()
        self._drop_thresholds = np.array(out_threshold, float)
        drops = Drops(np.array(out_rows, np.int64), np.array(out_doc, object), np.array(out_batch, object), np.array(out_score))
        pair = np.array(out_pair, np.int64)
        by_cross = (pair >= 0) & cross[np.maximum(pair, 0)]
        if by_cross.any():
            at = np.maximum(pair, 0)
            drops.score_kind = np.where(by_cross, confirmed.kind[at], None).astype(object)
            drops.detail = cross_details(
                by_cross, drops.score, self._drop_thresholds, confirmed.sentences[at], confirmed.model_id[at],
                confirmed.kind[at])
        return drops

    def _over_budget(self, open_sketch: np.ndarray, sketch_cos: np.ndarray) -> np.ndarray:
        """The open sketch pairs left unread by ``semantic_sketch_pair_budget``: all but the budget's
        number of highest sketch cosines (ties: the earlier pair). Empty without a budget or within it.

        The cosine itself, not its ratio to the row's neighbourhood: with the dev rewrites planted in
        the 20,000-document hours, a budget of 300 pairs an hour reached 70 of the 121 zh rewrites whose
        source was a candidate by cosine, 56 by the ratio, and 143 and 146 of the 146 en ones."""
        budget = int(self.config.semantic_sketch_pair_budget)
        pairs = np.flatnonzero(open_sketch)
        if budget <= 0 or len(pairs) <= budget:
            return np.empty(0, np.int64)
        order = np.lexsort((pairs, -sketch_cos[pairs]))
        return np.sort(pairs[order[budget:]])

    def _tally(self, amounts: dict[str, float]) -> None:
        """Adds to this run's running totals (an hour embeds and confirms in several calls); seconds are
        kept to the millisecond."""
        for key, amount in amounts.items():
            total = self._stats.get(key, 0) + amount
            self._stats[key] = round(total, 3) if isinstance(total, float) else total

    def _aligned(
        self, batch: pa.Table, ctx: LayerContext, store: EmbeddingStore, cos: np.ndarray, aligned: np.ndarray, sus_row: np.ndarray,
        cand_row: np.ndarray, in_batch: np.ndarray, cand_doc: np.ndarray, cand_batch: np.ndarray,
    ) -> SentenceScores:
        """The ``aligned`` pairs scored by their sentences instead of the head cosine (their heads are
        never embedded: ``cos`` holds +inf for them). A pair of a language with a cross-encoder file
        (``semantic_cross_encoder_<lang>``) gets the mean cross-encoder logit and that language's logit
        threshold; the others the aligned cosine (``embed.aligned``)."""
        from dedup_tasks.embed.aligned import aligned_scores

        cfg = self.config
        out = SentenceScores.of(cos)
        pairs = np.flatnonzero(aligned & (cos > -np.inf))  # -inf: refused before anything is embedded
        out.score[aligned] = -np.inf
        if not len(pairs):
            return out
        started = time.perf_counter()
        newer = self._sentence_texts(batch, sus_row[pairs], ctx)
        earlier: list[str | None] = [None] * len(pairs)
        local = in_batch[pairs]
        for i, t in zip(np.flatnonzero(local), self._sentence_texts(batch, cand_row[pairs[local]], ctx), strict=True):
            earlier[i] = t
        ext = np.flatnonzero(~local)
        for i, t in zip(ext, self._published_texts(ctx, cand_doc[pairs[ext]], cand_batch[pairs[ext]], sentence_view=True), strict=True):
            earlier[i] = t
        have = np.array([t is not None for t in earlier], bool)
        # Sentence vectors are kept by their text: an earlier page's sentences, embedded when it was the
        # newer side or another pair's candidate, are never embedded again (``embed.stored``), and the
        # model is loaded only when a sentence is missing.
        embed = StoredEncoder(
            lambda texts: self._embedder().encode(texts), store,
            sentence_model_id(model_id_for(cfg.embedder), EMBED_MAX_TOKENS),
        )
        models = cfg.cross_encoders()
        langs = strings_np(batch, "_lang")[sus_row[pairs]] if models and "_lang" in batch.column_names else np.full(len(pairs), None, object)
        cross_seconds = 0.0
        for lang in [*models, None]:
            # A language with a cross-encoder, then every other pair by the aligned cosine.
            mine = have & (langs == lang) if lang is not None else have & ~np.isin(langs, list(models))
            sel = np.flatnonzero(mine)
            if not len(sel):
                continue
            texts_new, texts_old = [newer[i] for i in sel], [earlier[i] for i in sel]
            if lang is None:
                out.score[pairs[sel]] = aligned_scores(embed, texts_new, texts_old)
                continue
            t0 = time.perf_counter()
            path, threshold = models[lang]
            pooling = CROSS_SCORE
            model = get_cross_encoder(path)
            story = model.story_scores(embed, texts_new, texts_old, pooling, CROSS_MIN_COS, threshold)
            at = pairs[sel]
            out.score[at] = story.score
            out.kind[at] = CROSS_KIND[pooling]
            out.cross[at] = True
            out.threshold[at] = threshold
            out.sentences[at] = story.sentences
            out.model_id[at] = model.model_id
            self._stats.setdefault("cross_models", {})[lang] = model.model_id
            lang_seconds = time.perf_counter() - t0
            cross_seconds += lang_seconds
            self._tally({
                "cross_pairs": len(sel), "cross_gated": int(story.gated.sum()), "cross_one_way": int(story.one_way.sum()),
                "cross_partial": int(story.partial.sum()),
                "cross_sentence_pairs": int(story.sentences[~story.gated].sum()), "cross_reads": int(story.reads.sum()),
                # Per language too: which language's stories the confirmer's time goes to.
                f"cross_pairs_{lang}": len(sel), f"cross_seconds_{lang}": lang_seconds,
            })
        self._tally({
            "sentences_embedded": embed.embedded, "sentences_reused": embed.reused,
            "sentence_embed_seconds": embed.embed_seconds,
        })
        self._stats["aligned_pairs"] = int(have.sum())
        self._stats["aligned_seconds"] = round(time.perf_counter() - started, 3)
        if cross_seconds:
            self._stats["cross_seconds"] = round(cross_seconds, 3)
        return out

    # ---- what a cosine cannot overrule ---------------------------------------------------------
    #
    # A cosine says "about the same thing"; it cannot see that a list page and its next page, or two
    # flashes of one template, give other names and figures (the hours3 bench: 54 list pages scored
    # 0.975-0.9998 against their previous page). So every confirmation gets the verifier's facts check
    # (``fingerprint.numbers.facts_differ`` on the newer against the earlier, at any Jaccard): on that
    # bench it refused all 54 list pages and none of the 49 true L4 drops. A page L1 kept as an update of
    # its URL stays kept: L3 holds it to a near-identical copy, and a rewrite of an updated page is what
    # an update is.

    def _fact_sets(
        self, batch: pa.Table, ctx: LayerContext, rows: np.ndarray, ext_doc: np.ndarray, ext_bat: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Number sets for the facts check (None: it is off, or the batch has no near-duplicate view):
        (hashes, offsets, set of each batch row (-1: none), set of each earlier candidate (-1: its text
        was not found)). The earlier candidates' sets are read from their published partitions, shared
        with the texts read for embedding (once per partition)."""
        if self.config.minhash_facts_min_new <= 0 or "_near_text" not in batch.column_names:
            return None
        row_nums, row_off = number_sets(batch, rows, ctx.near_text if "_row" in batch.column_names else None)
        ext_nums, ext_off, ext_index = self._published_numbers(ext_doc, ext_bat)
        set_of_row = np.full(batch.num_rows, -1, np.int64)
        set_of_row[rows] = np.arange(len(rows))
        set_of_ext = np.where(ext_index >= 0, len(rows) + ext_index, -1)
        nums = np.concatenate([row_nums, ext_nums]).astype(np.uint64)
        offsets = np.concatenate([row_off, row_off[-1] + ext_off[1:]]).astype(np.int64)
        return nums, offsets, set_of_row, set_of_ext

    def _updates(self, batch: pa.Table) -> np.ndarray:
        return bool_col(batch, URL_UPDATE) if URL_UPDATE in batch.column_names else np.zeros(batch.num_rows, bool)

    def _story_lengths_of(self, batch: pa.Table, ctx: LayerContext | None, rows: np.ndarray) -> np.ndarray:
        """The story length (``_story_lengths``: content without its site's template lines) of these rows."""
        lengths = text_lengths(batch)[rows].copy()
        raw = input_rows(batch, rows, ctx)
        if raw is not None and "content" in raw.column_names and len(rows):
            lengths[:] = story_lengths(raw.column("content"), template_lines_of(batch.schema))
        return lengths

    def _pair_objections(
        self, batch: pa.Table, facts: tuple | None, sus_row: np.ndarray, cand_row: np.ndarray, in_batch: np.ndarray,
        ext_of_pair: np.ndarray, sketch: np.ndarray, ctx: LayerContext | None = None,
    ) -> np.ndarray:
        """Named pairs no cosine may drop: the suspect is a URL update, or its facts differ from the
        candidate's: other figures where the candidate's sentences state some (both kinds of pair), or,
        for a rewrite candidate (``sketch``), values the candidate never states (a rewrite keeps a
        story's figures but not the words around them). A pair whose earlier text was not found cannot
        be checked: the score decides."""
        cfg = self.config
        refused = self._updates(batch)[sus_row]
        self._stats["vetoed_update"] = int(refused.sum())
        self._stats["vetoed_facts"] = 0
        if facts is None:
            return refused
        nums, offsets, set_of_row, set_of_ext = facts
        earlier = np.where(in_batch, set_of_row[np.maximum(cand_row, 0)], np.append(set_of_ext, -1)[ext_of_pair])
        pairs = np.flatnonzero(~refused & (earlier >= 0))
        newer = set_of_row[sus_row[pairs]]
        differ = pair_facts_differ(nums, offsets, newer, earlier[pairs], cfg.minhash_facts_min_new, FACTS_MIN_SHARE)
        rewrites = np.flatnonzero(sketch[pairs] & ~differ)  # the value check reads only what is still open
        if SKETCH_FACTS_MIN_NEW > 0 and len(rewrites):
            values = pair_values_differ(nums, offsets, newer[rewrites], earlier[pairs[rewrites]],
                                        SKETCH_FACTS_MIN_NEW, SKETCH_FACTS_MIN_SHARE)
            # A short story (a flash, a headline) is all facts: one value the earlier never states refuses it.
            short = np.flatnonzero(~values & (self._story_lengths_of(batch, ctx, sus_row[pairs[rewrites]]) < SHORT_STORY_CHARS))
            if len(short):
                at = rewrites[short]
                values[short] = pair_values_differ(nums, offsets, newer[at], earlier[pairs[at]], 1, 0.0)
            self._stats["vetoed_values"] = int(values.sum())
            differ[rewrites[values]] = True
        refused[pairs[differ]] = True
        self._stats["vetoed_facts"] = int(differ.sum())
        return refused

    def _hit_objections(self, batch: pa.Table, facts: tuple | None, hit_row: np.ndarray, hit_cand: np.ndarray) -> np.ndarray:
        """In-batch search hits no cosine may drop, by the same two rules (both rows were embedded, so
        both have number sets)."""
        cfg = self.config
        refused = self._updates(batch)[hit_row]
        self._stats["vetoed_update"] += int(refused.sum())
        if facts is None or not len(hit_row):
            return refused
        nums, offsets, set_of_row, _ = facts
        differ = pair_facts_differ(nums, offsets, set_of_row[hit_row], set_of_row[hit_cand], cfg.minhash_facts_min_new, FACTS_MIN_SHARE)
        self._stats["vetoed_facts"] += int(differ.sum())
        return refused | differ

    # ---- full mode ----------------------------------------------------------------------------
    def _full(self, batch: pa.Table, ctx: LayerContext) -> Drops:
        from dedup_tasks.embed.faiss_index import search_flat

        n = batch.num_rows
        doc_ids = strings_np(batch, "doc_id")
        rows = np.arange(n)
        texts = self._texts(batch, rows)
        has_text = np.array([bool(t) for t in texts], bool)
        model_id = model_id_for(self.config.embedder)
        self._stats["model_id"] = model_id
        store = store_for(ctx.registry)
        ok, vec = self._vectors(
            store, model_id, doc_ids, np.full(n, ctx.batch_id, object),
            lambda missing: [texts[i] if has_text[i] else None for i in missing],
        )
        if not ok.any():
            return Drops.none()
        dim = vec.shape[1]
        # The kept rows' vectors under an id of their own: the index mirrors exactly those (the store
        # also holds dropped rows and candidates under model_id).
        kept_id = kept_model_id(model_id)
        index = PersistentIndex.mirror(self.config.root, kept_id, dim, store)
        row_threshold = self._row_thresholds(batch)
        valid = np.flatnonzero(ok)
        prior, prior_doc, prior_batch = index.search(vec[valid], ctx.batch_id)
        scores, idx = search_flat(vec[valid], vec[valid], FLAT_NEIGHBOURS)

        dropped = np.zeros(n, bool)
        out_rows, out_doc, out_batch, out_score = [], [], [], []
        for qi, r in enumerate(valid):
            threshold = row_threshold[r]
            best = (prior[qi], prior_doc[qi], prior_batch[qi]) if prior[qi] >= threshold else (-np.inf, None, None)
            for s, j in zip(scores[qi], idx[qi], strict=True):
                c = valid[j] if j >= 0 else -1
                if 0 <= c < r and not dropped[c] and s >= threshold and s > best[0]:
                    best = (float(s), doc_ids[c], ctx.batch_id)
            if best[1] is not None:
                dropped[r] = True
                out_rows.append(r)
                out_doc.append(best[1])
                out_batch.append(best[2])
                out_score.append(float(best[0]))
        kept = valid[~dropped[valid]]
        kept_docs, kept_batch = doc_ids[kept], np.full(len(kept), ctx.batch_id, object)
        store.put(kept_id, kept_docs, kept_batch, vec[kept])
        index.follow(store, kept_id, kept_docs, kept_batch, vec[kept])
        if not out_rows:
            return Drops.none()
        self._drop_thresholds = row_threshold[np.array(out_rows, np.int64)]
        return Drops(np.array(out_rows, np.int64), np.array(out_doc, object), np.array(out_batch, object), np.array(out_score))
