"""`python -m dedup_tasks db ...`: registry maintenance (wired into the main CLI as `db`).

db migrate         apply missing migrations (idempotent)
db status          schema version, rows per table, bytes per document
db rebuild-bloom   rebuild the URL Bloom filter from the registry
db export-bloom    write the URL Bloom filter in the portable format of docs/seen.md (--out FILE)
db compact         move the recent tier into the main tier now (commits never do; the
                   dedup_registry_maintenance DAG does past compact_threshold_docs)
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from dedup_tasks.registry.migrate import (
    DEFAULT_SCHEMA,
    RegistryVersionError,
    code_version,
    current_version,
    migrate,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dedup_tasks db", description="fingerprint registry maintenance"
    )
    parser.add_argument("--db-url", help="PostgreSQL URL (default: DEDUP_DB_URL, Airflow dedup_db, embedded)")
    parser.add_argument(
        "--root", help="data root (default: DEDUP_ROOT or ./data); holds the embedded server and filter"
    )
    parser.add_argument(
        "--schema", default=DEFAULT_SCHEMA, help=f"registry schema (default {DEFAULT_SCHEMA})"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply missing migrations")
    sub.add_parser("stale", help="batches that need a rerun (an earlier batch committed after them)")
    status = sub.add_parser("status", help="schema version, rows and bytes per document")
    status.add_argument("--json", action="store_true", help="print JSON")
    bloom = sub.add_parser("rebuild-bloom", help="rebuild the URL Bloom filter from the registry")
    bloom.add_argument(
        "--capacity", type=int, default=None, help="URLs the filter is sized for (default 100M)"
    )
    bloom.add_argument(
        "--fp-rate", type=float, default=None, help="target false-positive rate (default 0.001)"
    )
    export = sub.add_parser("export-bloom", help="write the URL Bloom filter for a crawler (format: docs/seen.md)")
    export.add_argument("--out", type=Path, required=True, help="file to write (replaced atomically)")
    compact = sub.add_parser("compact", help="move the recent tier into the main tier")
    compact.add_argument(
        "--min-docs", type=int, default=0, help="only if the recent tier holds at least this many"
    )
    prune = sub.add_parser(
        "prune-sentences",
        help="delete the L4 sentence vectors (a cache keyed by text) written more than --older-than-days ago",
    )
    prune.add_argument("--older-than-days", type=float, required=True, help="age in days (0: all of them)")
    return parser


def _settings(args: argparse.Namespace) -> tuple[str | None, Path]:
    try:
        from dedup_tasks.config import DedupConfig

        config = DedupConfig.load({"root": args.root, "db_url": args.db_url})
        return config.db_url, Path(config.root)
    except ImportError:  # the config module is optional for this maintenance tool
        import os

        return args.db_url or os.environ.get("DEDUP_DB_URL"), Path(
            args.root or os.environ.get("DEDUP_ROOT", "./data")
        )


def db_main(argv: list[str]) -> int:
    """Run a `db` subcommand; returns the process exit code."""
    import psycopg2

    from dedup_tasks.registry import bloom as bloom_mod
    from dedup_tasks.registry.connect import bloom_path, resolve_dsn
    from dedup_tasks.registry.embedded import EmbeddedPostgres, EmbeddedPostgresError

    args = _parser().parse_args(argv)
    db_url, root = _settings(args)
    resolved = resolve_dsn(db_url, root)
    try:
        with ExitStack() as stack:
            if resolved.embedded:
                server = EmbeddedPostgres(resolved.embedded_dir)  # type: ignore[arg-type]
                stack.enter_context(server)
                dsn = server.dsn
            else:
                dsn = resolved.dsn  # type: ignore[assignment]
            conn = psycopg2.connect(dsn, application_name="crawl-dedup-db")
            stack.callback(conn.close)
            where = f"{resolved.source} database" + (
                f" ({resolved.embedded_dir})" if resolved.embedded else ""
            )

            if args.command == "migrate":
                applied = migrate(conn, args.schema)
                version = current_version(conn, args.schema)
                if applied:
                    print(
                        f"registry schema {args.schema!r} in the {where}: applied {applied}, now at version {version}"
                    )
                else:
                    print(f"registry schema {args.schema!r} in the {where}: up to date at version {version}")
                return 0

            if args.command == "status":
                info = _status(conn, dsn, args.schema, root)
                info["database"] = where
                if args.json:
                    print(json.dumps(info, indent=2))
                else:
                    _print_status(info)
                return 0

            if args.command == "stale":
                from dedup_tasks.registry.postgres import PostgresRegistry

                registry = PostgresRegistry(dsn, schema=args.schema)
                stack.callback(registry.close)
                stale = registry.stale_batches()
                for batch, info in stale.items():
                    earlier = ", ".join(info["earlier_batches"])
                    print(f"{batch}: {info['docs']} copies retracted (earlier: {earlier}); rerun it")
                if not stale:
                    print("no batch needs a rerun")
                return 0

            if args.command == "compact":
                from dedup_tasks.registry.postgres import PostgresRegistry

                registry = PostgresRegistry(dsn, schema=args.schema)
                stack.callback(registry.close)
                done = registry.compact(min_docs=args.min_docs)
                moved = done["moved"].get("documents", 0)
                steps = ", ".join(f"{name} {sec:.1f} s" for name, sec in done["steps"].items())
                print(f"compacted: {moved} documents moved to the main tier in {done['seconds']:.1f} s ({steps})")
                return 0

            if args.command == "prune-sentences":
                from dedup_tasks.registry.embeddings import PostgresEmbeddingStore

                try:
                    deleted = PostgresEmbeddingStore(conn, args.schema).prune_content_keyed(args.older_than_days)
                except ValueError as exc:
                    print(f"error: --older-than-days: {exc}", file=sys.stderr)
                    return 2
                for model_id, rows in sorted(deleted.items()):
                    print(f"{model_id}: {rows:,} sentence vectors deleted")
                print(f"pruned {sum(deleted.values()):,} sentence vectors older than {args.older_than_days:g} days"
                      " (a text needed again is embedded again)")
                return 0

            if args.command == "export-bloom":
                return _export_bloom(dsn, args.schema, root, args.out)

            if args.command == "rebuild-bloom":
                from dedup_tasks.registry.postgres import PostgresRegistry

                registry = PostgresRegistry(
                    dsn,
                    schema=args.schema,
                    bloom_path=bloom_path(root),
                    bloom_capacity=args.capacity or bloom_mod.DEFAULT_CAPACITY,
                    bloom_fp_rate=args.fp_rate or bloom_mod.DEFAULT_FP_RATE,
                )
                stack.callback(registry.close)
                rebuilt = registry.rebuild_bloom()
                print(
                    f"URL Bloom filter rebuilt at {bloom_path(root)}: {rebuilt.bloom.n_added} keys, "
                    f"{rebuilt.bloom.nbytes / 1e6:.1f} MB, k={rebuilt.bloom.k}, watermark seq {rebuilt.watermark}, "
                    f"expected false-positive rate {rebuilt.bloom.expected_fp_rate():.2e}"
                )
                return 0
    except RegistryVersionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (psycopg2.Error, EmbeddedPostgresError) as exc:
        print(f"error: {exc}".rstrip(), file=sys.stderr)
        return 1
    return 2


def _export_bloom(dsn: str, schema: str, root: Path, out: Path) -> int:
    """The registry's URL Bloom filter, caught up with the registry, written to `out` (docs/seen.md)."""
    from dedup_tasks.io import OutputError
    from dedup_tasks.registry.bloom_export import export_bloom
    from dedup_tasks.registry.connect import bloom_path
    from dedup_tasks.registry.seen import SeenIndex

    with SeenIndex(dsn, schema, bloom_path(root)) as index:  # the pipeline's filter, caught up
        persisted = index.synced_bloom()
    try:
        export_bloom(persisted, out)
    except OSError as exc:
        raise OutputError(f"cannot write the Bloom filter to {out}: {exc}") from exc
    print(f"URL Bloom filter written to {out}: {persisted.bloom.n_added:,} keys, {persisted.bloom.nbytes / 1e6:.1f} MB, "
          f"k={persisted.bloom.k}, watermark seq {persisted.watermark} (format: docs/seen.md)")
    return 0


