"""A cross-encoder that confirms rewrite candidates sentence by sentence (L4's sketch path).

The bi-encoder's cosine reads each text alone; a cross-encoder reads two sentences together, as one
sequence ``<s> A </s></s> B </s>``, and gives one logit for "the same statement". It is the shipped
e5-small encoder (``embed.e5_torch``) with fine-tuned weights and one linear unit on its mean-pooled
vector, loaded from a file ``bench.research.cross_probe --save-model`` writes. No weights ship with the
product: the recipe trains on research-only paraphrase pairs, so a deployment trains its own and
names the file (config ``semantic_cross_encoder_<lang>``). Nothing is downloaded.

A story pair (newer, earlier) is scored as in ``embed.aligned``: each newer sentence is aligned to its
nearest earlier sentence by the layer's embedder, each aligned pair is scored both ways round (one
way only where the story is far below its threshold, and only as many sentences as it takes to see
that it cannot reach it: ``story_scores``), and the story's score is
the mean logit over its newer sentences (docs/semantic.md: on the MRPC stories it
separates rewrites from same-topic stories at d' 2.5, the aligned cosine at 1.8), or, with
``score="prob_cos"``, the mean over them of the pair's probability and the two sentences' cosine,
averaged: the bi-encoder and the cross-encoder err on other pairs, and a probability keeps one
sentence the model is sure of from outvoting the rest (zh dev stories at the tail rule: recall 0.449
against the mean logit's 0.300; docs/semantic.md).
"""

from __future__ import annotations

import io
import pickle
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash

from dedup_tasks.embed.aligned import aligned_pairs

# The pooled vector is L2-normalized; the head was trained on it scaled by this (bench.research.cross_probe).
POOLED_SCALE = 10.0
# Pairs are read in batches of like length, at most this many padded tokens (``e5_torch.token_batches``):
# in the order they come, a batch is as long as its longest pair.
PAIR_BATCH_TOKENS = 2048
# How far below the drop threshold a story read in one order must score to be left unread the other
# way round, per score kind: about twice the largest one-order error of any dev story (en, mean
# logit: 0.84; zh, prob_cos: 0.041; docs/semantic.md). ``bench.research.cross_probe`` prints that
# error for a newly trained model.
# How a story score pools its sentence pairs: the mean logit, or of (probability + cosine) / 2.
CROSS_SCORES = ("logit", "prob_cos")
ORDER_BAND = {"logit": 1.5, "prob_cos": 0.1}
# Given a threshold, a story's first order is read in rounds of this many sentences, lowest aligned
# cosine first; after each round a story that cannot reach its one-order cut stops (``story_scores``).
# One sentence a round stops a story as soon as it can: on hours3 12% fewer reads than three, the same
# drops, and the rounds are still one batch over every story (docs/semantic.md).
READ_ROUND = 1


def pair_values(logit: np.ndarray, cos: np.ndarray, score: str) -> np.ndarray:
    """What a story's score averages per aligned sentence pair: the logit, or for ``score="prob_cos"``
    the mean of the pair's probability and the two sentences' cosine."""
    return 0.5 * (1.0 / (1.0 + np.exp(-logit)) + cos) if score == "prob_cos" else logit


class CrossEncoderError(ValueError):
    """A cross-encoder file that cannot be used; names the file."""


def pair_ids(tokenizer, a: list[str], b: list[str], side: int) -> list[list[int]]:
    """Token ids of each pair (a[i], b[i]) read together: ``<s> A </s></s> B </s>``, each side cut at
    ``side`` tokens (XLM-R's pair layout, e5's "query: " prefix on both)."""
    ea = tokenizer.encode(["query: " + x for x in a], side)
    eb = tokenizer.encode(["query: " + x for x in b], side)
    return [x + [tokenizer.eos] + y[1:] for x, y in zip(ea, eb, strict=True)]


@dataclass(frozen=True)
class StoryScores:
    """Per story pair: its score over the newer's aligned sentences (the mean logit, or the mean of
    probability and cosine; -inf where either text has no sentence) and how many sentences it averaged."""

    score: np.ndarray
    sentences: np.ndarray
    # Stories the aligned cosine ruled out before the cross-encoder read them (score -inf).
    gated: np.ndarray
    # Stories read in one order only: their score is that order's, far below the threshold.
    one_way: np.ndarray
    # One-order stories that stopped before their last sentence: their score is the most the full
    # order could have given (its ceiling), still below the cut.
    partial: np.ndarray
    # Sentence pairs the cross-encoder read per story, counting each order.
    reads: np.ndarray


