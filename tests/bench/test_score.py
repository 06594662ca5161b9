"""The scorer: coverage checks, rates per kind / band / language / layer, provenance, the table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.generate import GeneratedCrawl
from bench.score import ScoringError, format_edit_band_table, format_near_table, format_table, score

# A tiny hand-made truth. Cluster A: original a, url repeat a2 (source a), near copy a3 named after
# a2 (J 0.85), near copy a4 (J 0.6). Cluster B: original b, exact copy b2 in the next batch.
# Must-keep docs: template t, short s, update u (of a). Languages mixed.
ROWS = [
    # doc_id, batch, lang, kind, cluster, source, jaccard, dup
    ("a", "B0", "en", "original", "a", None, None, False),
    ("a2", "B0", "en", "url_repeat", "a", "a", 1.0, True),
    ("a3", "B0", "en", "near_copy", "a", "a2", 0.85, True),
    ("a4", "B0", "en", "near_copy", "a", "a", 0.6, True),
    ("b", "B0", "zh", "original", "b", None, None, False),
    ("b2", "B1", "zh", "exact_copy", "b", "b", 1.0, True),
    ("t", "B0", "zh", "template_distinct", "t", None, None, False),
    ("s", "B1", "en", "short_distinct", "s", None, None, False),
    ("u", "B1", "en", "url_update", "u", "a", 0.1, False),
    ("l", "B1", "en", "list_page", "l", None, None, False),
]


@pytest.fixture
def truth() -> pd.DataFrame:
    df = pd.DataFrame(
        ROWS,
        columns=[
            "doc_id",
            "batch_id",
            "lang",
            "kind",
            "cluster_id",
            "source_doc_id",
            "true_jaccard",
            "is_duplicate",
        ],
    )
    df["must_keep"] = df["kind"].isin(["template_distinct", "short_distinct", "url_update", "list_page"])
    df["hour"] = df["batch_id"].str[1].astype(int)
    df["edits"] = [[] for _ in range(len(df))]
    return df


def _decisions(
    truth: pd.DataFrame, drops: dict[str, str | None], layer: str | None = "minhash"
) -> pd.DataFrame:
    """Keep everything except ``drops`` (doc_id -> matched_doc_id)."""
    return pd.DataFrame(
        {
            "doc_id": truth["doc_id"],
            "action": ["drop" if d in drops else "keep" for d in truth["doc_id"]],
            "layer": [layer if d in drops else None for d in truth["doc_id"]],
            "matched_doc_id": [drops.get(d) for d in truth["doc_id"]],
        }
    )


PERFECT = {"a2": "a", "a3": "a2", "a4": "a", "b2": "b"}


def test_perfect_decisions(truth: pd.DataFrame) -> None:
    r = score(_decisions(truth, PERFECT), truth)
    assert r["precision"] == r["recall"] == r["f1"] == 1.0
    assert r["false_drop_rate"] == 0.0 and r["must_keep_false_drop_rate"] == 0.0
    assert all(v["rate"] in (0.0, None) for v in r["false_drop_rate_by_kind"].values())  # None: kind absent
    assert r["recall_near_j_ge_0_8"] == 1.0
    assert r["provenance_precision"] == 1.0
    assert r["counts"]["tp"] == 4 and r["counts"]["tn"] == 6
    assert r["recall_by_source_batch"]["earlier_batch"] == {"n": 1, "dropped": 1, "recall": 1.0}
    json.dumps(r)  # JSON-serialisable: no numpy scalars, no NaN


def test_dropping_every_must_keep_doc(truth: pd.DataFrame) -> None:
    drops = {**PERFECT, "t": "a", "s": "a", "u": "a", "l": "a"}
    r = score(_decisions(truth, drops), truth)
    for kind in ("template_distinct", "short_distinct", "url_update", "list_page"):
        assert r["false_drop_rate_by_kind"][kind]["rate"] == 1.0
    assert r["false_drop_rate_by_kind"]["original"]["rate"] == 0.0
    assert r["false_drop_rate"] == pytest.approx(4 / 6)
    assert r["must_keep_false_drop_rate"] == 1.0
    assert r["precision"] == pytest.approx(4 / 8)
    assert r["recall"] == 1.0
    assert set(r["examples"]["false_drops"]) == {"t", "s", "u", "l"}


def test_keep_everything(truth: pd.DataFrame) -> None:
    r = score(_decisions(truth, {}), truth)
    assert r["precision"] is None and r["recall"] == 0.0 and r["f1"] == 0.0
    assert r["false_drop_rate"] == 0.0
    assert r["by_layer"] == {}
    json.dumps(r)


def test_recall_per_kind_band_and_language(truth: pd.DataFrame) -> None:
    r = score(_decisions(truth, {"a3": "a", "b2": "b"}), truth)  # misses a2 (url) and a4 (J 0.6)
    assert r["recall_by_kind"]["near_copy"] == {"n": 2, "dropped": 1, "recall": 0.5}
    assert r["recall_by_kind"]["url_repeat"]["recall"] == 0.0
    assert r["recall_near_by_band"]["0.5-0.7"]["recall"] == 0.0
    assert r["recall_near_by_band"]["0.8-0.9"]["recall"] == 1.0
    assert r["recall_near_by_band"]["0.9-1.0"]["n"] == 0
    assert r["recall_near_j_ge_0_8"] == 1.0
    assert r["by_lang"]["zh"]["recall"] == 1.0 and r["by_lang"]["en"]["recall"] == pytest.approx(1 / 3)
    assert sorted(r["examples"]["misses"]) == ["a2", "a4"]


def test_per_layer_counts_and_precision(truth: pd.DataFrame) -> None:
    d = _decisions(truth, {**PERFECT, "t": "a"})
    d.loc[d["doc_id"] == "a2", "layer"] = "url"
    d.loc[d["doc_id"] == "b2", "layer"] = None  # peers may leave layer null
    r = score(d, truth)
    assert r["by_layer"]["url"] == {"drops": 1, "correct": 1, "precision": 1.0}
    assert r["by_layer"]["minhash"] == {"drops": 3, "correct": 2, "precision": pytest.approx(2 / 3)}
    assert r["by_layer"]["(none)"]["drops"] == 1


def test_provenance_is_judged_by_cluster(truth: pd.DataFrame) -> None:
    # a3 naming the second copy a2 or the original a is right; naming b, itself or nothing is wrong.
    for match, ok in (("a2", True), ("a", True), ("a4", True), ("b", False), ("a3", False), (None, False)):
        r = score(_decisions(truth, {"a3": match}), truth)
        assert r["provenance"]["checked"] == 1
        assert r["provenance_precision"] == (1.0 if ok else 0.0), match
    r = score(_decisions(truth, {"a3": None}), truth)
    assert r["provenance"]["no_match"] == 1
    # A false drop does not count toward provenance at all.
    r = score(_decisions(truth, {"t": "b", "b2": "b"}), truth)
    assert r["provenance"] == {"checked": 1, "correct": 1, "precision": 1.0, "no_match": 0}
    # Without a matched_doc_id column provenance is unknown, not wrong.
    r = score(_decisions(truth, PERFECT).drop(columns=["matched_doc_id", "layer"]), truth)
    assert r["provenance_precision"] is None and r["precision"] == 1.0


def test_refuses_missing_duplicated_and_unknown_docs(truth: pd.DataFrame) -> None:
    full = _decisions(truth, PERFECT)
    with pytest.raises(ScoringError, match=r"1 truth doc_ids have no decision.*'b2'"):
        score(full[full["doc_id"] != "b2"], truth)
    with pytest.raises(ScoringError, match=r"1 doc_ids decided more than once.*'a3'"):
        score(pd.concat([full, full[full["doc_id"] == "a3"]]), truth)
    extra = pd.DataFrame({"doc_id": ["zz"], "action": ["keep"], "layer": [None], "matched_doc_id": [None]})
    with pytest.raises(ScoringError, match=r"1 decided doc_ids are not in the truth.*'zz'"):
        score(pd.concat([full, extra]), truth)
    bad = full.copy()
    bad.loc[0, "action"] = "maybe"
    with pytest.raises(ScoringError, match="action other than"):
        score(bad, truth)
    with pytest.raises(ScoringError, match="lack column"):
        score(full.drop(columns=["action"]), truth)


def test_format_table(truth: pd.DataFrame) -> None:
    results = {
        "perfect": score(_decisions(truth, PERFECT), truth),
        "keep-all": score(_decisions(truth, {}), truth),
    }
    table = format_table(results)
    lines = table.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("| system") and "false-drop rate" in lines[0] and "update FD" in lines[0]
    assert lines[2].startswith("| perfect ") and "1.000" in lines[2]
    assert "n/a" in lines[3]  # precision of a system that drops nothing
    assert len({len(line) for line in lines}) == 1  # aligned columns


def test_scores_a_generated_crawl(crawl: GeneratedCrawl) -> None:
    truth = crawl.truth()
    perfect = pd.DataFrame(
        {
            "doc_id": truth["doc_id"],
            "action": truth["is_duplicate"].map({True: "drop", False: "keep"}),
            "matched_doc_id": truth["source_doc_id"].where(truth["is_duplicate"]),
        }
    )
    r = score(perfect, truth)
    assert r["precision"] == r["recall"] == r["provenance_precision"] == 1.0
    assert r["false_drop_rate"] == 0.0
    assert set(r["recall_near_by_band"]) == {"0.5-0.7", "0.7-0.8", "0.8-0.9", "0.9-1.0"}
    assert r["recall_by_source_batch"]["earlier_batch"]["n"] > 0
    # Dropping every must-keep doc as well.
    worst = perfect.copy()
    worst.loc[truth["must_keep"].to_numpy(), "action"] = "drop"
    r = score(worst, truth)
    for kind in ("template_distinct", "short_distinct", "url_update"):
        assert r["false_drop_rate_by_kind"][kind]["rate"] == 1.0
    json.dumps(r)


def test_near_recall_per_edit_and_per_language_band(truth: pd.DataFrame) -> None:
    truth["edits"] = [[], [], ["typos", "truncate"], ["typos"], [], [], [], [], [], []]
    truth["true_jaccard_words"] = truth["true_jaccard"] - 0.2
    r = score(_decisions(truth, {"a3": "a"}), truth)  # a3 (J 0.85) caught, a4 (J 0.6) missed
    assert r["recall_near_by_edit"]["typos"] == {"n": 2, "dropped": 1, "recall": 0.5}
    assert r["recall_near_by_edit"]["truncate"]["recall"] == 1.0
    assert r["recall_near_by_edit_lang"]["en"]["typos"]["n"] == 2
    assert r["recall_near_by_edit_count"] == {"1": {"n": 1, "dropped": 0, "recall": 0.0}, "2": {"n": 1, "dropped": 1, "recall": 1.0}}
    assert r["recall_near_by_band_lang"]["en"]["0.8-0.9"]["recall"] == 1.0
    assert r["recall_near_by_band_lang"]["en"]["0.5-0.7"]["recall"] == 0.0
    assert r["recall_near_j_0_5_0_7"] == 0.0 and r["recall_near_j_ge_0_7"] == 1.0
    assert r["recall_near_by_band_words"]["0.5-0.7"]["n"] == 1  # a3 at 0.65 on the second measure
    assert "typos" in format_near_table(r)
    # Per language x target band x edit kind: a4 (typos, J 0.6) missed, a3 (typos + truncate, J 0.85) caught.
    cells = r["recall_near_by_edit_band_lang"]["en"]
    assert cells["0.5-0.7"]["typos"] == {"n": 1, "dropped": 0, "recall": 0.0}
    assert cells[">=0.7"]["typos"] == {"n": 1, "dropped": 1, "recall": 1.0}
    assert cells["0.5-0.7"]["truncate"]["n"] == 0
    table = format_edit_band_table(r)
    assert "0.000 (1)" in table and "1.000 (1)" in table


def test_corpus_copies_are_reported_apart(truth: pd.DataFrame) -> None:
    # c retells b's story (bench.corpus_copies); dropping it is neither a false drop nor a hit, and
    # a near copy c2 of c that names b keeps its provenance through the merged cluster.
    extra = pd.DataFrame(
        [
            ("c", "B1", "zh", "corpus_copy", "b", "b", 0.62, False, False, 1, []),
            ("c2", "B1", "zh", "near_copy", "b", "c", 0.9, True, False, 1, []),
        ],
        columns=truth.columns,
    )
    t = pd.concat([truth, extra], ignore_index=True)
    r = score(_decisions(t, {**PERFECT, "c": "b", "c2": "b"}), t)
    assert r["false_drop_rate"] == 0.0 and r["false_drop_rate_by_kind"]["original"]["dropped"] == 0
    assert "corpus_copy" not in r["false_drop_rate_by_kind"]
    assert r["precision"] == r["recall"] == 1.0 and r["provenance_precision"] == 1.0
    assert r["counts"]["tp"] == 5 and r["counts"]["unjudged"] == 1 and r["counts"]["docs"] == len(t)
    assert r["unjudged"]["corpus_copy"]["n"] == 1 and r["unjudged"]["corpus_copy"]["dropped"] == 1
    assert r["unjudged"]["corpus_copy"]["by_band"]["0.5-0.7"] == {"n": 1, "dropped": 1, "recall": 1.0}
    kept = score(_decisions(t, {**PERFECT, "c2": "b"}), t)
    assert kept["recall"] == 1.0 and kept["unjudged"]["corpus_copy"]["dropped"] == 0
    # Labelled an original, the same drop is a false drop.
    as_original = t.assign(kind=t["kind"].replace("corpus_copy", "original"))
    assert score(_decisions(as_original, {**PERFECT, "c": "b", "c2": "b"}), as_original)["counts"]["fp"] == 1
