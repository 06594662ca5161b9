"""#16 row 1: stored XSS. Values from the crawl (lang, the URL's host, doc_id) reach the audit report
and the plugin's pages; they must arrive there as text, never as markup.

A crafted week: hour 00 carries a hostile ``lang`` and URL host, hour 02 hostile doc_ids (so they
appear as dropped and matched ids in the sampled pairs and the what-if page).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.audit.synth import HOURS, WEEK, config_for, generate_rows, run_week
from tests.plugins.conftest import auth_manager, mint  # noqa: F401 - fixtures

LANG = "<svg onload=alert('lang')>"
HOST = "evil<svg onload=alert('host')>.example"
DOC = "<svg onload=alert('doc')>"
MARKUP = ("<svg onload", "<img", "<script")


def crafted_rows() -> dict[str, list[dict]]:
    rows = generate_rows()
    for i, row in enumerate(rows[HOURS[0]][:20]):
        row["lang"] = LANG if i % 2 else row["lang"]
        if i % 2 == 0:
            row["url"] = f"https://{HOST}/a/{i}"
    for i, row in enumerate(rows[HOURS[2]]):
        row["doc_id"] = f"{DOC}{i}"
    return rows


@pytest.fixture(scope="module")
def hostile_week(tmp_path_factory, pg_dsn) -> tuple[Path, str]:
    import uuid

    import psycopg2

    from dedup_tasks.audit.run import run_audit

    root = tmp_path_factory.mktemp("xss-week")
    run_week(root, config_for(root), rows=crafted_rows())
    schema = f"t_{uuid.uuid4().hex[:12]}"
    run_audit(root, WEEK, db_url=pg_dsn, schema=schema, per_stratum=50)
    yield root, schema
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def assert_no_markup(page: str) -> None:
    lowered = page.lower()
    for tag in MARKUP:
        assert tag not in lowered, f"unescaped {tag!r} in the page: ...{page[lowered.index(tag) - 80:][:200]}..."


def test_report_file_escapes_crawl_values(hostile_week):
    root, _ = hostile_week
    page = (root / "audit" / f"week={WEEK}" / "report.html").read_text()
    assert_no_markup(page)
    # The values did reach the page (as text): the per-language and per-site tables, the pairs.
    assert "&lt;svg onload=alert(&#x27;lang&#x27;)&gt;" in page
    assert "evil&lt;svg onload=alert(&#x27;host&#x27;)&gt;.example" in page
    assert "&lt;svg onload=alert(&#x27;doc&#x27;)&gt;" in page
    # The renderer's own charts are still drawn, in the tables too (a rate bar per language).
    by_lang = page[page.index("Drop rate per language"):page.index("Score histograms")]
    assert "<svg xmlns=" in by_lang


def test_plugin_pages_escape_crawl_values(hostile_week, pg_dsn, mint):  # noqa: F811 - fixture
    import dedup_audit_plugin

    root, schema = hostile_week
    client = TestClient(dedup_audit_plugin.create_app(root=root, db_url=pg_dsn, schema=schema))
    client.headers["Authorization"] = f"Bearer {mint('vic', role='viewer')}"
    page = client.get(f"/weeks/{WEEK}")
    assert page.status_code == 200
    assert_no_markup(page.text)
    assert "&lt;svg onload=alert(&#x27;lang&#x27;)&gt;" in page.text
    # Tighter thresholds turn drops back into keeps: the what-if page lists their (hostile) doc_ids.
    whatif = client.get(f"/weeks/{WEEK}/whatif", params={"minhash": "0.99", "simhash": "0"})
    assert whatif.status_code == 200
    assert_no_markup(whatif.text)
    assert "&lt;svg onload=alert(&#x27;doc&#x27;)&gt;" in whatif.text
