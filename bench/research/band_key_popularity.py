"""One-band agreements of the registry's index keys, and how popular the agreeing keys are.

    python -m bench.research.band_key_popularity [--seed 0] [--stoplist NAME_OR_FILE ...]

Over the English originals of the generated 20k hour: every pair of documents that shares a registry
band key (``fingerprint.stoplist.registry_band_keys``, 24 bands; the plain signature's, and each
stoplist's), classed by the pair's exact Jaccard on the product's shingles (chance: < 0.1; copy-like:
>= 0.45). Two things the registry's cost at 10B depends on: how many one-band agreements a lookup
meets per registered English document (the main tier reads each, whatever it counts: docs/registry-scale.md), and which share of them comes through keys held by many documents (what a cap on a
key's registered documents would skip). Writes bench/work/research/band-key-popularity.json.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.harness import crawl, hour_ids, write_result
from bench.research import RESULTS
from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint.candidates import pair_overlap
from dedup_tasks.fingerprint.minhash import EN_SHINGLE_WORDS, MINHASH_SEED, SHINGLE_CHARS, MinHasher
from dedup_tasks.fingerprint.stoplist import DEFAULT_STOPLIST, load_stoplist, registry_band_keys
from dedup_tasks.io import BatchPaths, input_files
from dedup_tasks.layers.minhash import minhash_rows
from dedup_tasks.pipeline import layer_view, prepare_with_text

CAPS = (2, 3, 5, 10, 20, 50)
CHANCE, COPY = 0.1, 0.45


def agreeing_pairs(keys: np.ndarray) -> pd.DataFrame:
    """One row per (pair of documents, band) with an equal key: a, b (a < b), band, and the number of
    documents holding that key."""
    parts = []
    for band in range(keys.shape[1]):
        column = keys[:, band]
        order = np.argsort(column, kind="stable")
        sorted_keys = column[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        sizes = np.diff(np.r_[starts, len(column)])
        for start, size in zip(starts[sizes >= 2], sizes[sizes >= 2], strict=True):
            members = np.sort(order[start : start + size])
            a, b = np.triu_indices(size, 1)
            parts.append(pd.DataFrame({"a": members[a], "b": members[b], "band": band, "count": size}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["a", "b", "band", "count"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.research.band_key_popularity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--stoplist", action="append", default=None, help="a built-in name or .u32 file (repeatable; default: the built-in)")
    parser.add_argument("--output", default="band-key-popularity")
    args = parser.parse_args(argv)
    config = DedupConfig()
    root = crawl(args.docs, 1, args.seed)
    path = BatchPaths(root, hour_ids(root)[0]).input
    table = pa.concat_tables([pq.read_table(f) for f in input_files(path)])
    truth = pd.read_parquet(root / "truth.parquet").set_index("doc_id")
    prepared, near = prepare_with_text(table, config)
    view = layer_view(prepared)
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    sig, counts, sets = minhash_rows(view, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, near, True)
    info = truth.loc[np.asarray(view.column("doc_id").to_pylist(), object)]
    rows = np.flatnonzero(((info["kind"] == "original") & (info["lang"] == "en")).to_numpy() & (counts > 0))
    pairs = len(rows) * (len(rows) - 1) / 2
    out: dict = {"command": "python -m bench.research.band_key_popularity " + " ".join(sys.argv[1:] if argv is None else argv),
                 "crawl": root.name, "english_originals": len(rows), "pairs": pairs, "bands": config.registry_bands, "keys": {}}  # fmt: skip
    for name in [""] + (args.stoplist or [DEFAULT_STOPLIST]):
        stoplist = load_stoplist(name) if name else None
        keys = registry_band_keys(sig, sets, hasher, config.registry_bands, stoplist)[rows]
        df = agreeing_pairs(keys)
        jac, _, _ = pair_overlap(sets[0], sets[1], rows[df["a"].to_numpy(np.int64)], rows[df["b"].to_numpy(np.int64)])
        df["jac"] = jac
        chance, copies = df[df["jac"] < CHANCE], df[df["jac"] >= COPY]
        label = "plain signature" if stoplist is None else f"stoplist {stoplist.name} ({len(stoplist):,})"
        entry = {
            "one_band_chance_pairs": int(chance.groupby(["a", "b"]).ngroups),
            "one_band_chance_per_registered_doc": chance.groupby(["a", "b"]).ngroups / pairs,
            "two_band_chance_pairs": int((chance.groupby(["a", "b"]).size() >= 2).sum()),
            "copy_like_rows": len(copies),
            "share_through_keys_held_by_more_than": {
                str(cap): {"chance": float((chance["count"] > cap).mean()) if len(chance) else 0.0,
                           "copy_like": float((copies["count"] > cap).mean()) if len(copies) else 0.0}
                for cap in CAPS
            },
        }  # fmt: skip
        out["keys"][label] = entry
        print(f"{label}: one-band chance pairs {entry['one_band_chance_pairs']} ({entry['one_band_chance_per_registered_doc']:.1e} per registered doc),"
              f" two-band {entry['two_band_chance_pairs']}; through keys held by > 5 / > 10 / > 20 docs:"
              f" {entry['share_through_keys_held_by_more_than']['5']['chance']:.2f} / {entry['share_through_keys_held_by_more_than']['10']['chance']:.2f}"
              f" / {entry['share_through_keys_held_by_more_than']['20']['chance']:.2f} of the chance ones,"
              f" {entry['share_through_keys_held_by_more_than']['5']['copy_like']:.2f} / {entry['share_through_keys_held_by_more_than']['10']['copy_like']:.2f}"
              f" / {entry['share_through_keys_held_by_more_than']['20']['copy_like']:.2f} of the copy-like ({len(copies)})", flush=True)  # fmt: skip
    write_result(args.output, out, RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
