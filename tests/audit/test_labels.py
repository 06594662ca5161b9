"""Labels: upload a labelled sample (CLI, Parquet and CSV) -> PostgreSQL -> next audit's precision."""

from __future__ import annotations

import pandas as pd
import psycopg2
import pytest

from dedup_tasks.audit.labels import LabelError, LabelStore
from dedup_tasks.audit.run import run_audit
from dedup_tasks.cli import main


@pytest.fixture
def audited(week_root, pg_dsn, registry_schema):
    run_audit(week_root, "2026-W49", db_url=pg_dsn, schema=registry_schema, per_stratum=4)
    return week_root


def test_label_upload_round_trip(audited, pg_dsn, registry_schema, tmp_path, capsys, monkeypatch):
    sample = pd.read_parquet(audited / "audit" / "week=2026-W49" / "sample.parquet")
    labelled = sample.copy()
    labelled["label"] = ["duplicate" if i % 3 else "not_duplicate" for i in range(len(labelled))]
    labelled.loc[labelled.index[-1], "label"] = None  # unlabelled rows are skipped
    parquet = tmp_path / "labels.parquet"
    labelled.to_parquet(parquet)
    argv = ["audit", "label", "--root", str(audited), "--week", "2026-W49", "--db-url", pg_dsn]
    monkeypatch.setenv("DEDUP_DB_SCHEMA", registry_schema)
    # The CLI resolves the schema like every other command: DedupConfig (env DEDUP_DB_SCHEMA).
    assert main([*argv, "--file", str(parquet), "--user", "ana"]) == 0
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT sample_id, doc_id, matched_doc_id, label, labelled_by FROM "{registry_schema}".audit_labels')
        stored = {r[0]: r[1:] for r in cur.fetchall()}
    assert len(stored) == len(sample) - 1
    first = labelled.iloc[0]
    assert stored[first["sample_id"]] == (first["doc_id"], first["matched_doc_id"], "not_duplicate", "ana")

    # A CSV relabel by someone else wins; a bad label or unknown sample is refused, naming it.
    csv = tmp_path / "labels.csv"
    pd.DataFrame({"sample_id": [first["sample_id"]], "label": ["duplicate"]}).to_csv(csv, index=False)
    assert main([*argv, "--file", str(csv), "--user", "bo"]) == 0
    pd.DataFrame({"sample_id": ["nope:1"], "label": ["duplicate"]}).to_csv(csv, index=False)
    assert main([*argv, "--file", str(csv), "--user", "bo"]) == 2
    assert "nope:1" in capsys.readouterr().err

    # The next audit run shows the labels and their precision.
    result = run_audit(audited, "2026-W49", db_url=pg_dsn, schema=registry_schema, per_stratum=4)
    assert result.labelled == len(sample) - 1
    assert "Wilson 95%" in result.report.read_text()
    assert "no labels yet" not in result.report.read_text()
    store = LabelStore(pg_dsn, registry_schema)
    try:
        labels = store.load("2026-W49")
        assert labels.set_index("sample_id").loc[first["sample_id"], "labelled_by"] == "bo"
        with pytest.raises(LabelError):
            store.save(labels, user="")
    finally:
        store.close()


def test_earlier_weeks_labels_feed_this_weeks_precision(week_root, pg_dsn, registry_schema):
    store = LabelStore(pg_dsn, registry_schema)
    try:
        rows = pd.DataFrame([{"week": "2026-W48", "sample_id": f"2026-11-24T00:old{i}", "batch_id": "2026-11-24T00",
                              "doc_id": f"old{i}", "matched_batch_id": "2026-11-24T00", "matched_doc_id": f"m{i}",
                              "kind": "drop", "layer": "minhash", "band": "0.80-0.85", "score": 0.81,
                              "label": "duplicate" if i < 7 else "not_duplicate"} for i in range(9)])
        assert store.save(rows, "ana") == 9
        # A later week's labels must not leak into an earlier week's report.
        assert store.save(rows.assign(week="2026-W50", sample_id=rows["sample_id"] + "x"), "ana") == 9
    finally:
        store.close()
    result = run_audit(week_root, "2026-W49", db_url=pg_dsn, schema=registry_schema, per_stratum=2)
    page = result.report.read_text()
    assert result.labelled == 0
    # minhash 0.80-0.85: n = 9, 7 duplicates (precision 0.778) from week 48 only.
    assert "<td class=\"\">9</td><td class=\"\">7</td><td class=\"\">0.778</td>" in page
