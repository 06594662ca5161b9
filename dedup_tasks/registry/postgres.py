"""The PostgreSQL fingerprint registry: base.Registry with MemoryRegistry's semantics, persisted.

Every lookup is one transaction: the query keys are COPYed (binary) into a temporary table, one join
query answers all of them, and the answer comes back through one COPY; no query is ever issued per
document. SimHash is the exception to the join: its band join runs in memory over the registered
values read with one COPY (see `_simhash_matches`). Schema and storage decisions are documented in migrations/0001_initial.sql.

Concurrency. `begin(batch_id)` records, in registry_batches, the last seq committed when the batch's
run started (taken under a shared advisory lock, so no commit is half-visible). `commit` takes the
registry's exclusive advisory lock for its transaction, deletes the batch's earlier rows (reruns),
re-checks the kept documents against rows other batches registered after that snapshot, and
registers the rest. Two batches committing at once are serialized by the lock, and the second one
sees the first one's rows in its re-check: a duplicate pair can never be kept by both. Because the
snapshot lives in the database, a commit task in another process (an Airflow task) uses the
snapshot that the run's first task recorded.

Compaction (`compact()`, a maintenance step: never part of a commit) moves the recent tier into the
main tier holding the advisory lock shared (commits wait), then empties the recent partitions with TRUNCATE.
TRUNCATE is not MVCC-safe: a transaction whose snapshot predates it would see the recent tier empty
and the moved rows not yet in the main tier. So every lookup transaction first takes ACCESS SHARE
locks on the fingerprint tables (LOCK TABLE, before any statement takes its snapshot): TRUNCATE waits
for lookups in flight, and lookups that start later wait for the compaction to commit.

`PostgresRegistry` is assembled from mixins, one module each: `_pg_schema` (the tables' names, the
recent tier's runs, the band-key-space record), `_pg_lookups` (the joins that answer lookups and
re-checks), `_pg_commit` (the commit transaction) and `_pg_maintenance` (compaction, VACUUM,
statistics, Bloom rebuild). This module holds the connections and transactions, the batch
lifecycle, the public lookups and the URL Bloom filter's upkeep.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import psycopg2
from psycopg2 import sql

from dedup_tasks.registry import bloom as bloom_mod
from dedup_tasks.registry._pg_commit import CommitMixin
from dedup_tasks.registry._pg_lookups import MatchesMixin, Part, Runner, _empty, _index_probes_only
from dedup_tasks.registry._pg_maintenance import MaintenanceMixin
from dedup_tasks.registry._pg_schema import LAYERS, LOCKED_TABLES, TABLES, KeySpaceMixin
from dedup_tasks.registry.base import Matches, Registry
from dedup_tasks.registry.migrate import DEFAULT_SCHEMA, advisory_key, check_version, migrate

# Re-exported: benchmarks and tests import these from this module.
from dedup_tasks.registry._pg_lookups import _HIT_ENTRIES_SQL as _HIT_ENTRIES_SQL  # isort: skip
from dedup_tasks.registry._pg_lookups import WHOLE_RUN_ENTRIES_PER_PROBE as WHOLE_RUN_ENTRIES_PER_PROBE  # isort: skip
from dedup_tasks.registry._pg_maintenance import MAX_MAIN_RUNS as MAX_MAIN_RUNS  # isort: skip
from dedup_tasks.registry._pg_schema import BLOCK_TABLES as BLOCK_TABLES  # isort: skip
from dedup_tasks.registry._pg_schema import _read_recent as _read_recent  # isort: skip
from dedup_tasks.registry._pg_schema import write_recent_run as write_recent_run  # isort: skip

log = logging.getLogger(__name__)


# Planner settings for the lookup joins: a probe table of 1e5..2e6 keys against tables of 1e7..1e8
# rows. JIT compilation would add seconds to each big join and buys nothing for index probes.
_SESSION_SETTINGS = {"jit": "off"}

CommitHook = Callable[[str, Any], None]


class PostgresRegistry(KeySpaceMixin, MatchesMixin, CommitMixin, MaintenanceMixin, Registry):
    """Fingerprints of earlier batches in PostgreSQL.

    dsn: libpq connection string or URL. schema: the registry's schema (one database may hold several).
    bloom_path: where the URL Bloom filter is persisted (None: no filter, every URL lookup asks the
    database). simhash_max_distance: when set, `simhash_candidates` returns only band-sharing
    candidates within this Hamming distance (filtered inside PostgreSQL); the default None returns
    every band-sharing candidate, exactly like MemoryRegistry; at 1e7 registered documents that is
    ~150 candidates per band per query, so the pipeline should pass its largest distance of interest.
    conflict_max_hamming / conflict_min_jaccard: the commit re-check's rules (defaults 3 and 0.8).
    parallel_lookups: run the SimHash and MinHash lookups as two halves on two connections (two
    server processes: the machine's second core). Commits never compact: `compact()` is a maintenance
    step (`python -m dedup_tasks db compact`, the dedup_registry_maintenance DAG).

    Not thread-safe: one object per thread (or process).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        bloom_path: Path | str | None = None,
        bloom_capacity: int = bloom_mod.DEFAULT_CAPACITY,
        bloom_fp_rate: float = bloom_mod.DEFAULT_FP_RATE,
        simhash_max_distance: int | None = None,
        conflict_max_hamming: int = 3,
        conflict_min_jaccard: float = 0.8,
        num_perm: int = 128,
        auto_migrate: bool = False,
        work_mem: str = "256MB",
        parallel_lookups: bool = True,
        connect_kwargs: dict[str, Any] | None = None,
        band_key_space: str | None = None,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.bloom_path = Path(bloom_path) if bloom_path is not None else None
        self.bloom_capacity = bloom_capacity
        self.bloom_fp_rate = bloom_fp_rate
        self.simhash_max_distance = simhash_max_distance
        self.conflict_max_hamming = conflict_max_hamming
        self.conflict_min_jaccard = conflict_min_jaccard
        self.num_perm = num_perm
        self.work_mem = work_mem
        self.parallel_lookups = parallel_lookups
        self._connect_kwargs = dict(connect_kwargs or {})
        self._conns: dict[str, Any] = {}
        self._lock_key = advisory_key(f"crawl-dedup:registry:{schema}")
        self._compact_lock_key = advisory_key(f"crawl-dedup:registry-compaction:{schema}")
        self._begun: set[str] = set()
        self._bloom: bloom_mod.PersistedBloom | None = None
        # Test hook: called as hook(stage, cursor) at "locked", "deleted", "checked", "inserted" inside
        # the commit transaction (the failure tests drop the connection there).
        self.commit_hook: CommitHook | None = None
        # Test hooks: lookup_hook(cursor) runs in every lookup transaction once its table locks are
        # held; compact_hook(stage, cursor) at "locked", "moved" and "truncated" inside compaction.
        self.lookup_hook: Callable[[Any], None] | None = None
        self.compact_hook: CommitHook | None = None
        self.stats: dict[str, int] = {"bloom_skipped": 0, "bloom_maybe": 0}
        self.last_commit_seconds: dict[str, float] = {}
        self.last_simhash_seconds: dict[str, float] = {}
        self._embedding_store: Any = None

        conn = self._connection()
        if auto_migrate:
            migrate(conn, schema)
        check_version(conn, schema)
        # Checked on the first MinHash lookup or commit: maintenance (compaction, statistics) reads
        # no band keys' meaning.
        self._band_key_space = band_key_space
        self._recorded_stoplist: tuple[Any] | None = None


    # ---- connection ---------------------------------------------------------------------------
    def _connection(self, which: str = "main") -> Any:
        conn = self._conns.get(which)
        if conn is None or conn.closed:
            conn = psycopg2.connect(self.dsn, application_name="crawl-dedup-registry", **self._connect_kwargs)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
                cur.execute("SET work_mem = %s", (self.work_mem,))
                for name, value in _SESSION_SETTINGS.items():
                    cur.execute(sql.SQL("SET {} = %s").format(sql.Identifier(name)), (value,))
            conn.autocommit = False
            self._conns[which] = conn
        return conn

    @contextmanager
    def _transaction(self, *, repeatable_read: bool = False, which: str = "main") -> Iterator[Any]:
        conn = self._connection(which)
        try:
            with conn.cursor() as cur:
                if repeatable_read:
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    # Before the first statement that takes the snapshot: see the module docstring.
                    cur.execute(f"LOCK TABLE {', '.join(LOCKED_TABLES)} IN ACCESS SHARE MODE")
                    _index_probes_only(cur)
                    if self.lookup_hook is not None:
                        self.lookup_hook(cur)
                yield cur
            conn.commit()
        except BaseException:
            self._discard_transaction(which)
            raise

    def _discard_transaction(self, which: str = "main") -> None:
        conn = self._conns.get(which)
        if conn is None:
            return
        try:
            if not conn.closed:
                conn.rollback()
                return
        except psycopg2.Error:
            pass
        # The connection is gone (server restart, terminated backend): the next call reconnects.
        with suppress(psycopg2.Error):
            conn.close()
        self._conns.pop(which, None)

    def _lookup_runner(self) -> Runner:
        """Runs lookup parts, each in its own REPEATABLE READ transaction; two at once on two connections."""

        def run(parts: list[Part]) -> list[Any]:
            if len(parts) == 1 or not self.parallel_lookups:
                with self._transaction(repeatable_read=True) as cur:
                    return [part(cur, k) for k, part in enumerate(parts)]
            results: list[Any] = [None] * len(parts)
            errors: list[BaseException] = []

            def work(k: int, which: str) -> None:
                try:
                    with self._transaction(repeatable_read=True, which=which) as cur:
                        results[k] = parts[k](cur, k)
                except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                    errors.append(exc)

            # psycopg2 releases the GIL while the server works, so the halves run on two server processes.
            helper = threading.Thread(target=work, args=(1, "aux"), name="registry-lookup")
            helper.start()
            work(0, "main")
            helper.join()
            if errors:
                raise errors[0]
            return results

        return run

    @property
    def embedding_store(self) -> Any:
        """The L4 vector cache in this registry's schema (table ``embeddings``, migration 0002).

        It has its own connection: its writes commit on their own, so they never wait for (or roll back
        with) a lookup or the batch commit, and a vector stays cached even when the batch is retried.
        """
        if self._embedding_store is None or self._conns.get("embeddings") is None or self._conns["embeddings"].closed:
            from dedup_tasks.registry.embeddings import PostgresEmbeddingStore

            self._embedding_store = PostgresEmbeddingStore(self._connection("embeddings"), self.schema)
        return self._embedding_store

    @property
    def backend_pid(self) -> int:
        """PID of the server process of this registry's connection (tests terminate it)."""
        return int(self._connection().info.backend_pid)

    def close(self) -> None:
        try:
            if self._bloom is not None and self._bloom.dirty and self.bloom_path is not None:
                self._bloom.save(self.bloom_path)
        finally:
            for conn in self._conns.values():
                if not conn.closed:
                    conn.close()
            self._conns = {}

    # ---- batch lifecycle ----------------------------------------------------------------------
    def begin(self, batch_id: str) -> None:
        """Record this run's snapshot: the commit re-checks against everything registered after it."""
        self._record_snapshot(batch_id, overwrite=True)

    def _ensure_begun(self, batch_id: str) -> None:
        # A lookup without begin(): keep a snapshot that an earlier task of the same run recorded
        # (earlier is safer: it re-checks more), record one only if there is none.
        if batch_id not in self._begun:
            self._record_snapshot(batch_id, overwrite=False)

    def _record_snapshot(self, batch_id: str, *, overwrite: bool) -> None:
        with self._transaction() as cur:
            # Waits for a commit in progress: its seq block must not count as "seen" before it is visible.
            cur.execute("SELECT pg_advisory_xact_lock_shared(%s)", (self._lock_key,))
            snapshot = bloom_mod.last_seq(cur)
            cur.execute(
                "INSERT INTO registry_batches AS b (batch_id, snapshot_seq, began_at) VALUES (%s, %s, now())"
                " ON CONFLICT (batch_id) DO UPDATE SET snapshot_seq = EXCLUDED.snapshot_seq, began_at = EXCLUDED.began_at"
                + ("" if overwrite else " WHERE b.snapshot_seq IS NULL"),
                (batch_id, snapshot),
            )
        self._begun.add(batch_id)

    # ---- lookups ------------------------------------------------------------------------------
    def lookup_urls(self, batch_id: str, url_keys: np.ndarray) -> Matches:
        keys = np.ascontiguousarray(url_keys, dtype=np.uint64).ravel()
        self._ensure_begun(batch_id)
        with self._transaction(repeatable_read=True) as cur:
            probe = np.arange(len(keys))
            if self.bloom_path is not None and len(keys):
                maybe = self._synced_bloom(cur).bloom.contains(keys)
                probe = np.flatnonzero(maybe)
                self.stats["bloom_maybe"] += len(probe)
                self.stats["bloom_skipped"] += len(keys) - len(probe)
            if len(probe) == 0:
                return _empty("url", self.num_perm)
            m = self._url_matches(cur, keys[probe], "b.batch_id < %(batch)s", {"batch": batch_id})
        m.query = probe[m.query]
        return m

    def lookup_content(self, batch_id: str, content_hash: np.ndarray) -> Matches:
        hashes = np.ascontiguousarray(content_hash, dtype=np.uint64).reshape(-1, 2)
        self._ensure_begun(batch_id)
        with self._transaction(repeatable_read=True) as cur:
            return self._content_matches(cur, hashes, "b.batch_id < %(batch)s", {"batch": batch_id})

    def simhash_candidates(
        self, batch_id: str, simhash: np.ndarray, max_distance: int | None = None
    ) -> Matches:
        """Band-sharing candidates; `max_distance` (default: the constructor's) also filters by Hamming distance."""
        values = np.ascontiguousarray(simhash, dtype=np.uint64).ravel()
        distance = self.simhash_max_distance if max_distance is None else max_distance
        self._ensure_begun(batch_id)
        return self._simhash_matches(
            self._lookup_runner(), values, "b.batch_id < %(batch)s", {"batch": batch_id}, distance
        )

    def minhash_candidates(self, batch_id: str, band_keys: np.ndarray, *, main_min_bands: int = 1) -> Matches:
        keys = np.ascontiguousarray(band_keys, dtype=np.uint64)
        keys = keys.reshape(len(keys), -1) if keys.ndim != 2 else keys
        self._ensure_begun(batch_id)
        self._ensure_band_key_space()
        return self._minhash_matches(
            self._lookup_runner(), keys, "b.batch_id < %(batch)s", {"batch": batch_id}, "r.batch_id < %(batch)s",
            main_min_bands,
        )  # fmt: skip

    # ---- Bloom filter ---------------------------------------------------------------------------
    def _synced_bloom(self, cur: Any) -> bloom_mod.PersistedBloom:
        if self._bloom is None:
            assert self.bloom_path is not None
            self._bloom, how = bloom_mod.load_synced(
                cur, self.bloom_path, self.bloom_capacity, self.bloom_fp_rate
            )
            log.info(
                "URL Bloom filter %s from %s (watermark %d)", how, self.bloom_path, self._bloom.watermark
            )
            if how != "loaded":
                self._bloom.save(self.bloom_path)
        else:
            bloom_mod.catch_up(cur, self._bloom)
        if self._bloom.bloom.n_added > self.bloom_capacity:
            log.warning(
                "URL Bloom filter holds %d keys, above its capacity %d: its false-positive rate grows; "
                "rebuild it larger (`db rebuild-bloom --capacity N`)",
                self._bloom.bloom.n_added,
                self.bloom_capacity,
            )
        return self._bloom

    def save_bloom(self) -> None:
        if self._bloom is not None and self.bloom_path is not None and self._bloom.dirty:
            self._bloom.save(self.bloom_path)


__all__ = ["LAYERS", "TABLES", "PostgresRegistry"]
