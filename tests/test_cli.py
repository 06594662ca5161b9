"""The command line as a user runs it: real subprocesses, real Parquet."""

import json
import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, make_batch, write_partition


def cli(*args, env=None, check=True):
    return subprocess.run(
        [sys.executable, "-m", "dedup_tasks", *args],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})}, check=check,
    )


@pytest.fixture
def rows(en_articles):
    out = [{"doc_id": f"d{i}", "url": f"https://a.com/{i}", "title": a["title"], "content": a["text"]} for i, a in enumerate(en_articles[:20])]
    out.append(dict(out[0], doc_id="copy", url="https://b.com/x"))
    return out


def test_run_root_layout_prints_table_and_writes_outputs(tmp_path, rows):
    write_partition(tmp_path, "2026-12-01T00", make_batch(rows))
    result = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", "--no-registry")
    assert "rows in 21" in result.stdout and "exact" in result.stdout
    assert "exact: 21 in" not in result.stdout  # the per-layer progress lines go to stderr
    assert "url: 21 in, 0 dropped" in result.stderr
    decisions = pq.read_table(tmp_path / "decisions/dt=2026-12-01/hour=00").to_pandas()
    assert len(decisions) == 21
    assert decisions.set_index("doc_id").loc["copy", "matched_doc_id"] == "d0"
    summary = json.loads((tmp_path / "runs/batch_id=2026-12-01T00/summary.json").read_text())
    assert summary["kept"] == (decisions.action == "keep").sum() and summary["rows_in"] == 21
    shown = cli("show", "--root", str(tmp_path))
    assert "batch 2026-12-01T00" in shown.stdout


def test_run_input_file_and_out_dir(tmp_path, rows):
    src = tmp_path / "in" / "batch.parquet"
    src.parent.mkdir()
    pq.write_table(make_batch(rows), src)
    out = tmp_path / "out"
    cli("run", "--input", str(src.parent), "--out", str(out), "--no-registry", "--layers", "url,exact")
    assert {p.name for p in out.iterdir()} == {"deduped", "decisions", "runs"}
    kept = pq.read_table(next((out / "deduped").rglob("*.parquet")))
    decisions = pq.read_table(next((out / "decisions").rglob("*.parquet"))).to_pandas()
    assert len(decisions) == 21 and kept.num_rows == (decisions.action == "keep").sum()
    assert decisions.set_index("doc_id").loc["copy", "layer"] == "exact"


def test_bad_input_exits_2_and_writes_nothing(tmp_path, rows):
    rows[3]["doc_id"] = "d1"
    write_partition(tmp_path, "2026-12-01T00", make_batch(rows))
    result = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", "--no-registry", check=False)
    assert result.returncode == 2
    assert "doc_id must be unique" in result.stderr and "hour=00" in result.stderr
    assert not (tmp_path / "deduped").exists() and not (tmp_path / "decisions").exists()


def test_missing_partition_and_bad_flags_are_clear(tmp_path):
    result = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T07", "--no-registry", check=False)
    assert result.returncode == 2 and "does not exist" in result.stderr
    result = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T07", "--layers", "url,nope", check=False)
    assert result.returncode == 2 and "unknown layer" in result.stderr
    result = cli("run", "--root", str(tmp_path), "--batch", "x", "--set", "minhash_threshold=2", check=False)
    assert result.returncode == 2 and "minhash_threshold" in result.stderr


def test_rerun_with_registry_is_idempotent(tmp_path, rows, pg_dsn, registry_schema):
    write_partition(tmp_path, "2026-12-01T00", make_batch(rows))
    env = {"DEDUP_DB_URL": pg_dsn, "DEDUP_DB_SCHEMA": registry_schema}
    cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", env=env)
    first = pq.read_table(tmp_path / "decisions/dt=2026-12-01/hour=00")
    shutil.rmtree(tmp_path / "decisions")
    cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", env=env)
    assert pq.read_table(tmp_path / "decisions/dt=2026-12-01/hour=00").equals(first)


def test_stoplist_learn_writes_the_built_in_from_the_sample_corpus_and_a_run_uses_a_learned_one(tmp_path, rows):
    from bench.sample_corpus.stoplist import CUTOFF, sample_english
    from dedup_tasks.fingerprint.stoplist import DEFAULT_STOPLIST, load_stoplist

    src = tmp_path / "sample"
    src.mkdir()
    pq.write_table(sample_english(), src / "part-0.parquet")
    out = tmp_path / "en-mine-v1.u32"
    result = cli("stoplist", "learn", "--input", str(src), "--out", str(out), "--cutoff", str(CUTOFF))
    assert "minhash_registry_stoplist=" in result.stdout and "en-mine-v1" in result.stdout
    assert load_stoplist(str(out)).hashes.tobytes() == load_stoplist(DEFAULT_STOPLIST).hashes.tobytes()
    write_partition(tmp_path, "2026-12-01T00", make_batch(rows))
    run = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", "--no-registry", "--set", f"minhash_registry_stoplist={out}")
    assert "rows in 21" in run.stdout
    bad = cli("stoplist", "learn", "--input", str(src), "--out", str(tmp_path / "x.bin"), check=False)
    assert bad.returncode == 2 and "ends in .u32" in bad.stderr
    missing = cli("run", "--root", str(tmp_path), "--batch", "2026-12-01T00", "--no-registry", "--set", "minhash_registry_stoplist=nope", check=False)
    assert missing.returncode == 2 and "minhash_registry_stoplist: stoplist 'nope'" in missing.stderr


def test_db_takes_its_options_before_its_command(tmp_path, pg_dsn):
    """`db --db-url URL --schema S compact`, as `db`'s usage line writes it (argparse.REMAINDER refused it)."""
    import uuid

    import psycopg2

    schema = f"test_cli_db_{uuid.uuid4().hex[:10]}"
    base = ["db", "--db-url", pg_dsn, "--schema", schema, "--root", str(tmp_path)]
    try:
        assert "now at version" in cli(*base, "migrate").stdout
        info = json.loads(cli(*base, "status", "--json").stdout)
        assert info["tables"]["documents"]["rows"] == 0
        assert cli(*base, "compact").returncode == 0
        usage = cli("db", check=False)
        assert usage.returncode == 2 and "db [-h] [--db-url DB_URL]" in usage.stderr
    finally:
        conn = psycopg2.connect(pg_dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()
