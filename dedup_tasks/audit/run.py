"""The weekly audit: decisions of a week -> sample.parquet, audit.json and report.html."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from dedup_tasks.audit.labels import (
    LABEL_COLUMNS,
    LabelError,
    merge_with_sample,
    open_label_store,
    read_label_file,
)
from dedup_tasks.audit.metrics import DEFAULT_TARGET_PRECISION, band_populations, drop_rates, kept_notes
from dedup_tasks.audit.report import histogram, render_report
from dedup_tasks.audit.sampling import (
    DEFAULT_NEAR_MISS_PER_LAYER,
    DEFAULT_PER_STRATUM,
    SUSPECT_COLUMNS,
    attach_texts,
    draw_sample,
    load_week_decisions,
    near_miss_rows,
    with_site_lang,
)
from dedup_tasks.audit.trends import trend_table, trends_html
from dedup_tasks.audit.weeks import audit_dir, parse_week
from dedup_tasks.io import replace_dir

LAYER_ORDER = ["url", "exact", "simhash", "minhash", "semantic"]
SITE_ROWS = 25


@dataclass
class AuditResult:
    week: str
    directory: Path
    report: Path
    sample: Path
    rows: int
    sampled: int
    labelled: int

    def to_dict(self) -> dict:
        return {"week": self.week, "directory": str(self.directory), "report": str(self.report),
                "sample": str(self.sample), "rows": self.rows, "sampled": self.sampled, "labelled": self.labelled}


def _jsonable(frame: pd.DataFrame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


def build_data(decisions: pd.DataFrame, week: str, target: float) -> dict:
    """Everything the report draws besides the pairs (stored as audit.json so the UI can re-render)."""
    layers = [layer for layer in LAYER_ORDER if layer in set(decisions["layer"].dropna())]
    layers += sorted(set(decisions["layer"].dropna()) - set(layers))
    by_site = drop_rates(decisions, "site")
    by_site = by_site.sort_values(["rows", "site"], ascending=[False, True]).head(SITE_ROWS) if not by_site.empty else by_site
    histograms = {}
    drops = decisions[decisions["action"] == "drop"]
    for layer in layers:
        if layer in {"url", "exact"}:
            continue  # their score is always 1: nothing to histogram
        rows = drops[drops["layer"] == layer]
        threshold = rows["threshold"].dropna()
        edges, counts = histogram(rows["score"], layer)
        histograms[layer] = {"edges": edges, "counts": counts,
                             "threshold": float(threshold.iloc[0]) if len(threshold) else None}
    near = near_miss_rows(decisions)
    if all(c in decisions for c in SUSPECT_COLUMNS) or len(near):
        note = f"{len(near)} kept rows carry a best below-threshold candidate; they are sampled as near misses."
    else:
        note = ("The decisions of kept rows carry no candidate or score, so near misses cannot be sampled. "
                "The cascade should record, for each kept row, its best below-threshold candidate of the "
                "near-duplicate layers (suspect_layer, suspect_doc_id, suspect_batch_id, suspect_score: the "
                "layers already compute them for L4 as _suspect_<layer>_*); this audit reads those columns "
                "as soon as they exist.")
    hours = sorted(decisions["hour"].unique().tolist()) if not decisions.empty else []
    return {
        "week": week,
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": int(len(decisions)),
        "dropped": int((decisions["action"] == "drop").sum()),
        "hours": hours,
        "first_hour": hours[0] if hours else None,
        "last_hour": hours[-1] if hours else None,
        "layers": layers,
        "by_hour": _jsonable(drop_rates(decisions, "hour")),
        "by_site": _jsonable(by_site),
        "by_lang": _jsonable(drop_rates(decisions, "lang")),
        "kept_notes": _jsonable(kept_notes(decisions)),
        "histograms": histograms,
        "populations": _jsonable(band_populations(decisions, near)),
        "near_miss_note": note,
        "target_precision": target,
    }


def run_audit(
    root: Path | str,
    week: str,
    *,
    db_url: str | None = None,
    schema: str = "dedup",
    per_stratum: int = DEFAULT_PER_STRATUM,
    near_miss_per_layer: int = DEFAULT_NEAR_MISS_PER_LAYER,
    target_precision: float = DEFAULT_TARGET_PRECISION,
    use_labels: bool = True,
) -> AuditResult:
    """Write ROOT/audit/week=WEEK/{sample.parquet, audit.json, report.html} (replaced atomically).

    With `use_labels`, labels already stored for this week fill the sample's label column (a rerun
    keeps the analysts' work) and labels of earlier weeks feed the precision estimates.
    """
    parse_week(week)
    root = Path(root)
    decisions = load_week_decisions(root, week)
    if not decisions.empty:
        decisions = with_site_lang(root, decisions)
    sample = attach_texts(draw_sample(decisions, week, per_stratum, near_miss_per_layer), root) if not decisions.empty \
        else draw_sample(decisions, week)
    data = build_data(decisions, week, target_precision)
    labels = pd.DataFrame(columns=["sample_id", "label"])
    history = pd.DataFrame(columns=LABEL_COLUMNS)
    if use_labels:
        with open_label_store(root, db_url, schema) as store:
            history = store.load(up_to_week=week)
        current = history[history["week"] == week]
        labels = current[["sample_id", "label"]]
        data["history_labels"] = _jsonable(history[history["week"] != week][["sample_id", "kind", "layer", "band", "label"]])
        sample["label"] = sample["sample_id"].map(dict(zip(labels["sample_id"], labels["label"], strict=True)))
    trends = trends_html(trend_table(root, week, history, current=(data, sample)), week)
    html_text = render_report(data, sample, labels, trends=trends)
    final = audit_dir(root, week)

    def fill(tmp: Path) -> None:
        sample.to_parquet(tmp / "sample.parquet", index=False)
        (tmp / "audit.json").write_text(json.dumps(data, indent=1, default=str))
        (tmp / "report.html").write_text(html_text, encoding="utf-8")

    replace_dir(final, fill)
    return AuditResult(week, final, final / "report.html", final / "sample.parquet", int(len(decisions)),
                       int(len(sample)), int(sample["label"].notna().sum()))


def load_audit(root: Path | str, week: str) -> tuple[dict, pd.DataFrame]:
    """A written audit's data and sample; FileNotFoundError naming the week when there is none."""
    directory = audit_dir(root, week)
    if not (directory / "audit.json").exists():
        raise FileNotFoundError(f"no audit for week {week} under {directory}")
    return json.loads((directory / "audit.json").read_text()), pd.read_parquet(directory / "sample.parquet")


