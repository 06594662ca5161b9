"""Shared fixtures: real Parquet batches built from news-like corpora or from small texts.

Articles come from the evaluation corpora when present (``bench.evaldata``: ``$DEDUP_EVAL_DATA``) and
otherwise from the redistributable sample corpus shipped in ``bench/sample_corpus``, so these tests
run on a clean clone too.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.corpus import SAMPLE_DATA_DIR
from bench.evaldata import eval_data_dir

REPO = Path(__file__).resolve().parents[1]

# Airflow reads its home at import: give the test session a private one before anything imports it.
if "AIRFLOW_HOME" not in os.environ or os.environ.get("CI"):
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="dedup-airflow-home-")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
BASE_TIME = pd.Timestamp("2026-12-01T00:00:00Z")


# The shipped sample file standing in for each evaluation corpus (same language, article-sized texts).
SAMPLE_STAND_IN = {
    "en_reuters21578.jsonl": "en_sample_sotu.jsonl",
    "en_bbc_news.jsonl": "en_sample_sotu.jsonl",
    "zh_sogou_smarty.jsonl": "zh_sample_classics.jsonl",
}


def corpus_articles(name: str, limit: int) -> list[dict]:
    """Up to ``limit`` articles of >= 300 characters from eval corpus ``name``, else its sample stand-in."""
    path = eval_data_dir() / "corpora" / name
    if not path.exists():
        path = SAMPLE_DATA_DIR / "corpora" / SAMPLE_STAND_IN[name]
    out = []
    with path.open() as fh:
        for line in fh:
            row = json.loads(line)
            if len(row.get("text") or "") >= 300:
                out.append(row)
            if len(out) >= limit:
                break
    return out


def make_batch(rows: list[dict], start: pd.Timestamp = BASE_TIME) -> pa.Table:
    """Rows of doc_id/url/title/content (+ optional fetched_at, lang, extra) as a contract table."""
    records = []
    for i, row in enumerate(rows):
        rec = {"fetched_at": start + pd.Timedelta(seconds=i), "title": None, "content": None, "url": None}
        rec.update(row)
        records.append(rec)
    frame = pd.DataFrame(records)
    frame["fetched_at"] = pd.to_datetime(frame["fetched_at"], utc=True).astype("datetime64[us, UTC]")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for name in ("doc_id", "url", "title", "content"):
        idx = table.column_names.index(name)
        table = table.set_column(idx, name, table.column(name).cast(pa.string()))
    return table


def write_partition(root: Path, batch_id: str, table: pa.Table) -> Path:
    day, hour = batch_id.split("T")
    part = root / "crawl" / f"dt={day}" / f"hour={hour}"
    part.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, part / "part-00000.parquet")
    return part


@pytest.fixture
def en_articles() -> list[dict]:
    return corpus_articles("en_reuters21578.jsonl", 400)


@pytest.fixture
def zh_articles() -> list[dict]:
    return corpus_articles("zh_sogou_smarty.jsonl", 120)


def server_readable_tmpdir(prefix: str) -> Path:
    """A temporary directory the embedded server's unprivileged user can enter (mkdtemp makes 0700)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="session")
def pg_dsn():
    """A real PostgreSQL: DEDUP_TEST_DB_URL when set (CI), else an embedded server for the session."""
    dsn = os.environ.get("DEDUP_TEST_DB_URL")
    if dsn:
        yield dsn
        return
    import shutil

    from dedup_tasks.registry.embedded import EmbeddedPostgres

    base = server_readable_tmpdir("dedup-test-pg-")
    # fsync off: a throwaway test cluster need not survive a power cut.
    server = EmbeddedPostgres(base / "pg", init_fsync=False, settings={"fsync": "off", "shared_buffers": "128MB"})
    try:
        with server:
            yield server.dsn
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def registry_schema(pg_dsn) -> str:
    """A fresh registry schema per test, dropped afterwards."""
    import psycopg2

    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield schema
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
