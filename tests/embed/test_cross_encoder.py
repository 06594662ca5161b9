"""The cross-encoder confirmer (embed.cross_encoder): offline load, symmetric logits, story scores, bad files."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from dedup_tasks.embed.cross_encoder import CrossEncoder, CrossEncoderError, get_cross_encoder, pair_ids  # noqa: E402
from tests.embed.fakes import FakeEmbedder, write_cross_encoder  # noqa: E402

STORY = ("Shares of Northwind fell 14 percent on Monday. The company cut its forecast. "
         "Chief executive Maria Olsen said the strike would cost 40 million euros.")
REWRITE = ("Northwind stock dropped 14 percent Monday. Maria Olsen put the strike's cost at 40 million euros. "
           "The firm lowered its forecast.")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, object]:
    base = tmp_path_factory.mktemp("cross")
    return {
        "flat": write_cross_encoder(base / "flat.pt", bias=1.5),
        "random": write_cross_encoder(base / "random.pt", bias=0.0, weight_seed=7),
    }


def test_a_flat_head_scores_every_story_by_its_bias_over_the_newer_sentences(files) -> None:
    model = CrossEncoder(files["flat"])
    scores = model.story_scores(FakeEmbedder().encode, [REWRITE, "", STORY], [STORY, STORY, ""])
    assert scores.score[0] == pytest.approx(1.5, abs=1e-5)
    assert scores.sentences.tolist() == [3, 0, 0]  # the rewrite's three sentences; nothing without text
    assert np.isneginf(scores.score[1:]).all()


def test_prob_cos_pools_the_mean_of_each_pairs_probability_and_aligned_cosine(files) -> None:
    from dedup_tasks.embed.aligned import aligned_pairs

    model, embed = CrossEncoder(files["flat"]), FakeEmbedder().encode
    cos = np.array([p[3] for p in aligned_pairs(embed, [REWRITE], [STORY])])
    assert cos.std() > 1e-3  # the sentences align at different cosines: the mean is over pairs, not one
    scores = model.story_scores(embed, [REWRITE, ""], [STORY, STORY], "prob_cos")
    assert scores.score[0] == pytest.approx(float(np.mean(0.5 * (1 / (1 + np.exp(-1.5)) + cos))), abs=1e-5)
    assert scores.sentences.tolist() == [3, 0] and np.isneginf(scores.score[1])
    with pytest.raises(ValueError, match="score must be one of"):
        model.story_scores(embed, [REWRITE], [STORY], "max")


def test_a_story_below_the_cosine_gate_is_not_read_and_scores_minus_infinity(files) -> None:
    from dedup_tasks.embed.aligned import aligned_pairs

    model, embed = CrossEncoder(files["flat"]), FakeEmbedder().encode
    mean_cos = float(np.mean([p[3] for p in aligned_pairs(embed, [REWRITE], [STORY])]))
    scores = model.story_scores(embed, [REWRITE, REWRITE, ""], [STORY, STORY, STORY], "logit", min_cos=mean_cos + 1e-4)
    assert scores.gated.tolist() == [True, True, False]  # the empty story has no sentence: not gated, not scored
    assert np.isneginf(scores.score).all() and scores.sentences.tolist() == [3, 3, 0]
    passed = model.story_scores(embed, [REWRITE], [STORY], "logit", min_cos=mean_cos - 1e-4)
    assert passed.gated.tolist() == [False] and passed.score[0] == pytest.approx(1.5, abs=1e-5)


def test_a_story_far_below_the_threshold_is_read_in_one_order_only(files) -> None:
    from dedup_tasks.embed.aligned import aligned_pairs
    from dedup_tasks.embed.cross_encoder import ORDER_BAND

    model, embed = CrossEncoder(files["random"]), FakeEmbedder().encode
    pairs = aligned_pairs(embed, [REWRITE], [STORY])
    a, b = [p[1] for p in pairs], [p[2] for p in pairs]
    # Given a threshold the first order is read a sentence a round: each pair in a batch of its own
    # (bf16 arithmetic moves a logit by up to ~0.2% with the batch's shape).
    first = np.array([model.one_way([x], [y])[0] for x, y in zip(a, b, strict=True)])
    one, both = float(first.mean()), float((0.5 * (first + model.one_way(b, a))).mean())
    assert abs(one - both) > 1e-3  # the orders differ: the test can tell which was read
    far = model.story_scores(embed, [REWRITE], [STORY], "logit", threshold=one + ORDER_BAND["logit"] + 0.1)
    assert far.one_way.tolist() == [True] and far.score[0] == pytest.approx(one, abs=1e-4)
    near = model.story_scores(embed, [REWRITE], [STORY], "logit", threshold=one + ORDER_BAND["logit"] - 0.1)
    assert near.one_way.tolist() == [False] and near.score[0] == pytest.approx(both, abs=1e-4)
    whole = float(model.logits(a, b).mean())  # no threshold: both orders, each in one batch
    assert model.story_scores(embed, [REWRITE], [STORY]).score[0] == pytest.approx(whole, abs=1e-4)


LONG = " ".join(f"Sentence {w} of the Northwind strike report mentions {n} workers." for w, n in zip(
    ("one", "two", "three", "four", "five", "six", "seven", "eight"), (12, 40, 7, 93, 18, 55, 61, 24), strict=True))
LONG_REWRITE = " ".join(f"The report's {w} line counts {n} striking staff at Northwind." for w, n in zip(
    ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"), (12, 40, 7, 93, 18, 55, 61, 24), strict=True))


def test_a_story_that_cannot_reach_the_cut_stops_after_its_first_round(files) -> None:
    from dedup_tasks.embed.cross_encoder import ORDER_BAND, READ_ROUND

    model, embed = CrossEncoder(files["flat"]), FakeEmbedder().encode  # every pair: logit 1.5
    whole = model.story_scores(embed, [LONG_REWRITE], [LONG])
    assert whole.sentences.tolist() == [8] and whole.reads.tolist() == [16]  # both orders, no threshold
    stopped = model.story_scores(embed, [LONG_REWRITE], [LONG], threshold=1.5 + ORDER_BAND["logit"] + 0.5)
    assert stopped.reads.tolist() == [READ_ROUND] and stopped.partial.tolist() == [True]
    assert stopped.one_way.tolist() == [True]
    # Scored at its ceiling: at least the score, below the threshold.
    assert 1.5 <= stopped.score[0] < 1.51
    near = model.story_scores(embed, [LONG_REWRITE], [LONG], threshold=1.5 + ORDER_BAND["logit"] - 0.1)
    assert near.reads.tolist() == [16] and not near.partial.any() and near.score[0] == pytest.approx(1.5, abs=1e-5)


def test_reading_in_rounds_changes_no_decision_and_reads_less(files, monkeypatch) -> None:
    from dedup_tasks.embed import cross_encoder

    model, embed = CrossEncoder(files["random"]), FakeEmbedder().encode
    newer = [LONG_REWRITE, LONG, REWRITE, LONG_REWRITE, STORY + " " + LONG_REWRITE]
    earlier = [LONG, LONG, STORY, STORY, LONG]
    logits = model.one_way([LONG_REWRITE[:60], REWRITE], [LONG[:60], STORY])
    assert (np.abs(logits) <= model.pair_ceilings(np.zeros(2), "logit")).all()
    stopped_any = False
    for threshold in (0.5, 0.6, 0.7, 0.8, 0.9):
        rounds = model.story_scores(embed, newer, earlier, "prob_cos", threshold=threshold)
        monkeypatch.setattr(cross_encoder, "READ_ROUND", 100)
        whole = model.story_scores(embed, newer, earlier, "prob_cos", threshold=threshold)
        monkeypatch.setattr(cross_encoder, "READ_ROUND", 3)
        assert ((rounds.score >= threshold) == (whole.score >= threshold)).all()
        assert (rounds.score >= whole.score - 1e-5).all()  # a stopped story's ceiling is never below its score
        assert (rounds.score[~rounds.partial] == pytest.approx(whole.score[~rounds.partial], abs=1e-5))  # batches: bf16 noise
        assert rounds.reads.sum() <= whole.reads.sum()
        stopped_any |= bool(rounds.partial.any())
        assert (rounds.reads[rounds.partial] < whole.reads[rounds.partial]).all()
    assert stopped_any  # some threshold let a story stop early: the test saw the rounds work


def test_logits_read_both_orders_and_differ_by_pair(files) -> None:
    model = CrossEncoder(files["random"])
    a = ["The company cut its forecast.", "Shares fell 14 percent."]
    b = ["The firm lowered its forecast.", "It rained in Rotterdam on Monday."]
    ab, ba = model.logits(a, b), model.logits(b, a)
    assert np.allclose(ab, ba, atol=1e-5)
    assert abs(ab[0] - ab[1]) > 1e-3  # a head with weights tells pairs apart
    one_way = model.one_way(a, b)
    assert not np.allclose(one_way, model.one_way(b, a), atol=1e-5)  # the model itself reads them unequally
    many_a, many_b = [f"{x} ({i})" for i in range(20) for x in a], [f"{x} ({i})" for i in range(20) for x in b]
    threaded = model.logits(many_a, many_b)  # 40 pairs
    assert np.allclose(threaded, 0.5 * (model.one_way(many_a, many_b) + model.one_way(many_b, many_a)), atol=1e-5)
    with pytest.raises(ValueError, match="2 first sentences for 1"):
        model.logits(a, b[:1])


def test_pairs_are_read_as_one_sequence_in_the_xlmr_layout(files) -> None:
    tok = CrossEncoder(files["flat"])._model.tokenizer
    ids = pair_ids(tok, ["alpha beta"], ["gamma"], side=64)[0]
    a, b = tok.encode(["query: alpha beta"], 64)[0], tok.encode(["query: gamma"], 64)[0]
    assert ids == a + [tok.eos] + b[1:]  # <s> A </s></s> B </s>
    long = pair_ids(tok, ["word " * 200], ["word " * 200], side=16)[0]
    assert len(long) == 16 + 1 + 15  # each side cut at its own budget


def test_the_model_id_names_the_weights_not_the_path(files, tmp_path) -> None:
    import shutil

    copy = shutil.copy(files["flat"], tmp_path / "elsewhere.pt")
    assert CrossEncoder(copy).model_id == CrossEncoder(files["flat"]).model_id
    assert CrossEncoder(files["random"]).model_id != CrossEncoder(files["flat"]).model_id


def test_a_missing_or_foreign_file_is_refused_by_name(tmp_path) -> None:
    import torch

    with pytest.raises(CrossEncoderError, match="absent.pt does not exist"):
        CrossEncoder(tmp_path / "absent.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(CrossEncoderError, match="junk.pt is not a bench.research.cross_probe --save-model file"):
        CrossEncoder(junk)
    wrong = tmp_path / "wrong.pt"
    torch.save({"encoder": {}, "head": torch.nn.Linear(3, 1).state_dict(), "side": 64}, wrong)
    with pytest.raises(CrossEncoderError, match="wrong.pt"):
        CrossEncoder(wrong)


def test_the_process_keeps_one_model_per_file_until_the_file_is_replaced(files, tmp_path) -> None:
    import shutil

    path = tmp_path / "model.pt"
    shutil.copy(files["flat"], path)
    first = get_cross_encoder(path)
    assert get_cross_encoder(str(path)) is first
    shutil.copy(files["random"], path)  # retrained in place
    again = get_cross_encoder(path)
    assert again is not first and again.model_id == CrossEncoder(files["random"]).model_id
