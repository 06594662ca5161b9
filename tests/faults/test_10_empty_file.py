"""Row 10: a zero-row file runs cleanly: 0 in, 0 kept, all three outputs written."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths
from dedup_tasks.pipeline import run_partition
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import make_batch, write_partition
from tests.faults.conftest import cli, docs


def empty_table():
    return make_batch(docs("d", [1])).slice(0, 0)


def test_zero_row_partition_runs_and_publishes(tmp_path):
    write_partition(tmp_path, "2026-12-01T00", empty_table())
    summary = run_partition(BatchPaths(tmp_path, "2026-12-01T00"), DedupConfig(), MemoryRegistry())
    assert (summary.rows_in, summary.kept, summary.dropped) == (0, 0, 0)
    paths = BatchPaths(tmp_path, "2026-12-01T00")
    assert pq.read_table(paths.decisions).num_rows == 0
    deduped = pq.read_table(paths.deduped)
    assert deduped.num_rows == 0 and {"doc_id", "content"} <= set(deduped.column_names)
    assert json.loads(paths.summary.read_text())["rows_in"] == 0


def test_zero_row_partition_through_the_cli_with_the_registry(tmp_path, pg_dsn, registry_schema):
    write_partition(tmp_path, "2026-12-01T00", empty_table())
    result = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", "--no-progress",
                 "--db-url", pg_dsn, "--set", f"db_schema={registry_schema}")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "rows in 0" in result.stdout and "kept 0" in result.stdout
