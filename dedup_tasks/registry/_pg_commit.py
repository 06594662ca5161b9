"""The PostgreSQL registry's batch commit: one transaction under the registry's exclusive advisory
lock that deletes a rerun's earlier rows, re-checks the kept documents against what other batches
registered meanwhile, retracts later batches' copies, and inserts the rest (documents rows and the
batch's recent run of band keys); then the statistics refresh of the tables it changed.

`CommitMixin` is that part of `PostgresRegistry`; it uses the class's `_transaction`, the lookup
joins of `MatchesMixin` and the key-space check of `KeySpaceMixin`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import psycopg2
import pyarrow as pa

from dedup_tasks.registry import _sigpack
from dedup_tasks.registry._pg_lookups import _index_probes_only, _on_cursor
from dedup_tasks.registry._pg_schema import LAYERS, TABLES, _read_recent, write_recent_run
from dedup_tasks.registry._pgio import copy_in, u64_to_i64
from dedup_tasks.registry.base import CommitResult, Fingerprints, Matches

# The registry's one logger, named after its public module: that is the name callers configure.
log = logging.getLogger("dedup_tasks.registry.postgres")


class CommitMixin:
    """The commit of `PostgresRegistry` and the reads of what commits flagged."""

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
