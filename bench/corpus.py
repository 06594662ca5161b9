"""Source texts for the synthetic crawl, and the benchmark's reference text model.

Reference text model
--------------------
Truth is measured with this module's own ruler, deliberately independent of ``dedup_tasks`` so the
benchmark never grades the system with the system's code:

* ``reference_text(title, content)``: ``(title or "") + "\\n" + (content or "")``, Unicode NFKC,
  lower case, every punctuation (``P*``) and symbol (``S*``) character replaced by a space,
  whitespace collapsed.
* ``text_shingles(ref)``: when CJK characters are more than 30 % of the non-space characters,
  character 5-grams over the text with all whitespace removed; otherwise word 3-grams (tuples).
  A text too short for one shingle yields itself as the only shingle, so no set is empty.
* ``jaccard(a, b)``: ``|A & B| / |A | B|`` over those plain Python sets.
* ``exact_key(title, content)``: xxh3-128 of the NFKC + lower-case + whitespace-collapsed title and
  content joined by ``\\x1f``. It is the equivalence DESIGN.md's exact layer promises; the generator
  uses it to prove an exact copy equals its source and that distinct documents are distinct.

Corpora
-------
Two sources, chosen by ``resolve_data_dir(source)``:

* ``eval``: the research-only evaluation corpora under ``bench.evaldata.eval_data_dir()``
  (``$DEDUP_EVAL_DATA``, default ``../shared/data``): BBC News and Reuters-21578 (en), Sogou smarty (zh).
  Benchmarks and CI use these; they are never shipped.
* ``sample``: the redistributable corpus shipped in ``bench/sample_corpus/`` (public-domain U.S. State
  of the Union addresses and classical Chinese texts cut to article size; see its SOURCES.md). The demo
  and the tests that must run on a clean clone use it.
* ``auto`` (the default): ``eval`` when its corpora are present, else ``sample``.

Eval corpora: Bodies shorter than ``MIN_BODY_CHARS`` are skipped (73 Sogou rows are empty or
stubs). The corpora already contain duplicates: inside one language, documents are grouped into
components of "normalized body equal" or "Jaccard >= 0.5 on title + body" (MinHash-LSH candidates,
verified exactly). Only the first member of a component (file order) enters the originals pool;
other members with the same normalized body or a Jaccard >= 0.8 with that representative are kept
as its ``variants``, which the generator plants as ``corpus_dup`` documents in the representative's
cluster. Members in between (0.5 <= J < 0.8: in Reuters mostly same-template notices about different
companies, so not clearly duplicates) are discarded: neither planted nor used as originals. So the
originals pool holds no hidden duplicate and no ambiguous look-alike pair.

Sentence pools feed synthetic articles once the real ones are used up: English sentences from the
real articles; Chinese sentences from the Sogou texts plus the Chinese *train/dev* pair files
(never a file with ``_test`` in its name: those are held out for reporting).
"""

from __future__ import annotations

import functools
import json
import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from bench.evaldata import eval_data_available, eval_data_dir, missing_reason

SAMPLE_DATA_DIR = Path(__file__).resolve().parent / "sample_corpus"
SOURCES = ("auto", "eval", "sample")
CORPUS_FILES: dict[str, tuple[str, ...]] = {
    "en": ("en_bbc_news.jsonl", "en_reuters21578.jsonl"),
    "zh": ("zh_sogou_smarty.jsonl",),
}
SAMPLE_CORPUS_FILES: dict[str, tuple[str, ...]] = {
    "en": ("en_sample_sotu.jsonl",),
    "zh": ("zh_sample_classics.jsonl",),
}
MIN_BODY_CHARS = {"en": 60, "zh": 40}
CORPUS_DUP_THRESHOLD = 0.5
CORPUS_VARIANT_THRESHOLD = 0.8
CJK_SHARE = 0.3
ZH_SHINGLE = 5
EN_SHINGLE = 3

# ---------------------------------------------------------------------------------------------
# Reference text model


