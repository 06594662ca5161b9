"""Airflow UI plugin: the weekly dedup audit reports, and labelling their sampled pairs.

A FastAPI app mounted by the api-server at /dedup-audit plus a nav entry (external view) that opens
it inside the Airflow UI. Airflow 3 gives plugin apps no authentication of their own, so every route
resolves the caller from Airflow's JWT (the UI's `_token` cookie or an `Authorization: Bearer`
header) with the api-server's own `get_user`, and asks the auth manager whether that user may read
(GET) or change (PUT) the `dedup_audit` DAG. A label records the authenticated user's name, never a
name sent by the client.
"""

from __future__ import annotations

import html
import tempfile
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import Depends, FastAPI, File, Form, HTTPException, Query, Request, UploadFile, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

AUDIT_DAG_ID = "dedup_audit"
URL_PREFIX = "/dedup-audit"
_bearer = HTTPBearer(auto_error=False)

# Sent with every response. The pages hold no script at all, so none may run (an injected one
# included); styles are inline. Framing: the Airflow UI shows the plugin in an iframe of its own
# origin (external_views' url_route), so framing is allowed from the same origin only, not DENY.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'self'; base-uri 'none'",
    "X-Frame-Options": "SAMEORIGIN",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def same_origin(request: Request) -> bool:
    """Whether a browser request comes from a page of this server (its Origin, else its Referer).

    A request the browser sends on another site's behalf (a form posted from elsewhere: CSRF) carries
    the UI's `_token` cookie but that site's Origin. The host compared is what the client asked for
    (Host, or X-Forwarded-Host behind a proxy); the scheme is not, since a TLS proxy changes it.
    """
    from urllib.parse import urlsplit

    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return False
    hosts = {h.strip().lower() for h in (request.headers.get("x-forwarded-host", "") + "," +
                                          request.headers.get("host", "")).split(",") if h.strip()}
    return urlsplit(source).netloc.lower() in hosts


def check_csrf(request: Request) -> None:
    """A state-changing request authenticated by the cookie must come from this server's pages.

    A bearer token is never attached by a browser on its own, so API clients (no Origin) need none.
    """
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return
    if not same_origin(request):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "cross-origin POST refused: send it from the audit pages "
                                                        "(same Origin) or with an Authorization: Bearer token")


def _auth_manager() -> Any:
    # Inside the api-server the auth manager already exists and this returns it; in a standalone
    # server (tests, `uvicorn plugins.dedup_audit_plugin:app`) it is created from [core] auth_manager.
    from airflow.api_fastapi.app import create_auth_manager

    return create_auth_manager()


async def authenticated_user(
    request: Request, bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Any:
    """The Airflow user of this request (401 without a token, 403 for an invalid one)."""
    from airflow.api_fastapi.core_api.security import get_user

    _auth_manager()
    return await get_user(request, None, bearer)


def _require(method: str) -> Any:
    async def check(request: Request, user: Annotated[Any, Depends(authenticated_user)]) -> Any:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

        if method != "GET":
            check_csrf(request)

        if not _auth_manager().is_authorized_dag(method=method, details=DagDetails(id=AUDIT_DAG_ID), user=user):
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"{user.get_name()} may not {method} {AUDIT_DAG_ID}")
        return user

    return check


Reader = Annotated[Any, Depends(_require("GET"))]
Writer = Annotated[Any, Depends(_require("PUT"))]


def recommendation_html(root: Path, week: str, history: Any, target: float) -> str:
    """The `audit recommend` overlay for this week's labels, as a table, the YAML and the command."""
    from dedup_tasks.audit.recommend import overlay_text, recommend
    from dedup_tasks.audit.report import esc, table_html

    command = (f"python -m dedup_tasks audit recommend --root {root} --weeks {week} --target {target:g} "
               f"--out recommend-{week}.yaml")
    head = (f"<h2>Recommended overlay (audit recommend, target {target:g})</h2><p class=note>From this "
            "week's labelled drops and near misses: per setting, the threshold dropping the most while the Wilson "
            "lower bound of precision stays above the target; the what-if counts the stored decisions it changes. "
            "Write it, review it, then rerun the hours it names:</p>"
            f'<pre class="cmd" id="recommend-command">{esc(command)}</pre>')
    labels = history[history["week"] == week]
    if labels.empty:
        return head + '<p class="note" id="recommendation">no labels for this week yet</p>'
    result = recommend(root, [week], labels, target)
    import pandas as pd

    rows = [{"setting": r.setting, "current": r.current, "recommended": r.value if r.changed else None,
             "labels": r.labels, "low": r.low, "high": r.high, "hours to rerun": ", ".join(r.hours),
             "note": r.note} for r in result.recommendations]
    table = table_html(pd.DataFrame(rows, columns=["setting", "current", "recommended", "labels", "low", "high",
                                                   "hours to rerun", "note"]), left=["setting", "hours to rerun", "note"])
    return (head + f'<div id="recommendation">{table}<details><summary>overlay YAML</summary>'
            f'<pre class="cmd">{esc(overlay_text(result, command, root))}</pre></details></div>')


