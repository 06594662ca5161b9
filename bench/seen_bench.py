"""`seen` throughput: query URLs through the command against a registry of N registered URLs.

    python -m bench seen [--docs 10000000] [--queries 1000000] [--db-url URL | --root DIR] [--reuse]

Loads N synthetic canonical URLs (``https://site<j>.example.com/<section>/<i>``, keys as L1 computes
them) into a registry schema by binary COPY (indexes built after the data, VACUUM ANALYZE), builds the
URL Bloom filter the way the pipeline does (``bloom.load_synced``), then pipes the query file through
``python -m dedup_tasks seen`` as a crawler would (a subprocess, stdin from a file, stdout to a file)
and checks every answer. Queries: half registered URLs (a fifth of them with a tracking parameter
added, so canonicalization does work), half never registered, 1% unparsable.

Reported: URLs per wall second; CPU seconds (user+sys) of the `seen` process and of its database
backend (read from /proc while it runs); and what two idle cores allow: the two overlap (the registry
queries run in a second thread), so a run takes at least max(seen CPU, total CPU / 2). On a machine
shared with other jobs the wall figure is the disturbed one. Writes bench/results/seen.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg2
import xxhash

from dedup_tasks.normalize.url import canonical_url
from dedup_tasks.registry import bloom as bloom_mod
from dedup_tasks.registry._pgio import copy_in, u64_to_i64
from dedup_tasks.registry.migrate import migrate

REPO = Path(__file__).resolve().parent.parent
SCHEMA = "bench_seen"
BATCH_DOCS = 100_000
SECTIONS = ("news", "sport", "world", "tech", "opinion", "live")
CHUNK = 1_000_000


def url_of(i: int) -> str:
    return f"https://site{i % 20011}.example.com/{SECTIONS[i % len(SECTIONS)]}/{i}"


def load(conn: Any, schema: str, docs: int, log: Any) -> dict[str, float]:
    """COPY `docs` URL-registered documents (one batch per 100,000) into a fresh registry schema."""
    cur = conn.cursor()
    cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    conn.commit()
    migrate(conn, schema)
    cur.execute(f'SET search_path TO "{schema}"')
    cur.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'documents'", (schema,))
    indexes = cur.fetchall()
    for name, _ in indexes:
        cur.execute(f'DROP INDEX "{schema}"."{name}"')
    conn.commit()
    t0 = time.perf_counter()
    n_batches = (docs + BATCH_DOCS - 1) // BATCH_DOCS
    ords = []
    for b in range(n_batches):
        cur.execute("INSERT INTO registry_batches (batch_id) VALUES (%s) RETURNING ord", (_batch_id(b),))
        ords.append(cur.fetchone()[0])
    ords_arr = np.array(ords, np.int32)
    rng = np.random.default_rng(0)
    for start in range(0, docs, CHUNK):
        stop = min(docs, start + CHUNK)
        seq = np.arange(start + 1, stop + 1, dtype=np.int64)
        keys = np.fromiter((xxhash.xxh64_intdigest(url_of(i).encode()) for i in range(start, stop)), np.uint64, stop - start)
        copy_in(cur, "documents_main", ["seq", "url_key", "content_hi", "content_lo", "batch_ord", "tier", "has_content", "doc_id"], [
            ("int8", seq), ("int8", u64_to_i64(keys)),
            ("int8", rng.integers(-2**63, 2**63 - 1, stop - start)), ("int8", rng.integers(-2**63, 2**63 - 1, stop - start)),
            ("int4", ords_arr[(seq - 1) // BATCH_DOCS]), ("int2", np.zeros(stop - start, np.int16)),
            ("bool", np.ones(stop - start, bool)), ("text", np.char.add("doc-", seq.astype(str)).astype(object)),
        ])  # fmt: skip
        conn.commit()
        log(f"loaded {stop:,}/{docs:,} URLs ({time.perf_counter() - t0:.0f} s)")
    for b in range(n_batches):
        lo, hi = b * BATCH_DOCS + 1, min(docs, (b + 1) * BATCH_DOCS)
        cur.execute("UPDATE registry_batches SET snapshot_seq = %s, began_at = now(), seq_lo = %s, seq_hi = %s,"
                    " registered = %s, committed_at = now() WHERE batch_id = %s", (lo - 1, lo, hi, hi - lo + 1, _batch_id(b)))
    cur.execute("SELECT setval('registry_seq', %s)", (docs,))
    conn.commit()
    load_s = time.perf_counter() - t0
    conn.autocommit = True
    cur.execute("SET maintenance_work_mem = '1GB'")
    i0 = time.perf_counter()
    for _, definition in indexes:
        cur.execute(definition.replace(" ON ONLY ", " ON "))
    cur.execute("VACUUM (ANALYZE) documents")
    conn.autocommit = False
    return {"load_seconds": load_s, "index_seconds": time.perf_counter() - i0}


def _batch_id(b: int) -> str:
    return str(np.datetime64("2026-01-01T00", "h") + np.timedelta64(b, "h"))


def queries(docs: int, n: int, path: Path) -> dict[str, int]:
    """Write `n` query URLs to `path`; return how many of each kind."""
    rng = np.random.default_rng(1)
    n_bad = n // 100
    n_seen = (n - n_bad) // 2
    n_new = n - n_bad - n_seen
    seen = rng.integers(0, docs, n_seen)
    lines = [url_of(int(i)) + ("?utm_source=feed" if j % 5 == 0 else "") for j, i in enumerate(seen)]
    lines += [f"https://site{int(i) % 20011}.example.com/fresh/{int(i)}" for i in rng.integers(0, 10**12, n_new)]
    lines += [f"not a url {j}" if j % 2 else f"ftp://files.example.com/{j}" for j in range(n_bad)]
    order = rng.permutation(len(lines))
    path.write_text("\n".join(lines[i] for i in order) + "\n")
    return {"registered": n_seen, "unregistered": n_new, "unparsable": n_bad}


def _cpu_of(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_seen(root: Path, dsn: str, schema: str, qfile: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "DEDUP_DB_URL": dsn, "DEDUP_DB_SCHEMA": schema, "PYTHONPATH": str(REPO)}
    backend: dict[str, float] = {}
    done = threading.Event()

    def watch() -> None:  # the backend's CPU, sampled until its connection closes
        conn = psycopg2.connect(dsn)
        conn.autocommit = True  # pg_stat_activity is read once per transaction: a new one each time
        pid = None
        try:
            while not done.is_set():
                if pid is None:
                    with conn.cursor() as cur:
                        cur.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'crawl-dedup-seen'")
                        row = cur.fetchone()
                        pid = row[0] if row else None
                elif (cpu := _cpu_of(pid)) is not None:
                    backend["cpu"] = cpu
                time.sleep(0.02)
        finally:
            conn.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    before = os.times()
    t0 = time.perf_counter()
    with open(qfile, "rb") as fin, open(out, "wb") as fout:
        proc = subprocess.run([sys.executable, "-m", "dedup_tasks", "seen", "--root", str(root)], stdin=fin,
                              stdout=fout, stderr=subprocess.PIPE, env=env, check=True)
    wall = time.perf_counter() - t0
    after = os.times()
    done.set()
    watcher.join()
    child = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall_seconds": wall, "seen_cpu_seconds": child, "backend_cpu_seconds": backend.get("cpu"),
            "stderr": proc.stderr.decode().strip()}


def check(qfile: Path, out: Path) -> dict[str, int]:
    """Every answer against the generator's truth: registered <=> a loaded URL, unparsable <=> no canonical form."""
    counts = {"seen": 0, "unseen": 0, "unparsable": 0}
    with open(qfile) as fq, open(out) as fa:
        for url, line in zip(fq, fa, strict=True):
            url = url.rstrip("\n")
            answer = json.loads(line)
            assert answer["url"] == url, (url, answer)
            if answer["seen"] is None:
                assert url.startswith(("not a url", "ftp://")), answer
                counts["unparsable"] += 1
            elif answer["seen"]:
                i = int(answer["doc_id"].removeprefix("doc-")) - 1
                assert canonical_url(url) == url_of(i) == answer["canonical_url"], answer
                counts["seen"] += 1
            else:
                assert "/fresh/" in url, answer
                counts["unseen"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    from bench.harness import write_result

    parser = argparse.ArgumentParser(prog="python -m bench seen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=10_000_000, help="registered URLs (default 10M)")
    parser.add_argument("--queries", type=int, default=1_000_000, help="query URLs (default 1M)")
    parser.add_argument("--db-url", default=os.environ.get("DEDUP_DB_URL"), help="PostgreSQL (default DEDUP_DB_URL)")
    parser.add_argument("--root", type=Path, default=None, help="data root for the filter (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="keep an already loaded schema of the same size")
    args = parser.parse_args(argv)
    if not args.db_url:
        parser.error("needs --db-url or DEDUP_DB_URL (a PostgreSQL server)")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    assert canonical_url(url_of(12345)) == url_of(12345)  # the loaded URLs are canonical as written
    root = args.root or Path(tempfile.mkdtemp(prefix="bench-seen-"))
    conn = psycopg2.connect(args.db_url)
    cur = conn.cursor()
    cur.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.documents",))
    loaded = cur.fetchone()[0] is not None
    if loaded:
        cur.execute(f'SELECT count(*) FROM "{SCHEMA}".documents')
        loaded = cur.fetchone()[0] == args.docs
    conn.commit()
    result: dict[str, Any] = {"docs": args.docs, "queries": args.queries}
    if not (args.reuse and loaded):
        result["load"] = load(conn, SCHEMA, args.docs, log)
    with conn.cursor() as cur:
        cur.execute(f'SET search_path TO "{SCHEMA}"')
        t0 = time.perf_counter()
        from dedup_tasks.registry.connect import bloom_path

        persisted, how = bloom_mod.load_synced(cur, bloom_path(root))
        if how != "loaded":
            persisted.save(bloom_path(root))
        result["bloom"] = {"how": how, "seconds": time.perf_counter() - t0, "keys": persisted.bloom.n_added,
                           "bytes": persisted.bloom.nbytes}
    conn.commit()
    conn.close()
    with tempfile.TemporaryDirectory() as tmp:
        qfile, out = Path(tmp) / "queries.txt", Path(tmp) / "answers.jsonl"
        result["query_mix"] = queries(args.docs, args.queries, qfile)
        log("running seen ...")
        timing = run_seen(root, args.db_url, SCHEMA, qfile, out)
        result["answers"] = check(qfile, out)
    assert result["answers"] == {"seen": result["query_mix"]["registered"], "unseen": result["query_mix"]["unregistered"],
                                 "unparsable": result["query_mix"]["unparsable"]}
    cpu = timing["seen_cpu_seconds"] + (timing["backend_cpu_seconds"] or 0.0)
    result.update(timing)
    result["urls_per_wall_second"] = args.queries / timing["wall_seconds"]
    result["urls_per_cpu_second"] = args.queries / cpu
    # On two idle cores the `seen` process (one canonicalizing thread holding the GIL) and its backend
    # overlap: the run takes at least the larger of seen's CPU time and half of the total.
    two_core_seconds = max(timing["seen_cpu_seconds"], cpu / 2)
    result["two_core_bound_urls_per_second"] = args.queries / two_core_seconds
    result["command"] = f"python -m bench seen --docs {args.docs} --queries {args.queries}"
    result["note"] = "machine shared with other jobs while measured: CPU seconds are the steadier figure"
    path = write_result("seen", result)
    print(f"seen: {args.queries:,} URLs against {args.docs:,} registered in {timing['wall_seconds']:.2f} s wall "
          f"({result['urls_per_wall_second']:,.0f} URLs/s), {cpu:.2f} CPU-s seen+backend "
          f"({result['urls_per_cpu_second']:,.0f} URLs/CPU-s; two idle cores: {result['two_core_bound_urls_per_second']:,.0f} "
          f"URLs/s); every answer right -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
