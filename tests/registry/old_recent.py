"""Schema 6's recent tier of band keys (one row per (document, band)), for filling a registry under an
older schema through this code's commit path and compaction before migrating it (tests of
migrations 0005..0007): monkeypatch `postgres.write_recent_run` and `postgres._read_recent` with these."""

from __future__ import annotations

import numpy as np

from dedup_tasks.registry._pgio import copy_in, copy_out_int8, i64_to_u64, u64_to_i64


def write_recent_rows_v6(cur, batch_id: str, keys: np.ndarray, seqs: np.ndarray) -> int:
    """Schema 6's insert: (bucket, seq, band) rows into minhash_bands, in key order."""
    keys = np.asarray(keys, np.uint64).ravel()
    seqs = np.asarray(seqs, np.int64).ravel()
    if len(keys) == 0:
        return 0
    n_bands = len(keys) // len(np.unique(seqs))  # the commit passes a document's keys together
    band = np.tile(np.arange(n_bands, dtype=np.int16), len(keys) // n_bands)
    bucket = u64_to_i64(keys)
    order = np.argsort(bucket, kind="stable")
    copy_in(
        cur, "minhash_bands", ["bucket", "seq", "band"],
        [("int8", bucket[order]), ("int8", seqs[order]), ("int2", band[order])],
    )  # fmt: skip
    return len(keys)


def read_recent_rows_v6(cur, where: str, params) -> tuple[np.ndarray, np.ndarray]:
    """Schema 6's compaction input: every (bucket, seq) row of the recent tier."""
    assert where == "true"
    rows = copy_out_int8(cur, "SELECT bucket, seq FROM minhash_bands_recent", None, 2)
    return i64_to_u64(rows[:, 0]), rows[:, 1]
