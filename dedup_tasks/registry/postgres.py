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
"""

from __future__ import annotations

import base64
import io
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import psycopg2
import pyarrow as pa
from psycopg2 import sql

from dedup_tasks.fingerprint.stoplist import (
    AUTO_STOPLIST,
    DEFAULT_STOPLIST,
    SIGNATURE_KEY_SPACE,
    is_built_in,
    load_stoplist,
    stoplist_from_record,
)
from dedup_tasks.registry import _bandblocks, _bandjoin, _sigpack
from dedup_tasks.registry import bloom as bloom_mod
from dedup_tasks.registry._pgio import (
    copy_in,
    copy_out_int8,
    copy_out_table,
    hex_to_binary,
    i64_to_u64,
    text_column,
    u64_to_i64,
)
from dedup_tasks.registry.base import CommitResult, Fingerprints, Matches, Registry
from dedup_tasks.registry.migrate import (
    DEFAULT_SCHEMA,
    RegistryKeySpaceError,
    advisory_key,
    check_version,
    migrate,
)

log = logging.getLogger(__name__)

LAYERS = ("url", "exact", "simhash", "minhash")
# Since schema 8 one `documents` row per registered document holds its URL key, content hash, SimHash
# and MinHash signature (migration 0008; url_keys, content_hashes, simhashes and minhash_signatures are
# views of it).
TABLES = ("documents", "minhash_bands")
# What a lookup reads besides TABLES: the main tier's band blocks and their runs (migration 0005).
# Since schema 7 `minhash_bands` is a view of the recent tier's keys (minhash_bands_recent: one run of
# whole keys per commit, _bandblocks.recent_rows); `{table}_recent` and `{table}_main` are tables for
# every table of TABLES.
BLOCK_TABLES = ("minhash_bands_main", "minhash_band_runs")
# The tables a lookup locks (LOCK TABLE, see the module docstring): the view's table instead of the view.
LOCKED_TABLES = tuple(t if t != "minhash_bands" else "minhash_bands_recent" for t in TABLES) + BLOCK_TABLES
# Merge the main tier's band runs into one when a compaction leaves more than this many: every
# lookup reads one block per run and key.
MAX_MAIN_RUNS = 4
# A lookup reads a main-tier run whole (one COPY, joined in memory like the recent tier) instead of
# probing it block by block when the run holds at most this many entries per probe key: a probe costs
# an index descent and a block read (~several us), a read entry ~10-20 ns.
WHOLE_RUN_ENTRIES_PER_PROBE = 16
# Order in which compaction moves each table's rows: its largest index's key, so that the main tier's
# B-tree takes them leaf by leaf instead of at random.
# documents: in seq order (its seq index's); its url_key, content and SimHash B-trees take the rows at
# random (one table, one order).
_COMPACT_ORDER = {
    "documents": "seq",
    "minhash_bands": "bucket",  # rewritten into blocks: _compact_bands
}
# Registered rows `t` (documents) are read with their batch `b` (registry_batches, on its ord): the
# lookups' filters and outputs name b.batch_id.
_WITH_BATCH = "JOIN registry_batches b ON b.ord = t.batch_ord"

# Planner settings for the lookup joins: a probe table of 1e5..2e6 keys against tables of 1e7..1e8
# rows. JIT compilation would add seconds to each big join and buys nothing for index probes.
_SESSION_SETTINGS = {"jit": "off"}

CommitHook = Callable[[str, Any], None]
# A lookup part: (cursor, part index) -> result (a pa.Table or an array); a runner executes a list of parts.
Part = Callable[[Any, int], Any]
Runner = Callable[[list[Part]], list[Any]]


class PostgresRegistry(Registry):
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

    def _ensure_band_key_space(self) -> None:
        if self._band_key_space is not None:
            self._check_band_key_space(self._band_key_space)
            self._band_key_space = None

    def _check_band_key_space(self, wanted: str) -> None:
        """Record the key space of the MinHash band keys on first use; refuse another one later.

        Keys of another index signature would share no band with what is registered: every lookup would
        miss silently. A registry that holds documents but no record was keyed on the plain signature.
        ``wanted`` "auto" takes whatever is recorded (a registry still without a record gets the
        built-in stoplist: a batch without MinHash rows has nothing to learn one from)."""
        if wanted == AUTO_STOPLIST:
            self.band_key_stoplist(lambda: load_stoplist(DEFAULT_STOPLIST))
            return
        with self._transaction() as cur:
            cur.execute("LOCK TABLE registry_meta IN SHARE ROW EXCLUSIVE MODE")  # two first runs at once
            recorded = self._recorded_key_space(cur)
            if recorded is None:
                cur.execute("INSERT INTO registry_meta (key, value) VALUES ('band_key_space', %s)", (wanted,))
                recorded = wanted
        if recorded != wanted:
            setting = "''" if recorded == SIGNATURE_KEY_SPACE else recorded.split(":", 1)[1].split("#", 1)[0]
            raise RegistryKeySpaceError(
                f"registry schema {self.schema!r} holds MinHash band keys of {recorded!r}, but the configuration"
                f" asks for {wanted!r}: its lookups would find none of the registered documents. Set"
                f" minhash_registry_stoplist={setting} for this registry, or auto to follow what it records"
                " (or start a new one)."
            )

    def band_key_stoplist(self, propose: Callable[[], Any]) -> Any:
        # A record is never changed once written: read it once per registry object.
        if self._recorded_stoplist is None:
            self._recorded_stoplist = (self._band_key_stoplist(propose),)
        return self._recorded_stoplist[0]

    def _band_key_stoplist(self, propose: Callable[[], Any]) -> Any:
        with self._transaction() as cur:
            cur.execute("LOCK TABLE registry_meta IN SHARE ROW EXCLUSIVE MODE")  # two first runs at once
            recorded = self._recorded_key_space(cur)
            if recorded is None:
                stoplist = propose()
                cur.execute(
                    "INSERT INTO registry_meta (key, value) VALUES ('band_key_space', %s)",
                    (SIGNATURE_KEY_SPACE if stoplist is None else stoplist.key_space,),
                )
                if stoplist is not None and not is_built_in(stoplist):
                    # A learned stoplist lives here, beside its record: every task and engine that opens
                    # the registry reads the same hashes (docs/registry.md).
                    encoded = base64.b64encode(stoplist.hashes.astype("<u4").tobytes()).decode("ascii")
                    cur.execute("INSERT INTO registry_meta (key, value) VALUES ('band_key_stoplist', %s)", (encoded,))
                return stoplist
            cur.execute("SELECT value FROM registry_meta WHERE key = 'band_key_stoplist'")
            row = cur.fetchone()
        hashes = None if row is None else np.frombuffer(base64.b64decode(row[0]), "<u4")
        try:
            return stoplist_from_record(recorded, hashes)
        except ValueError as exc:
            raise RegistryKeySpaceError(f"registry schema {self.schema!r}: {exc}") from exc

    @staticmethod
    def _recorded_key_space(cur: Any) -> str | None:
        """The recorded key space (the caller holds registry_meta's lock); a registry holding documents
        but no record was keyed on the plain signature, and gets that record now."""
        cur.execute("SELECT value FROM registry_meta WHERE key = 'band_key_space'")
        row = cur.fetchone()
        if row is not None:
            return row[0]
        cur.execute("SELECT EXISTS (SELECT 1 FROM documents)")
        if not cur.fetchone()[0]:
            return None
        cur.execute("INSERT INTO registry_meta (key, value) VALUES ('band_key_space', %s)", (SIGNATURE_KEY_SPACE,))
        return SIGNATURE_KEY_SPACE

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

    # The *_matches helpers answer for arbitrary row filters `where` on the registered rows (alias t,
    # documents) and their batch (alias b, registry_batches): "b.batch_id < batch" for lookups,
    # "t.seq > snapshot AND b.batch_id < batch" (or "b.batch_id > batch") for the commit's re-checks.

    def _url_matches(self, cur: Any, keys: np.ndarray, where: str, params: dict[str, Any]) -> Matches:
        uniq, inv = np.unique(keys, return_inverse=True)
        cur.execute("CREATE TEMP TABLE _probe_url (u int4 NOT NULL, k int8 NOT NULL) ON COMMIT DROP")
        signed = u64_to_i64(uniq)
        order = np.argsort(signed, kind="stable")  # the index's order of the signed column
        copy_in(cur, "_probe_url", ["u", "k"], [("int4", order), ("int8", signed[order])])
        cur.execute("ANALYZE _probe_url")
        res = copy_out_table(
            cur,
            "SELECT p.u, t.doc_id, b.batch_id, t.content_hi, t.content_lo"
            f" FROM _probe_url p JOIN documents t ON t.url_key = p.k {_WITH_BATCH} WHERE {where}",
            params,
            [
                ("u", pa.int64()),
                ("doc_id", pa.string()),
                ("batch_id", pa.string()),
                ("hi", pa.int64()),
                ("lo", pa.int64()),
            ],
        )
        rows, query = _expand(res.column("u").to_numpy(), inv)
        content = np.stack(
            [i64_to_u64(res.column("hi").to_numpy()), i64_to_u64(res.column("lo").to_numpy())], axis=1
        )
        return Matches(
            query,
            text_column(res, "doc_id")[rows],
            text_column(res, "batch_id")[rows],
            {"content_hash": content.reshape(-1, 2)[rows]},
        )

    def _content_matches(self, cur: Any, hashes: np.ndarray, where: str, params: dict[str, Any]) -> Matches:
        pairs = np.ascontiguousarray(hashes).view([("hi", np.uint64), ("lo", np.uint64)]).ravel()
        uniq, inv = np.unique(pairs, return_inverse=True)
        cur.execute(
            "CREATE TEMP TABLE _probe_content (u int4 NOT NULL, hi int8 NOT NULL, lo int8 NOT NULL) ON COMMIT DROP"
        )
        hi, lo = u64_to_i64(uniq["hi"]), u64_to_i64(uniq["lo"])
        order = np.argsort(hi, kind="stable")
        copy_in(
            cur,
            "_probe_content",
            ["u", "hi", "lo"],
            [("int4", order), ("int8", hi[order]), ("int8", lo[order])],
        )
        cur.execute("ANALYZE _probe_content")
        res = copy_out_table(
            cur,
            "SELECT p.u, t.doc_id, b.batch_id FROM _probe_content p JOIN documents t"
            f" ON t.content_hi = p.hi AND t.content_lo = p.lo AND t.has_content {_WITH_BATCH} WHERE {where}",
            params,
            [("u", pa.int64()), ("doc_id", pa.string()), ("batch_id", pa.string())],
        )
        rows, query = _expand(res.column("u").to_numpy(), inv)
        return Matches(query, text_column(res, "doc_id")[rows], text_column(res, "batch_id")[rows], {})

    def _simhash_matches(
        self,
        run: Runner,
        values: np.ndarray,
        where: str,
        params: dict[str, Any],
        max_distance: int | None,
        *,
        prefilter: bool = False,
    ) -> Matches:
        """Band-sharing rows (within max_distance when given) of the registered rows matching `where`.

        Three steps: (1) the registered SimHash values (8 bytes each) are read with one binary COPY,
        in two halves on two connections (an index-only scan of documents' simhash index); (2) the
        band join and the distance test run in memory (_bandjoin, exact); (3) the (query, value) pairs
        found are COPYed back and joined to their rows through that index, with `where` applied. Step 1 reads every registered
        value, but a batch of 1e5 queries touches ~80% of the 65536 values of each band anyway, so
        the band indexes would read every row about six times.
        """
        uniq, inv = np.unique(values, return_inverse=True)
        schema = [
            ("u", pa.int64()),
            ("seq", pa.int64()),
            ("doc_id", pa.string()),
            ("batch_id", pa.string()),
            ("simhash", pa.int64()),
        ]
        if len(uniq) == 0:
            res = _empty_table(schema)
        else:

            def fetch(cur: Any, k: int) -> np.ndarray:
                # Halves by the sign of the value: each reads half of the simhash index, without the
                # heap (a documents row is ~20x wider than its entry). `where` is applied in the confirm step,
                # except for a selective one (the re-check's seq filter), which is cheaper to apply here.
                half = "t.simhash < 0" if k == 0 else "t.simhash >= 0"
                if not prefilter:
                    cur.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
                    return copy_out_int8(cur, f"SELECT t.simhash FROM documents t WHERE {half}", None, 1)
                return copy_out_int8(
                    cur, f"SELECT t.simhash FROM documents t {_WITH_BATCH} WHERE {half} AND {where}", params, 1
                )

            t0 = time.perf_counter()
            registered = i64_to_u64(np.concatenate([part.ravel() for part in run([fetch, fetch])]))
            t1 = time.perf_counter()
            q_idx, found = _bandjoin.band_join(registered, uniq, max_distance)
            del registered
            # One row per (query, value): equal SimHashes of several documents come back from step 3.
            pairs = np.unique(np.stack([q_idx, u64_to_i64(found)], axis=1), axis=0)

            def confirm(cur: Any, k: int) -> pa.Table:
                cur.execute("CREATE TEMP TABLE _probe_sim (u int4 NOT NULL, s int8 NOT NULL) ON COMMIT DROP")
                order = np.argsort(pairs[:, 1], kind="stable")
                copy_in(cur, "_probe_sim", ["u", "s"], [("int4", pairs[order, 0]), ("int8", pairs[order, 1])])
                cur.execute("ANALYZE _probe_sim")
                return copy_out_table(
                    cur,
                    "SELECT c.u, t.seq, t.doc_id, b.batch_id, t.simhash FROM _probe_sim c JOIN documents t"
                    f" ON t.simhash = c.s {_WITH_BATCH} WHERE {where}",
                    params,
                    schema,
                )

            t2 = time.perf_counter()
            res = run([confirm])[0] if len(pairs) else _empty_table(schema)
            # What the benchmark reports per step.
            self.last_simhash_seconds = {"fetch": t1 - t0, "band_join": t2 - t1, "confirm": time.perf_counter() - t2}
        u = res.column("u").to_numpy()
        rows, query = _expand(u, inv)
        return Matches(
            query,
            text_column(res, "doc_id")[rows],
            text_column(res, "batch_id")[rows],
            {"simhash": i64_to_u64(res.column("simhash").to_numpy())[rows]},
        )

    def _minhash_matches(
        self, run: Runner, band_keys: np.ndarray, where: str, params: dict[str, Any], recent_where: str,
        main_min_bands: int = 1,
    ) -> Matches:
        """Documents sharing a band key, from both tiers, with their signatures.

        Phase 1, per part k (0, 1): (1) the recent tier's runs of shards k mod 2 (rows of
        minhash_bands_recent r matching `recent_where`, a superset of `where` on their batch), read
        whole with one COPY and joined in memory with every query's keys (exact on 64 bits); (2) the
        main tier's runs: small ones read whole (their shards k mod 2), the others probed block by
        block (_bandblocks) for half of the distinct queries. Each (query, seq) comes once per agreeing
        band. Then a main-tier document with fewer than `main_min_bands` agreeing bands is no candidate.
        Phase 2, per half of the candidates: COPYed in and joined to the documents' signatures with
        `where`: a seq without a documents row (a rerun's or a retraction's leftover in a block) drops
        out there.
        """
        n_bands = band_keys.shape[1]
        if len(band_keys) == 0 or n_bands == 0:
            return _empty("minhash", self.num_perm)
        rows_view = np.ascontiguousarray(band_keys).view(np.dtype((np.void, 8 * n_bands))).ravel()
        _, first, inv = np.unique(rows_view, return_index=True, return_inverse=True)
        uniq = np.ascontiguousarray(band_keys[first], dtype=np.uint64)
        halves = np.array_split(np.arange(len(uniq)), 2)
        probes = _bandblocks.SortedProbes(uniq.ravel(), np.repeat(np.arange(len(uniq)), n_bands))

        def band_matches(cur: Any, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            out = io.BytesIO()
            cur.copy_expert(
                cur.mogrify(
                    "COPY (SELECT r.seq_base, r.entries FROM minhash_bands_recent r"
                    f" WHERE r.shard %% 2 = {int(k)} AND {recent_where}) TO STDOUT (FORMAT binary)",
                    params,
                ).decode(),
                out,
            )
            recent_u, recent_seq = probes.join_copy(out.getbuffer())
            del out
            cur.execute("SELECT run, bits, rem_bytes, entries FROM minhash_band_runs ORDER BY run")
            runs = cur.fetchall()
            whole = [r for r in runs if int(r[3]) <= WHOLE_RUN_ENTRIES_PER_PROBE * probes.keys.size]
            main_u, main_seq = [], []
            if whole:
                # A run's blocks through the (bucket, run) index: its buckets are < 2^bits, so the scan
                # passes only the index entries of other runs' buckets in that range (1/2^(b' - bits)
                # of a run of b' bits), checking `run` on the index; never a scan of the whole table.
                cur.execute("SET LOCAL enable_seqscan = off")
            for run_id, bits, rb, _ in whole:
                out = io.BytesIO()
                cur.copy_expert(
                    "COPY (SELECT bucket, seq_base, entries FROM minhash_bands_main"
                    f" WHERE bucket >= 0 AND bucket < {1 << int(bits)} AND run = {int(run_id)}"
                    f" AND shard % 2 = {int(k)}) TO STDOUT (FORMAT binary)",
                    out,
                )
                wu, ws = probes.join_blocks_copy(out.getbuffer(), int(bits), int(rb))
                del out
                main_u.append(wu)
                main_seq.append(ws)
            if whole:
                cur.execute("SET LOCAL enable_seqscan = on")
            us = halves[k]
            probed = [r[:3] for r in runs if r not in whole]
            pu, ps = self._main_band_candidates(cur, uniq[us].ravel(), np.repeat(us, n_bands), k, probed)
            return recent_u, recent_seq, np.concatenate([*main_u, pu]), np.concatenate([*main_seq, ps])

        found = run([band_matches, band_matches])
        main_u = np.concatenate([f[2] for f in found])
        main_seq = np.concatenate([f[3] for f in found])
        if main_min_bands > 1 and len(main_u):
            main_u, main_seq = _agreeing_pairs(main_u, main_seq, main_min_bands)
        u = np.concatenate([*(f[0] for f in found), main_u])
        seq = np.concatenate([*(f[1] for f in found), main_seq])
        pick = _first_of_pairs(u, seq)
        u, seq = u[pick], seq[pick]
        order = np.argsort(seq, kind="stable")
        u, seq = u[order], seq[order]
        parts = np.array_split(np.arange(len(seq)), 2)
        schema = [
            ("u", pa.int64()),
            ("seq", pa.int64()),
            ("doc_id", pa.string()),
            ("batch_id", pa.string()),
            ("sig", pa.string()),
        ]

        def signatures(cur: Any, k: int) -> pa.Table:
            take = parts[k]
            if len(take) == 0:
                return _empty_table(schema)
            cand = f"_cand_mh{k}"
            cur.execute(f"CREATE TEMP TABLE {cand} (u int4 NOT NULL, seq int8 NOT NULL) ON COMMIT DROP")
            copy_in(cur, cand, ["u", "seq"], [("int4", u[take]), ("int8", seq[take])])
            cur.execute(f"ANALYZE {cand}")
            return copy_out_table(
                cur,
                "SELECT c.u, t.seq, t.doc_id, b.batch_id, encode(t.signature, 'hex') AS sig"
                f" FROM {cand} c JOIN documents t ON t.seq = c.seq {_WITH_BATCH}"
                f" WHERE t.signature IS NOT NULL AND {where}",
                params,
                schema,
            )

        if len(seq) == 0:
            return _empty("minhash", self.num_perm)
        res = pa.concat_tables(run([signatures, signatures] if len(seq) > 1 else [signatures]))
        u = res.column("u").to_numpy()
        rows, query = _expand(u, inv)
        # b-bit (schema 9), packed (schema 6) or raw (rows written under schema 5) signatures: _sigpack
        # reads all three, and says each row's bits.
        sig, bits = _sigpack.unpack_bits(hex_to_binary(res.column("sig")), self.num_perm)
        return Matches(
            query,
            text_column(res, "doc_id")[rows],
            text_column(res, "batch_id")[rows],
            {"minhash": sig[rows], "minhash_bits": bits[rows]},
        )

    def _main_band_candidates(
        self, cur: Any, keys: np.ndarray, u_col: np.ndarray, k: int, runs: list[tuple[int, int, int]] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(u, seq) of the main tier's band keys equal (on the bits a run keeps) to `keys`.

        One probe row per key and run. The server returns a block only where its entries contain
        the key's stored bits (2 or 4 bytes, the run's rem_bytes; position() over the block's bytes, at
        any offset), and of such a block only the matching entry when that is the one match
        (`_HIT_ENTRIES_SQL`); the client then compares the entries at their true offsets. In a 2-byte
        run a key equal on bits + 16 only is a (verified) extra candidate.
        """
        if runs is None:
            cur.execute("SELECT run, bits, rem_bytes FROM minhash_band_runs ORDER BY run")
            runs = cur.fetchall()
        if not runs or len(keys) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        # A run compares the top bits + 8 * rem_bytes bits of a key.
        shift_of = {run_id: 64 - int(bits) - 8 * int(rb) for run_id, bits, rb in runs}
        cols: dict[str, list[np.ndarray]] = {"u": [], "k": [], "shard": [], "run": [], "bucket": [], "rem": []}
        for run_id, bits, rb in runs:
            bucket, rem = _bandblocks.split_key(keys, int(bits), int(rb))
            cols["u"].append(u_col)
            cols["k"].append(u64_to_i64(keys))
            cols["shard"].append((bucket >> np.uint64(int(bits) - _bandblocks.SHARD_BITS)).astype(np.int16))
            cols["run"].append(np.full(len(keys), run_id, np.int64))
            cols["bucket"].append(bucket.astype(np.int64))
            cols["rem"].append(rem.astype(">u4").view(np.uint8).reshape(-1, 4)[:, 4 - int(rb):])
        rems = cols.pop("rem")
        c = {name: np.concatenate(parts) for name, parts in cols.items()}
        # The stored bits of each probe as bytea (runs of 2- and 4-byte entries may coexist).
        rem_offsets = np.zeros(len(c["u"]) + 1, np.int64)
        np.cumsum(np.concatenate([np.full(len(r), r.shape[1]) for r in rems]), out=rem_offsets[1:])
        rem_flat = np.concatenate([r.ravel() for r in rems])
        order = np.argsort(c["bucket"], kind="stable")  # the (bucket, run) index's order
        rem_col = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), len(rem_offsets) - 1, [None, pa.py_buffer(rem_offsets), pa.py_buffer(rem_flat)]
        ).take(pa.array(order))
        probe = f"_probe_blk{k}"
        cur.execute(
            f"CREATE TEMP TABLE {probe} (u int8 NOT NULL, k int8 NOT NULL, shard int2 NOT NULL, run int8 NOT NULL,"
            " bucket int8 NOT NULL, rem bytea NOT NULL) ON COMMIT DROP"
        )
        copy_in(
            cur,
            probe,
            ["u", "k", "shard", "run", "bucket", "rem"],
            [("int8", c["u"][order]), ("int8", c["k"][order]), ("int2", c["shard"][order]),
             ("int8", c["run"][order]), ("int8", c["bucket"][order]), ("varbytea", rem_col)],
        )  # fmt: skip
        cur.execute(f"ANALYZE {probe}")
        out = io.BytesIO()
        cur.copy_expert(f"COPY ({_HIT_ENTRIES_SQL.format(probe=probe)}) TO STDOUT (FORMAT binary)", out)
        e = _bandblocks.decode_copy(out.getbuffer(), with_width=True)
        if len(e["seq"]) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        if len(runs) > 1:
            run_ids = np.array(sorted(shift_of), np.int64)
            shifts = np.array([shift_of[r] for r in run_ids], np.uint64)
            shift = shifts[np.searchsorted(run_ids, e["run"])]
        else:
            shift = np.uint64(shift_of[runs[0][0]])
        hit = (e["key"] >> shift) == e["tkey"]
        return e["tag"][hit], e["seq"][hit]

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

    def rebuild_bloom(self) -> bloom_mod.PersistedBloom:
        """Rebuild the URL filter from the registry and persist it."""
        if self.bloom_path is None:
            raise ValueError("this registry has no bloom_path")
        with self._transaction(repeatable_read=True) as cur:
            self._bloom = bloom_mod.rebuild(cur, self.bloom_capacity, self.bloom_fp_rate)
        self._bloom.save(self.bloom_path)
        return self._bloom

    def save_bloom(self) -> None:
        if self._bloom is not None and self.bloom_path is not None and self._bloom.dirty:
            self._bloom.save(self.bloom_path)

    # ---- commit -------------------------------------------------------------------------------
    def commit(
        self,
        batch_id: str,
        kept: Fingerprints,
        *,
        max_hamming: int | None = None,
        min_jaccard: float | None = None,
    ) -> CommitResult:
        """Replace what `batch_id` registered with `kept`, minus the documents the re-check finds taken.

        conflicts.payload: 'layer' (url/exact/simhash/minhash, object) and 'score' (float64: 1.0 for
        url/exact, the Hamming distance for simhash, the estimated Jaccard for minhash).
        """
        _validate(kept)
        self._ensure_band_key_space()
        max_hamming = self.conflict_max_hamming if max_hamming is None else max_hamming
        min_jaccard = self.conflict_min_jaccard if min_jaccard is None else min_jaccard
        user_hook = self.commit_hook
        started = time.perf_counter()
        self.last_commit_seconds = {}

        def hook(stage: str, cur: Any) -> None:
            # Seconds from the start of the commit to each stage: what the benchmark reports.
            self.last_commit_seconds[stage] = time.perf_counter() - started
            if user_hook is not None:
                user_hook(stage, cur)

        with self._transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            hook("locked", cur)
            # The batch's row (and its ord, which its documents rows name) exists from here on.
            cur.execute(
                "INSERT INTO registry_batches (batch_id) VALUES (%s) ON CONFLICT (batch_id) DO NOTHING", (batch_id,)
            )
            cur.execute(
                "SELECT snapshot_seq, seq_lo, seq_hi, ord FROM registry_batches WHERE batch_id = %s", (batch_id,)
            )
            snapshot, seq_lo, seq_hi, ord_ = cur.fetchone()
            changed = {table: 0 for table in TABLES}
            if seq_lo is not None:
                changed.update(self._delete_rows(cur, batch_id, ord_, seq_lo, seq_hi))
            hook("deleted", cur)

            conflicts = _empty_conflicts()
            if snapshot is None:
                log.warning(
                    "commit of batch %s without begin() or any lookup: nothing to re-check against", batch_id
                )
            elif len(kept):
                # Earlier batch wins: only earlier batches that committed after our snapshot can take a
                # document from us; a later batch's copy is handled below (it loses).
                cur.execute(
                    "SELECT EXISTS (SELECT 1 FROM registry_batches WHERE batch_id < %s AND seq_hi > %s)",
                    (batch_id, snapshot),
                )
                if cur.fetchone()[0]:
                    _index_probes_only(cur)
                    conflicts = self._recheck(
                        cur, kept, "t.seq > %(snap)s AND b.batch_id < %(batch)s",
                        {"snap": int(snapshot), "batch": batch_id}, max_hamming, min_jaccard,
                        recent_where="r.batch_id < %(batch)s",
                    )  # fmt: skip
            hook("checked", cur)

            keep_rows = np.setdiff1d(np.arange(len(kept)), conflicts.query)
            registered = kept.take(keep_rows)
            stale: dict[str, int] = {}
            if len(registered):
                # Later batches that registered first (a concurrent run that committed before us, or
                # hours run out of order): their duplicates of what we keep are retracted and flagged.
                cur.execute(
                    "SELECT EXISTS (SELECT 1 FROM registry_batches WHERE batch_id > %s AND seq_hi IS NOT NULL)",
                    (batch_id,),
                )
                if cur.fetchone()[0]:
                    _index_probes_only(cur)
                    later = self._recheck(
                        cur, registered, "b.batch_id > %(batch)s", {"batch": batch_id}, max_hamming, min_jaccard,
                        all_matches=True, recent_where="r.batch_id > %(batch)s",
                    )  # fmt: skip
                    stale = self._retract(cur, batch_id, registered, later)
            hook("later_checked", cur)
            # This commit decided again against every earlier batch: earlier flags on it are void.
            cur.execute("DELETE FROM registry_stale WHERE batch_id = %s", (batch_id,))
            lo = hi = None
            if len(registered):
                cur.execute("SELECT nextval('registry_seq')")
                lo = int(cur.fetchone()[0])
                hi = lo + len(registered) - 1
                # Reserve the whole block at once: only commits allocate seq, and they hold the lock.
                cur.execute("SELECT setval('registry_seq', %s)", (hi,))
                self._insert_rows(cur, batch_id, ord_, registered, lo)
                minhash = int(np.asarray(registered.has_minhash, bool).sum())
                bands = np.asarray(registered.minhash_bands).reshape(len(registered), -1).shape[1]
                changed["documents"] += len(registered)
                changed["minhash_bands"] += minhash * bands
            hook("inserted", cur)
            cur.execute(
                "INSERT INTO registry_batches AS b (batch_id, seq_lo, seq_hi, registered, committed_at)"
                " VALUES (%s, %s, %s, %s, now()) ON CONFLICT (batch_id) DO UPDATE SET seq_lo = EXCLUDED.seq_lo,"
                " seq_hi = EXCLUDED.seq_hi, registered = EXCLUDED.registered, committed_at = EXCLUDED.committed_at",
                (batch_id, lo, hi, len(registered)),
            )
        self.last_commit_seconds["committed"] = time.perf_counter() - started
        self._refresh_statistics(changed)
        self.last_commit_seconds["analyzed"] = time.perf_counter() - started
        if stale:
            log.warning(
                "batch %s: later batch(es) %s had registered duplicates of documents it keeps (out-of-order or"
                " concurrent runs); their copies were retracted from the registry: rerun them",
                batch_id, ", ".join(f"{b} ({n} docs)" for b, n in sorted(stale.items())),
            )  # fmt: skip
        return CommitResult(registered=len(registered), conflicts=conflicts, stale=stale)

    # A commit that changed at least this many rows of a table re-analyzes the table's recent tier.
    ANALYZE_MIN_ROWS = 1000

    def _refresh_statistics(self, changed: dict[str, int]) -> None:
        """ANALYZE the recent partitions this commit changed much (issue #16 row 3).

        Without statistics a rerun's DELETE ... seq IN (SELECT ...) becomes a nested-loop semi-join
        (169 s instead of 0.38 s at 20k documents): the embedded server stops after every run, so
        autovacuum never gets to analyze, and it may be off on a benchmark server. ANALYZE samples a
        fixed number of rows, so its cost does not grow with the registry. Its own transaction, after
        the commit: it never holds the registry lock, and a failure here loses no registration.
        """
        tables = [f"{table}_recent" for table, n in changed.items() if n >= self.ANALYZE_MIN_ROWS]
        if not tables:
            return
        try:
            with self._transaction() as cur:
                for table in tables:
                    cur.execute(f"ANALYZE {table}")
        except psycopg2.Error as exc:  # statistics are an optimisation: never fail a committed batch
            log.warning("ANALYZE after the commit failed (the commit stands): %s", exc)

    def _retract(self, cur: Any, batch_id: str, registered: Fingerprints, later: Matches) -> dict[str, int]:
        """Delete the later batches' rows of the documents in ``later`` and record them in registry_stale."""
        if not len(later):
            return {}
        pairs = np.stack([later.batch_id.astype(str), later.doc_id.astype(str)], axis=1)
        _, first = np.unique(pairs, axis=0, return_index=True)
        first = np.sort(first)
        cur.execute(
            'CREATE TEMP TABLE _retract (batch_id text COLLATE "C" NOT NULL, doc_id text COLLATE "C" NOT NULL,'
            " earlier_doc_id text NOT NULL, layer text NOT NULL) ON COMMIT DROP"
        )
        copy_in(
            cur,
            "_retract",
            ["batch_id", "doc_id", "earlier_doc_id", "layer"],
            [
                ("text", pa.array(later.batch_id[first].astype(str).tolist(), pa.large_string())),
                ("text", pa.array(later.doc_id[first].astype(str).tolist(), pa.large_string())),
                ("text", pa.array(np.asarray(registered.doc_id, object)[later.query[first]].astype(str).tolist(), pa.large_string())),
                ("text", pa.array(later.payload["layer"][first].astype(str).tolist(), pa.large_string())),
            ],
        )
        # The later batch's seq range bounds the scan; this path is rare (out of order).
        cur.execute(
            "DELETE FROM documents t USING _retract r, registry_batches rb WHERE rb.batch_id = r.batch_id"
            " AND t.batch_ord = rb.ord AND t.doc_id = r.doc_id AND t.seq BETWEEN rb.seq_lo AND rb.seq_hi"
            " RETURNING rb.batch_id, t.seq"
        )
        dead = cur.fetchall()
        # Their band keys: a batch's recent run is rewritten without them; in a main-tier block they
        # stay until the next merge of runs, dead (no signature row: every lookup drops them).
        for later_batch in sorted({b for b, _ in dead}):
            self._drop_recent_keys(cur, later_batch, np.array([q for b, q in dead if b == later_batch], np.int64))
        cur.execute(
            "INSERT INTO registry_stale (batch_id, doc_id, earlier_batch_id, earlier_doc_id, layer)"
            " SELECT batch_id, doc_id, %s, earlier_doc_id, layer FROM _retract"
            " ON CONFLICT (batch_id, doc_id) DO UPDATE SET earlier_batch_id = EXCLUDED.earlier_batch_id,"
            " earlier_doc_id = EXCLUDED.earlier_doc_id, layer = EXCLUDED.layer, flagged_at = now()",
            (batch_id,),
        )
        cur.execute(
            "UPDATE registry_batches b SET registered = greatest(b.registered - c.n, 0)"
            " FROM (SELECT batch_id, count(*) AS n FROM _retract GROUP BY batch_id) c WHERE b.batch_id = c.batch_id"
        )
        batches, counts = np.unique(later.batch_id[first].astype(str), return_counts=True)
        return {str(b): int(n) for b, n in zip(batches, counts, strict=True)}

    def stale_batches(self) -> dict[str, dict[str, Any]]:
        """Batches whose copies a commit of an earlier batch retracted: they need a rerun."""
        with self._transaction() as cur:
            cur.execute(
                "SELECT batch_id, count(*), array_agg(DISTINCT earlier_batch_id ORDER BY earlier_batch_id)"
                " FROM registry_stale GROUP BY batch_id ORDER BY batch_id"
            )
            return {b: {"docs": int(n), "earlier_batches": list(e)} for b, n, e in cur.fetchall()}

    def _delete_rows(self, cur: Any, batch_id: str, ord_: int, lo: int, hi: int) -> dict[str, int]:
        """Delete a batch's earlier rows (a rerun); rows deleted per table (band keys for minhash_bands)."""
        deleted: dict[str, int] = {}
        # The batch's recent run (if it was compacted, its keys in the main tier's blocks are dead from
        # the documents delete below on, and dropped by the next merge of runs).
        cur.execute(
            "WITH d AS (DELETE FROM minhash_bands_recent WHERE batch_id = %s RETURNING n) SELECT coalesce(sum(n), 0) FROM d",
            (batch_id,),
        )
        deleted["minhash_bands"] = int(cur.fetchone()[0])
        cur.execute(
            "DELETE FROM documents WHERE seq BETWEEN %(lo)s AND %(hi)s AND batch_ord = %(ord)s",
            {"lo": lo, "hi": hi, "ord": ord_},
        )
        deleted["documents"] = max(cur.rowcount, 0)
        return deleted

    def _insert_rows(self, cur: Any, batch_id: str, ord_: int, fp: Fingerprints, lo: int) -> None:
        """One documents row per document of `fp` (seq lo..), and the batch's recent run of band keys.

        A fingerprint a document lacks is NULL (url_key, simhash, signature) or has_content false.
        """
        n = len(fp)
        seq = lo + np.arange(n, dtype=np.int64)
        content = np.ascontiguousarray(fp.content_hash, dtype=np.uint64).reshape(n, 2)
        has_url = np.asarray(fp.has_url, bool)
        has_sim = np.asarray(fp.has_simhash, bool)
        has_mh = np.asarray(fp.has_minhash, bool)
        idx = np.flatnonzero(has_mh)
        sig = pa.nulls(n, pa.large_binary())
        if len(idx):
            packed = _sigpack.pack_bits(np.asarray(fp.minhash)[idx], fp.minhash_bits).cast(pa.large_binary())
            # Scatter the packed signatures to their rows, NULL elsewhere.
            at = np.full(n, -1, np.int64)
            at[idx] = np.arange(len(idx))
            sig = packed.take(pa.array(at, mask=at < 0))
        copy_in(
            cur,
            "documents",
            ["seq", "url_key", "content_hi", "content_lo", "simhash", "batch_ord", "has_content", "doc_id", "signature"],
            [
                ("int8", seq),
                ("int8?", (u64_to_i64(np.asarray(fp.url_key, np.uint64)), has_url)),
                ("int8", u64_to_i64(content[:, 0])),
                ("int8", u64_to_i64(content[:, 1])),
                ("int8?", (u64_to_i64(np.asarray(fp.simhash, np.uint64)), has_sim)),
                ("int4", np.full(n, ord_, np.int32)),
                ("bool", fp.content_mask()),
                ("text", pa.array(np.asarray(fp.doc_id, dtype=object), type=pa.large_string())),
                ("varbytea?", sig),
            ],
        )
        if len(idx):
            keys = np.asarray(fp.minhash_bands, np.uint64)[idx]
            keys = keys.reshape(len(idx), -1)
            write_recent_run(cur, batch_id, keys.ravel(), np.repeat(seq[idx], keys.shape[1]))

    def _drop_recent_keys(self, cur: Any, batch_id: str, seqs: np.ndarray) -> None:
        """Rewrite a batch's recent run without the keys of documents `seqs` (a retraction)."""
        keys, kseq = _read_recent(cur, "batch_id = %(batch)s", {"batch": batch_id})
        if len(keys) == 0:
            return
        cur.execute("DELETE FROM minhash_bands_recent WHERE batch_id = %s", (batch_id,))
        keep = ~np.isin(kseq, seqs)
        write_recent_run(cur, batch_id, keys[keep], kseq[keep])

    def _recheck(
        self,
        cur: Any,
        kept: Fingerprints,
        where: str,
        params: dict[str, Any],
        max_hamming: int,
        min_jaccard: float,
        *,
        all_matches: bool = False,
        recent_where: str = "true",
    ) -> Matches:
        """Kept documents duplicated by registered rows matching `where`: the best match of each (or,
        with `all_matches`, every matching registered document once per query)."""
        found: list[
            tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
        ] = []  # (layer rank, q, doc, batch, score)

        content = np.ascontiguousarray(kept.content_hash, dtype=np.uint64).reshape(-1, 2)
        idx = np.flatnonzero(np.asarray(kept.has_url, bool))
        if len(idx):
            m = self._url_matches(cur, np.asarray(kept.url_key, np.uint64)[idx], where, params)
            q = idx[m.query]
            same = (m.payload["content_hash"] == content[q]).all(axis=1)
            found.append((0, q[same], m.doc_id[same], m.batch_id[same], np.ones(int(same.sum()))))

        idx = np.flatnonzero(kept.content_mask())  # empty documents are never matched by content
        if len(idx):
            m = self._content_matches(cur, content[idx], where, params)
            found.append((1, idx[m.query], m.doc_id, m.batch_id, np.ones(len(m))))

        idx = np.flatnonzero(np.asarray(kept.has_simhash, bool))
        if len(idx):
            values = np.asarray(kept.simhash, np.uint64)[idx]
            m = self._simhash_matches(_on_cursor(cur), values, where, params, max_hamming, prefilter=True)
            q = idx[m.query]
            dist = np.bitwise_count(values[m.query] ^ m.payload["simhash"]).astype(np.float64)
            ok = dist <= max_hamming
            # Lower distance is better; the rank sorts ascending, so distance is used as is.
            found.append((2, q[ok], m.doc_id[ok], m.batch_id[ok], dist[ok]))

        idx = np.flatnonzero(np.asarray(kept.has_minhash, bool))
        if len(idx):
            m = self._minhash_matches(
                _on_cursor(cur), np.asarray(kept.minhash_bands, np.uint64)[idx], where, params, recent_where
            )
            q = idx[m.query]
            from dedup_tasks.fingerprint.minhash import estimated_jaccard

            # On the bits both signatures keep (b-bit rows: the low bits, with the chance agreement removed).
            bits = np.minimum(m.payload["minhash_bits"], kept.minhash_bits)
            jac = estimated_jaccard(np.asarray(kept.minhash, np.uint32)[q], m.payload["minhash"], bits) if len(m) else np.empty(0)
            ok = jac >= min_jaccard
            found.append((3, q[ok], m.doc_id[ok], m.batch_id[ok], jac[ok]))

        if not any(len(f[1]) for f in found):
            return _empty_conflicts()
        rank = np.concatenate([np.full(len(f[1]), f[0]) for f in found])
        query = np.concatenate([f[1] for f in found]).astype(np.int64)
        doc = np.concatenate([f[2] for f in found])
        batch = np.concatenate([f[3] for f in found])
        score = np.concatenate([f[4] for f in found]).astype(np.float64)
        # First layer in cascade order, then the best score (smallest distance / largest Jaccard).
        order = np.lexsort((np.where(rank == 3, -score, score), rank, query))
        query, rank, doc, batch, score = query[order], rank[order], doc[order], batch[order], score[order]
        if all_matches:
            # The best layer of each (query, registered document) pair.
            key = np.stack([query.astype(str), batch.astype(str), doc.astype(str)], axis=1)
            _, pick = np.unique(key, axis=0, return_index=True)
            first = np.zeros(len(query), bool)
            first[pick] = True
        else:
            first = np.r_[True, query[1:] != query[:-1]]
        layer = np.asarray(LAYERS, dtype=object)[rank[first]]
        return Matches(query[first], doc[first], batch[first], {"layer": layer, "score": score[first]})

    # ---- maintenance --------------------------------------------------------------------------
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
        lookups starting meanwhile wait for it to commit (module docstring).
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


