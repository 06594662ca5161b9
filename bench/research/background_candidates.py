"""How many registered documents does one lookup return that are *not* near copies? (docs/registry.md)

    python -m bench.research.background_candidates [--size small] [--seed 0]

The registry benchmark fills its registry with uniform random band keys, so a lookup there finds
almost nothing but the planted copies. Real documents of one language share common shingles
(English character 5-grams with the spaces dropped: "ofthe", "ation"), so two unrelated articles
have a Jaccard of a few percent and now and then agree on a whole LSH band. Each such pair is a
candidate the registry returns and the verifier throws away, and their number grows linearly with
the registry: at N registered documents a lookup returns ~rate x N of them.

This measures the rate with the product's own shingles (``prepare_with_text`` + ``minhash_rows``, the
default config) on the generated hour's originals (distinct articles of the eval corpora) and, on the
same hour, the LSH recall of the planted near copies against their sources, for the default banding
and for more selective ones. Writes bench/work/research/background-candidates.json.

``--index`` measures instead variants of the registry *index* (the band keys of a second MinHash over
index-only English shingles: a stoplist of common 5-grams learned on another seed's hour, in-word
5-grams, word 3-grams; the verifier's Jaccard stays the product's) for 16/24/32/42 x 3 bands, one or
two agreeing: counted chance rates, their expectation from every pair's exact index Jaccard, planted
recall, and the CPU of the second signature. Writes bench/work/research/background-candidates-index.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bench.harness import SIZES, crawl, hour_ids, write_result
from bench.research import RESULTS
from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.hashing import codepoints
from dedup_tasks.fingerprint.minhash import (
    EN_CHAR_SHINGLES,
    EN_SHINGLE_WORDS,
    MINHASH_SEED,
    SHINGLE_CHARS,
    MinHasher,
)
from dedup_tasks.fingerprint.stoplist import Stoplist, learn_stoplist, load_stoplist
from dedup_tasks.io import BatchPaths
from dedup_tasks.layers.minhash import minhash_rows
from dedup_tasks.pipeline import layer_view, prepare_with_text

NOT_A_COPY = 0.45  # the verifier's lowest Jaccard for any copy (VERIFY_FLOOR)


@dataclass(frozen=True)
class Banding:
    bands: int
    rows: int
    min_bands: int = 1  # a pair is a candidate when it agrees on at least this many bands

    @property
    def name(self) -> str:
        more = f", >= {self.min_bands} bands" if self.min_bands > 1 else ""
        return f"{self.bands}x{self.rows}{more}"

    def recall(self, jaccard: float) -> float:
        """Probability that a pair of this Jaccard becomes a candidate."""
        p = jaccard**self.rows
        k = np.arange(self.min_bands)
        from math import comb

        below = sum(comb(self.bands, int(i)) * p**i * (1 - p) ** (self.bands - i) for i in k)
        return float(1.0 - below)


BANDINGS = (Banding(42, 3), Banding(24, 3), Banding(42, 3, 2), Banding(64, 4), Banding(100, 5))


def band_agreements(keys: np.ndarray) -> dict[int, int]:
    """{pair code i * n + j (i < j): number of bands on which rows i and j share a key}."""
    n = len(keys)
    codes = []
    for b in range(keys.shape[1]):
        order = np.argsort(keys[:, b], kind="stable")
        sorted_keys = keys[order, b]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        sizes = np.diff(np.r_[starts, n])
        for start, size in zip(starts[sizes > 1], sizes[sizes > 1], strict=True):
            rows = np.sort(order[start : start + size]).astype(np.int64)
            i, j = np.triu_indices(size, 1)
            codes.append(rows[i] * n + rows[j])
    if not codes:
        return {}
    unique, counts = np.unique(np.concatenate(codes), return_counts=True)
    return dict(zip(unique.tolist(), counts.tolist(), strict=True))


def exact_jaccard(hashes: np.ndarray, offsets: np.ndarray, i: int, j: int) -> float:
    a = np.unique(hashes[offsets[i] : offsets[i + 1]])
    b = np.unique(hashes[offsets[j] : offsets[j + 1]])
    inter = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - inter
    return inter / union if union else 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.research.background_candidates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small", choices=list(SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--docs", type=int, default=None, help="--index: documents in the generated hour (default: the size's)")
    parser.add_argument("--index", action="store_true", help="measure the registry index variants (stoplist, in-word 5-grams, word 3-grams, two bands)")
    parser.add_argument("--stoplist-seed", type=int, default=None, help="the generated hour the stoplist is learned on (default: seed xor 1)")
    parser.add_argument("--stoplist", action="append", default=[], metavar="NAME_OR_FILE",
                        help="--index: also measure this stoplist (a built-in name or a .u32 file; repeatable)")
    parser.add_argument("--only", default=None, help="--index: measure only the variants whose name contains this")
    parser.add_argument("--output", default="background-candidates-index", help="result name of --index (bench/work/research/NAME.json)")
    args = parser.parse_args(argv)
    if args.index:
        return measure_index(args)
    spec = SIZES[args.size]
    root = crawl(spec["docs"], 1, args.seed)
    started = time.perf_counter()
    table = pq.read_table(BatchPaths(root, hour_ids(root)[0]).input)
    truth = pd.read_parquet(root / "truth.parquet").set_index("doc_id")
    config = DedupConfig()
    prepared, near = prepare_with_text(table, config)
    view = layer_view(prepared)
    doc_ids = np.asarray(view.column("doc_id").to_pylist(), object)
    info = truth.loc[doc_ids]
    original = (info["kind"] == "original").to_numpy()
    lang = info["lang"].to_numpy()
    # Planted near copies whose source is in the hour (their LSH recall against it).
    row_of = {d: r for r, d in enumerate(doc_ids)}
    near_rows = [
        (r, row_of[s], float(j)) for r, (s, j, dup, kind) in enumerate(zip(info["source_doc_id"], info["true_jaccard"], info["is_duplicate"], info["kind"], strict=True))
        if dup and kind != "exact" and isinstance(s, str) and s in row_of and j == j and j >= 0.5
    ]  # fmt: skip
    out: dict = {
        "command": "python -m bench.research.background_candidates " + " ".join(sys.argv[1:] if argv is None else argv),
        "crawl": root.name,
        "originals": {lg: int((original & (lang == lg)).sum()) for lg in ("en", "zh")},
        "near_copies_scored": len(near_rows),
        "bandings": {},
    }
    for banding in BANDINGS:
        hasher = MinHasher(max(128, banding.bands * banding.rows), MINHASH_SEED, banding.bands, banding.rows)
        sig, counts, (hashes, offsets) = minhash_rows(
            view, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, near, EN_CHAR_SHINGLES
        )
        keys = kernels.band_keys(np.ascontiguousarray(sig), banding.bands, banding.rows)
        has = counts > 0
        # Rows without shingles share one key; give them keys no other row has.
        keys[~has] = (np.uint64(1) << np.uint64(63)) + np.arange(int((~has).sum()) * banding.bands, dtype=np.uint64).reshape(-1, banding.bands)
        agree = band_agreements(keys)
        n = len(keys)
        result: dict = {"recall_theory": {f"{j:.2f}": banding.recall(j) for j in (0.45, 0.5, 0.6, 0.7, 0.8)}}
        for lg in ("en", "zh"):
            pool = has & original & (lang == lg)
            false_pairs, jaccards = 0, []
            for code, bands_shared in agree.items():
                i, j = divmod(code, n)
                if bands_shared < banding.min_bands or not (pool[i] and pool[j]):
                    continue
                jac = exact_jaccard(hashes, offsets, i, j)
                if jac < NOT_A_COPY:
                    false_pairs += 1
                    jaccards.append(jac)
            docs = int(pool.sum())
            rate = false_pairs / (docs * (docs - 1) / 2) if docs > 1 else 0.0
            result[lg] = {
                "originals": docs,
                "false_candidate_pairs": false_pairs,
                "rate_per_registered_doc": rate,
                "false_candidates_per_lookup_at_1e7_same_language": rate * 1e7,
                "false_candidates_per_lookup_at_1e10_same_language": rate * 1e10,
                "false_pair_jaccard_histogram": dict(zip(
                    ["0-0.02", "0.02-0.05", "0.05-0.1", "0.1-0.2", "0.2-0.3", "0.3-0.45"],
                    np.histogram(jaccards, bins=[0, 0.02, 0.05, 0.1, 0.2, 0.3, NOT_A_COPY])[0].tolist(), strict=True,
                )),
            }  # fmt: skip
        found = np.array([agree.get(min(a, b) * n + max(a, b), 0) >= banding.min_bands for a, b, _ in near_rows], bool)
        jac = np.array([j for _, _, j in near_rows])
        result["planted_recall"] = {
            band: {"n": int(m.sum()), "recall": float(found[m].mean()) if m.any() else None}
            for band, m in (("0.5-0.7", (jac >= 0.5) & (jac < 0.7)), (">=0.7", jac >= 0.7))
        }
        out["bandings"][banding.name] = result
        en, zh = result["en"], result["zh"]
        print(
            f"{banding.name:>16}: false candidates per registered doc en {en['rate_per_registered_doc']:.2e} zh {zh['rate_per_registered_doc']:.2e}"
            f" | per lookup at 1e7 en {en['false_candidates_per_lookup_at_1e7_same_language']:,.0f}, at 1e10 {en['false_candidates_per_lookup_at_1e10_same_language']:,.0f}"
            f" | planted recall 0.5-0.7 {result['planted_recall']['0.5-0.7']['recall']:.3f}, >=0.7 {result['planted_recall']['>=0.7']['recall']:.3f}"
            f" | theory J0.5 {result['recall_theory']['0.50']:.3f}"
        )
    out["seconds"] = time.perf_counter() - started
    write_result("background-candidates", out, RESULTS)
    return 0


# ---------------------------------------------------------------------------------------------------
# Registry index variants (docs/registry-scale.md, "Chance agreements")
#
#     python -m bench.research.background_candidates --index [--seed 0] [--stoplist-seed 1]
#
# The registry's band keys could be taken over another shingle set than the verifier's (a second
# MinHash signature per document, for the index only): the verifier keeps the product's 5-grams. Each
# variant below is such a set; the chance rate and the planted recall are measured with it, the
# Jaccard that classifies a pair (chance < 0.1 <= look-alike < 0.45, near copy 0.5-0.7 / >= 0.7) is
# always the product's. Chinese rows keep the product's shingles in every variant.

INDEX_BANDINGS = (
    Banding(16, 3), Banding(16, 3, 2), Banding(24, 3, 2), Banding(32, 3, 2), Banding(42, 3), Banding(42, 3, 2),
)  # fmt: skip
STOPLIST_CUTOFFS = (0.005, 0.01, 0.02, 0.05)
CHANCE = 0.1
EN_SHARE = 0.4  # English share of the registry for the per-lookup figures
REGISTRY_SIZES = (1e8, 1e9, 1e10)


def unique_sets(hashes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's shingle hashes sorted and without repeats (MinHash reads a set: same signature)."""
    n = len(offsets) - 1
    doc = np.repeat(np.arange(n, dtype=np.uint64), np.diff(offsets))
    keys = np.unique((doc << np.uint64(32)) | hashes.astype(np.uint64))
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount((keys >> np.uint64(32)).astype(np.int64), minlength=n), out=out_offsets[1:])
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32), out_offsets


