"""Precision, Wilson intervals, threshold recommendations and kept rows' notes on known decisions."""

from __future__ import annotations

import pandas as pd
import pytest

from dedup_tasks.audit.metrics import (
    kept_notes,
    normalize_label,
    precision_table,
    recommend_thresholds,
    wilson_interval,
)


def test_wilson_known_values():
    # Reference values (Wilson 1927; e.g. statsmodels proportion_confint(method="wilson")).
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == 1.0
    low, high = wilson_interval(0, 5)
    assert low == 0.0 and high == pytest.approx(0.4345, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def _labels(spec: dict[tuple[str, str], tuple[int, int]], kind: str = "drop") -> pd.DataFrame:
    rows = []
    for (layer, band), (dups, n) in spec.items():
        for i in range(n):
            rows.append({"sample_id": f"{layer}{band}{i}", "kind": kind, "layer": layer, "band": band,
                         "label": "duplicate" if i < dups else "not duplicate"})
    return pd.DataFrame(rows)


def test_precision_table():
    labels = _labels({("minhash", "0.80-0.85"): (6, 8), ("simhash", "d=0"): (5, 5)})
    labels.loc[len(labels)] = {"sample_id": "x", "kind": "drop", "layer": "simhash", "band": "d=0", "label": None}
    table = precision_table(labels).set_index(["layer", "band"])
    row = table.loc[("minhash", "0.80-0.85")]
    assert (row["n"], row["duplicates"], row["precision"]) == (8, 6, 0.75)
    assert (row["low"], row["high"]) == pytest.approx(wilson_interval(6, 8))
    assert table.loc[("simhash", "d=0"), "n"] == 5  # the blank label is not counted


def test_recommended_threshold_constructed_case():
    labels = _labels({
        ("minhash", "0.95-1.00"): (10, 10),
        ("minhash", "0.90-0.95"): (20, 20),
        ("minhash", "0.85-0.90"): (7, 10),
        ("minhash", "0.80-0.85"): (2, 10),
        ("simhash", "d=0"): (10, 10),
        ("simhash", "d=1"): (10, 10),
        ("simhash", "d=2"): (9, 10),
        ("simhash", "d=3"): (5, 10),
    })
    pops = pd.DataFrame([
        {"layer": "minhash", "band": b, "count": 100} for b in ("0.95-1.00", "0.90-0.95", "0.85-0.90", "0.80-0.85")
    ] + [{"layer": "simhash", "band": b, "count": c} for b, c in (("d=0", 100), ("d=1", 100), ("d=2", 10), ("d=3", 100))]
      + [{"layer": "url", "band": "all", "count": 5}])
    recs = recommend_thresholds(labels, pops, target=0.98)
    assert recs["minhash"].threshold == 0.90
    assert recs["minhash"].precision == 1.0
    # simhash d=2: (100 + 100 + 10 * 0.9) / 210 = 0.9952 >= 0.98 thanks to the population weights; d=3 is not.
    assert recs["simhash"].threshold == 2.0
    assert recs["simhash"].precision == pytest.approx(209 / 210)
    assert recs["url"].threshold is None
    assert recommend_thresholds(labels, pops, target=0.999)["minhash"].threshold == 0.90
    strict = recommend_thresholds(_labels({("minhash", "0.95-1.00"): (9, 10)}), pops, target=0.98)
    assert strict["minhash"].threshold is None and "no labelled band" in strict["minhash"].note


def test_normalize_label():
    assert normalize_label("Duplicate") == "duplicate"
    assert normalize_label("not duplicate") == "not_duplicate"
    assert normalize_label(0) == "not_duplicate"
    assert normalize_label("") is None
    with pytest.raises(ValueError):
        normalize_label("maybe")


def test_kept_notes_count_kept_rows_per_note():
    budget = "rewrite candidate not confirmed: over the batch's budget of 300 sketch pairs (semantic_sketch_pair_budget)"
    update = "url seen in an earlier batch with other content: kept as an update"
    decisions = pd.DataFrame([
        # doc_id, hour, action, reason
        ("a", "2026-12-01T00", "keep", budget),
        ("b", "2026-12-01T01", "keep", f"{update}; {budget}"),  # two notes: counted under each
        ("c", "2026-12-01T01", "keep", budget),
        ("d", "2026-12-01T02", "keep", update),
        ("e", "2026-12-01T02", "keep", None),
        ("f", "2026-12-01T02", "drop", budget),  # a drop's reason is not a kept row's note
        ("g", "2026-12-01T02", "keep", f"{update}; {update}"),  # one row, one count per note
    ], columns=["doc_id", "hour", "action", "reason"])
    notes = kept_notes(decisions)  # most rows first, then by note
    assert notes.to_dict("records") == [
        {"note": budget, "rows": 3, "hours": 2, "busiest hour": "2026-12-01T01", "rows that hour": 2},
        {"note": update, "rows": 3, "hours": 2, "busiest hour": "2026-12-01T02", "rows that hour": 2},
    ]
    # A tie for the busiest hour names the earliest.
    tie = kept_notes(decisions[decisions["doc_id"].isin(["a", "c"])])
    assert tie.to_dict("records") == [
        {"note": budget, "rows": 2, "hours": 2, "busiest hour": "2026-12-01T00", "rows that hour": 1},
    ]
    assert kept_notes(decisions[decisions["reason"].isna()]).empty
    assert kept_notes(decisions.iloc[:0]).empty
