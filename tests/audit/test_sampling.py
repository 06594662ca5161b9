"""Sampling: same week -> same sample; every non-empty stratum represented; caps respected."""

from __future__ import annotations

import pandas as pd
import pytest

from dedup_tasks.audit.sampling import band_of, draw_sample, near_miss_rows
from dedup_tasks.audit.weeks import decision_partitions, parse_week, week_of


def _decisions(n_per_stratum: dict[tuple[str, float | None], int]) -> pd.DataFrame:
    rows = []
    for (layer, score), n in n_per_stratum.items():
        for i in range(n):
            rows.append({"doc_id": f"{layer}-{score}-{i:03d}", "batch_id": f"2026-12-0{1 + i % 3}T0{i % 5}",
                         "action": "drop", "layer": layer, "matched_doc_id": f"m{i}", "matched_batch_id": "2026-11-30T00",
                         "score": score, "threshold": None, "reason": None})
    rows += [{"doc_id": f"k{i}", "batch_id": "2026-12-01T00", "action": "keep", "layer": None, "matched_doc_id": None,
              "matched_batch_id": None, "score": None, "threshold": None, "reason": None} for i in range(30)]
    return pd.DataFrame(rows)


STRATA = {("simhash", 0.0): 50, ("simhash", 1.0): 3, ("simhash", 3.0): 25, ("minhash", 0.82): 7,
          ("minhash", 0.97): 40, ("minhash", 0.91): 1, ("url", 1.0): 12, ("exact", 1.0): 60}


def test_band_of():
    assert band_of("simhash", 2.0) == "d=2"
    assert band_of("minhash", 0.8) == "0.80-0.85"
    assert band_of("minhash", 0.8499) == "0.80-0.85"
    assert band_of("minhash", 0.95) == "0.95-1.00"
    assert band_of("minhash", 1.0) == "0.95-1.00"
    assert band_of("minhash", 0.7) == "<0.80"
    assert band_of("url", 1.0) == band_of("exact", None) == "all"
    # A cross-encoder's logit is on no cosine band's scale: its drops form a stratum of their own.
    assert band_of("semantic", 0.95) == "0.94-0.96"
    assert band_of("semantic", 3.2, "cross_logit") == band_of("semantic", 0.95, "cross_logit") == "cross-encoder"
    # Nor is the mean of its probability and the aligned cosine, though it lies in [0, 1].
    assert band_of("semantic", 0.95, "cross_prob_cos") == "cross-encoder"


def test_cross_encoder_drops_are_sampled_in_their_own_stratum():
    decisions = _decisions({("semantic", 0.97): 4, ("semantic", 2.9): 3})
    decisions["score_kind"] = ["cross_logit" if s == 2.9 else "cosine" if a == "drop" else None
                               for s, a in zip(decisions["score"], decisions["action"], strict=True)]
    sample = draw_sample(decisions, "2026-W49", per_stratum=10)
    assert sample.groupby("band").size().to_dict() == {"0.96-0.98": 4, "cross-encoder": 3}


def test_same_week_same_sample_and_order_independent():
    decisions = _decisions(STRATA)
    a = draw_sample(decisions, "2026-W49", per_stratum=10)
    b = draw_sample(decisions.sample(frac=1.0, random_state=3), "2026-W49", per_stratum=10)
    assert a["sample_id"].tolist() == b["sample_id"].tolist()
    c = draw_sample(decisions, "2026-W50", per_stratum=10)
    assert set(c["sample_id"]) != set(a["sample_id"])  # the seed is the week


def test_every_stratum_represented_and_capped():
    decisions = _decisions(STRATA)
    sample = draw_sample(decisions, "2026-W49", per_stratum=10)
    counts = sample.groupby(["layer", "band"]).size().to_dict()
    expected = {(layer, band_of(layer, score)): min(10, n) for (layer, score), n in STRATA.items()}
    assert counts == expected
    assert (sample["kind"] == "drop").all()
    assert sample["sample_id"].is_unique


def test_near_misses_sampled_when_keeps_carry_candidates():
    decisions = _decisions({("minhash", 0.9): 5})
    keeps = decisions["action"] == "keep"
    decisions.loc[keeps, ["layer", "matched_doc_id", "matched_batch_id"]] = ["minhash", "mx", "2026-12-01T00"]
    decisions.loc[keeps, "score"] = [0.70 + 0.003 * i for i in range(int(keeps.sum()))]
    assert len(near_miss_rows(decisions)) == 30
    sample = draw_sample(decisions, "2026-W49", per_stratum=10, near_miss_per_layer=4)
    near = sample[sample["kind"] == "near_miss"]
    assert len(near) == 4 and set(near["band"]) == {"<0.80"}


def test_weeks():
    assert parse_week("2026-W49")[0].isoformat() == "2026-11-30"
    assert week_of(pd.Timestamp("2026-12-06T23:00Z")) == "2026-W49"
    assert week_of(pd.Timestamp("2026-12-07T00:00Z")) == "2026-W50"
    with pytest.raises(ValueError, match="ISO week"):
        parse_week("2026-49")


def test_week_partitions_and_texts(week_root, week_decisions):
    from dedup_tasks.audit.sampling import attach_texts, with_site_lang

    assert [b for b, _ in decision_partitions(week_root, "2026-W49")] == ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]
    assert decision_partitions(week_root, "2026-W50") == []
    enriched = with_site_lang(week_root, week_decisions)
    assert {"news.example.com", "zh.example.cn"} <= set(enriched["site"])
    sample = attach_texts(draw_sample(enriched, "2026-W49", per_stratum=3), week_root)
    assert sample["text"].notna().all() and sample["matched_text"].notna().all()
    cross = sample[sample["batch_id"] != sample["matched_batch_id"]]
    assert len(cross) > 0  # matched doc read from its own batch's partition
    assert sample["label"].isna().all()
