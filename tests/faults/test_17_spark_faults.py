"""Row 17: ``--engine spark`` under faults. An executor's Python worker killed (SIGKILL) in the middle
of the job: with task retries the job recovers and its decisions equal a clean run's; without, the job
fails, nothing of any hour is published nor registered, and a rerun equals a clean run. A corrupt input
file: one ``error:`` line before Spark or the registry starts, nothing published, and once the file is
replaced the run equals a clean one."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths
from tests.conftest import REPO, write_partition
from tests.faults.conftest import cli, docs, make_batch

pytest.importorskip("pyspark", reason="pyspark is not installed (requirements-spark.txt)")
if shutil.which("java") is None:
    pytest.skip("no Java runtime for Spark", allow_module_level=True)

HOURS = ["2026-12-01T00", "2026-12-01T01"]
LAYERS = "url,exact,simhash,minhash"
KILLERS = Path(__file__).parent / "killers"


def _crawl(root: Path) -> Path:
    first = docs("a", list(range(300)))
    # Hour 01: new pages, copies of hour 00's under other URLs, and in-hour copies.
    second = docs("b", list(range(300, 500))) + [{**r, "doc_id": "c" + r["doc_id"], "url": r["url"] + "?x"} for r in first[:60]]
    second += [{**r, "doc_id": "e" + r["doc_id"], "url": r["url"] + "/copy"} for r in second[:20]]
    write_partition(root, HOURS[0], make_batch(first))
    write_partition(root, HOURS[1], make_batch(second))
    return root


def _decisions(root: Path) -> list[dict]:
    return [row for h in HOURS for row in pq.read_table(BatchPaths(root, h).decisions).to_pylist()]


def _published(root: Path) -> list[Path]:
    return [p for h in HOURS for p in (BatchPaths(root, h).decisions, BatchPaths(root, h).deduped, BatchPaths(root, h).summary) if p.exists()]


def _spark_run(root: Path, master: str, schema_registry, kill_flag: Path | None):
    """One archive job in a fresh SparkSession (its master sets the task retries)."""
    from pyspark import SparkContext

    from dedup_tasks.engines.spark import run_batches, spark_session

    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    conf = {"spark.sql.shuffle.partitions": "4"}
    if kill_flag is not None:
        conf["spark.executorEnv.DEDUP_TEST_KILL_WORKER_FLAG"] = str(kill_flag)
    old = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(KILLERS), str(REPO), old])
    try:
        spark = spark_session(master, "crawl-dedup-faults", conf)
    finally:
        os.environ["PYTHONPATH"] = old
    config = DedupConfig.load({"root": str(root), "layers": LAYERS}, env={})
    try:
        return run_batches(spark, [BatchPaths(root, h) for h in HOURS], config, schema_registry(), partitions=4)
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def registries(pg_dsn):
    """A factory of PostgresRegistry objects, each on its own fresh schema (dropped afterwards)."""
    import psycopg2

    from dedup_tasks.registry.postgres import PostgresRegistry

    made, names = [], []

    def make(name: str | None = None):
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        names.append(name)
        registry = PostgresRegistry(pg_dsn, schema=name, auto_migrate=True)
        made.append(registry)
        return lambda: registry

    yield make
    for registry in made:
        registry.close()
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        for name in set(names):
            cur.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _registered(pg_dsn: str, schema: str) -> int:
    import psycopg2

    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT count(*) FROM "{schema}".documents')
        return cur.fetchone()[0]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, registries) -> list[dict]:
    root = _crawl(tmp_path_factory.mktemp("clean"))
    _spark_run(root, "local[2]", registries(), None)
    decisions = _decisions(root)
    assert {"exact", "simhash"} & {r["layer"] for r in decisions if r["layer"]}  # the hours have copies to drop
    assert sum(r["action"] == "drop" for r in decisions) >= 60
    return decisions


def test_a_killed_worker_is_retried_and_the_decisions_equal_a_clean_run(tmp_path, registries, clean):
    root = _crawl(tmp_path / "killed")
    flag = tmp_path / "killed.flag"
    _spark_run(root, "local[2,4]", registries(), flag)  # up to 4 attempts a task
    assert flag.exists()  # a worker really died mid-job
    assert _decisions(root) == clean


def test_a_killed_worker_without_retries_publishes_and_registers_nothing_then_a_rerun_equals_a_clean_run(
    tmp_path, registries, clean, pg_dsn
):
    root = _crawl(tmp_path / "failed")
    flag = tmp_path / "failed.flag"
    schema = f"t_{uuid.uuid4().hex[:12]}"
    registry = registries(schema)
    with pytest.raises(Exception, match="(?i)python worker|crashed|exited|Task .* failed"):
        _spark_run(root, "local[2]", registry, flag)  # one attempt a task: the job fails
    assert flag.exists()
    assert _published(root) == []
    assert not list((root / "work").glob("spark-*"))  # the job's scratch folder is gone too
    assert _registered(pg_dsn, schema) == 0
    _spark_run(root, "local[2]", registry, None)
    assert _decisions(root) == clean


def test_a_corrupt_input_file_fails_before_spark_starts_and_a_rerun_equals_a_clean_run(tmp_path, registries, clean, pg_dsn):
    root = _crawl(tmp_path / "corrupt")
    good = BatchPaths(root, HOURS[1]).input / "part-00000.parquet"
    saved = good.read_bytes()
    good.write_bytes(saved[: len(saved) // 2])  # a crawler's writer died half-way
    schema = f"t_{uuid.uuid4().hex[:12]}"
    env = {"DEDUP_DB_URL": pg_dsn, "DEDUP_DB_SCHEMA": schema}
    args = ["run", "--root", str(root), "--batch", HOURS[0], "--until", HOURS[1], "--layers", LAYERS, "--engine", "spark", "--no-progress"]
    result = cli(*args, env=env)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 2 and len(errors) == 1 and str(good) in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert _published(root) == []
    good.write_bytes(saved)
    registries(schema)  # dropped afterwards
    result = cli(*args, env=env)
    assert result.returncode == 0, result.stderr
    assert _decisions(root) == clean


def test_the_comparison_sees_a_difference():
    """A control: the decisions compared above differ when one row's decision does."""
    row = {"doc_id": "a", "layer": None}
    assert [row] != [{**row, "layer": "exact"}]
    assert pa.table({"a": [1]}).num_rows == 1
