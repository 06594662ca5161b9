"""End to end in a real headless browser: the plugin app under uvicorn, an Airflow user's session
cookie, open the report, label one pair by clicking, and find the label in PostgreSQL.

Needs Debian's chromium (/usr/bin/chromium) and the playwright Python package (its bundled
browsers are never downloaded: the test launches the system chromium).
"""

from __future__ import annotations

import psycopg2
import pytest

from tests.plugins.conftest import CHROMIUM, LAUNCH_ARGS, SCREENSHOT_DIR, WEEK, playwright_or_skip, served

playwright_api = playwright_or_skip()


@pytest.fixture
def server(plugin_app):
    with served(plugin_app) as url:
        yield url


def test_label_a_pair_by_clicking(server, mint, audited_root, pg_dsn):
    root, schema = audited_root
    token = mint("carol")
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            # Unauthenticated first: the page is refused.
            page = context.new_page()
            assert page.goto(f"{server}/weeks/{WEEK}").status == 401
            # What the Airflow UI's login leaves in the browser: the JWT in the `_token` cookie.
            context.add_cookies([{"name": "_token", "value": token, "url": server.rsplit("/", 1)[0] + "/"}])
            response = page.goto(f"{server}/")
            assert response.status == 200
            page.click(f"text={WEEK}")
            # The sampled pairs are collapsed per stratum (issue #12): open the loosest MinHash band.
            page.wait_for_selector(".pair", state="attached")
            page.screenshot(path=f"{SCREENSHOT_DIR}/dedup_audit_report_top.png", full_page=False)
            page.locator('details.stratum[data-layer="minhash"]').last.locator("summary").click()
            # A MinHash pair from the loosest band: the one with visible differences to judge.
            pair = page.locator('.pair[data-layer="minhash"]').last
            sample_id = pair.locator('button[data-label="duplicate"]').get_attribute("data-sample")
            pair.locator('button[data-label="duplicate"]').click()
            page.wait_for_load_state("load")
            labelled = page.locator(f'[id="s-{sample_id}"] .label.dup')
            labelled.wait_for()
            labelled.scroll_into_view_if_needed()
            page.screenshot(path=f"{SCREENSHOT_DIR}/dedup_audit_labelled_pair.png", full_page=False)
        finally:
            browser.close()
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT label, labelled_by FROM "{schema}".audit_labels WHERE week = %s AND sample_id = %s',
                    (WEEK, sample_id))
        assert cur.fetchone() == ("duplicate", "carol")