def _punct_symbol_table() -> dict[int, str]:
    """Translation table mapping every P*/S* code point below U+30000 to a space.

    (str.translate with a dict is about four times faster here than a regex with this huge class.)
    """
    return {cp: " " for cp in range(0x30000) if unicodedata.category(chr(cp))[0] in "PS"}


_PUNCT_TABLE = _punct_symbol_table()
_CJK_RE = re.compile(
    "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af\U00020000-\U0002ffff]"
)


def _str(value: object) -> str:
    """None, NaN and other non-strings (a null from a DataFrame) count as empty text."""
    return value if isinstance(value, str) else ""


def reference_text(title: str | None, content: str | None) -> str:
    text = unicodedata.normalize("NFKC", f"{_str(title)}\n{_str(content)}").lower()
    return " ".join(text.translate(_PUNCT_TABLE).split())


def cjk_share(text: str) -> float:
    compact = "".join(text.split())
    if not compact:
        return 0.0
    return len(_CJK_RE.findall(compact)) / len(compact)


def text_shingles(ref: str) -> set:
    """Shingles of a ``reference_text`` (char 5-grams for CJK-dominated text, else word 3-grams)."""
    compact = ref.replace(" ", "")
    if not compact:
        return {""}
    if not compact.isascii() and len(_CJK_RE.findall(compact)) > CJK_SHARE * len(compact):
        if len(compact) <= ZH_SHINGLE:
            return {compact}
        return {compact[i : i + ZH_SHINGLE] for i in range(len(compact) - ZH_SHINGLE + 1)}
    words = ref.split()
    if len(words) <= EN_SHINGLE:
        return {tuple(words)}
    return set(zip(words, words[1:], words[2:], strict=False))


def doc_shingles(title: str | None, content: str | None) -> set:
    return text_shingles(reference_text(title, content))


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def normalize_exact(text: str | None) -> str:
    """NFKC (folds full/half width), lower case, whitespace collapsed: the exact layer's view."""
    return " ".join(unicodedata.normalize("NFKC", _str(text)).lower().split())


def exact_key(title: str | None, content: str | None) -> int:
    joined = normalize_exact(title) + "\x1f" + normalize_exact(content)
    return xxhash.xxh3_128_intdigest(joined.encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# Articles


@dataclass(frozen=True)
class Article:
    """A news article as paragraphs of sentences, so edits can work on sentences and paragraphs."""

    id: str
    lang: str
    title: str
    paragraphs: tuple[tuple[str, ...], ...]
    url: str | None = None
    origin: str = "synthetic"

    def body(self) -> str:
        return render_body(self.lang, self.paragraphs)

    @property
    def n_sentences(self) -> int:
        return sum(len(p) for p in self.paragraphs)


def render_body(lang: str, paragraphs: Iterable[Sequence[str]]) -> str:
    # Chinese web text runs sentences together and breaks paragraphs with one newline; English
    # separates sentences by a space and paragraphs by a blank line.
    if lang == "zh":
        return "\n".join("".join(p) for p in paragraphs if p)
    return "\n\n".join(" ".join(p) for p in paragraphs if p)


_EN_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_ZH_SENT = re.compile(r"[^。！？]*[。！？]+[”’」』）)\"']*|[^。！？]+$")


def split_en_sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _EN_SENT_SPLIT.split(paragraph) if s.strip()]


def split_zh_sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _ZH_SENT.findall(paragraph) if s.strip()]


def _en_paragraphs(text: str) -> list[tuple[str, ...]]:
    # Reuters hard-wraps lines and indents each new paragraph; BBC separates paragraphs by blank lines.
    paragraphs: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        if not line.strip() or (line[:1].isspace() and current):
            if current:
                paragraphs.append(" ".join(current))
                current = []
            if not line.strip():
                continue
        current.append(line.strip())
    if current:
        paragraphs.append(" ".join(current))
    return [tuple(split_en_sentences(p)) for p in paragraphs if p]


def _zh_paragraphs(text: str) -> list[tuple[str, ...]]:
    out = []
    for line in text.split("\n"):
        line = line.strip(" \t\r\u3000")
        if line:
            out.append(tuple(split_zh_sentences(line)))
    return [p for p in out if p]


