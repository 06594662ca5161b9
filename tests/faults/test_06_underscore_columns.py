"""Row 6: input columns whose names start with ``_`` (even the pipeline's own ``_row``, ``_reason``)
pass through to deduped/ unchanged: the private columns are namespaced, so nothing collides."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths
from dedup_tasks.pipeline import run_batch, run_partition
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import write_partition
from tests.faults.conftest import docs, make_batch

EXTRA = {"_private": "p", "_row": "r", "_reason": "why", "~tilde": "t", "_near_text": "n"}


def batch_with_extras() -> pa.Table:
    rows = docs("d", [1, 2, 3])
    rows.append(dict(rows[0], doc_id="copy", url="https://b.example/copy"))
    for i, row in enumerate(rows):
        row.update({name: f"{value}{i}" for name, value in EXTRA.items()})
    return make_batch(rows)


def test_underscore_columns_pass_through_unchanged():
    result = run_batch(batch_with_extras(), "2026-12-01T00", DedupConfig(), MemoryRegistry())
    kept = result.kept
    assert set(EXTRA) <= set(kept.column_names)
    assert sorted(kept.column("doc_id").to_pylist()) == ["d1", "d2", "d3"]
    by_id = {d: i for i, d in enumerate(kept.column("doc_id").to_pylist())}
    for name, value in EXTRA.items():
        assert kept.column(name)[by_id["d2"]].as_py() == f"{value}1", name
    # The decisions are the pipeline's own: an input `_reason` is not taken for the decision's reason.
    reasons = dict(zip(result.decisions.column("doc_id").to_pylist(), result.decisions.column("reason").to_pylist(), strict=True))
    assert reasons["d2"] is None


def test_underscore_columns_in_the_published_partition(tmp_path):
    write_partition(tmp_path, "2026-12-01T00", batch_with_extras())
    run_partition(BatchPaths(tmp_path, "2026-12-01T00"), DedupConfig(layers=("url", "exact")), MemoryRegistry())
    deduped = pq.read_table(BatchPaths(tmp_path, "2026-12-01T00").deduped)
    assert set(EXTRA) <= set(deduped.column_names) and deduped.num_rows == 3
