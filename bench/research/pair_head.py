"""A trained pair head over frozen e5 sentence embeddings: "do these two sentences say the same thing?"

e5's cosine says "about the same thing": two questions of one FAQ topic (AFQMC/BQ/LCQMC label 0) score
like two wordings of one question, sentence by sentence (docs/semantic.md). The paraphrase
corpora label exactly that difference, so a small classifier learns it from their *train* files over
features the frozen encoder already gives: ``u*v`` and ``|u-v|`` (which dimensions agree), the cosine,
and the lexical overlap of the two sentences (word sets in English, character bigrams in Chinese).
One logistic regression per language; weights, feature scaling and provenance in
``bench/work/research/pair_head.npz`` (written by ``python -m bench.research.train_pair_head``, deterministic; 20 kB).
Nothing is downloaded.

An experiment of the bench, not a confirmer of the pipeline: on the dev stories it did not separate
rewrites from same-topic negatives better than the cosine (docs/semantic.md), so it
was not wired into ``layers/semantic.py``. ``python -m bench.research.reworded_tune dev trained`` measures it.

A story pair is scored like ``embed.aligned``: the mean over the newer's sentences of the best head
probability against a sentence of the earlier.
"""

from __future__ import annotations

import re
import zlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bench.research import RESULTS
from dedup_tasks.embed.aligned import embedded_sentences

HEAD_PATH = RESULTS / "pair_head.npz"

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK_DROP = re.compile(r"[\s\W_]+", re.UNICODE)
LEXICAL_FEATURES = 4  # Jaccard, containment, length ratio (chars), both-empty flag


def _tokens(text: str, lang: str) -> list[str]:
    if lang == "zh":
        s = _CJK_DROP.sub("", text.lower())
        return [s[i : i + 2] for i in range(len(s) - 1)] or ([s] if s else [])
    return _WORD.findall(text.lower())


def _bags(texts: list[str], lang: str, buckets: int = 1 << 20) -> sp.csr_matrix:
    """Binary (n, buckets) matrix of each text's hashed token set."""
    indptr, indices = [0], []
    for t in texts:
        ids = sorted({zlib.crc32(tok.encode()) % buckets for tok in _tokens(t, lang)})
        indices.extend(ids)
        indptr.append(len(indices))
    data = np.ones(len(indices), np.float32)
    return sp.csr_matrix((data, np.asarray(indices, np.int64), np.asarray(indptr, np.int64)), shape=(len(texts), buckets))


def lexical_grid(a: list[str], b: list[str], lang: str) -> np.ndarray:
    """(len(a), len(b), LEXICAL_FEATURES): the lexical features of every sentence pair (a_i, b_j)."""
    A, B = _bags(a, lang), _bags(b, lang)
    inter = np.asarray((A @ B.T).todense(), np.float32)
    na, nb = np.asarray(A.sum(1), np.float32), np.asarray(B.sum(1), np.float32).T
    union = na + nb - inter
    jac = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
    cont = np.where(np.minimum(na, nb) > 0, inter / np.maximum(np.minimum(na, nb), 1), 0.0)
    la = np.array([len(t) for t in a], np.float32)[:, None]
    lb = np.array([len(t) for t in b], np.float32)[None, :]
    ratio = np.minimum(la, lb) / np.maximum(np.maximum(la, lb), 1)
    empty = ((na == 0) | (nb == 0)).astype(np.float32)
    return np.stack(np.broadcast_arrays(jac, cont, ratio, empty), axis=-1).astype(np.float32)


def pair_features(u: np.ndarray, v: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """(n, 2d + 1 + LEXICAL_FEATURES) features of n pairs of L2-normalized rows; symmetric in u, v."""
    cos = (u * v).sum(1, keepdims=True)
    return np.concatenate([u * v, np.abs(u - v), cos, lexical], axis=1).astype(np.float32)


class PairHead:
    """Per-language logistic regression over ``pair_features``; ``prob(lang, ...)`` in [0, 1]."""

    def __init__(self, weights: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, float]], meta: dict[str, str]) -> None:
        self.weights = weights  # lang -> (mean, scale, w, b)
        self.meta = meta

    @classmethod
    def load(cls, path: str | Path | None = None) -> PairHead:
        with np.load(Path(path or HEAD_PATH), allow_pickle=False) as z:
            langs = [str(x) for x in z["langs"]]
            weights = {lang: (z[f"{lang}_mean"], z[f"{lang}_scale"], z[f"{lang}_w"], float(z[f"{lang}_b"])) for lang in langs}
            meta = {k[5:]: str(z[k]) for k in z.files if k.startswith("meta_")}
        return cls(weights, meta)

    def lang_of(self, lang: str | None) -> str:
        """The head a language uses: its own, else English's (the only other one trained)."""
        return lang if lang in self.weights else "en"

    def prob(self, lang: str | None, features: np.ndarray) -> np.ndarray:
        mean, scale, w, b = self.weights[self.lang_of(lang)]
        z = ((features - mean) / scale) @ w + b
        return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))


@lru_cache(maxsize=2)
def default_head(path: str | None = None) -> PairHead:
    return PairHead.load(path)


def trained_scores(
    embed, newer: list[str], earlier: list[str], langs: list[str | None], head: PairHead | None = None,
    max_sentences: int = 8, max_chars: int = 120,
) -> np.ndarray:
    """Per pair (newer[i], earlier[i]): mean over the newer's sentences of the best head probability
    against a sentence of the earlier (-1 where either has no sentence). ``embed(texts)`` ->
    L2-normalized rows; every distinct sentence is embedded once, in one call."""
    head = head or default_head()
    split_new, split_old, index, vec = embedded_sentences(embed, newer, earlier, max_sentences, max_chars)
    out = np.full(len(newer), -1.0)
    for i, (a, b) in enumerate(zip(split_new, split_old, strict=True)):
        if not a or not b:
            continue
        lang = head.lang_of(langs[i])
        ia, ib = [index[s] for s in a], [index[s] for s in b]
        u = np.repeat(vec[ia], len(ib), axis=0)
        v = np.tile(vec[ib], (len(ia), 1))
        lex = lexical_grid(a, b, lang).reshape(len(ia) * len(ib), -1)
        p = head.prob(lang, pair_features(u, v, lex)).reshape(len(ia), len(ib))
        out[i] = float(p.max(axis=1).mean())
    return out