def parse_article(row: dict[str, Any], lang: str) -> Article:
    text = row.get("text") or ""
    paragraphs = _zh_paragraphs(text) if lang == "zh" else _en_paragraphs(text)
    return Article(
        id=str(row["id"]),
        lang=lang,
        title=(row.get("title") or "").strip(),
        paragraphs=tuple(paragraphs),
        url=row.get("url") or None,
        origin=str(row.get("corpus") or "real"),
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# ---------------------------------------------------------------------------------------------
# Duplicates already in the corpora

_N_PERM = 32
_ROWS_PER_BAND = 2
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads the polynomial shingle codes over all 64 bits."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _shingle_codes(ref: str, vocab: dict[str, int]) -> np.ndarray:
    """uint64 codes of a reference text's shingles, computed with numpy instead of hashing each one.

    Words get ids from ``vocab`` in first-seen order (deterministic for a fixed input order); CJK
    text uses code points. A shingle's code is a polynomial of its k token codes.
    """
    compact = ref.replace(" ", "")
    if not compact.isascii() and len(_CJK_RE.findall(compact)) > CJK_SHARE * len(compact):
        tokens = np.frombuffer(compact.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        k = ZH_SHINGLE
    else:
        tokens = np.array([vocab.setdefault(w, len(vocab)) for w in ref.split()], dtype=np.uint64)
        k = EN_SHINGLE
    k = max(1, min(k, len(tokens)))
    m = len(tokens) - k + 1
    codes = np.zeros(max(m, 1), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            codes = codes * np.uint64(1_000_003) + tokens[j : j + m] + np.uint64(1)
    return np.unique(_mix64(codes))


def _minhash_signatures(refs: Sequence[str]) -> np.ndarray:
    """(n, 32) uint64 MinHash-like signatures of reference texts (xor-then-mix permutations).

    Only used to find candidate pairs; every candidate is verified with the exact Jaccard, so
    approximate min-wise independence is enough. No ``hash()``: it is salted per process.
    """
    rng = np.random.default_rng(12345)
    masks = rng.integers(0, 2**63, _N_PERM, dtype=np.uint64)
    out = np.empty((len(refs), _N_PERM), np.uint64)
    vocab: dict[str, int] = {}
    for i, ref in enumerate(refs):
        codes = _shingle_codes(ref, vocab)
        out[i] = _mix64(codes[:, None] ^ masks[None, :]).min(axis=0)
    return out


def _candidate_pairs(sig: np.ndarray, max_bucket: int = 200) -> set[tuple[int, int]]:
    pairs: set[tuple[int, int]] = set()
    for b in range(0, sig.shape[1], _ROWS_PER_BAND):
        buckets: dict[tuple[int, ...], list[int]] = {}
        for i, row in enumerate(sig[:, b : b + _ROWS_PER_BAND].tolist()):
            buckets.setdefault(tuple(row), []).append(i)
        for members in buckets.values():
            if len(members) < 2:
                continue
            if len(members) > max_bucket:
                # A degenerate bucket: compare with its first member only instead of all pairs.
                pairs.update((members[0], j) for j in members[1:])
                continue
            for x, i in enumerate(members):
                pairs.update((i, j) for j in members[x + 1 :])
    return pairs


def fold_corpus_duplicates(
    articles: Sequence[Article],
    threshold: float = CORPUS_DUP_THRESHOLD,
    variant_threshold: float = CORPUS_VARIANT_THRESHOLD,
) -> tuple[list[Article], dict[str, tuple[tuple[Article, float], ...]], dict[str, int]]:
    """Split articles into representatives and their natural duplicates (see module docstring)."""
    n = len(articles)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)  # the earliest article stays the root

    first_body: dict[str, int] = {}
    body_keys = [normalize_exact(a.body()) for a in articles]

    def same_body(i: int, j: int) -> bool:
        return body_keys[i] == body_keys[j]

    for i, key in enumerate(body_keys):
        if key in first_body:
            union(first_body[key], i)
        else:
            first_body[key] = i
    refs = [reference_text(a.title, a.body()) for a in articles]
    shingle_cache: dict[int, set] = {}

    def sets(i: int) -> set:
        if i not in shingle_cache:
            shingle_cache[i] = text_shingles(refs[i])
        return shingle_cache[i]

    near_pairs = 0
    for i, j in sorted(_candidate_pairs(_minhash_signatures(refs))):
        if find(i) != find(j) and jaccard(sets(i), sets(j)) >= threshold:
            union(i, j)
            near_pairs += 1
    reps: list[Article] = []
    variants: dict[str, list[tuple[Article, float]]] = {}
    discarded = 0
    for i, a in enumerate(articles):
        root = find(i)
        if root == i:
            reps.append(a)
            continue
        j = jaccard(sets(root), sets(i))
        if same_body(root, i) or j >= variant_threshold:
            variants.setdefault(articles[root].id, []).append((a, round(j, 6)))
        else:
            # 0.5 <= J < 0.8 is ambiguous in these corpora (e.g. two Reuters debt-offering notices
            # of different companies from one template): neither a planted duplicate nor an original.
            discarded += 1
    stats = {
        "articles": n,
        "representatives": len(reps),
        "components_with_duplicates": len(variants),
        "variants": sum(len(v) for v in variants.values()),
        "discarded_ambiguous": discarded,
        "near_pairs_joined": near_pairs,
    }
    return reps, {k: tuple(v) for k, v in variants.items()}, stats


# ---------------------------------------------------------------------------------------------
# Sentence pools and synthetic articles

_ZH_END = "。！？"


def pair_files(data_dir: Path, lang: str) -> list[Path]:
    """Train/dev pair files of one language; ``*_test*`` files are held out and never read."""
    return sorted(p for p in (data_dir / "pairs").glob(f"{lang}_*.jsonl") if "_test" not in p.name)


def _dedupe(sentences: Iterable[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for s in sentences:
        key = reference_text(None, s)
        if key and key not in seen:
            seen.add(key)
            out.append(s)
    return tuple(out)


def _zh_pool(articles: Sequence[Article], data_dir: Path) -> tuple[str, ...]:
    sentences = [s for a in articles for p in a.paragraphs for s in p if 8 <= len(s) <= 200]
    for path in pair_files(data_dir, "zh"):
        for row in _read_jsonl(path):
            for text in (row.get("text1"), row.get("text2")):
                text = (text or "").strip()
                if 6 <= len(text) <= 200 and cjk_share(text) > 0.5:
                    # Questions and short utterances carry no final stop; an article needs one.
                    sentences.append(text if text[-1] in _ZH_END else text + "。")
    return _dedupe(sentences)


def _en_pool(articles: Sequence[Article]) -> tuple[str, ...]:
    return _dedupe(s for a in articles for p in a.paragraphs for s in p if 40 <= len(s) <= 300)


def synthetic_article(lang: str, pool: Sequence[str], rng: random.Random, ident: str) -> Article:
    """6-30 pool sentences grouped into paragraphs, with a title cut from another pool sentence."""
    n = rng.randint(6, 30)
    sentences = [pool[rng.randrange(len(pool))] for _ in range(n)]
    paragraphs: list[tuple[str, ...]] = []
    lo, hi = (2, 5) if lang == "zh" else (1, 4)
    while sentences:
        k = rng.randint(lo, hi)
        paragraphs.append(tuple(sentences[:k]))
        sentences = sentences[k:]
    head = pool[rng.randrange(len(pool))]
    if lang == "zh":
        title = head.rstrip(_ZH_END + "，、；：")[:28]
    else:
        title = " ".join(head.split()[: rng.randint(6, 12)]).rstrip(".,;:!?")
    return Article(id=ident, lang=lang, title=title, paragraphs=tuple(paragraphs), origin="synthetic")


# ---------------------------------------------------------------------------------------------
# The loaded corpus


@dataclass
class Corpus:
    articles: dict[str, tuple[Article, ...]]
    variants: dict[str, tuple[tuple[Article, float], ...]]
    sentences: dict[str, tuple[str, ...]]
    stats: dict[str, Any] = field(default_factory=dict)


def resolve_data_dir(source: str = "auto") -> Path:
    """The folder holding ``corpora/`` for a source (see the module docstring for the rule)."""
    if source not in SOURCES:
        raise ValueError(f"unknown corpus source {source!r}: expected one of {', '.join(SOURCES)}")
    if source == "sample" or (source == "auto" and not eval_data_available("corpora")):
        return SAMPLE_DATA_DIR
    if not eval_data_available("corpora"):
        raise FileNotFoundError(missing_reason("corpora"))
    return eval_data_dir()


def corpus_files(root: Path) -> dict[str, tuple[str, ...]]:
    """The eval layout (BBC/Reuters/Sogou) where its first file exists, else the sample layout."""
    for files in (CORPUS_FILES, SAMPLE_CORPUS_FILES):
        if (root / "corpora" / files["en"][0]).is_file():
            return files
    raise FileNotFoundError(
        f"no corpus under {root / 'corpora'}: expected {CORPUS_FILES['en'][0]} (evaluation data) "
        f"or {SAMPLE_CORPUS_FILES['en'][0]} (the shipped sample)"
    )


@functools.lru_cache(maxsize=4)
def _load_corpus_cached(data_dir: str) -> Corpus:
    root = Path(data_dir)
    articles: dict[str, tuple[Article, ...]] = {}
    variants: dict[str, tuple[tuple[Article, float], ...]] = {}
    sentences: dict[str, tuple[str, ...]] = {}
    stats: dict[str, Any] = {}
    for lang, files in corpus_files(root).items():
        loaded: list[Article] = []
        skipped = 0
        for name in files:
            for row in _read_jsonl(root / "corpora" / name):
                article = parse_article(row, lang)
                if len(article.body()) < MIN_BODY_CHARS[lang]:
                    skipped += 1
                    continue
                loaded.append(article)
        reps, var, fold_stats = fold_corpus_duplicates(loaded)
        articles[lang] = tuple(reps)
        variants.update(var)
        sentences[lang] = _zh_pool(reps, root) if lang == "zh" else _en_pool(reps)
        stats[lang] = {**fold_stats, "skipped_short": skipped, "pool_sentences": len(sentences[lang])}
    return Corpus(articles=articles, variants=variants, sentences=sentences, stats=stats)


def load_corpus(data_dir: Path | None = None, source: str = "auto") -> Corpus:
    """Real articles (deduplicated), their natural duplicates and sentence pools; cached per process.

    ``data_dir`` (a folder with ``corpora/``) wins over ``source``.
    """
    return _load_corpus_cached(str(Path(data_dir or resolve_data_dir(source)).resolve()))


class ArticleStream:
    """Never-repeating articles of one language: real representatives first, then synthetic ones.

    Real articles are shuffled by the seed, with those that have natural duplicates moved to the
    front so ``corpus_dup`` documents have emitted sources early. Every article is handed out once,
    so no two generated documents share a body unless the generator derived one from the other.
    """

    def __init__(self, corpus: Corpus, lang: str, rng: random.Random) -> None:
        real = list(corpus.articles[lang])
        rng.shuffle(real)
        real.sort(key=lambda a: a.id not in corpus.variants)  # stable: keeps the shuffle within groups
        self._real = real
        self._pos = 0
        self._pool = corpus.sentences[lang]
        self._rng = rng
        self._lang = lang
        self._n_synthetic = 0

    def next(self) -> Article:
        if self._pos < len(self._real):
            self._pos += 1
            return self._real[self._pos - 1]
        self._n_synthetic += 1
        return synthetic_article(self._lang, self._pool, self._rng, f"synth-{self._lang}-{self._n_synthetic}")

    @property
    def used_real(self) -> int:
        return self._pos

    @property
    def used_synthetic(self) -> int:
        return self._n_synthetic
