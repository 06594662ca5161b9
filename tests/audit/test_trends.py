"""Audit trends: two audited weeks, labels in PostgreSQL, the trend table and its charts in the report."""

from __future__ import annotations

import uuid

import pytest

from tests.audit.synth import WEEK, config_for, generate_rows, run_week

EARLIER = "2026-W48"
EARLIER_HOURS = ["2026-11-24T00", "2026-11-24T01", "2026-11-24T02"]


@pytest.fixture(scope="module")
def two_weeks(tmp_path_factory, pg_dsn):
    import psycopg2

    from dedup_tasks.audit.run import run_audit

    root = tmp_path_factory.mktemp("trends")
    run_week(root, config_for(root), rows=generate_rows(seed=3), hours=EARLIER_HOURS)
    run_week(root, config_for(root))
    schema = f"t_{uuid.uuid4().hex[:12]}"
    run_audit(root, EARLIER, db_url=pg_dsn, schema=schema)
    yield root, schema
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_trends_count_drops_labels_and_precision_per_week_layer_and_language(two_weeks, pg_dsn):
    from dedup_tasks.audit.labels import LabelStore
    from dedup_tasks.audit.run import load_audit, run_audit
    from dedup_tasks.audit.trends import previous_weeks, trend_table

    root, schema = two_weeks
    _, sample = load_audit(root, EARLIER)
    drops = sample[(sample["kind"] == "drop") & (sample["layer"] == "simhash") & (sample["lang"] == "en")]
    labelled = drops.assign(label=["not_duplicate" if i % 4 == 0 else "duplicate" for i in range(len(drops))])
    store = LabelStore(pg_dsn, schema)
    try:
        store.save(labelled, "ana")
    finally:
        store.close()
    result = run_audit(root, WEEK, db_url=pg_dsn, schema=schema)
    store = LabelStore(pg_dsn, schema)
    try:
        history = store.load(up_to_week=WEEK)
    finally:
        store.close()
    table = trend_table(root, WEEK, history)
    assert set(table["week"]) == {EARLIER, WEEK} and previous_weeks(WEEK)[-2:] == [EARLIER, WEEK]
    row = table[(table["week"] == EARLIER) & (table["layer"] == "simhash") & (table["lang"] == "en")].iloc[0]
    k = int((labelled["label"] == "duplicate").sum())
    assert (row["labelled"], row["duplicates"]) == (len(labelled), k) and row["low"] < k / len(labelled) < row["high"]
    # The drop rate is the layer's drops over the language's rows, from the decisions themselves.
    from dedup_tasks.audit.sampling import load_week_decisions, with_site_lang

    decisions = with_site_lang(root, load_week_decisions(root, WEEK))
    en = decisions[decisions["lang"] == "en"]
    expected = ((en["action"] == "drop") & (en["layer"] == "minhash")).sum() / len(en)
    now = table[(table["week"] == WEEK) & (table["layer"] == "minhash") & (table["lang"] == "en")].iloc[0]
    assert now["rate"] == pytest.approx(expected) and now["labelled"] == 0
    html = result.report.read_text()
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="trend"') >= 3 * 4
    assert f'<a href="../week={EARLIER}/report.html">{EARLIER}</a>' in html
    assert f"<b>{WEEK}</b>" in html and "Trends: the last 8 weeks" in html
    # Weeks without an audit are gaps, not zeros: each rate line has two points (W48, W49), not eight.
    rates = html.split('<svg xmlns="http://www.w3.org/2000/svg" class="trend"')[1]
    assert rates.count("<circle") == 2 and rates.count(" L") == 1