# ---- helpers --------------------------------------------------------------------------------------
# The main tier's blocks that hold a probe's stored key bits, as (u, k, run, bucket, seq_base, rem_bytes,
# entries). A chance agreement of one band (most hits of a large registry) sends one entry instead of its
# block (~128 entries): position() matches at any byte offset, so the single entry is sent only where the
# first match sits on an entry boundary and no match starts after that entry, i.e. where it is the
# block's only entry with these key bits; any other hit sends the whole block, which the client decodes
# as before. The inner OFFSET 0 keeps the planner from re-evaluating position() per output column.
_HIT_ENTRIES_SQL = (
    "SELECT u, k, run, bucket, seq_base, w::int8,"
    " CASE WHEN (pos - 1) % (w + 4) = 0 AND position(rem IN substring(entries FROM pos + w + 4)) = 0"
    " THEN substring(entries FROM pos FOR w + 4) ELSE entries END"
    " FROM (SELECT p.u, p.k, p.rem, b.run, b.bucket, b.seq_base, b.entries, octet_length(p.rem) AS w,"
    " position(p.rem IN b.entries) AS pos"
    " FROM {probe} p JOIN minhash_bands_main b ON b.bucket = p.bucket AND b.run = p.run AND b.shard = p.shard"
    " WHERE position(p.rem IN b.entries) > 0 OFFSET 0) h"
)


