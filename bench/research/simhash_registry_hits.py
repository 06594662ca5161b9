"""Would MinHash find what the registry SimHash lookup finds? (docs/registry-scale.md, "SimHash at scale")

    python -m bench.research.simhash_registry_hits [--size hours3] [--seed 0]

Runs the generated crawl's hours twice through the cascade with an in-memory registry, publishing
each hour as the DAG would (L3 reads registered text back from there): once with every layer
(url, exact, simhash, minhash) and once without SimHash (url, exact, minhash). A *registry SimHash
drop* is a first-run drop by the simhash layer whose match is in an earlier hour. For each, the
second run says whether MinHash (its LSH bands and verifier, against the registry or earlier rows
of the batch) dropped the same document instead, and whether the drop was right (truth.parquet).
Writes bench/work/research/simhash-registry-hits.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pandas as pd

from bench.harness import SIZES, crawl, run_ours, write_result
from bench.research import RESULTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.research.simhash_registry_hits", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="hours3", choices=list(SIZES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    spec = SIZES[args.size]
    root = crawl(spec["docs"], spec["hours"], args.seed)
    truth = pd.read_parquet(root / "truth.parquet")
    started, cpu0 = time.perf_counter(), time.process_time()
    full, _ = run_ours(root, ("url", "exact", "simhash", "minhash"))
    without, _ = run_ours(root, ("url", "exact", "minhash"))
    sim = full[(full["layer"] == "simhash") & (full["action"] == "drop")]
    reg = sim[sim["matched_batch_id"] != sim["batch_id"]]
    other = without.set_index(["batch_id", "doc_id"]).loc[list(zip(reg["batch_id"], reg["doc_id"], strict=True))]
    dup_col = next(c for c in ("is_duplicate", "duplicate", "is_dup") if c in truth.columns) if len(truth) else None
    is_dup = truth.set_index("doc_id")[dup_col] if dup_col else None
    found = other["action"].to_numpy() == "drop"
    out = {
        "command": "python -m bench.research.simhash_registry_hits " + " ".join(sys.argv[1:] if argv is None else argv),
        "size": args.size,
        "docs": int(len(full)),
        "simhash_drops": int(len(sim)),
        "registry_simhash_drops": int(len(reg)),
        "found_without_simhash": int(found.sum()),
        "found_by_layer": {str(k): int(v) for k, v in other["layer"][found].value_counts().items()},
        "missed_without_simhash": int((~found).sum()),
        "missed_doc_ids": [str(d) for d in reg["doc_id"].to_numpy()[~found][:50]],
        "dropped_without_simhash_total": int((without["action"] == "drop").sum()),
        "dropped_with_simhash_total": int((full["action"] == "drop").sum()),
        # Documents whose keep/drop differs between the two runs (layer attribution aside).
        "decisions_differing": int(len(
            set(full.loc[full["action"] == "drop", "doc_id"]) ^ set(without.loc[without["action"] == "drop", "doc_id"])
        )),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu0,
        "load_average": os.getloadavg(),
    }
    if is_dup is not None:
        missed = reg["doc_id"].to_numpy()[~found]
        out["missed_true_duplicates"] = int(is_dup.reindex(missed).fillna(False).astype(bool).sum())
    print(out)
    write_result("simhash-registry-hits", out, RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
