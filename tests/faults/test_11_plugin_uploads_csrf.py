"""#16 row 11: label uploads of junk Parquet or non-UTF-8 CSV answered 500; plugin POSTs had no
Origin/CSRF check; the pages sent no CSP and no framing rule.

Decisions: a POST authenticated by the UI's cookie must come from this server's pages (Origin, else
Referer, names this host); a POST with an ``Authorization: Bearer`` token (never attached by a
browser on its own) needs none. Framing is allowed from the same origin only (the Airflow UI embeds
the plugin in an iframe of its own origin), so ``X-Frame-Options: SAMEORIGIN`` and
``frame-ancestors 'self'`` rather than DENY.
"""

from __future__ import annotations

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from tests.plugins.conftest import WEEK, audited_root, auth_manager, mint, plugin_app  # noqa: F401 - fixtures


def _sample_ids(audited_root, n: int = 1) -> list[str]:  # noqa: F811
    root, _ = audited_root
    return pd.read_parquet(root / "audit" / f"week={WEEK}" / "sample.parquet")["sample_id"].head(n).tolist()


@pytest.fixture
def writer(plugin_app, mint):  # noqa: F811
    client = TestClient(plugin_app)
    client.headers["Authorization"] = f"Bearer {mint('alice')}"
    return client


@pytest.mark.parametrize(
    ("name", "payload", "words"),
    [
        ("labels.parquet", b"PAR1 this is no parquet file PAR1", ["labels.parquet", "Parquet"]),
        ("labels.parquet", b"", ["labels.parquet", "Parquet"]),
        ("labels.csv", "sample_id,label\ncaf\xe9,duplicate\n".encode("latin-1"), ["labels.csv", "UTF-8"]),
    ],
)
def test_junk_uploads_are_422_naming_the_problem(writer, name, payload, words):
    r = writer.post(f"/weeks/{WEEK}/labels/upload", files={"file": (name, payload, "application/octet-stream")},
                    follow_redirects=False)
    assert r.status_code == 422, r.text[:300]
    detail = r.json()["detail"]
    for word in words:
        assert word in detail
    assert "/tmp" not in detail  # the upload's own name, not the server's temporary file


def test_cookie_posts_from_another_origin_are_refused(plugin_app, mint, audited_root):  # noqa: F811
    browser = TestClient(plugin_app)
    browser.cookies.set("_token", mint("alice"))
    sample_id = _sample_ids(audited_root)[0]
    form = {"sample_id": sample_id, "label": "duplicate"}
    for headers in ({"Origin": "https://evil.example"}, {"Referer": "https://evil.example/page"}, {},
                    {"Origin": "null"}):
        r = browser.post(f"/weeks/{WEEK}/labels", data=form, headers=headers, follow_redirects=False)
        assert r.status_code == 403, (headers, r.status_code)
    csv = f"sample_id,label\n{sample_id},duplicate\n".encode()
    r = browser.post(f"/weeks/{WEEK}/labels/upload", files={"file": ("l.csv", csv, "text/csv")},
                     headers={"Origin": "https://evil.example"}, follow_redirects=False)
    assert r.status_code == 403
    # The same POST from the report's own page (the browser sends this server's Origin) is accepted.
    ok = browser.post(f"/weeks/{WEEK}/labels", data=form, headers={"Origin": "http://testserver"},
                      follow_redirects=False)
    assert ok.status_code == 303
    behind_proxy = browser.post(f"/weeks/{WEEK}/labels", data=form, follow_redirects=False,
                                headers={"Origin": "https://airflow.example", "X-Forwarded-Host": "airflow.example"})
    assert behind_proxy.status_code == 303


def test_bearer_posts_need_no_origin(writer, audited_root):  # noqa: F811
    r = writer.post(f"/weeks/{WEEK}/labels", data={"sample_id": _sample_ids(audited_root)[0], "label": "duplicate"},
                    follow_redirects=False)
    assert r.status_code == 303


def test_pages_send_csp_and_framing_rules(plugin_app, writer):  # noqa: F811
    for r in (writer.get("/"), writer.get(f"/weeks/{WEEK}"), writer.get(f"/weeks/{WEEK}/whatif"),
              TestClient(plugin_app).get("/")):  # a refused request too
        csp = r.headers.get("content-security-policy", "")
        assert "frame-ancestors 'self'" in csp and "default-src 'none'" in csp, r.headers
        assert "script-src" not in csp  # default-src 'none': no script may run
        assert r.headers.get("x-frame-options") == "SAMEORIGIN"
        assert r.headers.get("x-content-type-options") == "nosniff"
