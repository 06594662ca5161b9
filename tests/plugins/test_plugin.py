"""The audit plugin's FastAPI app: refuses anonymous requests, serves and records labels for Airflow users."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import psycopg2
from fastapi.testclient import TestClient

from tests.plugins.conftest import WEEK


def _sample_id(audited_root) -> str:
    root, _ = audited_root
    return pd.read_parquet(root / "audit" / f"week={WEEK}" / "sample.parquet")["sample_id"].iloc[0]


def test_unauthenticated_requests_are_refused(plugin_app, audited_root):
    client = TestClient(plugin_app)
    assert client.get("/").status_code == 401
    assert client.get(f"/weeks/{WEEK}").status_code == 401
    r = client.post(f"/weeks/{WEEK}/labels", data={"sample_id": _sample_id(audited_root), "label": "duplicate"})
    assert r.status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer not-a-jwt"}).status_code == 403
    client.cookies.set("_token", "not-a-jwt")
    assert client.get("/").status_code == 403


def test_forged_token_is_refused(plugin_app, mint):
    import jwt

    token = mint("mallory")
    claims = jwt.decode(token, options={"verify_signature": False})
    forged = jwt.encode(claims, "another-key-" * 6, algorithm="HS512")
    assert TestClient(plugin_app).get("/", headers={"Authorization": f"Bearer {forged}"}).status_code == 403


def test_authenticated_user_reads_and_labels(plugin_app, audited_root, mint, pg_dsn):
    client = TestClient(plugin_app)
    token = mint("alice")
    r = client.get("/", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and WEEK in r.text and "alice" in r.text
    browser = TestClient(plugin_app)
    browser.cookies.set("_token", token)  # the Airflow UI's session cookie
    r = browser.get(f"/weeks/{WEEK}")
    assert r.status_code == 200 and 'data-label="duplicate"' in r.text
    sample_id = _sample_id(audited_root)
    r = client.post(f"/weeks/{WEEK}/labels", data={"sample_id": sample_id, "label": "not_duplicate"},
                    headers={"Authorization": f"Bearer {token}"}, follow_redirects=False)
    # Back to the pair, its (collapsed) stratum rendered open (#12: pairs collapsed per stratum).
    assert r.status_code == 303 and r.headers["location"].endswith(f"/weeks/{WEEK}?{urlencode({'open': sample_id})}#s-{sample_id}")
    back = browser.get(r.headers["location"].split("#")[0])
    opened = back.text[: back.text.index(f'id="s-{sample_id}"')].rsplit("<details", 1)[1]
    assert opened.startswith(' class="stratum" open') and back.text.count("<details class=\"stratum\" open") == 1
    _, schema = audited_root
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT label, labelled_by FROM "{schema}".audit_labels WHERE week = %s AND sample_id = %s',
                    (WEEK, sample_id))
        assert cur.fetchone() == ("not_duplicate", "alice")  # the token's user, not a client-sent name
    labels = client.get(f"/weeks/{WEEK}/labels", headers={"Authorization": f"Bearer {token}"}).json()
    assert {(x["sample_id"], x["labelled_by"]) for x in labels} >= {(sample_id, "alice")}
    bad = client.post(f"/weeks/{WEEK}/labels", data={"sample_id": "nope", "label": "duplicate"},
                      headers={"Authorization": f"Bearer {token}"})
    assert bad.status_code == 422
    assert client.get("/weeks/2026-W01", headers={"Authorization": f"Bearer {token}"}).status_code == 404


def test_upload_labels_through_the_page(plugin_app, audited_root, mint, tmp_path):
    client = TestClient(plugin_app)
    token = mint("bob")
    root, _ = audited_root
    sample = pd.read_parquet(root / "audit" / f"week={WEEK}" / "sample.parquet").head(3)
    csv = sample[["sample_id"]].assign(label="duplicate").to_csv(index=False).encode()
    r = client.post(f"/weeks/{WEEK}/labels/upload", files={"file": ("labels.csv", csv, "text/csv")},
                    headers={"Authorization": f"Bearer {token}"}, follow_redirects=False)
    assert r.status_code == 303
    labels = client.get(f"/weeks/{WEEK}/labels", headers={"Authorization": f"Bearer {token}"}).json()
    assert {x["sample_id"] for x in labels if x["labelled_by"] == "bob"} == set(sample["sample_id"])


def test_viewer_may_read_but_not_label(plugin_app, audited_root, mint):
    client = TestClient(plugin_app)
    token = mint("vic", role="viewer")
    assert client.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    r = client.post(f"/weeks/{WEEK}/labels", data={"sample_id": _sample_id(audited_root), "label": "duplicate"},
                    headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 403


def test_whatif_page(plugin_app, mint):
    client = TestClient(plugin_app)
    client.headers["Authorization"] = f"Bearer {mint('alice')}"
    r = client.get(f"/weeks/{WEEK}/whatif", params={"minhash": "0.9", "simhash": "2"})
    assert r.status_code == 200 and "Decisions that would change" in r.text and "minhash" in r.text
    assert client.get(f"/weeks/{WEEK}/whatif", params={"minhash": "high"}).status_code == 422
    assert TestClient(plugin_app).get(f"/weeks/{WEEK}/whatif").status_code == 401


def test_airflow_plugin_registration():
    import dedup_audit_plugin

    plugin = dedup_audit_plugin.DedupAuditPlugin
    assert plugin.fastapi_apps[0]["url_prefix"] == "/dedup-audit"
    assert plugin.fastapi_apps[0]["app"] is dedup_audit_plugin.app
    view = plugin.external_views[0]
    assert view["href"] == "/dedup-audit/" and view["destination"] == "nav"
