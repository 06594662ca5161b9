"""How many registered documents does one lookup return that are *not* near copies? (docs/registry.md)

    python -m bench.background_candidates [--size small] [--seed 0]

The registry benchmark fills its registry with uniform random band keys, so a lookup there finds
almost nothing but the planted copies. Real documents of one language share common shingles
(English character 5-grams with the spaces dropped: "ofthe", "ation"), so two unrelated articles
have a Jaccard of a few percent and now and then agree on a whole LSH band. Each such pair is a
candidate the registry returns and the verifier throws away, and their number grows linearly with
the registry: at N registered documents a lookup returns ~rate x N of them.

This measures the rate with the product's own shingles (``prepare_with_text`` + ``minhash_rows``, the
default config) on the generated hour's originals (distinct articles of the eval corpora) and, on the
same hour, the LSH recall of the planted near copies against their sources, for the default banding
and for more selective ones. Writes bench/results/background-candidates.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bench.__main__ import SIZES, crawl, hour_ids, write_result
from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.minhash import MinHasher
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
    parser = argparse.ArgumentParser(prog="python -m bench.background_candidates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small", choices=list(SIZES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
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
        "command": "python -m bench.background_candidates " + " ".join(sys.argv[1:] if argv is None else argv),
        "crawl": root.name,
        "originals": {lg: int((original & (lang == lg)).sum()) for lg in ("en", "zh")},
        "near_copies_scored": len(near_rows),
        "bandings": {},
    }
    for banding in BANDINGS:
        hasher = MinHasher(max(128, banding.bands * banding.rows), config.minhash_seed, banding.bands, banding.rows)
        sig, counts, (hashes, offsets) = minhash_rows(
            view, hasher, config.zh_shingle_chars, config.en_shingle_words, near, config.en_shingles == "chars"
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
    write_result("background-candidates", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