def _status(conn: Any, dsn: str, schema: str, root: Path) -> dict[str, Any]:
    from dedup_tasks.registry.bloom import PersistedBloom
    from dedup_tasks.registry.connect import bloom_path

    version = current_version(conn, schema)
    info: dict[str, Any] = {"schema": schema, "version": version, "code_version": code_version()}
    if 0 < version <= code_version():
        from dedup_tasks.registry.postgres import PostgresRegistry

        registry = PostgresRegistry(dsn, schema=schema)
        try:
            info["tables"] = registry.table_stats()
            with registry._transaction() as cur:
                cur.execute(
                    "SELECT count(*), count(committed_at), max(committed_at)::text FROM registry_batches"
                )
                batches, committed, last = cur.fetchone()
            info["batches"] = {"known": batches, "committed": committed, "last_commit": last}
        finally:
            registry.close()
    persisted = PersistedBloom.load(bloom_path(root))
    info["bloom"] = (
        None
        if persisted is None
        else {
            "path": str(bloom_path(root)),
            "keys": persisted.bloom.n_added,
            "bytes": persisted.bloom.nbytes,
            "watermark": persisted.watermark,
            "expected_fp_rate": persisted.bloom.expected_fp_rate(),
        }
    )
    return info


def _print_status(info: dict[str, Any]) -> None:
    state = "up to date"
    if info["version"] == 0:
        state = "not migrated: run `python -m dedup_tasks db migrate`"
    elif info["version"] < info["code_version"]:
        state = "needs `python -m dedup_tasks db migrate`"
    elif info["version"] > info["code_version"]:
        state = "NEWER than this code: upgrade crawl-dedup"
    print(f"registry schema {info['schema']!r} in the {info['database']}")
    print(f"  version {info['version']} (code knows {info['code_version']}): {state}")
    if "batches" in info:
        b = info["batches"]
        print(f"  batches: {b['committed']} committed, last {b['last_commit']}")
    if "tables" in info:
        print(f"  {'table':<20} {'rows':>14} {'(recent)':>12} {'MB':>10} {'bytes/doc':>10}")
        for name, t in info["tables"].items():
            recent = f"{t['recent_rows']:,}" if "recent_rows" in t else ""
            print(
                f"  {name:<20} {t['rows']:>14,} {recent:>12} {t['bytes'] / 1e6:>10.1f} {t['bytes_per_doc']:>10.1f}"
            )
    bloom = info.get("bloom")
    if bloom:
        print(
            f"  URL Bloom filter: {bloom['keys']:,} keys, {bloom['bytes'] / 1e6:.1f} MB, watermark seq "
            f"{bloom['watermark']}, expected false-positive rate {bloom['expected_fp_rate']:.2e}"
        )
    else:
        print("  URL Bloom filter: none yet (built on the first URL lookup)")


if __name__ == "__main__":
    raise SystemExit(db_main(sys.argv[1:]))
