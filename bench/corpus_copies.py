"""Stories the source corpora hold twice: the labelling behind ``corpus_copy`` (``bench.generate``).

The corpora (Reuters, Sogou) carry some stories more than once, outside the natural-duplicate
groups the corpus loader knows (a wire story and its shorter or trimmed retelling, one flash filed
twice). The generator hands both out as originals, so a system that drops the later one as a copy
of the earlier would be charged with a false drop for what a reader calls the same article.

A later original is a **corpus copy** of an earlier original or template page when, on the
story text (title and paragraphs, without site chrome; folded like ``bench.similarity``):

* one text covers at least ``MIN_COVERAGE`` of the other's character 5-grams (the later is a
  trimmed telling of the earlier, or the earlier of the later);
* the covered text misses the other in *passages* only: at most ``MAX_SCATTERED`` of its 5-gram
  positions miss it in runs shorter than ``LONG_RUN`` (reports written from one template, other
  names and figures in the same sentences, differ in short runs everywhere and are not copies);
* every number the covered text states is stated by the other (a report with other figures is
  another report).

Deliberately stricter than the system's verifier: this decides only which documents the bench
stops calling distinct originals; they are scored on their own (``bench.score``), not as copies a
system must find.

Candidates come from a 1-in-8 sample of each text's 5-gram hashes (a deterministic polynomial
hash of the code points, numpy throughout), paired through the samples they share; every
candidate is then checked exactly on its full 5-gram sets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.similarity import CHAR_GRAM, char_text

MIN_COVERAGE = 0.8
MAX_SCATTERED = 0.05
LONG_RUN = 20  # 5-gram positions, as the system's verifier reads a passage
SAMPLE_MOD = 8
MAX_GROUP = 64  # a sampled 5-gram in more texts than this is common wording, not evidence of a copy
MIN_CHARS = 40  # below this a text is a flash, and shared wording says nothing
_NUMBER = re.compile(r"\d+")
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass(frozen=True)
class CorpusCopy:
    later: int  # index into the texts given to ``find_corpus_copies``
    earlier: int
    covers_later: float  # share of the later's 5-grams in the earlier
    covers_earlier: float
    jaccard: float


def gram_hashes(text: str, n: int = CHAR_GRAM) -> np.ndarray:
    """64-bit hashes of the character n-grams of ``text`` in text order (one per position)."""
    cp = np.frombuffer(text.encode("utf-32-le"), np.uint32).astype(np.uint64)
    if len(cp) < n:
        cp = np.concatenate([cp, np.zeros(n - len(cp), np.uint64)])
    with np.errstate(over="ignore"):
        h = np.zeros(len(cp) - n + 1, np.uint64)
        for k in range(n):
            h = h * np.uint64(1_000_003) + cp[k : len(cp) - n + 1 + k]
        # fmix64: the low bits of the polynomial are poorly mixed, and the sample keys on them.
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
    return h


def _scattered(positions: np.ndarray, other: np.ndarray) -> float:
    """Share of the positions (hashes in text order) missing ``other`` in runs under LONG_RUN."""
    miss = ~np.isin(positions, other)
    if not miss.any():
        return 0.0
    edges = np.diff(np.concatenate([[0], miss.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    runs = ends - starts
    return float(runs[runs < LONG_RUN].sum()) / len(positions)


def _numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(text))


def find_corpus_copies(
    texts: Sequence[str], order: Sequence[int], eligible_later: Sequence[bool]
) -> list[CorpusCopy]:
    """Pairs (later, earlier) of ``texts`` (``bench.similarity.char_text`` of the story) where the
    later is a corpus copy of the earlier (module docstring). ``order`` ranks the texts in crawl
    order; only texts with ``eligible_later`` may be the later one. Each later text gets its best
    earlier match (highest Jaccard)."""
    n = len(texts)
    rank = np.asarray(order, np.int64)
    full = [gram_hashes(t) if len(t) >= MIN_CHARS else np.empty(0, np.uint64) for t in texts]
    sample_h, sample_d = [], []
    n_samples = np.zeros(n, np.int64)
    for i, h in enumerate(full):
        s = np.unique(h[(h % np.uint64(SAMPLE_MOD)) == 0])
        n_samples[i] = len(s)
        sample_h.append(s)
        sample_d.append(np.full(len(s), i, np.int64))
    if not n:
        return []
    hs = np.concatenate(sample_h)
    ds = np.concatenate(sample_d)
    idx = np.lexsort((ds, hs))
    hs, ds = hs[idx], ds[idx]
    # Group sizes per element; pairs within groups of at most MAX_GROUP texts.
    starts = np.flatnonzero(np.concatenate([[True], hs[1:] != hs[:-1]]))
    sizes = np.diff(np.concatenate([starts, [len(hs)]]))
    size_of = np.repeat(sizes, sizes)
    small = size_of <= MAX_GROUP
    pair_keys = []
    for k in range(1, MAX_GROUP):
        same = (hs[:-k] == hs[k:]) & small[:-k]
        if not same.any():
            break
        a, b = ds[:-k][same], ds[k:][same]
        pair_keys.append(np.minimum(a, b) * n + np.maximum(a, b))
    if not pair_keys:
        return []
    keys, counts = np.unique(np.concatenate(pair_keys), return_counts=True)
    a, b = keys // n, keys % n
    # Estimated coverage of the smaller sample by the other: a copy covers >= 0.8, keep >= 0.5.
    cand = counts >= 0.5 * np.minimum(n_samples[a], n_samples[b])
    best: dict[int, CorpusCopy] = {}
    eligible = np.asarray(eligible_later, bool)
    for x, y in zip(a[cand].tolist(), b[cand].tolist(), strict=True):
        later, earlier = (x, y) if rank[x] > rank[y] else (y, x)
        if not eligible[later]:
            continue
        hl, he = full[later], full[earlier]
        ul, ue = np.unique(hl), np.unique(he)
        common = len(np.intersect1d(ul, ue, assume_unique=True))
        cov_l, cov_e = common / len(ul), common / len(ue)
        jac = common / (len(ul) + len(ue) - common)
        if max(cov_l, cov_e) < MIN_COVERAGE:
            continue
        # The covered text (the one the other holds most of) must differ in passages only and keep
        # every figure it states.
        if cov_l >= cov_e:
            covered, coverer, t_cov, t_other = hl, ue, texts[later], texts[earlier]
        else:
            covered, coverer, t_cov, t_other = he, ul, texts[earlier], texts[later]
        if _scattered(covered, coverer) > MAX_SCATTERED:
            continue
        if not _numbers(t_cov) <= _numbers(t_other):
            continue
        found = CorpusCopy(later, earlier, cov_l, cov_e, jac)
        if later not in best or jac > best[later].jaccard:
            best[later] = found
    return [best[k] for k in sorted(best)]


def story_text(title: str | None, paragraphs_text: str) -> str:
    """The folded, space-free story text a corpus copy is judged on."""
    return char_text(title, paragraphs_text)