def import_labels(root: Path | str, week: str, file: Path | str, user: str, *, db_url: str | None = None,
                  schema: str = "dedup") -> int:
    """Store the labels of an analyst's labelled sample file (Parquet/CSV); return how many were stored."""
    _, sample = load_audit(root, week)
    frame = read_label_file(file)
    if "week" in frame and frame["week"].notna().any() and set(frame["week"].dropna().astype(str)) - {week}:
        raise LabelError(f"{file}: rows of week(s) {sorted(set(frame['week'].dropna().astype(str)) - {week})}, expected {week}")
    merged = merge_with_sample(frame, sample, str(file))
    with open_label_store(root, db_url, schema) as store:
        return store.save(merged, user)


def render_week(root: Path | str, week: str, labels: pd.DataFrame, history: pd.DataFrame | None = None,
                week_link: Callable[[str], str] | None = None, **kwargs: object) -> str:
    """Re-render a written audit with current labels (the UI does this on every page view); the trends
    link each week through `week_link` (default: the reports' relative file links)."""
    from dedup_tasks.audit.trends import default_week_link

    data, sample = load_audit(root, week)
    if history is not None:
        data["history_labels"] = _jsonable(history[history["week"] != week][["sample_id", "kind", "layer", "band", "label"]])
    trends = trends_html(trend_table(root, week, history if history is not None else pd.DataFrame(columns=LABEL_COLUMNS)),
                         week, week_link or default_week_link)
    return render_report(data, sample, labels, trends=trends, **kwargs)  # type: ignore[arg-type]


def run_for_interval(data_interval_start: datetime, params: dict | None = None) -> dict:
    """The DAG's one call: audit the ISO week the run's data interval starts in; returns paths and counts.

    Config (root, DSN, schema) comes from DedupConfig as everywhere else; DAG params may override
    root, per_stratum, near_miss_per_layer and target_precision.
    """
    from dedup_tasks.audit.weeks import week_of
    from dedup_tasks.config import run_config

    params = {k: v for k, v in (params or {}).items() if v is not None}
    config = run_config({"root": params.get("root")})  # confined to the data root, as the hourly DAG's
    kwargs = {k: params[k] for k in ("per_stratum", "near_miss_per_layer", "target_precision") if k in params}
    result = run_audit(Path(config.root).resolve(), week_of(data_interval_start), db_url=config.db_url,
                       schema=config.db_schema, **kwargs)
    return result.to_dict()
