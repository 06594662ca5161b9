"""Self-contained HTML report: inline CSS and SVG only (no CDN, no scripts), so it opens from a file,
an e-mail attachment or behind the Airflow UI alike."""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from dedup_tasks.audit.sampling import DISTANCE_LAYERS, band_order

LAYER_COLORS = {"url": "#4e79a7", "exact": "#f28e2b", "simhash": "#e15759", "minhash": "#76b7b2", "semantic": "#59a14f"}
MAX_DIFF_CHARS = 4000
LABEL_CHAR_PX = 6.0  # a generous width of one 10px sans-serif character, for label placement
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
_SENTENCE = re.compile(r"[^.!?。！？\n]*(?:[.!?。！？]+|\n+|$)\s*")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1280px;padding:16px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.note{color:#666;font-size:13px}
.pair{border:1px solid #ccc;border-radius:6px;margin:14px 0;padding:8px}
.pair h3{font-size:14px;margin:0 0 6px}.cols{display:grid;grid-template-columns:1fr 1fr;gap:10px}
.txt{white-space:pre-wrap;word-break:break-word;font:12px/1.4 ui-monospace,Menlo,monospace;background:#fafafa;
padding:6px;max-height:320px;overflow:auto;border:1px solid #eee}
del{background:#ffd7d5;text-decoration:none}ins{background:#ccffd8;text-decoration:none}
.label{font-weight:bold}.dup{color:#1a7f37}.notdup{color:#cf222e}.none{color:#888}
form.lab{display:inline}button{margin-left:6px;cursor:pointer}.legend span{display:inline-block;margin-right:12px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px}
table.trends td{padding:1px 6px}p.weeks a{margin:0 2px}pre.cmd{background:#f6f8fa;padding:6px;white-space:pre-wrap}
details.stratum{margin:6px 0}details.stratum>summary{cursor:pointer;font-weight:bold;padding:4px 0}
"""


class Safe(str):
    """Markup the renderer built itself (its SVG charts, label buttons): written into a page as it is.

    Everything else that reaches a page is escaped, whatever it looks like: a cell's value comes from
    the crawl (lang, URL host, doc_id) and may hold markup. Only code in this module makes a Safe.
    """

    __slots__ = ()


def safe_column(values: Iterable[Safe], index: pd.Index) -> pd.Series:
    """A column of renderer-built markup. Object dtype: pandas 3 would turn a list of str into its
    string dtype and lose the Safe type, and the cells would (safely, but uselessly) be escaped."""
    return pd.Series(list(values), index=index, dtype=object)


def esc(value: Any) -> str:
    if isinstance(value, Safe):
        return value
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return html.escape(str(value))


def _fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, Safe):
        return value
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return esc(value)


# Columns that hold fractions even when every value happens to be whole (a precision of 1.0).
FRACTION_COLUMNS = frozenset({"precision", "low", "high", "rate", "score", "suspect_score"})


def _count_column(column: pd.Series) -> bool:
    """A column of counts: integer typed, or float only because pandas filled a gap with NaN."""
    if column.name in FRACTION_COLUMNS or pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_integer_dtype(column):
        return True
    if not pd.api.types.is_float_dtype(column):
        return False
    values = column.dropna().to_numpy()
    return len(values) > 0 and bool(np.all(values == np.round(values)))


def _fmt_count(value: Any) -> str:
    return "–" if value is None or pd.isna(value) else f"{int(value):d}"


def tokens(text: str, lang: str | None) -> list[str]:
    """Diff units: characters for Chinese/Japanese (no spaces between words), words otherwise."""
    if (lang or "").lower().startswith(("zh", "ja")) or _CJK.search(text[:500] or ""):
        return list(text)
    return _WORD.findall(text)


def _segments(text: str) -> list[str]:
    """Sentences (keeping their terminators and following space): the coarse level of the diff."""
    return [m for m in _SENTENCE.findall(text) if m]


def diff_html(left: str | None, right: str | None, lang: str | None = None) -> tuple[str, str]:
    """Both texts as HTML with what only the left has in <del> and what only the right has in <ins>.

    Two levels: sentences first, then words (or characters for Chinese) inside changed sentences.
    A single word-level SequenceMatcher over a whole article is quadratic and took ~50 ms a pair.
    """
    a, b = (left or "")[:MAX_DIFF_CHARS], (right or "")[:MAX_DIFF_CHARS]
    out_a: list[str] = []
    out_b: list[str] = []
    sa, sb = _segments(a), _segments(b)
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, sa, sb, autojunk=False).get_opcodes():
        if op == "equal":
            text = html.escape("".join(sa[i1:i2]))
            out_a.append(text)
            out_b.append(text)
        else:
            _token_diff("".join(sa[i1:i2]), "".join(sb[j1:j2]), lang, out_a, out_b)
    more_a = "…" if left and len(left) > MAX_DIFF_CHARS else ""
    more_b = "…" if right and len(right) > MAX_DIFF_CHARS else ""
    return "".join(out_a) + more_a, "".join(out_b) + more_b


def _token_diff(a: str, b: str, lang: str | None, out_a: list[str], out_b: list[str]) -> None:
    ta, tb = tokens(a, lang), tokens(b, lang)
    # autojunk off: with it, frequent tokens (spaces, common characters) are ignored and the diff is noisy.
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes():
        xa, xb = html.escape("".join(ta[i1:i2])), html.escape("".join(tb[j1:j2]))
        if op == "equal":
            out_a.append(xa)
            out_b.append(xb)
        else:
            if xa:
                out_a.append(f"<del>{xa}</del>")
            if xb:
                out_b.append(f"<ins>{xb}</ins>")


# ---------------------------------------------------------------------------------------- charts
def svg_stacked_bars(rows: pd.DataFrame, key: str, layers: Iterable[str], title: str) -> Safe:
    """Drop rate per `key` value, one bar each, stacked by layer."""
    layers = [layer for layer in layers if layer in rows]
    if rows.empty or not layers:
        return Safe('<p class="note">no decisions</p>')
    n = len(rows)
    width, height, pad_l, pad_b = max(360, 26 * n + 60), 220, 44, 60
    bar_w = (width - pad_l - 10) / n
    top = max(0.05, float((rows[layers].sum(axis=1) / rows["rows"]).max()) * 1.1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img"><title>{esc(title)}</title>']
    plot_h = height - pad_b - 10
    for frac in (0, 0.5, 1):
        y = 10 + plot_h * (1 - frac)
        parts.append(f'<line x1="{pad_l}" x2="{width - 5}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
                     f'<text x="{pad_l - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{top * frac:.0%}</text>')
    for i, row in enumerate(rows.itertuples(index=False)):
        data = row._asdict()
        x = pad_l + i * bar_w
        y = 10 + plot_h
        for layer in layers:
            frac = float(data[layer]) / float(data["rows"]) if data["rows"] else 0.0
            h = plot_h * frac / top
            y -= h
            parts.append(f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{max(bar_w - 4, 1):.1f}" height="{h:.1f}" '
                         f'fill="{LAYER_COLORS.get(layer, "#999")}"><title>{esc(data[key])} {esc(layer)}: '
                         f'{int(data[layer])}/{int(data["rows"])}</title></rect>')
        label = esc(str(data[key])[-13:])
        parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{height - pad_b + 12}" font-size="9" '
                     f'transform="rotate(45 {x + bar_w / 2:.1f} {height - pad_b + 12})">{label}</text>')
    parts.append("</svg>")
    legend = "".join(f'<span><i class="sw" style="background:{LAYER_COLORS.get(layer, "#999")}"></i>{esc(layer)}</span>'
                     for layer in layers)
    return Safe("".join(parts) + f'<div class="legend">{legend}</div>')


def histogram(scores: pd.Series, layer: str) -> tuple[list[float], list[int]]:
    """Bin edges and counts: integer distances for SimHash, 0.02-wide bins for similarities."""
    values = scores.dropna().astype(float)
    if layer in DISTANCE_LAYERS:
        top = int(max(values.max() if len(values) else 0, 4))
        edges = [x - 0.5 for x in range(top + 2)]
    else:
        lo = min(0.4, float(values.min()) if len(values) else 0.4)
        lo = int(lo * 50) / 50
        edges = [round(lo + 0.02 * i, 4) for i in range(int(round((1.0 - lo) / 0.02)) + 2)]
    counts = pd.cut(values, edges, right=False, include_lowest=True).value_counts(sort=False).tolist()
    return edges, counts


def svg_histogram(edges: list[float], counts: list[int], threshold: float | None, layer: str) -> Safe:
    width, height, pad_l, pad_b = 420, 180, 40, 28
    plot_w, plot_h = width - pad_l - 10, height - pad_b - 10
    top = max(counts) if counts and max(counts) else 1
    lo, hi = edges[0], edges[-1]
    sx = lambda v: pad_l + (v - lo) / (hi - lo) * plot_w  # noqa: E731 - a local scale
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">'
             f'<title>{esc(layer)} score histogram</title>']
    for i, c in enumerate(counts):
        x0, x1 = sx(edges[i]), sx(edges[i + 1])
        h = plot_h * c / top
        parts.append(f'<rect x="{x0 + 0.5:.1f}" y="{10 + plot_h - h:.1f}" width="{max(x1 - x0 - 1, 1):.1f}" '
                     f'height="{h:.1f}" fill="{LAYER_COLORS.get(layer, "#999")}"><title>[{edges[i]:g}, '
                     f'{edges[i + 1]:g}): {c}</title></rect>')
    ticks = edges[:: max(1, len(edges) // 6)]
    for t in ticks:
        # Distance bins are centred on integers (edges at k - 0.5): label the centre.
        at, label = (t + 0.5, f"{t + 0.5:g}") if layer in DISTANCE_LAYERS else (t, f"{t:.2f}")
        if at <= hi:
            parts.append(f'<text x="{sx(at):.1f}" y="{height - 10}" font-size="10" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{pad_l - 4}" y="18" font-size="10" text-anchor="end">{top}</text>')
    if threshold is not None and not pd.isna(threshold):
        # A distance threshold drops "<= t", so the line sits after bin t; a similarity one at t itself.
        tx = sx(threshold + 0.5 if layer in DISTANCE_LAYERS else threshold)
        # The label sits right of the line unless that would run past the chart's edge (semantic's
        # 0.975 is next to it): then it is right-aligned to the line's left instead of clipped.
        label = f"threshold {threshold:g}"
        fits_right = tx + 3 + LABEL_CHAR_PX * len(label) <= width
        anchor = f'x="{tx + 3:.1f}"' if fits_right else f'x="{tx - 3:.1f}" text-anchor="end"'
        parts.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="6" y2="{10 + plot_h}" stroke="#000" '
                     f'stroke-dasharray="4 3" stroke-width="1.5"/><text {anchor} y="16" font-size="10">'
                     f'{label}</text>')
    parts.append("</svg>")
    return Safe("".join(parts))


def svg_rate_bar(row: dict, layers: Iterable[str], width: int = 160) -> Safe:
    """One row's drops as a stacked bar by layer, 0-100% of its rows."""
    parts, x = [], 0.0
    for layer in layers:
        frac = float(row.get(layer, 0) or 0) / float(row["rows"]) if row["rows"] else 0.0
        parts.append(f'<rect x="{x:.1f}" y="1" width="{frac * width:.1f}" height="10" '
                     f'fill="{LAYER_COLORS.get(layer, "#999")}"/>')
        x += frac * width
    return Safe(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="12"><rect x="0" y="1" '
            f'width="{width}" height="10" fill="#f0f0f0"/>{"".join(parts)}</svg>')


def svg_interval(low: float, high: float, point: float) -> Safe:
    """A 120-px bar from 0 to 1 with the Wilson interval and the estimate."""
    w = 120
    return Safe(f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="12"><rect x="0" y="5" width="{w}" '
            f'height="2" fill="#eee"/><rect x="{low * w:.1f}" y="2" width="{max((high - low) * w, 1):.1f}" '
            f'height="8" fill="#9ecae1"/><circle cx="{point * w:.1f}" cy="6" r="3" fill="#08519c"/></svg>')


# ---------------------------------------------------------------------------------------- tables
def table_html(frame: pd.DataFrame, left: Iterable[str] = (), digits: int = 3) -> str:
    """An HTML table; every cell escaped unless the renderer built it (``Safe``); counts as integers."""
    left = set(left)
    counts = {c for c in frame.columns if _count_column(frame[c])}
    head = "".join(f'<th class="{"l" if c in left else ""}">{esc(c)}</th>' for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for c, v in zip(frame.columns, row, strict=True):
            # Escaped unless the renderer made it (Safe): a crawl value starting with "<svg" is text too.
            if c in counts:
                text = _fmt_count(v)
            elif c == "rate" and isinstance(v, float):
                text = f"{v:.1%}"
            else:
                text = _fmt(v, digits)
            cells.append(f'<td class="{"l" if c in left else ""}">{text}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _label_html(label: Any) -> str:
    if label == "duplicate":
        return '<span class="label dup">duplicate</span>'
    if label == "not_duplicate":
        return '<span class="label notdup">not duplicate</span>'
    return '<span class="label none">unlabelled</span>'


def pair_html(row: dict, label: Any, label_url: str | None) -> str:
    left, right = diff_html(row.get("matched_text"), row.get("text"), row.get("lang"))
    sid = esc(row["sample_id"])
    buttons = ""
    if label_url:
        buttons = "".join(
            f'<form class="lab" method="post" action="{esc(label_url)}"><input type="hidden" name="sample_id" '
            f'value="{sid}"><button type="submit" name="label" value="{value}" data-sample="{sid}" '
            f'data-label="{value}">{text}</button></form>'
            for value, text in (("duplicate", "duplicate"), ("not_duplicate", "not duplicate"))
        )
    score = _fmt(row.get("score"))
    return (
        f'<div class="pair" id="s-{sid}" data-layer="{esc(row["layer"])}" data-band="{esc(row["band"])}"><h3>{esc(row["kind"])} · {esc(row["layer"])} · band {esc(row["band"])} · '
        f'score {score} (threshold {_fmt(row.get("threshold"))}) · {_label_html(label)}{buttons}</h3>'
        f'<div class="note">sample {sid} · lang {esc(row.get("lang"))} · {esc(row.get("reason"))}</div>'
        f'<div class="cols"><div><b>kept (earlier)</b> {esc(row.get("matched_batch_id"))} / '
        f'{esc(row.get("matched_doc_id"))}<br><span class="note">{esc(row.get("matched_url"))}</span><br>'
        f'<i>{esc(row.get("matched_title"))}</i><div class="txt">{left}</div></div>'
        f'<div><b>{"dropped" if row["kind"] == "drop" else "kept (near miss)"}</b> {esc(row.get("batch_id"))} / '
        f'{esc(row.get("doc_id"))}<br><span class="note">{esc(row.get("url"))}</span><br>'
        f'<i>{esc(row.get("title"))}</i><div class="txt">{right}</div></div></div></div>'
    )


def render_report(data: dict, sample: pd.DataFrame, labels: pd.DataFrame, label_url: str | None = None,
                  upload_url: str | None = None, nav: str = "", open_sample: str | None = None,
                  trends: str = "", beside_labels: str = "") -> str:
    """The week's report. `data` is what run_audit stores in audit.json; `labels` (sample_id, label)
    override the sample's label column; `label_url` adds the labelling buttons (the plugin).
    `trends` (trends.trends_html) follows the summary; `beside_labels` (the plugin's overlay
    recommendation) follows the precision table."""
    from dedup_tasks.audit.metrics import precision_table

    week = data["week"]
    current = dict(zip(labels["sample_id"], labels["label"], strict=True)) if not labels.empty else {}
    layers = data["layers"]
    out = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Dedup audit {esc(week)}</title>"
           f"<style>{CSS}</style></head><body>{nav}<h1>Dedup audit {esc(week)}</h1>"
           f'<p class="note">{data["rows"]} decisions in {len(data["hours"])} hourly batches '
           f'({esc(data["first_hour"])} … {esc(data["last_hour"])}), {data["dropped"]} dropped; sample of '
           f'{len(sample)} pairs (seeded by the week), generated {esc(data["generated_at"])}.</p>']
    out.append(trends)
    out.append("<h2>Drop rate per hour and layer</h2>")
    out.append(svg_stacked_bars(pd.DataFrame(data["by_hour"]), "hour", layers, "drop rate per hour"))
    for key, title in (("site", "Drop rate per site (top 25 by rows)"), ("lang", "Drop rate per language")):
        frame = pd.DataFrame(data[f"by_{key}"])
        out.append(f"<h2>{title}</h2>")
        if not frame.empty:
            frame = frame.assign(chart=safe_column((svg_rate_bar(row, layers) for row in frame.to_dict("records")),
                                                     frame.index))
        out.append(table_html(frame, left=[key, "chart"]) if not frame.empty else '<p class="note">none</p>')
    if "kept_notes" in data:  # audits written before the notes were counted have none to show
        out.append(kept_notes_html(pd.DataFrame(data["kept_notes"])))
    out.append("<h2>Score histograms</h2><p class=note>Scores of drops; dashed line: the threshold in force. "
               "Kept rows carry no score today, so the region just outside the threshold is empty.</p>")
    for layer, hist in data["histograms"].items():
        out.append(f"<h3>{esc(layer)}</h3>" + svg_histogram(hist["edges"], hist["counts"], hist["threshold"], layer))
    # Precision from every label up to this week: the current sample's labels plus earlier weeks'.
    history = pd.DataFrame(data.get("history_labels", []))
    sample_labels = sample[["sample_id", "kind", "layer", "band"]].assign(label=[current.get(s) for s in sample["sample_id"]])
    pooled = pd.concat([history[~history["sample_id"].isin(sample["sample_id"])] if not history.empty else history,
                        sample_labels], ignore_index=True) if not history.empty else sample_labels
    prec = precision_table(pooled)
    out.append("<h2>Estimated precision per layer and band</h2><p class=note>Labelled drops of this and earlier "
               "weeks; Wilson 95% intervals.</p>")
    if prec.empty:
        out.append('<p class="note">no labels yet</p>')
    else:
        prec = prec.assign(interval=safe_column((svg_interval(lo, hi, p) for lo, hi, p in
                                                 zip(prec["low"], prec["high"], prec["precision"], strict=True)), prec.index))
        out.append(table_html(prec, left=["layer", "band"]))
    out.append(beside_labels)
    out.append(recommendations_html(pooled, pd.DataFrame(data["populations"]), data.get("target_precision", 0.98)))
    out.append("<h2>Near misses</h2>")
    out.append(f'<p class="note">{esc(data["near_miss_note"])}</p>')
    out.append("<h2>Sampled pairs</h2>")
    strata = sample.groupby(["kind", "layer", "band"]).size().reset_index(name="sampled") if not sample.empty else sample
    if not sample.empty:
        out.append(table_html(strata, left=["kind", "layer", "band"]))
    if upload_url:
        out.append(f'<form method="post" action="{esc(upload_url)}" enctype="multipart/form-data">Upload labelled '
                   f'sample (Parquet/CSV with sample_id, label): <input type="file" name="file" '
                   f'accept=".parquet,.csv"><button type="submit">upload</button></form>')
    ordered = sample.assign(_o=[band_order(layer, band) for layer, band in zip(sample["layer"], sample["band"], strict=True)])
    ordered = ordered.sort_values(["kind", "layer", "_o", "sample_id"]) if not ordered.empty else ordered
    out.append(pairs_html(ordered, current, label_url, open_sample))
    out.append("</body></html>")
    return "\n".join(out)


def pairs_html(ordered: pd.DataFrame, current: dict, label_url: str | None, open_sample: str | None = None) -> str:
    """The sampled pairs, collapsed in one ``<details>`` per (kind, layer, band): a week samples a few
    hundred pairs (1 MB of diffs); the reader opens the stratum being labelled. ``open_sample``'s
    stratum is rendered open: labelling returns to ``?open=<id>#s-<id>``, so the labelled pair is
    shown whether or not the browser expands a closed ``<details>`` for a fragment."""
    if ordered.empty:
        return ""
    out = []
    for (kind, layer, band), group in ordered.groupby(["kind", "layer", "band"], sort=False):
        labelled = sum(current.get(sid, label) in ("duplicate", "not_duplicate")
                       for sid, label in zip(group["sample_id"], group.get("label", [None] * len(group)), strict=True))
        is_open = " open" if open_sample is not None and (group["sample_id"] == open_sample).any() else ""
        out.append(f'<details class="stratum"{is_open} data-kind="{esc(kind)}" data-layer="{esc(layer)}" data-band="{esc(band)}">'
                   f"<summary>{esc(kind)} · {esc(layer)} · band {esc(band)}: {len(group)} pairs, "
                   f"{labelled} labelled</summary>")
        out.extend(pair_html(row, current.get(row["sample_id"], row.get("label")), label_url)
                   for row in group.to_dict("records"))
        out.append("</details>")
    return "\n".join(out)


def kept_notes_html(notes: pd.DataFrame) -> str:
    """The week's kept rows that carry a note, counted per note."""
    head = ("<h2>Kept rows with a note</h2><p class=note>Kept rows whose decision says why they were kept "
            "(an update of a known URL, an invalid URL) or what was not tested (a rewrite candidate left "
            "unread over the batch's budget, a text too long to compare whole, an earlier partition that "
            "could not be read). Untested rows are judged by rerunning their hour with the setting the note "
            "names raised, or by re-deduplicating the archive.</p>")
    return head + (table_html(notes, left=["note", "busiest hour"]) if not notes.empty else '<p class="note">none</p>')


def recommendations_html(labels: pd.DataFrame, populations: pd.DataFrame, target: float) -> str:
    from dedup_tasks.audit.metrics import recommend_thresholds

    pops = populations if not populations.empty else pd.DataFrame(columns=["layer", "band", "count"])
    recs = recommend_thresholds(labels, pops, target)
    rows = [{"layer": r.layer, "recommended threshold": r.threshold, "precision": r.precision, "low": r.low,
             "high": r.high, "labelled": r.labelled, "note": r.note} for r in recs.values()]
    frame = pd.DataFrame(rows, columns=["layer", "recommended threshold", "precision", "low", "high", "labelled", "note"])
    return (f"<h2>Recommended thresholds (target precision {target:.2f})</h2><p class=note>Band edges only, each "
            "band's labelled precision weighted by its population. `audit recommend` searches every labelled "
            "score, near misses included, against a Wilson lower bound, and writes the DEDUP_CONFIG overlay "
            "(docs/audit.md).</p>"
            + (table_html(frame, left=["layer", "note"]) if rows else '<p class="note">no data</p>'))


def render_whatif(week: str, result: Any, current: dict[str, float | None], action_url: str, nav: str = "",
                  max_rows: int = 500) -> str:
    """The what-if page: a threshold form, per-layer counts before/after, the changed decisions, the limits."""
    inputs = "".join(
        f'<label>{esc(layer)} <input name="{esc(layer)}" value="{esc(result.thresholds.get(layer, ""))}" '
        f'placeholder="{esc(current.get(layer))}" size="6"></label> '
        for layer in ("simhash", "minhash", "semantic")
    )
    changes = result.changes.head(max_rows)
    more = f"<p class=note>first {max_rows} of {len(result.changes)} changes</p>" if len(result.changes) > max_rows else ""
    notes = "".join(f"<li>{esc(n)}</li>" for n in result.notes)
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>What-if {esc(week)}</title>"
        f"<style>{CSS}</style></head><body>{nav}<h1>What-if {esc(week)}</h1>"
        f'<form method="get" action="{esc(action_url)}">Thresholds (current in grey): {inputs}'
        f'<button type="submit">replay</button></form>'
        f"<p class=note>Replayed from the stored scores of the week's decisions; no fingerprint is recomputed.</p>"
        f"<h2>Per layer</h2>{table_html(result.per_layer, left=['layer'])}"
        f"<h2>Decisions that would change ({len(result.changes)})</h2>{more}"
        f"{table_html(changes, left=['doc_id', 'batch_id', 'layer', 'matched_doc_id', 'matched_batch_id'])}"
        f"<h2>Limits</h2><ul>{notes}</ul></body></html>"
    )
