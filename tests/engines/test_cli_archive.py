"""The CLI's archive options (--batch .. --until), engine-independent parts: real Parquet, one process."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from dedup_tasks.cli import batch_range, main
from dedup_tasks.config import ConfigError
from tests.conftest import make_batch, write_partition

TEXT = "the quick brown fox jumps over the lazy dog near the river bank " * 4


def test_batch_range_crosses_days_and_refuses_reversed_or_non_hour_ids() -> None:
    assert batch_range("2026-12-01T22", "2026-12-02T01") == ["2026-12-01T22", "2026-12-01T23", "2026-12-02T00", "2026-12-02T01"]
    assert batch_range("2026-12-01T05", None) == ["2026-12-01T05"]
    with pytest.raises(ConfigError, match="before"):
        batch_range("2026-12-01T05", "2026-12-01T04")
    with pytest.raises(ConfigError, match="hour"):
        batch_range("nightly", "2026-12-01T04")


def test_until_runs_hours_oldest_first_and_skips_missing_ones(tmp_path, capsys) -> None:
    write_partition(tmp_path, "2026-12-01T00", make_batch([{"doc_id": "a", "url": "https://x.org/a", "content": TEXT}]))
    # Hour 01 has no input; hour 02 repeats hour 00's page, so it must be dropped against hour 00.
    write_partition(tmp_path, "2026-12-01T02", make_batch([{"doc_id": "b", "url": "https://x.org/b", "content": TEXT}]))
    args = ["run", "--root", str(tmp_path), "--batch", "2026-12-01T00", "--until", "2026-12-01T02", "--no-registry", "--no-progress"]
    assert main([*args, "--layers", "url,exact"]) == 0
    assert "2026-12-01T01: no input partition" in capsys.readouterr().err
    later = pq.read_table(tmp_path / "decisions/dt=2026-12-01/hour=02").to_pylist()
    assert later[0]["action"] == "drop" and later[0]["matched_doc_id"] == "a" and later[0]["matched_batch_id"] == "2026-12-01T00"
    assert not (tmp_path / "decisions/dt=2026-12-01/hour=01").exists()
