"""What the PostgreSQL registry's code knows of its schema: the tables it names, the recent tier's
runs of band keys, and the recorded key space of the MinHash band keys.

The DDL itself is in migrations/ (applied and version-checked by `migrate`); the constants here say
which of its tables a lookup reads and locks. `write_recent_run` and `_read_recent` are the one
reader and writer of the recent tier's rows (`minhash_bands_recent`), shared by the commit and the
compaction. `KeySpaceMixin` is the part of `PostgresRegistry` that records, in `registry_meta`,
which index signature the band keys were made of, and refuses another one.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint.stoplist import (
    AUTO_STOPLIST,
    DEFAULT_STOPLIST,
    SIGNATURE_KEY_SPACE,
    is_built_in,
    load_stoplist,
    stoplist_from_record,
)
from dedup_tasks.registry import _bandblocks
from dedup_tasks.registry._pgio import copy_in
from dedup_tasks.registry.migrate import RegistryKeySpaceError

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
# The tables a lookup locks (LOCK TABLE, see dedup_tasks.registry.postgres): the view's table instead of the view.
LOCKED_TABLES = tuple(t if t != "minhash_bands" else "minhash_bands_recent" for t in TABLES) + BLOCK_TABLES
# Registered rows `t` (documents) are read with their batch `b` (registry_batches, on its ord): the
# lookups' filters and outputs name b.batch_id.
_WITH_BATCH = "JOIN registry_batches b ON b.ord = t.batch_ord"


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


class KeySpaceMixin:
    """The band-key-space record of `PostgresRegistry` (uses its `_transaction`, `schema`,
    `_band_key_space` and `_recorded_stoplist`)."""

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