def create_app(root: str | Path | None = None, db_url: str | None = None, schema: str | None = None) -> FastAPI:
    """The plugin's app. Without arguments the data root and database come from DedupConfig at request time."""
    app = FastAPI(title="Dedup audit", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    def settings() -> tuple[Path, str | None, str]:
        from dedup_tasks.config import DedupConfig

        config = DedupConfig.load()
        return (Path(root or config.root), db_url if db_url is not None else config.db_url,
                schema or config.db_schema)

    def load_labels(week: str) -> tuple[Any, Any]:
        from dedup_tasks.audit.labels import open_label_store

        data_root, dsn, db_schema = settings()
        with open_label_store(data_root, dsn, db_schema) as store:
            history = store.load(up_to_week=week)
        return history[history["week"] == week][["sample_id", "label"]], history

    def check_week(week: str) -> str:
        from dedup_tasks.audit.weeks import audit_dir, parse_week

        try:
            parse_week(week)
        except ValueError as exc:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
        if not (audit_dir(settings()[0], week) / "audit.json").exists():
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no audit for week {week}")
        return week

    @app.get("/", response_class=HTMLResponse, name="index")
    def index(request: Request, user: Reader) -> str:
        from dedup_tasks.audit.weeks import list_audit_weeks

        weeks = list_audit_weeks(settings()[0])
        items = "".join(
            f'<li><a href="{request.url_for("week_page", week=w)}">{html.escape(w)}</a></li>' for w in weeks
        ) or "<li>no audits yet: the dedup_audit DAG writes one per week</li>"
        return (f"<!doctype html><html><head><meta charset=utf-8><title>Dedup audits</title></head>"
                f"<body style='font-family:system-ui;margin:16px'><h1>Dedup audits</h1>"
                f"<p>signed in as {html.escape(user.get_name())}</p><ul>{items}</ul></body></html>")

    @app.get("/weeks/{week}", response_class=HTMLResponse, name="week_page")
    def week_page(request: Request, week: str, user: Reader,
                  open_sample: Annotated[str | None, Query(alias="open")] = None,
                  target: Annotated[float | None, Query()] = None) -> str:
        """The report with labelling buttons, the trends and the overlay recommendation (?target=0.9)."""
        from dedup_tasks.audit.recommend import DEFAULT_TARGET
        from dedup_tasks.audit.run import render_week

        check_week(week)
        target = DEFAULT_TARGET if target is None else target
        if not 0.0 < target < 1.0:  # nan fails this too
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"target {target!r}: a precision in (0, 1)")
        labels, history = load_labels(week)
        nav = (f'<p class="note"><a href="{request.url_for("index")}">all weeks</a> · signed in as '
               f'{html.escape(user.get_name())} · <a href="{request.url_for("sample_file", week=week)}">'
               f'sample.parquet</a> · <a href="{request.url_for("whatif", week=week)}">what-if</a></p>')
        week_url = str(request.url_for("week_page", week="WEEK"))
        return render_week(settings()[0], week, labels, history, nav=nav,
                           label_url=str(request.url_for("post_label", week=week)),
                           upload_url=str(request.url_for("upload_labels", week=week)), open_sample=open_sample,
                           week_link=lambda w: week_url.replace("WEEK", quote(w)),
                           beside_labels=recommendation_html(settings()[0], week, history, target))

    @app.get("/weeks/{week}/whatif", response_class=HTMLResponse, name="whatif")
    def whatif(request: Request, week: str, user: Reader) -> str:
        """Replay the week under thresholds given as query parameters (?minhash=0.9&simhash=2)."""
        from dedup_tasks.audit.report import render_whatif
        from dedup_tasks.audit.sampling import load_week_decisions
        from dedup_tasks.audit.whatif import THRESHOLD_LAYERS, ThresholdError, parse_thresholds, replay

        check_week(week)
        try:
            thresholds = parse_thresholds(request.query_params)
        except ThresholdError as exc:  # not a number, nan/inf, out of range: the caller's mistake
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
        decisions = load_week_decisions(settings()[0], week)
        current = {layer: (float(t.iloc[0]) if len(t := decisions.loc[decisions["layer"] == layer, "threshold"].dropna())
                           else None) for layer in THRESHOLD_LAYERS}
        nav = f'<p class="note"><a href="{request.url_for("week_page", week=week)}">back to the report</a></p>'
        return render_whatif(week, replay(decisions, thresholds), current,
                             str(request.url_for("whatif", week=week)), nav=nav)

    @app.get("/weeks/{week}/sample.parquet", name="sample_file")
    def sample_file(week: str, user: Reader) -> Response:
        from dedup_tasks.audit.weeks import audit_dir

        check_week(week)
        data = (audit_dir(settings()[0], week) / "sample.parquet").read_bytes()
        return Response(data, media_type="application/vnd.apache.parquet",
                        headers={"Content-Disposition": f'attachment; filename="sample-{week}.parquet"'})

    @app.get("/weeks/{week}/labels", name="get_labels")
    def get_labels(week: str, user: Reader) -> list[dict]:
        check_week(week)
        labels, history = load_labels(week)
        current = history[history["week"] == week]
        return [{k: (str(v) if k == "labelled_at" else v) for k, v in row.items()} for row in current.to_dict("records")]

    @app.post("/weeks/{week}/labels", name="post_label")
    def post_label(request: Request, week: str, user: Writer, sample_id: Annotated[str, Form()],
                   label: Annotated[str, Form()]) -> RedirectResponse:
        import pandas as pd

        from dedup_tasks.audit.labels import LabelError, merge_with_sample, open_label_store
        from dedup_tasks.audit.run import load_audit

        check_week(week)
        _, sample = load_audit(settings()[0], week)
        try:
            rows = merge_with_sample(pd.DataFrame({"sample_id": [sample_id], "label": [label]}), sample, "form")
        except LabelError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
        data_root, dsn, db_schema = settings()
        with open_label_store(data_root, dsn, db_schema) as store:
            store.save(rows, user.get_name())
        # Back to the labelled pair, its stratum rendered open (the pairs are collapsed per stratum).
        target = f"{request.url_for('week_page', week=week)}?{urlencode({'open': sample_id})}#s-{quote(sample_id, safe=':')}"
        return RedirectResponse(target, status_code=status.HTTP_303_SEE_OTHER)

    @app.post("/weeks/{week}/labels/upload", name="upload_labels")
    async def upload_labels(request: Request, week: str, user: Writer,
                            file: Annotated[UploadFile, File()]) -> RedirectResponse:
        from dedup_tasks.audit.labels import LabelError
        from dedup_tasks.audit.run import import_labels

        check_week(week)
        name = Path(file.filename or "labels.csv").name
        suffix = Path(name).suffix or ".csv"
        data_root, dsn, db_schema = settings()
        with tempfile.NamedTemporaryFile(suffix=suffix) as tmp:
            tmp.write(await file.read())
            tmp.flush()
            try:
                import_labels(data_root, week, tmp.name, user.get_name(), db_url=dsn, schema=db_schema)
            except LabelError as exc:
                # Junk Parquet, a non-UTF-8 CSV, unknown ids: the upload's fault (422), named as uploaded.
                raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc).replace(tmp.name, name)) from exc
        return RedirectResponse(str(request.url_for("week_page", week=week)), status_code=status.HTTP_303_SEE_OTHER)

    return app


app = create_app()

try:
    from airflow.plugins_manager import AirflowPlugin
except ImportError:  # the app is usable (and testable) without Airflow's plugin machinery
    AirflowPlugin = None  # type: ignore[assignment,misc]

if AirflowPlugin is not None:

    class DedupAuditPlugin(AirflowPlugin):
        name = "dedup_audit"
        fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Dedup audit"}]
        # url_route embeds the page in the Airflow UI (an iframe under /plugin/dedup-audit), with the nav entry.
        external_views = [
            {
                "name": "Dedup audit",
                "href": f"{URL_PREFIX}/",
                "destination": "nav",
                "category": "browse",
                "url_route": "dedup-audit",
            }
        ]
