"""Audit trends: the last TREND_WEEKS weeks per layer and language, so a drift shows at a glance.

Per week, layer and language: the drop rate (the layer's drops over the language's rows, from each
week's audit.json), the labelled precision of the layer's drops with its Wilson 95% interval, and how
many pairs were labelled (labels of that week's sample, from the label store). Weeks without a written
audit are gaps. Drawn as small inline SVG charts (report.py's rules: no script, every crawl value
escaped), each week's label linking to its report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pandas as pd

from dedup_tasks.audit.metrics import DUPLICATE, normalize_label, wilson_interval
from dedup_tasks.audit.report import LAYER_COLORS, Safe, esc
from dedup_tasks.audit.weeks import audit_dir, parse_week, week_of

TREND_WEEKS = 8
TREND_COLUMNS = ["week", "layer", "lang", "rows", "drops", "rate", "labelled", "duplicates", "precision", "low", "high"]


def previous_weeks(week: str, n: int = TREND_WEEKS) -> list[str]:
    """The `n` ISO weeks ending with `week`, oldest first."""
    monday, _ = parse_week(week)
    return [week_of(monday - timedelta(weeks=i)) for i in range(n - 1, -1, -1)]


def trend_table(root: Path | str, week: str, labels: pd.DataFrame,
                current: tuple[dict, pd.DataFrame] | None = None) -> pd.DataFrame:
    """One row per (week, layer, language) of the last TREND_WEEKS weeks that have an audit.

    `labels`: the label store's rows (week, sample_id, kind, layer, label, ...) of those weeks;
    `current`: this week's audit data and sample when they are not written yet (run_audit renders
    before it writes).
    """
    rows = []
    for w in previous_weeks(week):
        directory = audit_dir(root, w)
        if w == week and current is not None:
            data, sample = current
            langs_of = dict(zip(sample["sample_id"], sample["lang"].fillna("unknown").astype(str), strict=True))
        elif (directory / "audit.json").exists():
            data = json.loads((directory / "audit.json").read_text())
            langs_of = _sample_langs(directory / "sample.parquet")
        else:
            continue
        mine = labels[labels["week"] == w] if not labels.empty else labels
        labelled = _labelled_by_layer_lang(mine, langs_of)
        for entry in data.get("by_lang", []):
            lang = str(entry.get("lang"))
            for layer in data.get("layers", []):
                n_rows = int(entry.get("rows") or 0)
                drops = int(entry.get(layer) or 0)
                k, n = labelled.get((layer, lang), (0, 0))
                low, high = wilson_interval(k, n) if n else (None, None)
                rows.append({"week": w, "layer": layer, "lang": lang, "rows": n_rows, "drops": drops,
                             "rate": drops / n_rows if n_rows else 0.0, "labelled": n, "duplicates": k,
                             "precision": k / n if n else None, "low": low, "high": high})
    return pd.DataFrame(rows, columns=TREND_COLUMNS)


def _sample_langs(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    sample = pd.read_parquet(path, columns=["sample_id", "lang"])
    return dict(zip(sample["sample_id"], sample["lang"].fillna("unknown").astype(str), strict=True))


def _labelled_by_layer_lang(labels: pd.DataFrame, langs_of: dict[str, str]) -> dict[tuple[str, str], tuple[int, int]]:
    """(layer, lang) -> (labelled drops that are duplicates, labelled drops)."""
    if labels.empty:
        return {}
    drops = labels[labels["kind"] == "drop"]
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for sample_id, layer, label in zip(drops["sample_id"], drops["layer"], drops["label"], strict=True):
        value = normalize_label(label)
        if value is None:
            continue
        key = (str(layer), langs_of.get(sample_id, "unknown"))
        k, n = out.get(key, (0, 0))
        out[key] = (k + (value == DUPLICATE), n + 1)
    return out


# ---------------------------------------------------------------------------------------- charts
_W, _H, _PAD = 168, 44, 4


def _x(i: int, n: int) -> float:
    return _PAD + (i + 0.5) * (_W - 2 * _PAD) / n


def svg_rate_trend(values: list[float | None], weeks: list[str], color: str, title: str) -> Safe:
    """A line of drop rates (0 to the series' maximum), one point a week, gaps where there is no audit."""
    top = max([v for v in values if v is not None] or [0.0]) or 1.0
    n = len(values)
    y = lambda v: _H - _PAD - (_H - 2 * _PAD) * v / top  # noqa: E731 - a local scale
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{_W}" height="{_H}" role="img">'
             f"<title>{esc(title)}</title>"]
    path, pen = [], "M"
    for i, v in enumerate(values):
        if v is None:
            pen = "M"
            continue
        path.append(f"{pen}{_x(i, n):.1f},{y(v):.1f}")
        pen = "L"
    if path:
        parts.append(f'<path d="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="1.5"/>')
    for i, v in enumerate(values):
        if v is not None:
            parts.append(f'<circle cx="{_x(i, n):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"><title>{esc(weeks[i])}: '
                         f"{v:.1%}</title></circle>")
    parts.append(f'<text x="{_W - 2}" y="10" font-size="9" text-anchor="end">{top:.0%}</text></svg>')
    return Safe("".join(parts))


