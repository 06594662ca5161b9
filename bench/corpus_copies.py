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
* every number the covered text states is stated by the other, and every capitalized name of its
  first sentence appears in the other (a report with other figures, or about
  another company or fund, is another report);
* their Jaccard is at least ``MIN_JACCARD`` (a long article holding a whole short one, or a
  recombined text holding a short article's sentences, is not a retelling of it; the system's
  verifier does not drop under 0.45 either).

Deliberately stricter than the system's verifier: this decides only which documents the bench
stops calling distinct originals; they are scored on their own (``bench.score``), not as copies a
system must find.

A rewording passes none of these tests, so the corpora's rewritten stories (a wire story filed again
in other words, a correction, one deal told by buyer and seller) stay originals. Those a reader
judged are listed in ``reviewed_copies.csv`` (``reviewed_same_story``): pairs of corpus article ids,
each with the reader's verdict and why. A pair judged ``same_story`` makes the later of the two a
corpus copy as well; a pair judged ``distinct`` stays two originals (the file keeps it so that the
verdict is not asked again). The list holds what L4 dropped on the ``hours3`` crawl that the
generator called distinct (docs/semantic.md); stories no system paired were never read.

Candidates come from a 1-in-8 sample of each text's character 12-gram hashes (a deterministic
polynomial hash of the code points, numpy throughout; space-free 5-grams of English are too common
to pair texts by), paired through the samples they share; every candidate is then checked exactly
on its full 5-gram sets.
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.similarity import CHAR_GRAM, char_text

MIN_COVERAGE = 0.8
MIN_JACCARD = 0.4
MAX_SCATTERED = 0.15
LONG_RUN = 20  # 5-gram positions, as the system's verifier reads a passage
CANDIDATE_GRAM = 12  # candidates pair through longer grams: space-free 5-grams of English are common
SAMPLE_MOD = 8
MIN_SHARED = 0.25  # of the smaller sample, for a candidate (a rewording breaks 12-grams sooner)
MAX_GROUP = 64  # a sampled 5-gram in more texts than this is common wording, not evidence of a copy
MIN_CHARS = 40  # below this a text is a flash, and shared wording says nothing
_NUMBER = re.compile(r"\d+")
_NAME = re.compile(r"[A-Z][A-Za-z]{2,}")
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)
REVIEWED = Path(__file__).with_name("reviewed_copies.csv")
VERDICTS = ("same_story", "distinct")


@dataclass(frozen=True)
class CorpusCopy:
    later: int  # index into the texts given to ``find_corpus_copies``
    earlier: int
    covers_later: float  # share of the later's 5-grams in the earlier
    covers_earlier: float
    jaccard: float


def reviewed_pairs(path: Path = REVIEWED) -> dict[frozenset[str], tuple[str, str]]:
    """Every reviewed pair of corpus articles (unordered) -> (verdict, why); a bad row is refused by
    its line number."""
    out: dict[frozenset[str], tuple[str, str]] = {}
    with path.open(encoding="utf-8", newline="") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            pair = frozenset((row.get("later_article") or "", row.get("earlier_article") or ""))
            if "" in pair or len(pair) != 2 or row.get("verdict") not in VERDICTS:
                raise ValueError(f"{path}:{line}: expected two article ids and a verdict in {VERDICTS}, got {row}")
            out[pair] = (row["verdict"], row.get("why") or "")
    return out


@functools.lru_cache(maxsize=1)
def reviewed_same_story() -> dict[frozenset[str], str]:
    """The reviewed pairs judged the same story -> why (``reviewed_copies.csv``)."""
    return {pair: why for pair, (verdict, why) in reviewed_pairs().items() if verdict == "same_story"}


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


def _names(lede: str) -> set[str]:
    return {w.lower() for w in _NAME.findall(lede)}


def find_corpus_copies(
    texts: Sequence[str], order: Sequence[int], eligible_later: Sequence[bool], ledes: Sequence[str] | None = None
) -> list[CorpusCopy]:
    """Pairs (later, earlier) of ``texts`` (``story_text`` of each story) where the later is a corpus
    copy of the earlier (module docstring). ``order`` ranks the texts in crawl order; only texts
    with ``eligible_later`` may be the later one; ``ledes`` (``lede`` of each, for the names; None:
    no names check). Each later text gets its best earlier match (highest Jaccard)."""
    n = len(texts)
    rank = np.asarray(order, np.int64)
    sample_h, sample_d = [], []
    n_samples = np.zeros(n, np.int64)
    for i, t in enumerate(texts):
        h = gram_hashes(t, CANDIDATE_GRAM) if len(t) >= MIN_CHARS else np.empty(0, np.uint64)
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
    cand = (counts >= 2) & (counts >= MIN_SHARED * np.minimum(n_samples[a], n_samples[b]))
    best: dict[int, CorpusCopy] = {}
    eligible = np.asarray(eligible_later, bool)
    for x, y in zip(a[cand].tolist(), b[cand].tolist(), strict=True):
        later, earlier = (x, y) if rank[x] > rank[y] else (y, x)
        if not eligible[later]:
            continue
        hl, he = gram_hashes(texts[later]), gram_hashes(texts[earlier])
        ul, ue = np.unique(hl), np.unique(he)
        common = len(np.intersect1d(ul, ue, assume_unique=True))
        cov_l, cov_e = common / len(ul), common / len(ue)
        jac = common / (len(ul) + len(ue) - common)
        if max(cov_l, cov_e) < MIN_COVERAGE or jac < MIN_JACCARD:
            continue
        # The covered text (the one the other holds most of) must differ in passages only and keep
        # every figure it states.
        (cov, other) = (later, earlier) if cov_l >= cov_e else (earlier, later)
        covered, coverer = (hl, ue) if cov == later else (he, ul)
        t_cov, t_other = texts[cov], texts[other]
        if _scattered(covered, coverer) > MAX_SCATTERED:
            continue
        if not _numbers(t_cov) <= _numbers(t_other):
            continue
        if ledes is not None and any(name not in t_other for name in _names(ledes[cov])):
            continue
        found = CorpusCopy(later, earlier, cov_l, cov_e, jac)
        if later not in best or jac > best[later].jaccard:
            best[later] = found
    return [best[k] for k in sorted(best)]


def story_text(title: str | None, paragraphs_text: str) -> str:
    """The folded, space-free story text a corpus copy is judged on."""
    return char_text(title, paragraphs_text)


def lede(first_sentence: str) -> str:
    """What the names check reads: the first sentence as written (not the title: wire headlines are
    upper case, so every word of one would read as a name)."""
    return first_sentence
