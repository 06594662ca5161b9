"""Registry benchmark of the MinHash layer in the block layout (schema 5..7) at 10M..50M documents.

    python -m bench registry --curve 10000000,25000000,50000000 --db-url URL [--batch 100000]
                             [--hour-batches 10] [--hours 1 [--compact-between]] [--schema bench_blocks]
                             [--keep] [--resume] [--load-only]

For each size N (ascending, the registry grows from one to the next): loads the documents' MinHash
signatures (128 x uint32, what the verifier reads) into documents_main (schema 8: with random URL keys,
content hashes and SimHashes, every layer of a crawled page) and writes the main
tier's band keys (42 bands of 3 rows, the configured LSH) directly as one run of blocks, shard by
shard, with numpy-generated keys: uniformly random 64-bit keys, each naming a random registered
document (42 per document on average), plus the real band keys of a 40,000-document sample whose
near-copies the timed batches plant. Then times, against N registered documents:

* one 100k-document batch: `minhash_candidates` (5% planted near-copies at Jaccard ~0.8) and the
  commit of the documents it keeps (all layers' rows into the recent tier);
* a 1M-document hour: ten such batches, lookups + commit each, the recent tier growing;
* with --hours N --compact-between: N such hours, the recent tier compacted into a new main-tier run
  before each hour after the first (`PostgresRegistry.compact`, as the maintenance DAG does hourly), so
  the later hours probe the main tier of several runs (the steady state);

and reports bytes per document of the band blocks and the documents rows (and of each documents index),
and the recent tier the hour
left (schema 7: one run of whole keys per commit). The recent tier and the timed batches are removed
before the next size, so each size starts from the same state. --load-only loads the sizes and times
nothing; a later --resume run with the same seed times a size already loaded without reloading it. With
--all-layers each batch also runs the URL, exact and SimHash lookups (of new keys: no hits).
Writes bench/results/registry-blocks.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg2

from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint.minhash import MinHasher, estimated_jaccard
from dedup_tasks.layers.minhash import MAIN_MIN_BANDS
from dedup_tasks.registry import _bandblocks, _sigpack
from dedup_tasks.registry._pgio import copy_in
from dedup_tasks.registry.base import Fingerprints
from dedup_tasks.registry.migrate import migrate
from dedup_tasks.registry.postgres import PostgresRegistry

RESULTS = Path(__file__).resolve().parent / "results"
NUM_PERM, BANDS, ROWS = 128, 42, 3
# What the pipeline registers (schema 9): the first K band keys and b bits of each signature value;
# set from --registry-bands / --signature-bits (default: DedupConfig's) in main.
REGISTRY_BANDS, SIGNATURE_BITS = BANDS, 32
SAMPLE = 40_000
CHUNK = 500_000
BASE_HOUR = np.datetime64("2026-01-01T00", "h")


def batch_id_of(index: int) -> str:
    return str(BASE_HOUR + np.timedelta64(int(index), "h"))


# Shingles per document (distinct character 5-grams): log-normal around 800, between the median
# counts of the evaluation corpora (Reuters 469, BBC 1,511, Sogou 237). A signature value is the
# minimum of that many uniform 32-bit values: its bit width is what the packed layout stores.
SHINGLES_MEDIAN, SHINGLES_SIGMA = 800.0, 0.9


def minima(rng: np.random.Generator, counts: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """uint32 minima of counts[i] uniform 32-bit values, `shape` = (len(counts), k)."""
    x = -np.expm1(np.log1p(-rng.random(shape)) / counts[:, None])
    return np.minimum(x * 2.0**32, 2.0**32 - 1).astype(np.uint32)


def signatures_like_documents(rng: np.random.Generator, n: int) -> np.ndarray:
    counts = np.clip(rng.lognormal(np.log(SHINGLES_MEDIAN), SHINGLES_SIGMA, n), 20, 100_000)
    return minima(rng, counts, (n, NUM_PERM))


def batch_ords(cur: Any, first: int, last: int) -> np.ndarray:
    """registry_batches.ord of the loaded batches first..last (100k documents each), created if missing."""
    for b in range(first, last + 1):
        cur.execute(
            "INSERT INTO registry_batches (batch_id) VALUES (%s) ON CONFLICT (batch_id) DO NOTHING", (batch_id_of(b),)
        )
    cur.execute(
        "SELECT batch_id, ord FROM registry_batches WHERE batch_id >= %s AND batch_id <= %s",
        (batch_id_of(first), batch_id_of(last)),
    )
    ord_of = dict(cur.fetchall())
    return np.array([ord_of[batch_id_of(b)] for b in range(first, last + 1)], np.int32)


def write_documents(cur: Any, seq: np.ndarray, sig: np.ndarray, rng: np.random.Generator) -> None:
    """documents rows (schema 8) of seq: the signatures given, random URL keys, content hashes and
    SimHashes (every layer present, as for a crawled page), batch = 100k documents by seq."""
    n = len(seq)
    batch = (seq - 1) // 100_000
    ords = batch_ords(cur, int(batch[0]), int(batch[-1]))
    copy_in(
        cur,
        "documents_main",
        ["seq", "url_key", "content_hi", "content_lo", "simhash", "batch_ord", "tier", "has_content", "doc_id", "signature"],
        [
            ("int8", seq),
            ("int8", rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)),
            ("int8", rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)),
            ("int8", rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)),
            ("int8", rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)),
            ("int4", ords[batch - batch[0]]),
            ("int2", np.zeros(n, np.int16)),
            ("bool", np.ones(n, bool)),
            ("text", np.char.add("doc-", seq.astype(str)).astype(object)),
            ("varbytea", _sigpack.pack_bits(sig, SIGNATURE_BITS)),
        ],
    )


def load_signatures(cur: Any, lo: int, hi: int, rng: np.random.Generator, log: Any) -> None:
    """documents rows for seq lo..hi-1 (doc ids and batches as the pipeline writes them)."""
    for start in range(lo, hi, CHUNK):
        stop = min(hi, start + CHUNK)
        seq = np.arange(start, stop, dtype=np.int64)
        write_documents(cur, seq, signatures_like_documents(rng, stop - start), rng)
        cur.connection.commit()
        log(f"documents {stop - 1:,}")


def write_band_run(cur: Any, docs: int, sample_keys: np.ndarray, rng: np.random.Generator, log: Any) -> dict[str, Any]:
    """The main tier's band keys of `docs` documents as one run, written shard by shard."""
    cur.execute("TRUNCATE minhash_bands_main, minhash_band_runs")
    entries = docs * REGISTRY_BANDS
    bits = _bandblocks.run_bits(entries)
    rem_bytes = _bandblocks.run_rem_bytes(entries)
    shards = 1 << _bandblocks.SHARD_BITS
    s_keys = np.ascontiguousarray(sample_keys[:, :REGISTRY_BANDS]).ravel()
    s_seqs = np.repeat(np.arange(1, SAMPLE + 1, dtype=np.int64), REGISTRY_BANDS)
    s_shard = (s_keys >> np.uint64(64 - _bandblocks.SHARD_BITS)).astype(np.int64)
    random_entries = entries - len(s_keys)
    per_shard = np.full(shards, random_entries // shards)
    per_shard[: random_entries % shards] += 1
    blocks = 0
    t0 = time.perf_counter()
    for shard in range(shards):
        n = int(per_shard[shard])
        keys = rng.integers(0, 2**56, n, dtype=np.uint64)
        keys |= np.uint64(shard) << np.uint64(56)
        keys.sort()  # random keys naming random documents: sorting the keys alone keeps that true
        seqs = rng.integers(SAMPLE + 1, docs + 1, n, dtype=np.int64)
        mine = np.flatnonzero(s_shard == shard)
        mine = mine[np.argsort(s_keys[mine], kind="stable")]
        at = np.searchsorted(keys, s_keys[mine])
        keys = np.insert(keys, at, s_keys[mine])
        seqs = np.insert(seqs, at, s_seqs[mine])
        b = _bandblocks.build_blocks(keys, seqs, bits, presorted=True, rem_bytes=rem_bytes)
        nb = len(b["n"])
        copy_in(
            cur,
            "minhash_bands_main",
            ["shard", "run", "bucket", "seq_base", "n", "entries"],
            [("int2", b["shard"]), ("int8", np.ones(nb, np.int64)), ("int8", b["bucket"]), ("int8", b["seq_base"]),
             ("int4", b["n"]), ("varbytea", b["entries"])],
        )  # fmt: skip
        blocks += nb
        if shard % 32 == 31:
            cur.connection.commit()
            log(f"band blocks: shard {shard + 1}/{shards} ({time.perf_counter() - t0:.0f} s)")
    cur.execute(
        "INSERT INTO minhash_band_runs (run, bits, rem_bytes, entries, blocks) VALUES (1, %s, %s, %s, %s)",
        (bits, rem_bytes, entries, blocks),
    )
    cur.connection.commit()
    return {"bits": bits, "rem_bytes": rem_bytes, "entries": entries, "blocks": blocks,
            "seconds": time.perf_counter() - t0}  # fmt: skip


def timed_batch(
    rng: np.random.Generator, n: int, tag: int, sample_sig: np.ndarray, hasher: MinHasher
) -> tuple[Fingerprints, int]:
    """n documents, 5% of them near-copies (10% of values replaced) of sampled registered ones.

    The rng draws are those of the benchmark before --background (same batches for a seed)."""
    sig = signatures_like_documents(rng, n)
    planted = n // 20
    src = rng.integers(0, SAMPLE, planted)
    near = sample_sig[src].copy()
    replace = rng.random(near.shape) < 0.1
    near[replace] = signatures_like_documents(rng, planted)[replace]
    sig[:planted] = near
    fp = Fingerprints(
        doc_id=np.array([f"t{tag}-{i}" for i in range(n)], dtype=object),
        url_key=rng.integers(0, 2**64, n, dtype=np.uint64),
        has_url=np.ones(n, bool),
        content_hash=rng.integers(0, 2**64, (n, 2), dtype=np.uint64),
        simhash=rng.integers(0, 2**64, n, dtype=np.uint64),
        has_simhash=np.ones(n, bool),
        minhash=sig,
        has_minhash=np.ones(n, bool),
        minhash_bands=np.ascontiguousarray(hasher.band_keys(sig)[:, :REGISTRY_BANDS]),
        minhash_bits=SIGNATURE_BITS,
    )
    return fp, planted


def background_keys(
    rng: np.random.Generator, fp: Fingerprints, planted: int, per_doc: int, sample_keys: np.ndarray
) -> np.ndarray:
    """The batch's band keys with `per_doc` chance agreements planted in each document not planted as a
    near copy: band j of the document takes band j's key of a random sample document (registered in the
    main tier), for `per_doc` distinct random j, so each such pair agrees on exactly one band. What real
    text does (unrelated articles agreeing on a band through common 5-grams; docs/registry.md), at a
    chosen rate per lookup. Only the lookup sees them: the commit registers the documents' own keys."""
    keys = fp.minhash_bands.copy()
    rows = np.arange(planted, len(fp))
    if per_doc <= 0 or len(rows) == 0:
        return keys
    bands = np.argsort(rng.random((len(rows), keys.shape[1])), axis=1)[:, :per_doc]
    donors = rng.integers(0, len(sample_keys), (len(rows), per_doc))
    keys[rows[:, None], bands] = sample_keys[donors, bands]
    return keys


def run_batch(
    registry: PostgresRegistry, batch_id: str, fp: Fingerprints, planted: int, all_layers: bool = False,
    simhash_lookup: bool = True, lookup_bands: np.ndarray | None = None, main_min_bands: int = 1,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    registry.begin(batch_id)
    seconds: dict[str, float] = {}
    if all_layers:
        # The other lookups of the cascade (their keys are new: no hits, the lookup's cost); SimHash's
        # only where the pipeline runs it (DedupConfig.simhash_registry_lookup).
        calls = [
            ("url", lambda: registry.lookup_urls(batch_id, fp.url_key)),
            ("exact", lambda: registry.lookup_content(batch_id, fp.content_hash)),
        ]
        if simhash_lookup:
            calls.append(("simhash", lambda: registry.simhash_candidates(batch_id, fp.simhash, 12)))
        for name, call in calls:
            t = time.perf_counter()
            call()
            seconds[name] = time.perf_counter() - t
    t = time.perf_counter()
    keys = fp.minhash_bands if lookup_bands is None else lookup_bands
    m = registry.minhash_candidates(batch_id, keys, main_min_bands=main_min_bands)
    t1 = time.perf_counter()
    seconds["minhash"] = t1 - t
    jac = estimated_jaccard(m.payload["minhash"], fp.minhash[m.query], m.payload["minhash_bits"]) if len(m) else np.empty(0)
    found = np.unique(m.query[jac >= 0.5])
    kept = np.setdiff1d(np.arange(len(fp)), found)
    result = registry.commit(batch_id, fp.take(kept))
    t2 = time.perf_counter()
    return {
        "candidates": len(m),
        "planted": planted,
        "found_planted": int(np.isin(np.arange(planted), found).sum()),
        "false_candidates": int((jac < 0.5).sum()),
        "registered": result.registered,
        "lookup_seconds": t1 - t0,
        "lookup_seconds_by_layer": seconds,
        "commit_seconds": t2 - t1,
        "commit_stages": dict(registry.last_commit_seconds),
    }


def reset_recent(cur: Any, docs: int) -> None:
    """Back to the loaded state: no recent tier, no timed batches (nor their compacted main-tier rows)."""
    cur.execute("DELETE FROM minhash_bands_main WHERE run <> 1")
    cur.execute("DELETE FROM minhash_band_runs WHERE run <> 1")
    cur.execute("DELETE FROM documents_main WHERE seq > %s", (docs,))
    cur.execute("TRUNCATE documents_recent, minhash_bands_recent, registry_stale")
    cur.execute("DELETE FROM registry_batches WHERE batch_id >= %s", (batch_id_of(10**6),))
    cur.connection.commit()


def sizes(cur: Any) -> dict[str, Any]:
    out = {}
    for name, rel in (("band_blocks", "minhash_bands_main"), ("documents", "documents_main")):
        cur.execute(
            "SELECT sum(pg_total_relation_size(relid))::bigint, sum(pg_relation_size(relid))::bigint,"
            " sum(pg_indexes_size(relid))::bigint FROM pg_partition_tree(%s::regclass)",
            (rel,),
        )
        total, heap, idx = cur.fetchone()
        out[name] = {"bytes": int(total), "heap_bytes": int(heap), "index_bytes": int(idx or 0)}
    # Each index of the documents (what a layer's lookup key costs).
    cur.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = 'documents_main'::regclass ORDER BY 1"
    )
    for index, size in cur.fetchall():
        out[f"index {index}"] = {"bytes": int(size)}
    return out


def time_hour(
    args: Any, step: dict[str, Any], docs: int, rng: np.random.Generator, sample_sig: np.ndarray, hasher: MinHasher, log: Any
) -> bool:
    """The 100k batch and the hour against `docs` registered (into `step`); False with --load-only."""
    if args.load_only:
        return False
    sample_keys = hasher.band_keys(sample_sig)
    bg_rng = np.random.default_rng([args.seed, 99, docs])
    conn = psycopg2.connect(args.db_url)
    with conn.cursor() as cur:
        cur.execute(f'SET search_path TO "{args.schema}"')
        registry = PostgresRegistry(args.db_url, schema=args.schema, num_perm=NUM_PERM)
        try:
            warm_fp, planted = timed_batch(rng, args.batch, 0, sample_sig, hasher)
            t = time.perf_counter()
            registry.minhash_candidates(batch_id_of(10**6 - 1), warm_fp.minhash_bands)
            step["warmup_lookup_seconds"] = time.perf_counter() - t
            hours = []
            for h in range(args.hours):
                if h and args.compact_between:
                    # The maintenance DAG's hourly compaction: the recent tier becomes a main-tier run.
                    t = time.perf_counter()
                    c = registry.compact()
                    cur.execute("SELECT run, bits, rem_bytes, entries, blocks FROM minhash_band_runs ORDER BY run")
                    runs = [dict(zip(("run", "bits", "rem_bytes", "entries", "blocks"), map(int, r), strict=True))
                            for r in cur.fetchall()]  # fmt: skip
                    conn.commit()
                    step.setdefault("compactions", []).append(
                        {"seconds": time.perf_counter() - t, "steps": c["steps"], "runs_after": runs,
                         "load_average": os.getloadavg()}  # fmt: skip
                    )
                    log(f"{docs:,}: compacted in {time.perf_counter() - t:.0f} s, main runs {runs}")
                hour = []
                for b in range(args.hour_batches):
                    fp, planted = timed_batch(rng, args.batch, b + 1, sample_sig, hasher)
                    lookup = background_keys(bg_rng, fp, planted, args.background, sample_keys[:, :REGISTRY_BANDS])
                    r = run_batch(
                        registry, batch_id_of(10**6 + h * args.hour_batches + b), fp, planted, args.all_layers,
                        args.simhash_lookup == "on", lookup, args.main_min_bands,
                    )  # fmt: skip
                    r["load_average"] = os.getloadavg()
                    hour.append(r)
                    log(f"{docs:,}: hour {h} batch {b}: lookup {r['lookup_seconds']:.1f} s, commit {r['commit_seconds']:.1f} s,"
                        f" found {r['found_planted']}/{planted}, false candidates {r['false_candidates']}")  # fmt: skip
                hours.append({
                    "docs": args.batch * args.hour_batches,
                    "lookup_seconds": sum(r["lookup_seconds"] for r in hour),
                    "commit_seconds": sum(r["commit_seconds"] for r in hour),
                    "total_seconds": sum(r["lookup_seconds"] + r["commit_seconds"] for r in hour),
                    "batches": hour,
                })  # fmt: skip
            step["batch_100k"] = hours[0]["batches"][0]
            step["hour"] = hours[0]
            if len(hours) > 1:
                step["hours"] = hours
            # The recent tier the hour left (one run of whole keys per commit, schema 7), before it is reset.
            cur.execute(
                "SELECT coalesce(sum(n), 0), count(*), pg_total_relation_size('minhash_bands_recent')"
                " FROM minhash_bands_recent"
            )
            keys, rows, size = (int(v) for v in cur.fetchone())
            step["recent_tier_after_hour"] = {"band_keys": keys, "rows": rows, "bytes": size,
                                              "bytes_per_key": size / keys if keys else 0.0}  # fmt: skip
        finally:
            registry.close()
        reset_recent(cur, docs)
    conn.close()
    log(f"{docs:,}: hour {step['hour']['total_seconds']:.0f} s")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench registry --curve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--curve", required=True, help="comma-separated registry sizes, ascending")
    parser.add_argument("--db-url", default=os.environ.get("DEDUP_DB_URL"), required=os.environ.get("DEDUP_DB_URL") is None)
    parser.add_argument("--schema", default="bench_blocks")
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--hour-batches", type=int, default=10)
    parser.add_argument("--hours", type=int, default=1, help="timed hours per size (the first one is 'hour')")
    parser.add_argument("--compact-between", action="store_true",
                        help="compact the recent tier into the main tier between the hours (the steady state)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the schema at the end")
    parser.add_argument("--resume", action="store_true", help="grow a schema kept by an earlier --keep run")
    parser.add_argument("--out", type=Path, default=RESULTS / "registry-blocks.json")
    parser.add_argument("--load-only", action="store_true", help="load the sizes (for a later --resume), time nothing")
    parser.add_argument("--all-layers", action="store_true",
                        help="each batch also runs the URL, exact and SimHash lookups (the whole cascade's registry work)")
    defaults = DedupConfig()
    parser.add_argument("--signature-bits", type=int, default=defaults.registry_signature_bits,
                        help="bits stored per signature value (DedupConfig.registry_signature_bits; 32: lossless)")
    parser.add_argument("--registry-bands", type=int, default=defaults.registry_bands,
                        help="band keys stored per document (DedupConfig.minhash_registry_bands)")
    parser.add_argument("--simhash-lookup", choices=("on", "off"), default="on" if defaults.simhash_registry_lookup else "off",
                        help="with --all-layers, also time the registry SimHash lookup (DedupConfig.simhash_registry_lookup)")
    parser.add_argument("--background", type=int, default=0,
                        help="chance candidates planted per looked-up document: one agreeing band each, main tier (background_keys)")
    parser.add_argument("--main-min-bands", type=int, default=MAIN_MIN_BANDS,
                        help="agreeing bands a main-tier candidate needs (layers.minhash.MAIN_MIN_BANDS)")
    args = parser.parse_args(argv)
    global REGISTRY_BANDS, SIGNATURE_BITS
    REGISTRY_BANDS, SIGNATURE_BITS = args.registry_bands, args.signature_bits
    curve = [int(x) for x in args.curve.split(",")]

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    conn = psycopg2.connect(args.db_url)
    if not args.resume:
        with conn.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{args.schema}" CASCADE')
        conn.commit()
    migrate(conn, args.schema)
    cur = conn.cursor()
    cur.execute(f'SET search_path TO "{args.schema}"')
    cur.execute("SET synchronous_commit = off")
    cur.execute("SHOW shared_buffers")
    result: dict[str, Any] = {
        "name": "registry-blocks",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench registry " + " ".join(sys.argv[2:] if argv is None else argv),
        "server": {"shared_buffers": cur.fetchone()[0]},
        "bands": BANDS,
        "registry_bands": REGISTRY_BANDS,
        "signature_bits": SIGNATURE_BITS,
        "simhash_lookup": args.all_layers and args.simhash_lookup == "on",
        "background_per_doc": args.background,
        "main_min_bands": args.main_min_bands,
        "rows": ROWS,
        "sizes": [],
    }
    hasher = MinHasher(NUM_PERM, 1, BANDS, ROWS)
    rng = np.random.default_rng(args.seed)
    sample_sig = signatures_like_documents(rng, SAMPLE)
    sample_keys = hasher.band_keys(sample_sig)
    # --resume: continue from the documents a kept run loaded (same seed: the same sample).
    cur.execute("SELECT coalesce(max(seq), 0) FROM documents_main")
    loaded = int(cur.fetchone()[0])
    conn.commit()
    for docs in curve:
        step: dict[str, Any] = {"docs": docs}
        t0 = time.perf_counter()
        # --resume of a size a --load-only run loaded: its signatures and band run are there (same seed).
        cur.execute("SELECT entries FROM minhash_band_runs WHERE run = 1")
        row = cur.fetchone()
        if loaded == docs and row is not None and int(row[0]) == docs * REGISTRY_BANDS:
            log(f"{docs:,} docs already loaded")
            step["load_seconds"] = 0.0
            step["bytes"] = sizes(cur)
            for part in step["bytes"].values():
                part["bytes_per_doc"] = part["bytes"] / docs
            step["timed"] = time_hour(args, step, docs, rng, sample_sig, hasher, log)
            result["sizes"].append(step)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2, default=float))
            continue
        if loaded == 0:
            write_documents(cur, np.arange(1, SAMPLE + 1, dtype=np.int64), sample_sig, np.random.default_rng([args.seed, 1]))
            loaded = SAMPLE
        # Documents on a second connection while this one writes the band blocks (two server processes);
        # their indexes are built after the load.
        conn.commit()
        conn.autocommit = True
        cur.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'documents'",
            (args.schema,),
        )
        doc_indexes = cur.fetchall()
        for name, _ in doc_indexes:
            cur.execute(f'DROP INDEX "{args.schema}"."{name}"')
        conn.autocommit = False
        sig_rng = np.random.default_rng([args.seed, docs])
        errors: list[BaseException] = []

        def signatures(lo: int = loaded + 1, hi: int = docs + 1, sig_rng: Any = sig_rng, errors: list = errors) -> None:
            try:
                c2 = psycopg2.connect(args.db_url)
                with c2.cursor() as cur2:
                    cur2.execute(f'SET search_path TO "{args.schema}"')
                    cur2.execute("SET synchronous_commit = off")
                    load_signatures(cur2, lo, hi, sig_rng, log)
                c2.close()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        loader = threading.Thread(target=signatures)
        loader.start()
        step["band_run"] = write_band_run(cur, docs, sample_keys, rng, log)
        loader.join()
        if errors:
            raise errors[0]
        loaded = docs
        step["signature_and_block_load_seconds"] = time.perf_counter() - t0
        conn.autocommit = True
        cur.execute("SET maintenance_work_mem = '1GB'")
        for _, definition in doc_indexes:
            # pg_indexes shows a partitioned index as "ON ONLY parent"; without ONLY it is built on every tier.
            cur.execute(definition.replace(" ON ONLY ", " ON "))
        conn.autocommit = False
        conn.autocommit = True
        for table in ("documents_main", "minhash_bands_main"):
            cur.execute(f"VACUUM (ANALYZE) {table}")
        cur.execute("CHECKPOINT")
        conn.autocommit = False
        for b in range((docs + 99_999) // 100_000):
            lo, hi = b * 100_000 + 1, min(docs, (b + 1) * 100_000)
            cur.execute(
                "UPDATE registry_batches SET snapshot_seq = %s, seq_lo = %s, seq_hi = %s, registered = %s WHERE batch_id = %s",
                (lo - 1, lo, hi, hi - lo + 1, batch_id_of(b)),
            )
        cur.execute("SELECT setval('registry_seq', %s)", (docs,))
        conn.commit()
        step["load_seconds"] = time.perf_counter() - t0
        step["bytes"] = sizes(cur)
        for part in step["bytes"].values():
            part["bytes_per_doc"] = part["bytes"] / docs
        log(f"{docs:,} docs loaded in {step['load_seconds']:.0f} s: {json.dumps(step['bytes'])}")

        step["timed"] = time_hour(args, step, docs, rng, sample_sig, hasher, log)
        result["sizes"].append(step)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=float))
        log(f"{docs:,}: written {args.out}")
    if not args.keep:
        with conn.cursor() as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{args.schema}" CASCADE')
        conn.commit()
    conn.close()
    return 0
