"""The PostgreSQL registry's maintenance steps, never part of a commit: compaction of the recent
tier into the main tier (band keys rewritten into runs of blocks, runs merged past MAX_MAIN_RUNS),
VACUUM, size statistics and the rebuild of the URL Bloom filter.

`MaintenanceMixin` is that part of `PostgresRegistry` (uses its `_connection`, `_transaction`,
advisory lock keys, `compact_hook` and Bloom settings).
"""

from __future__ import annotations

import io
import logging
import time
from typing import Any

import numpy as np

from dedup_tasks.registry import _bandblocks
from dedup_tasks.registry import bloom as bloom_mod
from dedup_tasks.registry._pg_schema import LOCKED_TABLES, TABLES, _read_recent
from dedup_tasks.registry._pgio import copy_in, copy_out_int8

# The registry's one logger, named after its public module: that is the name callers configure.
log = logging.getLogger("dedup_tasks.registry.postgres")

# Merge the main tier's band runs into one when a compaction leaves more than this many: every
# lookup reads one block per run and key.
MAX_MAIN_RUNS = 4
# Order in which compaction moves each table's rows: its largest index's key, so that the main tier's
# B-tree takes them leaf by leaf instead of at random.
# documents: in seq order (its seq index's); its url_key, content and SimHash B-trees take the rows at
# random (one table, one order).
_COMPACT_ORDER = {
    "documents": "seq",
    "minhash_bands": "bucket",  # rewritten into blocks: _compact_bands
}