def document_frequency_stoplist(hashes: np.ndarray, offsets: np.ndarray, rows: np.ndarray, cutoff: float) -> np.ndarray:
    """Sorted shingle hashes found in more than ``cutoff`` of the documents ``rows`` (bool per document)
    of these sets: the product's learner (``fingerprint.stoplist.learn_stoplist``)."""
    return learn_stoplist("", hashes, offsets, rows, cutoff).hashes


def members(values: np.ndarray, of: np.ndarray) -> np.ndarray:
    """``np.isin(values, of)`` for uint32 values, as the product's index signature probes its stoplist
    (``fingerprint.stoplist.Stoplist.contains``): what a product filter costs."""
    return Stoplist.of("", of).contains(values)


def drop_shingles(hashes: np.ndarray, offsets: np.ndarray, drop: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sets with the shingles ``drop`` removed from the documents ``rows`` (bool per document). A
    document left with none keeps its whole set (it must still have band keys)."""
    n = len(offsets) - 1
    doc = np.repeat(np.arange(n), np.diff(offsets))
    hit = rows[doc] & members(hashes, drop)
    emptied = (np.bincount(doc[~hit], minlength=n) == 0) & (np.diff(offsets) > 0)
    keep = ~(hit & ~emptied[doc])
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(doc[keep], minlength=n), out=out_offsets[1:])
    return hashes[keep], out_offsets


def in_word_shingles(cp: np.ndarray, offsets: np.ndarray, n_chars: int) -> tuple[np.ndarray, np.ndarray]:
    """The character ``n_chars``-grams of each document ``cp[offsets[d]:offsets[d + 1]]`` (words
    separated by single spaces) that lie inside one word: the product's 5-gram hashes
    (``kernels.shingle_hashes`` in CHARS mode, one span per word) of the words of at least n_chars
    characters, so a subset of the product's set. Shorter words give none."""
    n = len(offsets) - 1
    size = len(cp)
    if size == 0:
        return np.empty(0, np.uint32), np.zeros(n + 1, np.int64)
    word = cp != kernels._SPACE
    first = np.zeros(size, bool)
    last = np.zeros(size, bool)
    first[offsets[:-1][offsets[:-1] < size]] = True  # a document's first code point
    last[offsets[1:][offsets[1:] > 0] - 1] = True  # a document's last
    first[1:] |= ~word[:-1]
    last[:-1] |= ~word[1:]
    starts = np.flatnonzero(word & first)
    ends = np.flatnonzero(word & last) + 1
    long = ends - starts >= n_chars
    starts, ends = starts[long], ends[long]
    doc = np.searchsorted(offsets[1:], starts, side="right")
    modes = np.full(len(starts), kernels.CHARS, np.int64)
    per_word = kernels.count_shingles(cp, starts, ends, modes, 1, n_chars)
    word_offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(per_word, out=word_offsets[1:])
    hashes = kernels.shingle_hashes(cp, starts, ends, modes, 1, n_chars, word_offsets)
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(doc, weights=per_word, minlength=n).astype(np.int64), out=out_offsets[1:])
    return hashes, out_offsets


