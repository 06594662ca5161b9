"""The joins behind the PostgreSQL registry's lookups and its commit's re-checks.

`MatchesMixin` answers URL, content-hash, SimHash and MinHash band queries for an arbitrary filter
on the registered rows: the public lookups pass "earlier batches", the commit its re-check filters.
Each helper takes a cursor or a `Runner` (which runs lookup parts, on one cursor or on two
connections), so the same code serves a lookup's own transactions and the commit's transaction.
The module-level helpers fan unique-key results out to queries, build empty answers and pin the
planner to index probes.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from dedup_tasks.registry import _bandblocks, _bandjoin, _sigpack
from dedup_tasks.registry._pg_schema import _WITH_BATCH
from dedup_tasks.registry._pgio import (
    copy_in,
    copy_out_int8,
    copy_out_table,
    hex_to_binary,
    i64_to_u64,
    text_column,
    u64_to_i64,
)
from dedup_tasks.registry.base import Matches

# A lookup reads a main-tier run whole (one COPY, joined in memory like the recent tier) instead of
# probing it block by block when the run holds at most this many entries per probe key: a probe costs
# an index descent and a block read (~several us), a read entry ~10-20 ns.
WHOLE_RUN_ENTRIES_PER_PROBE = 16
# A lookup part: (cursor, part index) -> result (a pa.Table or an array); a runner executes a list of parts.
Part = Callable[[Any, int], Any]
Runner = Callable[[list[Part]], list[Any]]


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


class MatchesMixin:
    """The *_matches joins of `PostgresRegistry` (uses its `num_perm` and sets `last_simhash_seconds`)."""

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


def _index_probes_only(cur: Any) -> None:
    """Make the lookup joins index nested loops for the rest of the transaction.

    A probe table of 1e5..2e6 keys against 1e7..1e8 registered rows is always best answered by index
    probes, but at small sizes, or with a stale estimate of the probe table, the planner picks a hash
    join that reads a whole fingerprint table (minutes at 1e8 rows). The probe tables are COPYed in
    key order, so the probes walk each index from left to right.
    """
    cur.execute("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")


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
