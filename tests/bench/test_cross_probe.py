"""The dev-only threshold rule of bench.cross_probe (the probe itself trains a model: not a unit test)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from bench.cross_probe import _tail_threshold


def test_the_tail_threshold_is_set_by_the_hardest_datasets_negatives() -> None:
    rng = np.random.default_rng(0)
    easy, hard = rng.normal(-4.0, 1.0, 400), rng.normal(0.0, 1.0, 100)
    score = np.concatenate([easy, hard, rng.normal(5.0, 1.0, 50)])
    dup = np.concatenate([np.zeros(500, bool), np.ones(50, bool)])
    dataset = np.array(["easy"] * 400 + ["hard"] * 100 + ["hard"] * 50)
    t = _tail_threshold(score, dup, dataset, 0.005)
    expected = hard.mean() + NormalDist().inv_cdf(0.995) * hard.std(ddof=1)
    assert abs(t - expected) < 1e-9
    # A pooled fit would sit far lower: the easy negatives would hide the hard ones.
    pooled = score[~dup].mean() + NormalDist().inv_cdf(0.995) * score[~dup].std(ddof=1)
    assert t > pooled + 0.5
