"""The Spark engine in pyspark local mode: the same decisions as the single-node CLI, hour by hour.

One session for the module (a start costs ~10-20 s). Three generated hours with planted duplicates
of every kind (URL repeats, exact copies, near copies, chains, cross-hour copies) run through the
single-node CLI one hour at a time and through one Spark archive job with several partitions per
hour, each against its own registry schema in the real PostgreSQL. L4 (semantic) is left out here:
on Spark it is the unchanged layer run on the driver over the survivors.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.evaldata import eval_data_available, eval_data_dir, missing_reason
from dedup_tasks.cli import main
from dedup_tasks.contract import ContractError
from dedup_tasks.io import BatchPaths, read_input

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (requirements-spark.txt)")
if shutil.which("java") is None:
    pytest.skip("no Java runtime for Spark (.ci/run installs openjdk-17-jre-headless)", allow_module_level=True)

HOURS = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]
LAYERS = "url,exact,simhash,minhash"


@pytest.fixture(scope="module")
def spark():
    from dedup_tasks.engines.spark import spark_session

    session = spark_session("local[2]", "crawl-dedup-tests", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not eval_data_available("corpora"):
        pytest.skip(missing_reason("corpora"))
    from bench.generate import generate_crawl

    out = tmp_path_factory.mktemp("spark-crawl")
    generate_crawl(out, 800, hours=len(HOURS), seed=11, start=HOURS[0], data_dir=eval_data_dir())
    return out / "crawl"


@pytest.fixture
def schemas(pg_dsn):
    import psycopg2

    names = [f"t_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    yield names
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        for name in names:
            cur.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _root_with(crawl: Path, root: Path) -> Path:
    shutil.copytree(crawl, root / "crawl")
    return root


def _decisions(root: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(BatchPaths(root, h).decisions) for h in HOURS])


def test_archive_on_spark_equals_the_cli_hour_by_hour(spark, crawl, tmp_path, pg_dsn, schemas, monkeypatch):
    local = _root_with(crawl, tmp_path / "local")
    remote = _root_with(crawl, tmp_path / "spark")
    monkeypatch.setenv("DEDUP_DB_URL", pg_dsn)
    monkeypatch.setenv("DEDUP_DB_SCHEMA", schemas[0])
    for hour in HOURS:
        assert main(["run", "--root", str(local), "--batch", hour, "--layers", LAYERS, "--no-progress"]) == 0
    monkeypatch.setenv("DEDUP_DB_SCHEMA", schemas[1])
    args = ["run", "--root", str(remote), "--batch", HOURS[0], "--until", HOURS[-1], "--layers", LAYERS]
    assert main([*args, "--engine", "spark", "--partitions", "5", "--no-progress"]) == 0

    want, got = _decisions(local), _decisions(remote)
    assert got.num_rows == want.num_rows == sum(read_input(BatchPaths(local, h).input)[0].num_rows for h in HOURS)
    # Every layer drops something here, within and across hours, so the comparison means something.
    layers = set(want.column("layer").drop_null().to_pylist())
    assert {"url", "exact", "simhash", "minhash"} <= layers
    assert set(want.filter(pa.compute.is_valid(want.column("matched_batch_id"))).column("matched_batch_id").to_pylist()) > {HOURS[0]}
    # L3 found copies through the registry: the executors computed the registry's band keys (the index
    # signature needs the shingle sets, which stay there) exactly as the single-node layer does.
    assert any(r["layer"] == "minhash" and r["matched_batch_id"] not in (None, r["batch_id"]) for r in want.to_pylist())
    differences = [
        (w, g) for w, g in zip(want.to_pylist(), got.to_pylist(), strict=True) if w != g
    ]
    assert differences == []  # not one decision differs: not the layer, the match, the score nor the reason

    # The in-batch near copies came from the executors' verified band-join pairs, not the driver's stream.
    import json

    for hour in HOURS:
        prepare = json.loads(BatchPaths(remote, hour).summary.read_text())["layers"][0]
        assert prepare["extra"]["verified_pairs"] > 0

    for hour in HOURS:
        a = read_input(BatchPaths(local, hour).deduped)[0]
        b = read_input(BatchPaths(remote, hour).deduped)[0]
        # The same rows in the same order with the same values; Spark does not keep "not null" flags.
        assert b.cast(a.schema).equals(a)


def test_duplicate_doc_id_fails_the_batch_naming_it(spark, tmp_path):
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.engines.spark import run_batches
    from dedup_tasks.registry.base import MemoryRegistry
    from tests.conftest import make_batch, write_partition

    rows = [{"doc_id": "a", "url": "https://x.org/1", "title": "t", "content": "one two three"}] * 2
    write_partition(tmp_path, HOURS[0], make_batch(rows))
    config = DedupConfig.load({"root": str(tmp_path), "layers": LAYERS})
    with pytest.raises(ContractError, match="doc_id"):
        run_batches(spark, [BatchPaths(tmp_path, HOURS[0])], config, MemoryRegistry())
    assert not BatchPaths(tmp_path, HOURS[0]).decisions.exists()


def test_spark_workers_run_the_drivers_interpreter_whatever_python3_is_on_path(tmp_path):
    """As under an Airflow worker, cron or a Makefile naming the venv's interpreter: the venv is not
    activated and the ``python3`` on PATH has none of the requirements."""
    import os
    import subprocess
    import sys

    from tests.conftest import make_batch, write_partition

    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'pyarrow'\" >&2\nexit 1\n")
    (bare / "python3").chmod(0o755)
    stories = ("the council approved the new budget for the river bridge after a long debate on monday " * 3,
               "heavy snow closed the mountain pass and stranded trucks along the northern highway overnight " * 3)
    rows = [{"doc_id": f"d{i}", "url": f"https://x.org/{i}", "title": "news", "content": stories[i % 2]} for i in range(6)]
    write_partition(tmp_path, HOURS[0], make_batch(rows))
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(bare), *(p for p in env.get("PATH", "").split(os.pathsep) if p != str(Path(sys.executable).parent))])
    args = ["run", "--root", str(tmp_path), "--batch", HOURS[0], "--no-registry", "--layers", LAYERS, "--engine", "spark", "--no-progress"]
    done = subprocess.run([sys.executable, "-m", "dedup_tasks", *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    decisions = pq.read_table(BatchPaths(tmp_path, HOURS[0]).decisions).to_pylist()
    # Two texts, three rows each: the executors' Python workers fingerprinted and verified them.
    assert sorted(r["action"] for r in decisions) == ["drop"] * 4 + ["keep"] * 2
