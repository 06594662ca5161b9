"""Row 16: a run checks its input partition (exists, holds Parquet files, each with a readable footer)
before it starts anything: no embedded registry is initialised or started for an hour that is missing
or unreadable, from the CLI or from the DAG's ``validate`` task."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dedup_tasks.registry.connect import registry_dir
from tests.conftest import write_partition
from tests.faults.conftest import cli, docs, make_batch

HOUR = "2026-12-01T00"


def _unreadable(root: Path, state: str) -> None:
    if state == "missing":
        return
    part = write_partition(root, HOUR, make_batch(docs("d", [1, 2])))
    if state == "corrupt":
        (part / "part-00000.parquet").write_bytes(b"PAR1 truncated by a crashed writer")
    if state == "empty folder":
        (part / "part-00000.parquet").unlink()


@pytest.mark.parametrize("state", ["missing", "empty folder", "corrupt"])
def test_the_cli_refuses_the_partition_before_the_registry_starts(tmp_path, state):
    _unreadable(tmp_path, state)
    started = time.monotonic()
    result = cli("run", "--root", str(tmp_path), "--batch", HOUR, "--no-progress", env={"DEDUP_DB_URL": ""})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")], result.stderr
    assert not registry_dir(tmp_path).exists(), "the embedded registry was initialised for a partition that cannot be read"
    assert "registry schema" not in result.stderr  # nothing migrated
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("state", ["missing", "corrupt"])
def test_the_validate_task_refuses_the_partition_before_the_registry_starts(tmp_path, monkeypatch, state):
    from airflow.sdk.exceptions import AirflowFailException

    from dedup_tasks.airflow_support import run_step
    from dedup_tasks.io import InputError

    _unreadable(tmp_path, state)
    monkeypatch.setenv("DEDUP_ROOT", str(tmp_path))
    monkeypatch.delenv("DEDUP_DB_URL", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_DEDUP_DB", raising=False)
    with pytest.raises(AirflowFailException) as failed:
        run_step("validate", {"params": {"batch_hour": HOUR}})
    assert isinstance(failed.value.__cause__, InputError)
    assert not registry_dir(tmp_path).exists()