class MaintenanceMixin:
    """Compaction, VACUUM, table statistics and the Bloom rebuild of `PostgresRegistry`."""

    def vacuum(self, analyze: bool = True, tables: list[str] | None = None) -> None:
        """VACUUM (ANALYZE) the fingerprint tables: sets visibility-map bits for index-only scans.

        Autovacuum does this on a default server (see the storage parameters in the migration); call
        it after bulk loads or where autovacuum is off.
        """
        conn = self._connection()
        conn.commit()
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                for table in tables or [t for t in LOCKED_TABLES if t != "minhash_band_runs"]:
                    cur.execute(f"VACUUM {'(ANALYZE) ' if analyze else ''}{table}")
        finally:
            if not conn.closed:
                conn.autocommit = False

    def table_stats(self) -> dict[str, dict[str, float]]:
        """Rows, bytes (heap + indexes + TOAST of both tiers) and bytes per registered document, per table."""
        out: dict[str, dict[str, float]] = {}
        with self._transaction() as cur:
            cur.execute("SELECT count(*) FROM documents")
            docs = int(cur.fetchone()[0])
            for table in TABLES:
                if table == "minhash_bands":
                    # The recent tier's keys (a run of rows per commit; `minhash_bands` is their view).
                    cur.execute(
                        "SELECT coalesce(sum(n), 0), coalesce(sum(n), 0), pg_total_relation_size('minhash_bands_recent'),"
                        " pg_relation_size('minhash_bands_recent') FROM minhash_bands_recent"
                    )
                else:
                    cur.execute(
                        f"SELECT (SELECT count(*) FROM {table}), (SELECT count(*) FROM {table}_recent),"
                        " sum(pg_total_relation_size(relid))::bigint, sum(pg_relation_size(relid))::bigint"
                        " FROM pg_partition_tree(%s::regclass)",
                        (table,),
                    )
                rows, recent, total, heap = (int(v) for v in cur.fetchone())
                if table == "minhash_bands":
                    # The main tier's band keys live in blocks (minhash_bands_main): count keys, not rows.
                    cur.execute(
                        "SELECT (SELECT coalesce(sum(entries), 0) FROM minhash_band_runs),"
                        " sum(pg_total_relation_size(relid))::bigint + pg_total_relation_size('minhash_band_runs'),"
                        " sum(pg_relation_size(relid))::bigint FROM pg_partition_tree('minhash_bands_main'::regclass)"
                    )
                    main_rows, main_total, main_heap = cur.fetchone()
                    rows, total, heap = rows + int(main_rows), total + main_total, heap + main_heap
                out[table] = {
                    "rows": int(rows),
                    "recent_rows": int(recent),
                    "bytes": int(total),
                    "heap_bytes": int(heap),
                    "bytes_per_row": total / rows if rows else 0.0,
                    "bytes_per_doc": total / docs if docs else 0.0,
                }
        out["total"] = {
            "rows": docs,
            "bytes": sum(v["bytes"] for v in out.values()),
            "bytes_per_doc": sum(v["bytes_per_doc"] for v in out.values()),
        }
        return out

    def recent_docs(self) -> int:
        """Documents in the recent tier (registered since the last compaction)."""
        with self._transaction() as cur:
            cur.execute("SELECT count(*) FROM documents_recent")
            return int(cur.fetchone()[0])

    def compact(self, min_docs: int = 0) -> dict[str, Any]:
        """Move the recent tier into the main tier; returns rows moved and seconds per step.

        A maintenance step, run outside the pipeline's commits (`db compact`, the
        dedup_registry_maintenance DAG). Does nothing while the recent tier holds fewer than
        `min_docs` documents (or none). Holds the registry lock (shared), so commits wait; lookups
        and begin() do not, except that the TRUNCATE at the end waits for lookups in flight and
        lookups starting meanwhile wait for it to commit (dedup_tasks.registry.postgres's docstring).
        Afterwards VACUUMs documents_main, which sets the visibility-map bits of the moved rows
        (the SimHash read is an index-only scan of its simhash index).
        """
        started = time.perf_counter()
        steps: dict[str, float] = {}
        moved: dict[str, int] = {}

        def mark(name: str, since: float) -> float:
            now = time.perf_counter()
            steps[name] = now - since
            return now

        hook = self.compact_hook or (lambda stage, cur: None)
        with self._transaction() as cur:
            # One compaction at a time; the registry lock is taken shared: that keeps commits out (they
            # take it exclusively) but lets runs record their snapshot (shared) meanwhile.
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._compact_lock_key,))
            cur.execute("SELECT pg_advisory_xact_lock_shared(%s)", (self._lock_key,))
            hook("locked", cur)
            cur.execute("SELECT count(*) FROM documents_recent")
            if int(cur.fetchone()[0]) < max(min_docs, 1):
                return {"moved": {}, "seconds": time.perf_counter() - started, "steps": steps}
            t = time.perf_counter()
            for table, order in _COMPACT_ORDER.items():
                if table == "minhash_bands":
                    moved[table] = self._compact_bands(cur)
                    t = mark(f"insert_{table}", t)
                    continue
                cols = _columns(cur, table)
                cur.execute(
                    f"INSERT INTO {table}_main ({cols}, tier) SELECT {cols}, 0 FROM {table}_recent ORDER BY {order}"
                )
                moved[table] = cur.rowcount
                t = mark(f"insert_{table}", t)
            hook("moved", cur)
            # One statement for all recent partitions: a new empty file each, no dead rows to vacuum.
            cur.execute(f"TRUNCATE {', '.join(f'{table}_recent' for table in TABLES)}")
            hook("truncated", cur)
        t = mark("truncate_commit", t)
        # Only the SimHash read is an index-only scan, which needs the visibility-map bits of the moved
        # rows; the other lookups read the heap anyway. Vacuuming the big main tables here would
        # also scan their whole indexes whenever reruns left dead rows (minutes at 1e7 documents):
        # autovacuum does that, and ANALYZE, outside the maintenance window (plans are fixed).
        self.vacuum(analyze=False, tables=["documents_main"])
        t = mark("vacuum_documents_main", t)
        # Fresh statistics for the grown main tier (and the emptied recent one): a rerun's DELETE of a
        # compacted batch is planned on them (issue #16 row 3). ANALYZE samples, it does not scan.
        with self._transaction() as cur:
            for table in TABLES:
                cur.execute(f"ANALYZE {table}_main")
                cur.execute(f"ANALYZE {table}_recent")
        mark("analyze", t)
        seconds = time.perf_counter() - started
        log.info("registry compacted: %s rows moved to the main tier in %.1f s %s", moved, seconds, steps)
        return {"moved": moved, "seconds": seconds, "steps": steps}

    def _compact_bands(self, cur: Any) -> int:
        """Turn the recent tier's band rows into one new main-tier run; merge the main runs when there
        are more than MAX_MAIN_RUNS. Returns the band keys moved. Inside compact()'s transaction."""
        keys, seqs = _read_recent(cur, "true", None)
        if len(keys):
            self._write_run(cur, keys, seqs)
        cur.execute("SELECT run FROM minhash_band_runs ORDER BY run")
        runs = [r for (r,) in cur.fetchall()]
        if len(runs) > MAX_MAIN_RUNS:
            self._merge_runs(cur, runs)
        return len(keys)

    def _write_run(
        self, cur: Any, keys: np.ndarray, seqs: np.ndarray, bits: int | None = None, rem_bytes: int | None = None
    ) -> int:
        """Write band keys as one new main-tier run of blocks; returns its id."""
        cur.execute("SELECT coalesce(max(run), 0) + 1 FROM minhash_band_runs")
        run_id = int(cur.fetchone()[0])
        if bits is None or rem_bytes is None:
            # A run keeps its keys' top bits + 8 * rem_bytes only: a new run is sized by its own keys but
            # keeps enough bits for a later merge with the finest run (_bandblocks.new_run_shape).
            cur.execute("SELECT bits, rem_bytes FROM minhash_band_runs")
            bits, rem_bytes = _bandblocks.new_run_shape(len(keys), [(int(b), int(r)) for b, r in cur.fetchall()])
        blocks = _bandblocks.build_blocks(keys, seqs, bits, rem_bytes=rem_bytes)
        n_blocks = len(blocks["n"])  # type: ignore[arg-type]
        copy_in(
            cur,
            "minhash_bands_main",
            ["shard", "run", "bucket", "seq_base", "n", "entries"],
            [
                ("int2", blocks["shard"]),
                ("int8", np.full(n_blocks, run_id, np.int64)),
                ("int8", blocks["bucket"]),
                ("int8", blocks["seq_base"]),
                ("int4", blocks["n"]),
                ("varbytea", blocks["entries"]),
            ],
        )
        cur.execute(
            "INSERT INTO minhash_band_runs (run, bits, rem_bytes, entries, blocks) VALUES (%s, %s, %s, %s, %s)",
            (run_id, bits, rem_bytes, len(keys), n_blocks),
        )
        return run_id

    def _merge_runs(self, cur: Any, runs: list[int]) -> None:
        """Merge main-tier runs into one, dropping entries whose document is gone (reruns, retractions)."""
        live = np.sort(copy_out_int8(cur, "SELECT seq FROM documents WHERE signature IS NOT NULL", None, 1).ravel())
        cur.execute("SELECT run, bits, rem_bytes FROM minhash_band_runs WHERE run = ANY(%s)", (runs,))
        shape_of = {run_id: (int(bits), int(rb)) for run_id, bits, rb in cur.fetchall()}
        keys_parts, seq_parts = [], []
        for run_id in runs:
            bits, rb = shape_of[run_id]
            out = io.BytesIO()
            cur.copy_expert(
                "COPY (SELECT 0::int8, 0::int8, run, bucket, seq_base, entries FROM minhash_bands_main"
                f" WHERE run = {int(run_id)}) TO STDOUT (FORMAT binary)",
                out,
            )
            e = _bandblocks.decode_copy(out.getbuffer(), rb)
            tkey, seq = e["tkey"], e["seq"]
            # Only the top bits + 8 * rem_bytes of a key are stored: the merged run takes the fewest
            # bits and stored bytes among its inputs.
            keys_parts.append(tkey << np.uint64(64 - bits - 8 * rb))
            seq_parts.append(seq)
        keys, seqs = np.concatenate(keys_parts), np.concatenate(seq_parts)
        pos = np.searchsorted(live, seqs)
        alive = (pos < len(live)) & (live[np.minimum(pos, len(live) - 1)] == seqs) if len(live) else np.zeros(len(seqs), bool)
        cur.execute("DELETE FROM minhash_bands_main WHERE run = ANY(%s)", (runs,))
        cur.execute("DELETE FROM minhash_band_runs WHERE run = ANY(%s)", (runs,))
        if alive.any():
            bits, rem_bytes = _bandblocks.merged_shape(int(alive.sum()), list(shape_of.values()))
            self._write_run(cur, keys[alive], seqs[alive], bits, rem_bytes)

    def rebuild_bloom(self) -> bloom_mod.PersistedBloom:
        """Rebuild the URL filter from the registry and persist it."""
        if self.bloom_path is None:
            raise ValueError("this registry has no bloom_path")
        with self._transaction(repeatable_read=True) as cur:
            self._bloom = bloom_mod.rebuild(cur, self.bloom_capacity, self.bloom_fp_rate)
        self._bloom.save(self.bloom_path)
        return self._bloom


def _columns(cur: Any, table: str) -> str:
    """The table's columns except the partition key `tier`, quoted, in table order."""
    cur.execute(
        "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attname <> 'tier'",
        (table,),
    )
    return str(cur.fetchone()[0])
