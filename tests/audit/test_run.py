"""The weekly audit end to end: CLI -> ROOT/audit/week=.../ with sample.parquet and a self-contained report."""

from __future__ import annotations

import json
import re

import pandas as pd

from dedup_tasks.audit.report import diff_html
from dedup_tasks.audit.run import run_audit
from dedup_tasks.audit.sampling import SAMPLE_COLUMNS
from dedup_tasks.cli import main
from dedup_tasks.config import DedupConfig
from tests.audit.synth import HOURS, WEEK, config_for, generate_rows, run_week


def test_cli_writes_sample_and_report(week_root, capsys):
    assert main(["audit", "--root", str(week_root), "--week", "2026-W49", "--no-labels", "--per-stratum", "5"]) == 0
    out_dir = week_root / "audit" / "week=2026-W49"
    assert "report:" in capsys.readouterr().out
    sample = pd.read_parquet(out_dir / "sample.parquet")
    assert list(sample.columns) == SAMPLE_COLUMNS
    assert sample["label"].isna().all()
    drops = sample[sample["kind"] == "drop"]
    assert drops.groupby(["layer", "band"]).size().max() <= 5
    # Kept rows whose best candidate fell short are sampled as near misses, capped per layer.
    near = sample[sample["kind"] == "near_miss"]
    assert len(near) > 0 and near.groupby("layer").size().max() <= 20
    assert near["matched_doc_id"].notna().all()
    assert {"url", "exact", "simhash", "minhash"} <= set(drops["layer"])
    assert sample[["text", "matched_text"]].notna().all().all()

    page = (out_dir / "report.html").read_text()
    # Self-contained: no external scripts, styles, images or fonts.
    assert not re.search(r"<script|<link|<img|@import|src=\"http|url\(http", page)
    assert page.count("<svg") >= 3  # drop rates per hour + the simhash and minhash histograms
    # Histogram threshold marks: the thresholds the decisions recorded (L3's is 0.7 since issue #17).
    assert f"threshold {DedupConfig().minhash_threshold:g}" in page and "threshold 3" in page
    assert "Drop rate per site" in page and "zh.example.cn" in page and "Drop rate per language" in page
    assert "Recommended thresholds" in page
    assert "near misses cannot be sampled" not in page  # the cascade records them now
    assert page.count('class="pair"') == len(sample)
    # Rerun: same sample (seeded by the week).
    assert main(["audit", "--root", str(week_root), "--week", "2026-W49", "--no-labels", "--per-stratum", "5"]) == 0
    assert pd.read_parquet(out_dir / "sample.parquet")["sample_id"].tolist() == sample["sample_id"].tolist()


def test_the_report_counts_the_notes_of_kept_rows(tmp_path):
    rows = generate_rows()
    first = rows[HOURS[0]][0]
    # Hour 01: a known URL with other content (kept as an update) and a page of a title only (too short for
    # SimHash alone to drop it).
    rows[HOURS[1]] += [
        {**first, "doc_id": "update", "content": first["content"][::-1]},
        {**first, "doc_id": "title-only", "url": "https://news.example.com/title-only", "content": ""},
    ]
    run_week(tmp_path, config_for(tmp_path), rows=rows)
    result = run_audit(tmp_path, WEEK, use_labels=False)
    notes = {n["note"]: n for n in json.loads((result.directory / "audit.json").read_text())["kept_notes"]}
    update = "url seen in an earlier batch with other content: kept as an update"
    assert notes[update]["rows"] == 1 and notes[update]["busiest hour"] == HOURS[1]
    assert notes["short text: not dropped on SimHash alone"]["rows"] == 1
    page = result.report.read_text()
    assert "Kept rows with a note" in page and update in page


def test_cli_errors(week_root, capsys):
    assert main(["audit", "--root", str(week_root), "--week", "2026-49"]) == 2
    assert "ISO week" in capsys.readouterr().err
    assert main(["audit", "whatif", "--root", str(week_root), "--week", "2026-W49", "--threshold", "minhash"]) == 2


def test_cli_whatif(week_root, tmp_path, capsys):
    out = tmp_path / "changes.csv"
    # Options before the action word count too.
    assert main(["audit", "--root", str(week_root), "--week", "2026-W49", "whatif", "--threshold", "minhash=0.9",
                 "--out", str(out)]) == 0
    changes = pd.read_csv(out)
    assert len(changes) > 0 and (changes["score"] < 0.9).all() and set(changes["layer"]) == {"minhash"}


def test_diff_highlighting_words_and_chinese_chars():
    left, right = diff_html("The cat sat. On the mat today.", "The cat sat. On a mat today!")
    assert left == "The cat sat. On <del>the</del> mat today<del>.</del>"
    assert right == "The cat sat. On <ins>a</ins> mat today<ins>!</ins>"
    left, right = diff_html("我们今天去公园玩。", "我们明天去公园玩。", "zh")
    assert left == "我们<del>今</del>天去公园玩。" and right == "我们<ins>明</ins>天去公园玩。"
    assert diff_html("<b>x</b>", "<b>y</b>")[0].startswith("&lt;")  # escaped