class CrossEncoder:
    """``logits(a, b)``: one symmetric logit per sentence pair; ``story_scores``: per story pair."""

    def __init__(self, path: str | Path, threads: int = 1) -> None:
        import torch

        from dedup_tasks.embed.e5_torch import E5Torch

        path = Path(path)
        if not path.is_file():
            raise CrossEncoderError(f"cross-encoder file {path} does not exist")
        raw = path.read_bytes()
        try:
            state = torch.load(io.BytesIO(raw), weights_only=True)
            # Two workers: batches side by side, each on one torch thread (E5Torch.pooled_ids).
            model = E5Torch(threads=threads, workers=2)
            model.encoder.load_state_dict(state["encoder"])
            head = torch.nn.Linear(model.H, 1)
            head.load_state_dict(state["head"])
            side = int(state["side"])
        except (KeyError, RuntimeError, TypeError, ValueError, pickle.UnpicklingError) as exc:
            raise CrossEncoderError(
                f"cross-encoder file {path} is not a bench.research.cross_probe --save-model file for the shipped e5-small: {exc}"
            ) from exc
        # The model id names the weights, not the path: a retrained file is another model.
        self._set(model, head, side, "cross-e5-" + xxhash.xxh64_hexdigest(raw)[:12])

    @classmethod
    def from_parts(cls, model, head, side: int, model_id: str = "cross-e5-unsaved") -> CrossEncoder:
        """A cross-encoder over an ``E5Torch`` and a head in memory (the trainer's, before it saves)."""
        out = cls.__new__(cls)
        out._set(model, head, side, model_id)
        return out

    def _set(self, model, head, side: int, model_id: str) -> None:
        self._model, self._head, self.side, self.model_id = model, head, int(side), model_id
        model.encoder.eval()

    def state(self) -> dict:
        """What a model file holds (``CrossEncoder(path)`` reads it back): encoder and head weights, side."""
        return {"encoder": self._model.encoder.state_dict(), "head": self._head.state_dict(), "side": self.side}

    def one_way(self, a: list[str], b: list[str]) -> np.ndarray:
        """The logit of each pair read in the given order (``a[i]`` first); pairs of like length are
        batched together (``E5Torch.pooled_ids``)."""
        import torch

        if not len(a):
            return np.zeros(0)
        pooled = self._model.pooled_ids(pair_ids(self._model.tokenizer, a, b, self.side), PAIR_BATCH_TOKENS)
        with torch.inference_mode():
            return self._head(torch.from_numpy(pooled) * POOLED_SCALE).squeeze(1).numpy().astype(float)

    def logits(self, a: list[str], b: list[str]) -> np.ndarray:
        """The logit of each pair (a[i], b[i]), the mean of both orders (the model reads them unequally)."""
        if len(a) != len(b):
            raise ValueError(f"{len(a)} first sentences for {len(b)} second ones")
        return 0.5 * (self.one_way(a, b) + self.one_way(b, a))

    def story_scores(
        self, embed, newer: list[str], earlier: list[str], score: str = "logit", min_cos: float = -1.0,
        threshold: float | None = None,
    ) -> StoryScores:
        """Per pair (newer[i], earlier[i]): the newer's sentences against their aligned earlier sentences
        (``embed``: the bi-encoder that aligns them, L2-normalized rows), pooled by ``score``: "logit",
        the mean of both orders' logits; "prob_cos", the mean of (sigmoid(logit) + cosine) / 2.

        Cheapest test first:

        * a story whose aligned cosine (the mean over its newer sentences of the cosine to their
          counterparts, known once they are aligned) is below ``min_cos`` is not read by the
          cross-encoder: it scores -inf and is marked ``gated``;
        * given the drop ``threshold``, each story is read in one order first (newer sentence first),
          and only a story that scores within ``ORDER_BAND[score]`` of the threshold or above it is
          read the other way round too. The rest keep their one-way score, marked ``one_way``: below
          the threshold by more than the two orders ever differ on the dev stories (docs/semantic.md), so their decision is the one both orders give, for half the reading;
        * that first order is read in rounds of ``READ_ROUND`` sentences, lowest aligned cosine first.
          After each round a story's ceiling is what it has read plus the most each unread sentence
          can add (``pair_ceilings``); a story whose ceiling is below the one-order cut stops, marked
          ``partial`` and scored at that ceiling: no sentence left could have brought it to the cut,
          so its decision is the one reading it whole gives."""
        if score not in CROSS_SCORES:
            raise ValueError(f"score must be one of {CROSS_SCORES}, got {score!r}")
        n = len(newer)
        pairs = aligned_pairs(embed, newer, earlier)
        out = np.full(n, -np.inf)
        none = np.zeros(n, bool)
        if not pairs:
            return StoryScores(out, np.zeros(n, np.int64), none, none, none, np.zeros(n, np.int64))
        story = np.array([p[0] for p in pairs], np.int64)
        cos = np.array([p[3] for p in pairs], float)
        count = np.bincount(story, minlength=n)
        has = count > 0
        gated = has & (np.bincount(story, weights=cos, minlength=n) / np.maximum(count, 1) < min_cos)
        read = np.flatnonzero(~gated[story])
        first = [pairs[i][1] for i in read]
        second = [pairs[i][2] for i in read]
        scored = has & ~gated

        def pooled(values: np.ndarray) -> np.ndarray:
            return np.bincount(story[read], weights=values, minlength=n) / np.maximum(count, 1)

        def values(logit: np.ndarray) -> np.ndarray:
            # A read pair by its value, an unread one (NaN) by the most it could add.
            known = ~np.isnan(logit)
            return np.where(known, pair_values(np.where(known, logit, 0.0), cos[read], score), ceilings)

        logit = np.full(len(read), np.nan)
        # The first order: all at once without a threshold, else in rounds, each story's lowest
        # cosines first (a story of other news shows it soonest there).
        cut = -np.inf if threshold is None else threshold - ORDER_BAND[score]
        rank = _rank_within(story[read], cos[read]) // READ_ROUND if threshold is not None else np.zeros(len(read), np.int64)
        ceilings = self.pair_ceilings(cos[read], score)
        going = scored.copy()
        for r in range(int(rank.max()) + 1 if len(read) else 0):
            now = np.flatnonzero(going[story[read]] & (rank == r))
            logit[now] = self.one_way([first[i] for i in now], [second[i] for i in now])
            going &= pooled(values(logit)) >= cut
        # A story still going has read its whole first order, and scores within the band of the
        # threshold or above: it is read the other way round too.
        again = np.flatnonzero(going[story[read]])
        if len(again):
            logit[again] = 0.5 * (logit[again] + self.one_way([second[i] for i in again], [first[i] for i in again]))
        known = ~np.isnan(logit)
        partial = scored & (np.bincount(story[read], weights=(~known).astype(float), minlength=n) > 0)
        out[scored] = pooled(values(logit))[scored]
        reads = np.bincount(story[read], weights=known.astype(float), minlength=n) + np.bincount(story[read][again], minlength=n)
        return StoryScores(out, count, gated, scored & ~going, partial, reads.astype(np.int64))

    def pair_ceilings(self, cos: np.ndarray, score: str) -> np.ndarray:
        """The most each aligned pair can add to a story's pooled score, before it is read: a
        probability is at most 1, so ``prob_cos`` at most (1 + cosine) / 2; the linear head on an
        L2-normalized vector at most ``POOLED_SCALE * |w| + b`` (a hair above: bf16 arithmetic)."""
        if score == "prob_cos":
            return 0.5 * (1.0 + cos)
        weight, bias = self._head.weight.detach(), self._head.bias.detach()
        top = POOLED_SCALE * float(weight.norm()) + float(bias.sum())
        return np.full(len(cos), top + 1e-3 * abs(top) + 1e-3)


def _rank_within(group: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Each element's rank by ``key`` (ascending, ties by position) among the elements of its group."""
    order = np.lexsort((np.arange(len(key)), key, group))
    rank = np.empty(len(key), np.int64)
    starts = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1]
    sizes = np.diff(np.r_[starts, len(order)])
    rank[order] = np.arange(len(order)) - np.repeat(starts, sizes)
    return rank


_CACHE: dict[tuple, CrossEncoder] = {}
_LOCK = threading.Lock()


def get_cross_encoder(path: str | Path, threads: int = 1) -> CrossEncoder:
    """The process-wide cross-encoder of ``path``, loaded on first use (an hourly task loads it once);
    a file replaced since (a retrained model) is loaded again."""
    resolved = Path(path).resolve()
    stat = resolved.stat() if resolved.is_file() else None
    key = (str(resolved), stat and (stat.st_mtime_ns, stat.st_size), int(threads))
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = CrossEncoder(path, threads)
        return _CACHE[key]
