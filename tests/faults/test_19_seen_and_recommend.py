"""Row 19: the crawler's ``seen`` command and ``audit recommend`` under bad input: malformed URLs on
``seen``'s stdin, an empty week, a malformed week and labels of another week for ``recommend``. Each
ends in answers or one ``error:`` line with a documented rc, never a traceback."""

from __future__ import annotations

import json
import subprocess
import uuid

import psycopg2
import pytest

from tests.faults.conftest import cli

MALFORMED_URLS = ["", "not a url", "http://", "https://exa mple.com/x", "javascript:alert(1)", "https://[::1/x",
                  "ftp://a.example/f", "https://a.example/" + "x" * 70_000, "\x01\x02", "https://a.example/ok"]


@pytest.fixture
def schema(pg_dsn, registry_schema):
    from dedup_tasks.registry.migrate import migrate

    conn = psycopg2.connect(pg_dsn)
    conn.autocommit = True
    try:
        migrate(conn, registry_schema)
    finally:
        conn.close()
    return registry_schema


def _one_error_or_success(result: subprocess.CompletedProcess) -> list[str]:
    err = result.stderr
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert (result.returncode == 0 and not errors) or (result.returncode in (2, 3, 4) and len(errors) == 1), err
    return errors


def test_seen_answers_every_malformed_url_without_a_traceback(tmp_path, pg_dsn, schema):
    stdin = "\n".join(MALFORMED_URLS).encode() + b"\n\xff\xfe not utf-8\n"
    result = cli("seen", "--root", str(tmp_path), "--db-url", pg_dsn, stdin=stdin, env={"DEDUP_DB_SCHEMA": schema})
    assert result.returncode == 0, result.stderr
    _one_error_or_success(result)
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert len(answers) >= 1 and all(isinstance(a, dict) for a in answers)
    assert not any(a.get("seen") for a in answers)  # an empty registry has seen nothing


@pytest.mark.parametrize("weeks", ["2026-W10", "2026-W99", "zz", ","])
def test_recommend_on_an_empty_or_malformed_week_is_one_line(tmp_path, pg_dsn, schema, weeks):
    out = tmp_path / "overlay.yaml"
    result = cli("audit", "--root", str(tmp_path), "--db-url", pg_dsn, "recommend", "--weeks", weeks, "--out", str(out),
                 env={"DEDUP_DB_SCHEMA": schema})
    errors = _one_error_or_success(result)
    if weeks in ("2026-W99", "zz", ","):
        assert errors, "a malformed week must be refused"
        assert not out.exists()


def test_recommend_does_not_count_labels_of_another_week(tmp_path, pg_dsn, schema):
    """Week 49's labels in the store change nothing of a recommendation for week 48: the overlay (or the
    error) equals the one from a store without them."""
    import pandas as pd

    from dedup_tasks.audit.labels import LabelStore

    store = LabelStore(pg_dsn, schema)
    try:
        store.ensure_table()
        rows = pd.DataFrame([{"week": "2026-W49", "sample_id": f"s{i}", "batch_id": "2026-12-01T00", "doc_id": f"d{i}",
                              "matched_batch_id": "2026-12-01T00", "matched_doc_id": f"m{i}", "kind": "drop", "layer": "minhash",
                              "band": "0.7-0.8", "score": 0.75, "label": "not_duplicate"} for i in range(30)])
        assert store.save(rows, "tester") == 30
    finally:
        store.close()
    outputs, empty = [], f"t_{uuid.uuid4().hex[:12]}"
    for name in (schema, empty):
        out = tmp_path / f"{name}.yaml"
        result = cli("audit", "--root", str(tmp_path), "--db-url", pg_dsn, "recommend", "--weeks", "2026-W48", "--out", str(out),
                     env={"DEDUP_DB_SCHEMA": name})
        errors = _one_error_or_success(result)
        body = [line for line in out.read_text().splitlines() if not line.lstrip().startswith("#")] if out.exists() else []
        outputs.append((result.returncode, [e.replace(name, "S") for e in errors], body))
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{empty}" CASCADE')
    assert outputs[0] == outputs[1]
