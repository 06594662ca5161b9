"""The rewrite-sketch search over history, flat against the HNSW mirror:
``python -m bench.research.sketch_history [--sizes 20000,100000,400000] [--hour 20000] [--db-url URL]``.

For each history size N: N stored sketches (256-d, unit length) in a PostgreSQL embedding store, then
one hour of ``--hour`` new sketches searched for their k=4 nearest earlier sketches, two ways:

* flat: ``store.scan`` of every stored sketch, then an exact IndexFlatIP search;
* mirror (what the layer does): ``PersistentIndex.mirror`` opens the HNSW index saved by the previous hour,
  searches its graph at each ``--ef-search`` (forced here: the layer scans the index's own storage
  exactly up to ``faiss_index.EXACT_UP_TO`` sketches), and ``follow`` adds the hour's kept sketches
  and saves it.

Also the one-off cost of a rebuild (a stale index: another registry, a rerun) and, per search list,
the HNSW recall of the exact search's neighbours: the share of each source's exact top 4 the index
returns, and the share of rewrites whose source it ranks first (what a candidate needs).
Sketches are synthetic: clusters of 20 noisy copies around random centres, so that a neighbour is
as near as the crawl's rewrites are (cosine 0.5-0.9) while most of the history is far. Writes
``bench/work/research/sketch-history.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.research import RESULTS
from dedup_tasks.embed.faiss_index import PersistentIndex, search_flat
from dedup_tasks.embed.sketch import SKETCH_DIM

# Per-coordinate noise for the synthetic sketches, scaled so that their cosines do not depend on the
# sketch size (the noise figures were set at 256 buckets).
NOISE_SCALE = float(np.sqrt(256 / SKETCH_DIM))

MODEL = "sketch:bench"
K = 4


def clustered(n: int, rng: np.random.Generator, cluster: int = 20) -> np.ndarray:
    centres = rng.standard_normal((max(n // cluster, 1), SKETCH_DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, SKETCH_DIM)).astype(np.float32) * 0.06 * NOISE_SCALE
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def ids(prefix: str, n: int) -> np.ndarray:
    return np.array([f"{prefix}{i}" for i in range(n)], object)


def measure(size: int, hour: int, dsn: str, rng: np.random.Generator, ef_searches: list[int]) -> dict[str, Any]:
    import psycopg2

    from dedup_tasks.registry.embeddings import PostgresEmbeddingStore
    from dedup_tasks.registry.migrate import scratch_schema

    conn = psycopg2.connect(dsn)
    root = Path(tempfile.mkdtemp(prefix="sketch-history-"))
    try:
        with scratch_schema(conn, "bench_sketch") as schema:
            return _measure(PostgresEmbeddingStore(conn, schema), root, size, hour, rng, ef_searches)
    finally:
        conn.close()
        shutil.rmtree(root, ignore_errors=True)


def _measure(store: Any, root: Path, size: int, hour: int, rng: np.random.Generator, ef_searches: list[int]) -> dict[str, Any]:
    history = clustered(size, rng)
    for start in range(0, size, 50_000):  # earlier hours, each mirrored as the layer does
        part = slice(start, min(start + 50_000, size))
        batch = np.full(part.stop - part.start, f"2026-11-{1 + start // 50_000:02d}T00", object)
        index = PersistentIndex.mirror(root, MODEL, SKETCH_DIM, store)
        store.put(MODEL, ids("h", size)[part], batch, history[part])
        index.follow(store, MODEL, ids("h", size)[part], batch, history[part])
    # The hour: half rewrites of history (near a stored sketch), half new stories.
    queries = np.concatenate([
        history[rng.integers(0, size, hour // 2)] + rng.standard_normal((hour // 2, SKETCH_DIM)).astype(np.float32) * 0.05 * NOISE_SCALE,
        clustered(hour - hour // 2, rng),
    ])
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    now = "2026-12-01T00"

    started = time.perf_counter()
    scanned_docs, _, vectors = store.scan(MODEL, before_batch=now)
    read = time.perf_counter() - started
    exact_scores, exact_idx = search_flat(vectors, queries, K)
    flat = time.perf_counter() - started

    started = time.perf_counter()
    index = PersistentIndex.mirror(root, MODEL, SKETCH_DIM, store)
    opened = time.perf_counter() - started
    # HNSW ids are insertion order and the store scans in key order: compare by doc id.
    exact_docs = scanned_docs[exact_idx]
    near = exact_scores[:, 0] >= 0.5  # the sources: what a candidate floor would pass
    by_ef = []
    for ef in ef_searches:
        started = time.perf_counter()
        _, idx = index.neighbours(queries, K, now, ef, exact_up_to=0)
        searched = time.perf_counter() - started
        found_docs = index.doc_id[np.maximum(idx, 0)]
        recall = np.mean([len(set(e) & set(f)) / K for e, f in zip(exact_docs[near], found_docs[near], strict=True)])
        by_ef.append({
            "ef_search": ef, "search_s": round(searched, 2), "recall_at_4": round(float(recall), 4),
            "source_first": round(float(np.mean(exact_docs[near, 0] == found_docs[near, 0])), 4),
        })
    kept = ids("q", hour)
    store.put(MODEL, kept, np.full(hour, now, object), queries)
    started = time.perf_counter()
    index.follow(store, MODEL, kept, np.full(hour, now, object), queries)
    followed = time.perf_counter() - started

    started = time.perf_counter()
    rebuilt = PersistentIndex._from_snapshot(index.path, SKETCH_DIM, store, MODEL)
    rebuild = time.perf_counter() - started
    assert len(rebuilt) == size + hour
    index_mb = (index.path.stat().st_size + sum(g.stat().st_size for g in index.graph_files)) / 2**20
    row = {
        "history": size, "hour": hour, "k": K,
        "flat_read_s": round(read, 2), "flat_total_s": round(flat, 2),
        "mirror_open_s": round(opened, 2), "mirror_follow_s": round(followed, 2), "mirror_search": by_ef,
        "rebuild_s": round(rebuild, 2), "index_mb": round(index_mb, 1), "sources": int(near.sum()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(row, flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.research.sketch_history", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="20000,100000,400000")
    p.add_argument("--hour", type=int, default=20_000)
    p.add_argument("--ef-search", default="128,256,512", help="HNSW search lists to time (semantic_sketch_ef_search)")
    p.add_argument("--db-url", default=os.environ.get("DEDUP_TEST_DB_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    p.add_argument("--name", default="sketch-history")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    ef_searches = [int(e) for e in args.ef_search.split(",")]
    rows = [measure(int(n), args.hour, args.db_url, rng, ef_searches) for n in args.sizes.split(",")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"runs": rows, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
