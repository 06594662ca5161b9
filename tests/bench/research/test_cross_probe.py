"""The dev-only threshold rule of bench.research.cross_probe (the probe itself trains a model: not a unit test)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from bench.research.cross_probe import _tail_threshold


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


def test_more_files_add_training_pairs_but_never_a_held_out_story_or_a_test_file() -> None:
    import pytest

    from bench.evaldata import eval_data_available, missing_reason

    if not eval_data_available("pairs"):
        pytest.skip(missing_reason("pairs"))
    from bench.research.train_pair_head import MORE_TRAIN_FILES, TRAIN_FILES, held_out_text, training_pairs

    a, b, y, counts = training_pairs("zh", random_pairs=False, stories_only=True)
    a2, b2, y2, counts2 = training_pairs("zh", random_pairs=False, stories_only=True, more_files=True)
    assert len(a2) > len(a) and set(counts2) == {n for n, _, _ in TRAIN_FILES["zh"] + MORE_TRAIN_FILES["zh"]}
    assert not any("test" in name for name in counts2)
    held = held_out_text("zh", stories_only=True)
    assert counts2["zh_lcqmc_dev.jsonl"]["held_out"] > 0  # the planted dev stories are cut from it
    assert not any(t in held for t in a2[len(a):len(a) + 200])


def test_a_second_language_adds_its_pairs_but_never_its_held_out_stories() -> None:
    import pytest

    from bench.evaldata import eval_data_available, missing_reason

    if not eval_data_available("pairs"):
        pytest.skip(missing_reason("pairs"))
    from bench.research.cross_probe import training_set
    from bench.research.train_pair_head import held_out_text

    a, _, y = training_set("zh", random_pairs=False, stories_only=True)
    a2, b2, y2 = training_set("zh", "en", random_pairs=False, stories_only=True)
    assert a2[: len(a)] == a and np.array_equal(y2[: len(y)], y) and len(a2) > len(a)
    held = held_out_text("en", stories_only=True)
    assert not any(t in held for t in a2[len(a):] + b2[len(a):])