def pick_sets(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray], use_second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per document, the set of ``second`` where ``use_second`` (and it is not empty), else ``first``."""
    (h1, o1), (h2, o2) = first, second
    n = len(o1) - 1
    use = use_second & (np.diff(o2) > 0)
    d1 = np.repeat(np.arange(n), np.diff(o1))
    d2 = np.repeat(np.arange(n), np.diff(o2))
    m1, m2 = ~use[d1], use[d2]
    doc = np.concatenate([d1[m1], d2[m2]])
    order = np.argsort(doc, kind="stable")
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(doc, minlength=n), out=out_offsets[1:])
    return np.concatenate([h1[m1], h2[m2]])[order], out_offsets


def set_sizes_and_intersections(hashes: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the documents ``rows`` (indices; sets without repeats): their set sizes and the dense matrix
    of pairwise intersection sizes (a sparse document x shingle product)."""
    from scipy import sparse

    lengths = np.diff(offsets)[rows]
    take = np.repeat(offsets[:-1][rows], lengths) + (np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    local = np.repeat(np.arange(len(rows)), lengths)
    _, col = np.unique(hashes[take], return_inverse=True)
    x = sparse.csr_matrix((np.ones(len(col), np.float32), (local, col)), shape=(len(rows), int(col.max()) + 1 if len(col) else 1))
    inter = (x @ x.T).toarray()
    return lengths.astype(np.float32), inter


def jaccard_matrix(sizes: np.ndarray, inter: np.ndarray) -> np.ndarray:
    union = sizes[:, None] + sizes[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def candidate_probability(jaccard: np.ndarray, banding: Banding) -> np.ndarray:
    """Probability that pairs of these Jaccards agree on at least ``min_bands`` bands (binomial tail,
    accurate far below 1e-9)."""
    from scipy.stats import binom

    return binom.sf(banding.min_bands - 1, banding.bands, np.asarray(jaccard, np.float64) ** banding.rows)


def learn_stoplists(root_train, exclude_titles: set, config: DedupConfig, cutoffs=STOPLIST_CUTOFFS) -> tuple[dict[float, np.ndarray], int]:
    """Stoplists of the product's English 5-grams (df > cutoff), learned on another generated hour's
    English originals whose title is not one of the measured hour's (a different article sample)."""
    table = pq.read_table(BatchPaths(root_train, hour_ids(root_train)[0]).input)
    truth = pd.read_parquet(root_train / "truth.parquet").set_index("doc_id")
    prepared, near = prepare_with_text(table, config)
    view = layer_view(prepared)
    info = truth.loc[np.asarray(view.column("doc_id").to_pylist(), object)]
    titles = pd.Series(table.column("title").to_pylist(), index=table.column("doc_id").to_pylist())
    rows = ((info["kind"] == "original") & (info["lang"] == "en")).to_numpy()
    rows = rows & ~titles.loc[info.index].isin(exclude_titles).to_numpy()
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    _, _, sets = minhash_rows(view, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, near, True)
    hashes, offsets = unique_sets(*sets)
    return {c: document_frequency_stoplist(hashes, offsets, rows, c) for c in cutoffs}, int(rows.sum())


def unique_keys(sig: np.ndarray, has: np.ndarray, bands: int, rows: int) -> np.ndarray:
    keys = kernels.band_keys(np.ascontiguousarray(sig), bands, rows)
    # Rows without shingles share one key; give them keys no other row has.
    keys[~has] = (np.uint64(1) << np.uint64(63)) + np.arange(int((~has).sum()) * bands, dtype=np.uint64).reshape(-1, bands)
    return keys


def best_seconds(fn, repeat: int = 2) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def measure_index(args) -> int:
    started = time.perf_counter()
    docs = args.docs or SIZES[args.size]["docs"]
    root = crawl(docs, 1, args.seed)
    train_seed = args.seed ^ 1 if args.stoplist_seed is None else args.stoplist_seed
    if train_seed == args.seed:
        raise SystemExit("the stoplist must be learned on another hour than the measured one")
    table = pq.read_table(BatchPaths(root, hour_ids(root)[0]).input)
    truth = pd.read_parquet(root / "truth.parquet").set_index("doc_id")
    config = DedupConfig()
    prepared, near = prepare_with_text(table, config)
    view = layer_view(prepared)
    n = view.num_rows
    doc_ids = np.asarray(view.column("doc_id").to_pylist(), object)
    info = truth.loc[doc_ids]
    original = (info["kind"] == "original").to_numpy()
    lang = info["lang"].to_numpy()
    is_en = lang == "en"
    stoplists, train_docs = learn_stoplists(
        crawl(docs, 1, train_seed), set(t for t in table.column("title").to_pylist() if t), config
    )
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    product_args = (view, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, near)
    product = unique_sets(*minhash_rows(*product_args, True)[2])
    cp, cp_offsets = codepoints(view.column("_near_text"))
    # The index sets of every variant (Chinese rows: the product's 5-grams).
    variants: dict[str, tuple[np.ndarray, np.ndarray]] = {"product 5-grams (today)": product}
    for cutoff, stop in stoplists.items():
        variants[f"stoplist df > {cutoff:.1%}"] = drop_shingles(*product, stop, is_en)
    for name in args.stoplist:
        stop = load_stoplist(name)
        variants[f"stoplist {stop.name} ({len(stop):,})"] = drop_shingles(*product, stop.hashes, is_en)
    in_word = pick_sets(product, unique_sets(*in_word_shingles(cp, cp_offsets, SHINGLE_CHARS)), is_en)
    variants["in-word 5-grams"] = in_word
    variants["word 3-grams"] = unique_sets(*minhash_rows(*product_args, False)[2])
    # The product's Jaccard of every pair of originals of one language, and of each planted near copy.
    pools = {lg: np.flatnonzero(original & (lang == lg)) for lg in ("en", "zh")}
    product_j = {lg: jaccard_matrix(*set_sizes_and_intersections(*product, rows)) for lg, rows in pools.items()}
    triu = {lg: np.triu_indices(len(rows), 1) for lg, rows in pools.items()}
    upper = {lg: product_j[lg][triu[lg]] for lg in pools}
    row_of = {d: r for r, d in enumerate(doc_ids)}
    near_pairs = np.array([
        (r, row_of[s]) for r, (s, dup, kind) in enumerate(zip(info["source_doc_id"], info["is_duplicate"], info["kind"], strict=True))
        if dup and kind == "near_copy" and isinstance(s, str) and s in row_of
    ], np.int64).reshape(-1, 2)  # fmt: skip
    near_j = np.array([exact_jaccard(*product, a, b) for a, b in near_pairs])
    near_lang = lang[near_pairs[:, 1]]
    out: dict = {
        "command": "python -m bench.research.background_candidates " + " ".join(sys.argv[1:]),
        "crawl": root.name,
        "stoplist_learned_on": {"crawl": f"seed {train_seed}", "english_originals": train_docs, "sizes": {f"{c:.1%}": len(s) for c, s in stoplists.items()}},
        "originals": {lg: len(rows) for lg, rows in pools.items()},
        "near_copies": {"n": len(near_pairs), "en": int((near_lang == "en").sum()), "zh": int((near_lang == "zh").sum())},
        "registered_english_share": EN_SHARE,
        "variants": {},
    }  # fmt: skip
    bins = {"0.5-0.7": (near_j >= 0.5) & (near_j < 0.7), ">=0.7": near_j >= 0.7}
    if args.only:
        variants = {k: v for k, v in variants.items() if args.only in k or k.startswith("product")}
    for name, (hashes, offsets) in variants.items():
        has = np.diff(offsets) > 0
        sig = hasher.signatures(hashes, offsets)
        keys = unique_keys(sig, has, config.minhash_bands, config.minhash_rows)
        agreements = {b: band_agreements(np.ascontiguousarray(keys[:, :b])) for b in sorted({x.bands for x in INDEX_BANDINGS})}
        index_upper = {
            lg: jaccard_matrix(*set_sizes_and_intersections(hashes, offsets, rows))[triu[lg]] for lg, rows in pools.items()
        }
        pair_index_j = np.array([exact_jaccard(hashes, offsets, a, b) for a, b in near_pairs])
        entry: dict = {
            "english_index_shingles_per_doc": float(np.diff(offsets)[is_en & original].mean()),
            "english_originals_without_index_shingles": int((~has & is_en & original).sum()),
            "near_copy_index_jaccard_minus_product": {"mean": float((pair_index_j - near_j).mean()), "min": float((pair_index_j - near_j).min())},
        }
        for banding in INDEX_BANDINGS:
            agree = agreements[banding.bands]
            result: dict = {}
            for lg, rows in pools.items():
                local = np.full(n, -1, np.int64)
                local[rows] = np.arange(len(rows))
                codes = np.fromiter((c for c, k in agree.items() if k >= banding.min_bands), np.int64)
                i, j = local[codes // n], local[codes % n]
                ok = (i >= 0) & (j >= 0)
                jac = product_j[lg][i[ok], j[ok]]
                pairs = len(rows) * (len(rows) - 1) / 2
                pj, prob = upper[lg], candidate_probability(index_upper[lg], banding)
                chance, alike = pj < CHANCE, (pj >= CHANCE) & (pj < NOT_A_COPY)
                counted = float((jac < CHANCE).sum()) / pairs
                expected = float(prob[chance].sum()) / pairs
                result[lg] = {
                    "chance_pairs": int((jac < CHANCE).sum()),
                    "look_alike_pairs": int(((jac >= CHANCE) & (jac < NOT_A_COPY)).sum()),
                    "chance_per_registered_doc": counted,
                    "look_alike_per_registered_doc": float(((jac >= CHANCE) & (jac < NOT_A_COPY)).sum()) / pairs,
                    "chance_per_registered_doc_expected": expected,
                    "look_alike_per_registered_doc_expected": float(prob[alike].sum()) / pairs,
                }
            en = result["en"]
            result["chance_per_english_lookup"] = {
                f"{size:.0e}": {"counted": en["chance_per_registered_doc"] * EN_SHARE * size, "expected": en["chance_per_registered_doc_expected"] * EN_SHARE * size}
                for size in REGISTRY_SIZES
            }  # fmt: skip
            found = np.array([agree.get(int(min(a, b) * n + max(a, b)), 0) >= banding.min_bands for a, b in near_pairs], bool)
            expected_found = candidate_probability(pair_index_j, banding)
            result["planted_recall"] = {
                lg: {
                    band: {"n": int((m & (near_lang == lg)).sum()), "recall": float(found[m & (near_lang == lg)].mean()) if (m & (near_lang == lg)).any() else None,
                           "expected": float(expected_found[m & (near_lang == lg)].mean()) if (m & (near_lang == lg)).any() else None}
                    for band, m in bins.items()
                }
                for lg in ("en", "zh")
            }  # fmt: skip
            entry[banding.name] = result
            rec = result["planted_recall"]["en"]
            print(
                f"{name:>24} {banding.name:>16}: chance/doc en {en['chance_per_registered_doc']:.1e} (exp {en['chance_per_registered_doc_expected']:.1e})"
                f" | look-alike en {en['look_alike_per_registered_doc']:.1e}"
                f" zh {result['zh']['chance_per_registered_doc']:.1e} (exp {result['zh']['chance_per_registered_doc_expected']:.1e})"
                f" | per en lookup at 1e10 {result['chance_per_english_lookup']['1e+10']['expected']:,.0f}"
                f" | recall en 0.5-0.7 {rec['0.5-0.7']['recall']:.3f} >=0.7 {rec['>=0.7']['recall']:.3f}"
                f" zh {result['planted_recall']['zh']['0.5-0.7']['recall']} {result['planted_recall']['zh']['>=0.7']['recall']:.3f}",
                flush=True,
            )
        out["variants"][name] = entry
    out["cpu"] = index_cpu(view, near, config, product, stoplists[0.01], is_en, cp, cp_offsets)
    out["seconds"] = time.perf_counter() - started
    write_result(args.output, out, RESULTS)
    return 0


def index_cpu(view, near, config, product, stop, is_en, cp, cp_offsets) -> dict:
    """Seconds per 1,000 documents of the product's MinHash (shingles + 128 values) and of each
    variant's second signature (its index shingles + 48 values for 16 x 3, or 128)."""
    n = view.num_rows
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    small = MinHasher(48, MINHASH_SEED, 16, 3)
    product_args = (view, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, near)
    hashes, offsets = minhash_rows(*product_args, True)[2]
    shingles = {
        "stoplist (filter the product's 5-grams)": lambda: drop_shingles(hashes, offsets, stop, is_en),
        "in-word 5-grams": lambda: in_word_shingles(cp, cp_offsets, SHINGLE_CHARS),
        "word 3-grams": lambda: minhash_rows(
            view, MinHasher(1, MINHASH_SEED, 1, 1), SHINGLE_CHARS, EN_SHINGLE_WORDS, near, False
        )[2],
    }  # fmt: skip
    per_k = 1000 / n
    out = {"documents": n, "product_minhash_rows_128": best_seconds(lambda: minhash_rows(*product_args, True)) * per_k}
    out["stoplist probe only (members)"] = best_seconds(lambda: members(hashes, stop)) * per_k
    for name, make in shingles.items():
        made = make()
        out[name] = {
            "shingles": best_seconds(make) * per_k,
            "signature_48": best_seconds(lambda m=made: small.signatures(*m)) * per_k,
            "signature_128": best_seconds(lambda m=made: hasher.signatures(*m)) * per_k,
        }
    print("cpu, seconds per 1,000 documents:", out, flush=True)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
