"""Sentence-aligned scores of rewrite candidates (dedup_tasks.embed.aligned)."""

from __future__ import annotations

import numpy as np

from dedup_tasks.embed.aligned import aligned_scores, punctuated_text, sentences
from tests.embed.fakes import FakeEmbedder


def test_sentences_split_latin_and_cjk_and_cut_long_runs() -> None:
    assert sentences("One thing happened. Then another! Did it? Yes.") == ["One thing happened.", "Then another!", "Did it?", "Yes."]
    assert sentences("深圳地铁将设立头等车厢。买双倍票可享坐票？是的，当然可以") == ["深圳地铁将设立头等车厢。", "买双倍票可享坐票？", "是的，当然可以"]
    run = "没有标点的一段很长的中文" * 30  # 360 characters, no sentence end
    parts = sentences(run, max_chars=100)
    assert len(parts) == 4 and all(len(p) <= 100 for p in parts) and "".join(parts) == run
    assert len(sentences(" ".join(f"Sentence number {i}." for i in range(20)), max_sentences=5)) == 5
    assert sentences("") == [] and sentences("Hm! Ok? Ya.") == []  # pieces under min_chars are not sentences


def test_a_full_stop_after_an_abbreviation_or_initial_ends_no_sentence() -> None:
    # MRPC-style news sentences: split at every ". ", a third of them fell into pieces such as
    # "President George W." that a rewrite's sentence cannot be aligned to.
    text = "President George W. Bush said the U.S. would act. Retailers J.C. Penney Co. said no. Mr. Smith left on Jan. 5. shares fell."
    assert sentences(text, max_chars=400) == [
        "President George W. Bush said the U.S. would act.",
        "Retailers J.C. Penney Co. said no.",
        "Mr. Smith left on Jan. 5.",
        "shares fell.",
    ]


def test_a_closing_quote_or_bracket_after_the_mark_still_ends_the_sentence() -> None:
    # MRPC quotes: 'effort." A 32-year-old ...' was one sentence, aligned to the source's first alone.
    text = 'It is a long effort." A mother of two was arrested. He said: "Go!" Then he left (quietly.) Done now.'
    assert sentences(text, max_chars=400) == [
        'It is a long effort."', "A mother of two was arrested.", 'He said: "Go!"', "Then he left (quietly.)", "Done now.",
    ]
    assert sentences("他说：“我们明天走。”然后离开了会场。") == ["他说：“我们明天走。”", "然后离开了会场。"]


def test_no_before_a_number_ends_no_sentence() -> None:
    # "No." is under min_chars: a sentence end, but no sentence of its own.
    assert sentences("Mrs. Kroc ranked No. 121 on the list. She said no. That is all.", max_chars=400) == [
        "Mrs. Kroc ranked No. 121 on the list.", "She said no.", "That is all.",
    ]


def test_a_title_the_body_opens_with_is_not_a_sentence_of_its_own() -> None:
    # The title cut from the first sentence would be that sentence twice, once cut short.
    body = "Amrozi accused his brother of lying. He called him the witness."
    assert punctuated_text("Amrozi accused his brother", body, None) == body
    assert punctuated_text("Family feud in court", body, None) == "Family feud in court\n" + body
    assert punctuated_text("Amrozi accused his bro", body, None).startswith("Amrozi accused his bro\n")  # not a whole word
    assert punctuated_text("延迟退休真的来了", "延迟退休真的来了！你准备好了吗？", None) == "延迟退休真的来了！你准备好了吗？"
    # Template lines are out first: the title is compared with the first line the view kept.
    view = "amrozi accused his brother of lying he called him the witness amrozi accused his brother"
    assert punctuated_text("Amrozi accused his brother", "Home | News\n" + body, view) == body


def test_a_reordered_rewrite_scores_above_a_same_topic_text() -> None:
    fake = FakeEmbedder()
    source = "The council approved the budget on Tuesday. Bus fares will fall by ten percent. Three new lines open in May."
    reordered = "Three new lines open in May. The council approved the budget on Tuesday. Bus fares will fall by ten percent."
    same_topic = "The council debated the budget on Tuesday. Bus drivers may strike in June. No new lines are planned."
    scores = aligned_scores(fake.encode, [reordered, same_topic, ""], [source, source, source])
    assert scores[0] > 0.99  # every sentence finds itself
    assert scores[1] < scores[0] - 0.2
    assert scores[2] == -1.0
    # One embedding call for every distinct sentence of every pair.
    assert len(fake.calls) == 1 and len(fake.encoded) == len(set(fake.encoded)) == 6
    assert np.isclose(aligned_scores(fake.encode, [source], [source])[0], 1.0, atol=1e-5)
