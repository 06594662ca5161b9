"""The threshold search of `audit recommend` on hand-made labels (no database)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dedup_tasks.audit.metrics import wilson_interval
from dedup_tasks.audit.recommend import MIN_LABELS, _setting_groups, best_threshold


def test_similarity_tightens_past_the_not_duplicates_and_rounds_inside_the_gap():
    # 30 duplicates at 0.85-0.99, 10 "not duplicate" at 0.70-0.79.
    scores = np.r_[np.linspace(0.853, 0.99, 30), np.linspace(0.70, 0.79, 10)]
    dup = np.r_[np.ones(30, bool), np.zeros(10, bool)]
    found = best_threshold(scores, dup, distance=False, target=0.85)
    assert found is not None and (found.dropped, found.duplicates) == (30, 30)
    assert found.threshold == 0.853 and found.low == wilson_interval(30, 30)[0]
    # One more pair would be a "not duplicate": the bound would fall below the target.
    assert wilson_interval(30, 31)[0] < 0.85


def test_similarity_loosens_over_duplicate_near_misses_and_stops_at_the_first_bad_stretch():
    scores = np.r_[np.linspace(0.8, 0.99, 40), np.linspace(0.62, 0.69, 20), np.linspace(0.50, 0.60, 10)]
    dup = np.r_[np.ones(60, bool), np.zeros(10, bool)]
    found = best_threshold(scores, dup, distance=False, target=0.92)
    assert found is not None and found.dropped == 60 and found.threshold == 0.62
    # "Drops the most while the bound holds": at 0.90 one "not duplicate" more still keeps it (60/61).
    looser = best_threshold(scores, dup, distance=False, target=0.90)
    assert looser is not None and (looser.dropped, looser.threshold) == (61, 0.6) and looser.low >= 0.90


def test_distance_drops_at_or_below_and_returns_whole_distances():
    scores = np.array([1] * 10 + [2] * 10 + [3] * 10 + [4] * 8 + [5] * 6, float)
    dup = np.array([True] * 38 + [False] * 6)
    found = best_threshold(scores, dup, distance=True, target=0.85)
    assert found is not None and found.threshold == 4 and found.dropped == 38
    # All "not duplicate" in the closest band: no threshold reaches the target.
    assert best_threshold(scores, ~dup, distance=True, target=0.5) is None


def test_semantic_gets_a_setting_per_language_that_has_one_the_others_share_semantic_threshold():
    pairs = pd.DataFrame({"layer": ["semantic"] * 3 + ["minhash"] * 2, "lang": ["en", "zh", "de", "en", "zh"]})
    groups = _setting_groups(pairs)
    assert ("semantic_threshold_en", "semantic", ["en"]) in groups
    assert ("semantic_threshold_zh", "semantic", ["zh"]) in groups
    assert ("semantic_threshold", "semantic", ["de"]) in groups
    assert ("minhash_threshold", "minhash", None) in groups  # one MinHash threshold for every language
    assert MIN_LABELS == 10
