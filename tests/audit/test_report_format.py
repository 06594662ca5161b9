"""The report's formatting (#12): integer counts, threshold labels inside the chart, pairs collapsed."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from dedup_tasks.audit.report import Safe, safe_column, svg_histogram, table_html


def test_counts_print_as_integers_even_with_gaps():
    # A layer with no drops on a site is NaN after the JSON round trip: the column turns float.
    frame = pd.DataFrame({"site": ["a", "b"], "rows": [128, 7], "minhash": [128.0, np.nan], "rate": [0.5, 0.25],
                          "precision": [1.0, 0.5]})
    page = table_html(frame, left=["site"])
    assert "128.000" not in page and ">128<" in page and ">–<" in page
    assert ">50.0%<" in page and ">1.000<" in page  # fractions keep their digits


def test_cells_are_escaped_unless_the_renderer_built_them():
    frame = pd.DataFrame({"lang": ["<svg onload=x>"]})
    frame = frame.assign(chart=safe_column([Safe("<svg xmlns='x'></svg>")], frame.index))
    page = table_html(frame)
    assert "&lt;svg onload=x&gt;" in page and "<svg xmlns='x'></svg>" in page


def test_threshold_label_stays_inside_the_chart():
    edges = [round(0.9 + 0.02 * i, 4) for i in range(7)]
    svg = svg_histogram(edges, [1, 2, 3, 4, 5, 6], 0.975, "semantic")
    width = float(re.search(r'width="(\d+)"', svg).group(1))
    text = re.search(r'<text x="([\d.]+)"( text-anchor="end")? y="16"[^>]*>threshold 0.975</text>', svg)
    assert text, svg
    x, anchored_end = float(text.group(1)), bool(text.group(2))
    # Right-aligned at the line, or starting at the line with room for its ~15 characters.
    assert anchored_end or x + 6 * len("threshold 0.975") <= width


def test_report_collapses_sampled_pairs_per_stratum(week_root):
    from dedup_tasks.audit.run import run_audit

    result = run_audit(week_root, "2026-W49", use_labels=False, per_stratum=3)
    page = (week_root / "audit" / "week=2026-W49" / "report.html").read_text()
    assert result is not None
    strata = re.findall(r'<details class="stratum"', page)
    pairs = re.findall(r'<div class="pair"', page)
    assert len(strata) >= 3 and len(pairs) > len(strata)
    assert "<details open" not in page
    # Every pair sits inside a stratum: the page before the first <details> has none.
    assert '<div class="pair"' not in page[: page.index("<details")]
    assert not re.search(r"\d\.000<", page.split("<h2>Score histograms")[0])
