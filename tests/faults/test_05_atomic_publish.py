"""Row 5: decisions, deduped and summary are published as one step. A real kill -9 at every point of
the publish (a test hook makes the CLI process SIGKILL itself there) leaves outputs that the next
``show`` or rerun turns into one consistent set, with no temporary folder left behind."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from dedup_tasks.io import BatchPaths
from tests.conftest import write_partition
from tests.faults.conftest import cli, docs, make_batch

HOUR = "2026-12-01T00"
CRASH_ENV = "DEDUP_TEST_CRASH_PUBLISH"  # io.CRASH_ENV, spelled out: the test hook of the publish
V1, V2 = list(range(20)), list(range(20, 50))  # the rerun's input differs: old and new outputs disagree


def state(root) -> tuple[int, int, int]:
    paths = BatchPaths(root, HOUR)
    decisions = pq.read_table(paths.decisions).column("action").to_pylist()
    return decisions.count("keep"), pq.read_table(paths.deduped).num_rows, json.loads(paths.summary.read_text())["kept"]


def temporaries(root) -> list[str]:
    return [str(p) for p in root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name or p.name == "publish.json"]


def run(root, **env):
    return cli("run", "--root", str(root), "--batch", HOUR, "--no-registry", "--no-progress", "--layers", "url,exact", env=env)


@pytest.mark.parametrize("point", ["staged", "0", "1", "2"])
@pytest.mark.parametrize("recover_with", ["show", "rerun"])
def test_kill_during_publish_then_recovery(tmp_path, point, recover_with):
    write_partition(tmp_path, HOUR, make_batch(docs("a", V1)))
    assert run(tmp_path).returncode == 0
    assert state(tmp_path) == (20, 20, 20)

    write_partition(tmp_path, HOUR, make_batch(docs("b", V2)))
    crashed = run(tmp_path, **{CRASH_ENV: point})
    assert crashed.returncode == -9, crashed.stderr  # really killed at the publish point

    if recover_with == "show":
        shown = cli("show", "--root", str(tmp_path), "--batch", HOUR)
        assert shown.returncode == 0, shown.stderr
        # Before the journal the old outputs stand; after it the publish is completed.
        assert state(tmp_path) == ((20, 20, 20) if point == "staged" else (30, 30, 30))
    else:
        assert run(tmp_path).returncode == 0
        assert state(tmp_path) == (30, 30, 30)
    assert temporaries(tmp_path) == []
