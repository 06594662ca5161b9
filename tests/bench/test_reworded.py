"""The reworded kind is assembled from the right paraphrase files: train/dev to tune, test to report."""

from __future__ import annotations

import pytest

from bench.evaldata import eval_data_available, missing_reason
from bench.reworded import SOURCES, stories

pytestmark = pytest.mark.skipif(not eval_data_available("pairs"), reason=missing_reason("pairs"))


def test_dev_stories_come_only_from_train_and_dev_files() -> None:
    assert all("_test" not in name for files in SOURCES["dev"].values() for name, *_ in files)
    found = stories("dev")
    for lang in ("en", "zh"):
        items = found[lang]
        assert {s.lang for s in items} == {lang}
        assert all("_test" not in s.dataset for s in items)
        # Rewrites and same-topic negatives, each a several-sentence text distinct from its source.
        assert sum(s.duplicate for s in items) > 300 and sum(not s.duplicate for s in items) > 300
        assert all(s.source != s.other and s.source and s.other for s in items)


def test_test_stories_are_the_held_out_files() -> None:
    found = stories("test")
    assert {s.dataset for s in found["zh"]} == {"zh_sohu_dd_test", "zh_sohu_dc_test"}
    assert {s.dataset for s in found["en"]} == {"en_mrpc_test"}


def test_same_seed_same_stories() -> None:
    assert stories("dev", seed=3)["en"][:5] == stories("dev", seed=3)["en"][:5]


def test_every_sentence_of_a_story_ends_so_a_sentence_splitter_finds_it() -> None:
    from bench.reworded import _join
    from dedup_tasks.embed.aligned import sentences

    # Unpunctuated questions (most of AFQMC/ATEC/BQ) used to run together into one run of characters.
    assert _join(["花呗怎么还款", "借呗利息是多少？", "怎么开通花呗"], "zh") == "花呗怎么还款。借呗利息是多少？怎么开通花呗。"
    assert _join(["A plane is taking off", "A man plays.", ""], "en") == "A plane is taking off. A man plays."
    for lang, k in (("zh", 6), ("en", 5)):
        story = next(s for s in stories("dev")[lang] if s.dataset.endswith("_train"))
        assert len(sentences(story.source)) >= k
