"""What-if replay from stored scores, checked against a full recomputation of the same week."""

from __future__ import annotations

import pandas as pd
import pytest

from dedup_tasks.audit.whatif import replay
from tests.audit.synth import config_for, generate_rows, run_week

NEW = {"simhash": 1.0, "minhash": 0.9}


def test_replay_rules():
    decisions = pd.DataFrame([
        {"doc_id": "a", "batch_id": "b", "action": "drop", "layer": "minhash", "score": 0.85, "threshold": 0.8,
         "matched_doc_id": "x", "matched_batch_id": "b"},
        {"doc_id": "b", "batch_id": "b", "action": "drop", "layer": "minhash", "score": 0.95, "threshold": 0.8,
         "matched_doc_id": "x", "matched_batch_id": "b"},
        {"doc_id": "c", "batch_id": "b", "action": "drop", "layer": "simhash", "score": 3.0, "threshold": 3.0,
         "matched_doc_id": "x", "matched_batch_id": "b"},
        {"doc_id": "d", "batch_id": "b", "action": "keep", "layer": None, "score": None, "threshold": None,
         "matched_doc_id": None, "matched_batch_id": None},
    ])
    result = replay(decisions, {"minhash": 0.9, "simhash": 2})
    assert sorted(result.changes["doc_id"]) == ["a", "c"]
    assert set(result.changes["new_action"]) == {"keep"}
    assert result.undecidable_keeps == 1
    loose = replay(decisions, {"minhash": 0.7})
    assert loose.changes.empty and any("cannot be replayed" in n for n in loose.notes)
    with pytest.raises(ValueError, match="url"):
        replay(decisions, {"url": 1})


def test_a_cosine_threshold_does_not_replay_a_cross_encoder_drop():
    row = {"batch_id": "b", "action": "drop", "layer": "semantic", "matched_doc_id": "x", "matched_batch_id": "b"}
    decisions = pd.DataFrame([
        {**row, "doc_id": "cos", "score": 0.95, "threshold": 0.945, "score_kind": "cosine"},
        {**row, "doc_id": "logit", "score": 2.6, "threshold": 2.37, "score_kind": "cross_logit"},
        {**row, "doc_id": "prob_cos", "score": 0.74, "threshold": 0.72, "score_kind": "cross_prob_cos"},
    ])
    # At 0.96 the cosine drop is undone; the logit 2.6 passes any cosine but was judged on its own
    # scale, and so was the 0.74 of probability and cosine, which a cosine threshold would undo.
    result = replay(decisions, {"semantic": 0.96})
    assert result.changes["doc_id"].tolist() == ["cos"]
    assert result.per_layer.iloc[0][["drops_before", "drops_after"]].tolist() == [3, 2]
    assert any("2 semantic drops confirmed by a cross-encoder" in n for n in result.notes)
    assert not any("cross-encoder" in n for n in replay(decisions, {"minhash": 0.9}).notes)


def test_replay_matches_full_recomputation(week_root, week_decisions, tmp_path, monkeypatch):
    """Recompute the week with the new thresholds (run_batch on the same crawl) and compare.

    The replay decides each row from its own stored score; it cannot know about documents that the
    new thresholds keep and that then become matches for others, nor about later layers seeing a row
    they never saw. Rows whose recomputed decision depends on either are the undecidable ones; on
    every other row the replay must agree with the recomputation exactly.
    """
    original = week_decisions.set_index("doc_id")
    # The replay knows one rule per layer, score >= threshold. Since issue #17, L3's verifier also drops
    # on coverage below minhash_threshold and holds short texts and registry pairs to their own Jaccard,
    # which a stored score cannot replay: the recomputation turns coverage off (> 1 never holds) and
    # gives every Jaccard rule the new threshold, so it applies the one rule the replay models.
    # Registry pairs: with b-bit registered signatures (schema 9's compact profile) every one is verified on
    # the earlier text, so its stored score is the exact Jaccard, as for an in-batch pair; with lossless
    # signatures (registry_signature_bits 32, the default) they are judged on the signature (no text read back: its
    # exact Jaccard would settle pairs whose stored score is an estimate). Without the facts check.
    one_rule = {"minhash_min_coverage": 1.01, "minhash_passage_min_coverage": 1.01, "minhash_registry_min_coverage": 1.01,
                "minhash_registry_threshold": 0.9, "minhash_facts_min_new": 0}
    monkeypatch.setattr("dedup_tasks.layers.minhash.SHORT_SIGNATURE_JACCARD", 0.9)
    if config_for(tmp_path).registry_signature_bits >= 32:
        one_rule["minhash_text_max_partitions"] = 0
    recomputed = run_week(tmp_path, config_for(tmp_path, simhash_max_distance=1, minhash_threshold=0.9, **one_rule),
                          rows=generate_rows()).set_index("doc_id")
    result = replay(week_decisions, NEW)
    changed = result.changes.set_index("doc_id")
    assert len(changed) > 5 and (changed["new_action"] == "keep").all()

    originally_dropped = set(original.index[original["action"] == "drop"])
    layer_rank = {"url": 0, "exact": 1, "simhash": 2, "minhash": 3}
    decided = agree = 0
    for doc_id, old in original.iterrows():
        new = recomputed.loc[doc_id]
        if new["action"] == "drop" and new["matched_doc_id"] in originally_dropped:
            continue  # matched a document only the new thresholds keep
        if doc_id in changed.index:
            if new["action"] == "drop" and layer_rank[new["layer"]] > layer_rank[old["layer"]]:
                continue  # a later layer, which the original run never showed this row to
            expected_action, expected_layer = "keep", None
        else:
            expected_action, expected_layer = old["action"], old["layer"]
        decided += 1
        same = new["action"] == expected_action and (expected_action == "keep" or new["layer"] == expected_layer)
        agree += same
        assert same, f"{doc_id}: replay says {expected_action}/{expected_layer}, recomputation {new['action']}/{new['layer']}"
    print(f"replay vs recomputation: {len(changed)} changed, {decided}/{len(original)} decidable, {agree} agree")
    assert decided >= 0.8 * len(original)
    assert decided == agree
    # Per layer, the replayed drop counts are those of the recomputation up to the undecidable rows.
    for row in result.per_layer.itertuples():
        recomputed_drops = int(((recomputed["action"] == "drop") & (recomputed["layer"] == row.layer)).sum())
        assert abs(recomputed_drops - row.drops_after) <= len(original) - decided
