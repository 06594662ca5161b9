"""In a real headless browser (Debian's chromium, as test_browser_e2e): the audit page shows the
trend charts of two audited weeks, links the earlier week, and shows the overlay recommendation
computed from the week's labels in PostgreSQL, with its command."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from tests.plugins.conftest import CHROMIUM, LAUNCH_ARGS, SCREENSHOT_DIR, playwright_or_skip, served

playwright_api = playwright_or_skip()

WEEK, EARLIER = "2026-W49", "2026-W48"


@pytest.fixture
def two_week_app(tmp_path, pg_dsn):
    import dedup_audit_plugin
    import psycopg2

    from dedup_tasks.audit.labels import LabelStore
    from dedup_tasks.audit.run import load_audit, run_audit
    from tests.audit.synth import config_for, generate_rows, run_week

    root = tmp_path / "root"
    run_week(root, config_for(root), rows=generate_rows(seed=3), hours=["2026-11-24T00", "2026-11-24T01", "2026-11-24T02"])
    run_week(root, config_for(root))
    schema = f"t_{uuid.uuid4().hex[:12]}"
    for week in (EARLIER, WEEK):
        run_audit(root, week, db_url=pg_dsn, schema=schema)
    _, sample = load_audit(root, WEEK)
    drops = sample[(sample["kind"] == "drop") & (sample["layer"] == "simhash")]
    store = LabelStore(pg_dsn, schema)
    try:  # the loosest SimHash band is not duplicates: the recommendation tightens 3 -> 2
        store.save(drops.assign(label=np.where(drops["band"] == "d=3", "not_duplicate", "duplicate")), "ana")
    finally:
        store.close()
    yield dedup_audit_plugin.create_app(root=root, db_url=pg_dsn, schema=schema)
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def server(two_week_app):
    with served(two_week_app) as url:
        yield url


def test_audit_page_shows_trend_charts_and_the_recommendation(server, mint):
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": "_token", "value": mint("dora"), "url": server.rsplit("/", 1)[0] + "/"}])
            page = context.new_page()
            assert page.goto(f"{server}/weeks/{WEEK}?target=0.75").status == 200
            # Trend charts: one row per layer and language, three rendered SVG charts in each.
            rows = page.locator("table.trends tr[data-layer]")
            assert rows.count() >= 4
            simhash_en = page.locator('table.trends tr[data-layer="simhash"][data-lang="en"] svg.trend')
            assert simhash_en.count() == 3
            box = simhash_en.first.bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 30  # drawn, not collapsed
            # Two audited weeks: two points on the rate line; the earlier week is a link to its page.
            assert simhash_en.first.locator("circle").count() == 2
            page.locator("table.trends").scroll_into_view_if_needed()
            page.screenshot(path=f"{SCREENSHOT_DIR}/dedup_audit_trends.png", full_page=False)
            # The recommendation beside the labels: the setting, its new value, the hours, the command.
            rec = page.locator("#recommendation")
            rec.scroll_into_view_if_needed()
            row = rec.locator("tr", has_text="simhash_max_distance")
            cells = row.locator("td").all_inner_texts()
            assert cells[:3] == ["simhash_max_distance", "3", "2"]
            assert "2026-12-01T00" in cells[6]
            command = page.locator("#recommend-command").inner_text()
            assert command.startswith("python -m dedup_tasks audit recommend --root ") and f"--weeks {WEEK}" in command
            rec.locator("summary").click()
            assert "simhash_max_distance: 2" in rec.locator("pre.cmd").inner_text()
            page.screenshot(path=f"{SCREENSHOT_DIR}/dedup_audit_recommendation.png", full_page=False)
            page.locator("p.weeks").get_by_role("link", name=EARLIER).click()
            page.wait_for_load_state("load")
            assert page.url.endswith(f"/weeks/{EARLIER}") and page.locator("h1").inner_text() == f"Dedup audit {EARLIER}"
        finally:
            browser.close()