def svg_precision_trend(points: list[tuple[float, float, float] | None], weeks: list[str], title: str) -> Safe:
    """Labelled precision per week (0-1): the estimate as a dot, its Wilson interval as a bar."""
    n = len(points)
    y = lambda v: _H - _PAD - (_H - 2 * _PAD) * v  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{_W}" height="{_H}" role="img">'
             f'<title>{esc(title)}</title><line x1="0" x2="{_W}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#eee"/>']
    for i, p in enumerate(points):
        if p is None:
            continue
        est, low, high = p
        parts.append(f'<rect x="{_x(i, n) - 3:.1f}" y="{y(high):.1f}" width="6" height="{max(y(low) - y(high), 1):.1f}" '
                     f'fill="#9ecae1"/><circle cx="{_x(i, n):.1f}" cy="{y(est):.1f}" r="2.5" fill="#08519c">'
                     f"<title>{esc(weeks[i])}: {est:.3f} [{low:.3f}, {high:.3f}]</title></circle>")
    parts.append("</svg>")
    return Safe("".join(parts))


def svg_count_trend(counts: list[int], weeks: list[str], title: str) -> Safe:
    """Labels collected per week, as bars."""
    n = len(counts)
    top = max(counts or [0]) or 1
    bar = (_W - 2 * _PAD) / n * 0.6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{_W}" height="{_H}" role="img">'
             f"<title>{esc(title)}</title>"]
    for i, c in enumerate(counts):
        h = (_H - 2 * _PAD) * c / top
        parts.append(f'<rect x="{_x(i, n) - bar / 2:.1f}" y="{_H - _PAD - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                     f'fill="#bbb"><title>{esc(weeks[i])}: {c} labelled</title></rect>')
    if max(counts or [0]):
        parts.append(f'<text x="{_W - 2}" y="10" font-size="9" text-anchor="end">{top}</text>')
    parts.append("</svg>")
    return Safe("".join(parts))


def default_week_link(week: str) -> str:
    """A written report's link to another week's report, relative: ROOT/audit/week=W/report.html."""
    return f"../week={week}/report.html"


def trends_html(table: pd.DataFrame, week: str, link: Callable[[str], str] = default_week_link) -> str:
    """The trends section: one row per layer and language, three charts (drop rate, precision, labels)."""
    weeks = previous_weeks(week)
    head = (f"<h2>Trends: the last {len(weeks)} weeks</h2><p class=note>Per layer and language: drop rate, "
            "labelled precision of the layer's drops (dot; bar: Wilson 95% interval) and labels collected; "
            "one point a week, oldest left, gaps where a week has no audit.</p>")
    present = set(table["week"]) if not table.empty else set()
    nav = " · ".join(f'<a href="{esc(link(w))}">{esc(w)}</a>' if w in present and w != week else
                     (f"<b>{esc(w)}</b>" if w == week else f'<span class="none">{esc(w)}</span>') for w in weeks)
    out = [head, f'<p class="weeks">weeks: {nav}</p>']
    if table.empty:
        return "".join(out) + '<p class="note">no audited weeks yet</p>'
    rows = []
    for (layer, lang), group in table.groupby(["layer", "lang"], sort=True):
        by_week = group.set_index("week")
        rate = [float(by_week.at[w, "rate"]) if w in by_week.index else None for w in weeks]
        prec = [(float(by_week.at[w, "precision"]), float(by_week.at[w, "low"]), float(by_week.at[w, "high"]))
                if w in by_week.index and int(by_week.at[w, "labelled"]) > 0 else None for w in weeks]
        counts = [int(by_week.at[w, "labelled"]) if w in by_week.index else 0 for w in weeks]
        if not any(rate) and not any(counts):
            continue  # a layer that never dropped in this language: nothing to watch
        color = LAYER_COLORS.get(str(layer), "#999")
        rows.append(f'<tr data-layer="{esc(layer)}" data-lang="{esc(lang)}"><td class="l">{esc(layer)}</td>'
                    f'<td class="l">{esc(lang)}</td>'
                    f"<td>{svg_rate_trend(rate, weeks, color, f'{layer} {lang} drop rate')}</td>"
                    f"<td>{svg_precision_trend(prec, weeks, f'{layer} {lang} labelled precision')}</td>"
                    f"<td>{svg_count_trend(counts, weeks, f'{layer} {lang} labels')}</td></tr>")
    out.append('<table class="trends"><tr><th class="l">layer</th><th class="l">lang</th><th>drop rate</th>'
               "<th>labelled precision</th><th>labels</th></tr>" + "".join(rows) + "</table>")
    return "".join(out)