def write_recent_run(cur: Any, batch_id: str, keys: np.ndarray, seqs: np.ndarray) -> int:
    """Append band keys (uint64) of documents `seqs` to the recent tier as rows of batch_id's run
    (_bandblocks.recent_rows); returns the rows written."""
    rows = _bandblocks.recent_rows(keys, seqs)
    n_rows = len(rows["n"])  # type: ignore[arg-type]
    if n_rows:
        copy_in(
            cur,
            "minhash_bands_recent",
            ["batch_id", "shard", "seq_base", "n", "entries"],
            [
                ("text", pa.array(np.full(n_rows, batch_id, dtype=object), pa.large_string())),
                ("int2", rows["shard"]),
                ("int8", rows["seq_base"]),
                ("int4", rows["n"]),
                ("varbytea", rows["entries"]),
            ],
        )
    return n_rows


def _read_recent(cur: Any, where: str, params: dict[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """(keys, seqs) of the recent tier's rows matching `where` (one binary COPY)."""
    out = io.BytesIO()
    query = f"COPY (SELECT seq_base, entries FROM minhash_bands_recent WHERE {where}) TO STDOUT (FORMAT binary)"
    cur.copy_expert(cur.mogrify(query, params).decode() if params else query, out)
    return _bandblocks.decode_recent(out.getbuffer())


def _index_probes_only(cur: Any) -> None:
    """Make the lookup joins index nested loops for the rest of the transaction.

    A probe table of 1e5..2e6 keys against 1e7..1e8 registered rows is always best answered by index
    probes, but at small sizes, or with a stale estimate of the probe table, the planner picks a hash
    join that reads a whole fingerprint table (minutes at 1e8 rows). The probe tables are COPYed in
    key order, so the probes walk each index from left to right.
    """
    cur.execute("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")


def _columns(cur: Any, table: str) -> str:
    """The table's columns except the partition key `tier`, quoted, in table order."""
    cur.execute(
        "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attname <> 'tier'",
        (table,),
    )
    return str(cur.fetchone()[0])


def _expand(u_rows: np.ndarray, inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fan result rows keyed by unique-query index out to every query with that key.

    Returns (result row index, query index) pairs, vectorized like MemoryRegistry._join.
    """
    u_rows = np.asarray(u_rows, dtype=np.int64)
    inv = np.asarray(inv, dtype=np.int64).ravel()
    if len(u_rows) == 0 or len(inv) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv, minlength=int(u_rows.max()) + 1)
    starts = np.cumsum(counts) - counts
    c = counts[u_rows]
    rows = np.repeat(np.arange(len(u_rows), dtype=np.int64), c)
    offsets = np.arange(int(c.sum()), dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
    query = order[np.repeat(starts[u_rows], c) + offsets]
    return rows, query.astype(np.int64)


def _on_cursor(cur: Any) -> Runner:
    """Runs lookup parts one after the other on one cursor (inside the commit's transaction)."""
    return lambda parts: [part(cur, k) for k, part in enumerate(parts)]


def _empty_table(schema: list[tuple[str, pa.DataType]]) -> pa.Table:
    return pa.table({name: pa.array([], type=typ) for name, typ in schema})


def _pair_runs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): the (a, b) pairs sorted (stable) and where each distinct pair's run begins."""
    order = np.lexsort((b, a))
    a_s, b_s = a[order], b[order]
    return order, np.flatnonzero(np.r_[True, (a_s[1:] != a_s[:-1]) | (b_s[1:] != b_s[:-1])])


def _agreeing_pairs(u: np.ndarray, seq: np.ndarray, min_bands: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (u, seq) pairs that occur at least ``min_bands`` times (once per agreeing band)."""
    order, starts = _pair_runs(u, seq)
    first = order[starts[np.diff(np.r_[starts, len(u)]) >= min_bands]]
    return u[first], seq[first]


def _first_of_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct (a, b) pair, in input order."""
    if len(a) == 0:
        return np.empty(0, np.int64)
    order, starts = _pair_runs(a, b)
    # lexsort is stable: the first of each run is the earliest occurrence.
    return np.sort(order[starts])


def _empty(layer: str, num_perm: int) -> Matches:
    payload = {
        "url": {"content_hash": np.empty((0, 2), np.uint64)},
        "exact": {},
        "simhash": {"simhash": np.empty(0, np.uint64)},
        "minhash": {"minhash": np.empty((0, num_perm), np.uint32), "minhash_bits": np.empty(0, np.uint8)},
    }[layer]
    return Matches.empty(**payload)


def _empty_conflicts() -> Matches:
    return Matches.empty(layer=np.empty(0, object), score=np.empty(0, np.float64))


def _validate(fp: Fingerprints) -> None:
    n = len(fp)
    for name in ("url_key", "has_url", "simhash", "has_simhash", "has_minhash"):
        if len(getattr(fp, name)) != n:
            raise ValueError(f"Fingerprints.{name} has {len(getattr(fp, name))} rows, doc_id has {n}")
    # By size, not reshape(n, -1): an empty batch (n = 0) cannot infer the -1.
    if np.asarray(fp.content_hash).size != 2 * n:
        raise ValueError("Fingerprints.content_hash must be (n, 2) uint64")
    if (
        n
        and np.asarray(fp.has_minhash, bool).any()
        and (np.asarray(fp.minhash).ndim != 2 or len(fp.minhash) != n or len(fp.minhash_bands) != n)
    ):
        raise ValueError("Fingerprints.minhash must be (n, num_perm) and minhash_bands (n, bands)")
    ids = np.asarray(fp.doc_id, dtype=object)
    if n and len(np.unique(ids.astype(str))) != n:
        raise ValueError("Fingerprints.doc_id must be unique within a batch")


__all__ = ["LAYERS", "TABLES", "PostgresRegistry"]
