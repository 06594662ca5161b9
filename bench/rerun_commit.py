"""Rerun commit: a 20k-document hour committed, then committed again by its rerun (issue #16 row 3).

``python -m bench rerun-commit [--docs 20000] [--db-url DSN] [--no-embedded] [--control]``

Per server (the embedded one, and the one named by --db-url / DEDUP_DB_URL), in a fresh schema: the
first commit of the hour, then the rerun's commit (deletes every row of the hour, registers it again).
Target: rerun <= 3x the first commit. Reported: wall seconds, the server backend's CPU seconds (from
/proc when the server runs on this machine), the commit's stages, and the load average beside them.
``--control`` repeats the pair with the post-commit ANALYZE switched off (the code before the fix),
under a statement timeout, to show what the statistics buy. Writes bench/results/rerun-commit.json.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg2

from dedup_tasks.fingerprint.minhash import MinHasher
from dedup_tasks.registry.base import Fingerprints
from dedup_tasks.registry.postgres import PostgresRegistry

HOUR = "2026-12-01T00"
NUM_PERM, BANDS, ROWS = 128, 21, 6


def hour_fingerprints(
    n: int, seed: int, num_perm: int = NUM_PERM, bands: int = BANDS, rows: int = ROWS
) -> Fingerprints:
    """Random fingerprints of an ``n``-document hour (distinct per seed); also the row-3 fault test's."""
    rng = np.random.default_rng(seed)
    sig = rng.integers(0, 2**32, (n, num_perm), dtype=np.uint64).astype(np.uint32)
    return Fingerprints(
        doc_id=np.array([f"doc-{seed}-{i}" for i in range(n)], dtype=object),
        url_key=rng.integers(1, 2**63, n, dtype=np.uint64),
        has_url=np.ones(n, bool),
        content_hash=rng.integers(0, 2**63, (n, 2), dtype=np.uint64),
        simhash=rng.integers(0, 2**63, n, dtype=np.uint64),
        has_simhash=rng.random(n) < 0.9,
        minhash=sig,
        has_minhash=np.ones(n, bool),
        minhash_bands=MinHasher(num_perm, 1, bands, rows).band_keys(sig),
    )


def _backend_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of a server process on this machine, None if not readable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed_commit(registry: PostgresRegistry, fp: Fingerprints) -> dict[str, Any]:
    registry.begin(HOUR)
    pid = registry.backend_pid
    cpu0, wall0 = _backend_cpu(pid), time.perf_counter()
    try:
        registry.commit(HOUR, fp)
        timed_out = False
    except psycopg2.errors.QueryCanceled:
        timed_out = True
    wall = time.perf_counter() - wall0
    cpu1 = _backend_cpu(pid)
    return {
        "seconds": round(wall, 3),
        "server_cpu_seconds": None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 3),
        "stages": {k: round(v, 3) for k, v in registry.last_commit_seconds.items()},
        "timed_out": timed_out,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def measure(dsn: str, docs: int, *, analyze: bool, timeout_s: int) -> dict[str, Any]:
    schema = f"bench_rerun_{uuid.uuid4().hex[:8]}"
    kwargs: dict[str, Any] = {"schema": schema, "num_perm": NUM_PERM, "auto_migrate": True}
    if not analyze:
        kwargs["connect_kwargs"] = {"options": f"-c statement_timeout={timeout_s * 1000}"}
    registry = PostgresRegistry(dsn, **kwargs)
    if not analyze:
        registry.ANALYZE_MIN_ROWS = 2**62  # the code before the fix: no statistics after a commit
    try:
        first = _timed_commit(registry, hour_fingerprints(docs, 1))
        rerun = _timed_commit(registry, hour_fingerprints(docs, 2))
    finally:
        registry.close()
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()
    ratio = rerun["seconds"] / first["seconds"] if first["seconds"] else None
    return {"first_commit": first, "rerun_commit": rerun, "rerun_over_first": round(ratio, 2) if ratio else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench rerun-commit")
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--db-url", default=os.environ.get("DEDUP_DB_URL"), help="the local server (default DEDUP_DB_URL)")
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded server")
    parser.add_argument("--control", action="store_true", help="also run without the post-commit ANALYZE")
    parser.add_argument("--control-timeout", type=int, default=300, help="statement timeout of the control run, s")
    parser.add_argument("--root", type=Path, default=Path("data/bench-rerun-commit"), help="embedded server directory")
    args = parser.parse_args(argv)

    from bench.harness import write_result

    servers: dict[str, Any] = {}
    targets: list[tuple[str, str | None]] = []
    if not args.no_embedded:
        targets.append(("embedded", None))
    if args.db_url:
        targets.append(("local", args.db_url))
    for name, dsn in targets:
        server = None
        if dsn is None:
            from dedup_tasks.registry.embedded import EmbeddedPostgres

            args.root.mkdir(parents=True, exist_ok=True)
            server = EmbeddedPostgres(args.root.absolute() / "pg")
            dsn = server.start()
        try:
            out = {"with_analyze": measure(dsn, args.docs, analyze=True, timeout_s=args.control_timeout)}
            if args.control:
                out["without_analyze"] = measure(dsn, args.docs, analyze=False, timeout_s=args.control_timeout)
        finally:
            if server is not None:
                server.stop()
        servers[name] = out
        for mode, r in out.items():
            print(
                f"{name:<9}{mode:<16} first {r['first_commit']['seconds']:>8.2f} s   rerun {r['rerun_commit']['seconds']:>8.2f} s"
                f"{' (timed out)' if r['rerun_commit']['timed_out'] else ''}   ratio {r['rerun_over_first']}"
                f"   server CPU {r['first_commit']['server_cpu_seconds']} / {r['rerun_commit']['server_cpu_seconds']} s"
                f"   load {r['rerun_commit']['loadavg']}"
            )
    path = write_result("rerun-commit", {"docs": args.docs, "target": "rerun <= 3x first commit", "servers": servers})
    print(f"wrote {path}")
    return 0
