"""Score dedup decisions against the generator's truth (``bench.generate``'s ``truth.parquet``).

``score(decisions, truth)`` takes DESIGN.md's decision rows (at least ``doc_id``, ``action``
keep/drop; ``layer`` and ``matched_doc_id`` when the system has them) and returns a JSON-ready dict.
A drop is a positive; it is correct when truth says ``is_duplicate``. Duplicates are judged by
cluster: a drop naming any other member of its truth cluster (the original, or an earlier copy of
it) has correct provenance.

The scorer refuses (``ScoringError``) a decisions frame that does not cover every truth document
exactly once: a partial or double-counted run would make every rate meaningless.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

DUPLICATE_KINDS = ("url_repeat", "exact_copy", "near_copy", "corpus_dup", "reworded")  # reworded: bench.reworded
MUST_KEEP_KINDS = ("template_distinct", "short_distinct", "short_leadin", "url_update", "url_append", "list_page")
# Neither a copy a system must find nor a document it must keep (bench.generate.LABELLED_KINDS):
# an original retelling a story an earlier original told (bench.corpus_copies). Left out of every
# rate; ``unjudged`` reports how many were dropped.
UNJUDGED_KINDS = ("corpus_copy",)
NEAR_BANDS: tuple[tuple[str, float, float], ...] = (
    ("0.5-0.7", 0.5, 0.7),
    ("0.7-0.8", 0.7, 0.8),
    ("0.8-0.9", 0.8, 0.9),
    ("0.9-1.0", 0.9, math.inf),  # closed at 1.0: a near copy can reach Jaccard 1.0
)
# The bands issue #17 sets its per-edit targets on.
TARGET_BANDS: tuple[tuple[str, float, float], ...] = (("0.5-0.7", 0.5, 0.7), (">=0.7", 0.7, math.inf))
TRUTH_COLUMNS = (
    "doc_id",
    "batch_id",
    "lang",
    "kind",
    "cluster_id",
    "source_doc_id",
    "true_jaccard",
    "is_duplicate",
)
_EXAMPLES = 5


class ScoringError(ValueError):
    """The decisions cannot be scored against this truth (coverage or format problem)."""


def _ids(values: Iterable[Any]) -> list[str]:
    return [str(v) for v, _ in zip(values, range(_EXAMPLES), strict=False)]


def _validate(decisions: pd.DataFrame, truth: pd.DataFrame) -> None:
    missing_cols = [c for c in ("doc_id", "action") if c not in decisions.columns]
    if missing_cols:
        raise ScoringError(f"decisions lack column(s) {missing_cols}")
    missing_truth = [c for c in TRUTH_COLUMNS if c not in truth.columns]
    if missing_truth:
        raise ScoringError(f"truth lacks column(s) {missing_truth}")
    problems: list[str] = []
    null_ids = decisions["doc_id"].isna().to_numpy()
    if null_ids.any():
        problems.append(f"{int(null_ids.sum())} decision rows have a null doc_id")
    # Plain Python sets: pandas' isin with a large set is slow on Arrow-backed strings.
    counts = Counter(str(x) for x in decisions["doc_id"][~null_ids].tolist())
    dup = [i for i, c in counts.items() if c > 1]
    if dup:
        problems.append(f"{len(dup)} doc_ids decided more than once, e.g. {_ids(dup)}")
    truth_ids = [str(x) for x in truth["doc_id"].tolist()]
    known = set(truth_ids)
    missing = [i for i in truth_ids if i not in counts]
    if missing:
        problems.append(f"{len(missing)} truth doc_ids have no decision, e.g. {_ids(missing)}")
    unknown = [i for i in counts if i not in known]
    if unknown:
        problems.append(f"{len(unknown)} decided doc_ids are not in the truth, e.g. {_ids(unknown)}")
    bad = decisions["doc_id"][~decisions["action"].isin(["keep", "drop"]).to_numpy()]
    if len(bad):
        problems.append(f"{len(bad)} rows have an action other than 'keep'/'drop', e.g. {_ids(bad.tolist())}")
    if problems:
        raise ScoringError("decisions do not cover the truth exactly once: " + "; ".join(problems))


def _rate(num: int, den: int) -> float | None:
    return float(num) / den if den else None


def _prf(dropped: pd.Series, dup: pd.Series) -> dict[str, Any]:
    tp = int((dropped & dup).sum())
    fp = int((dropped & ~dup).sum())
    fn = int((~dropped & dup).sum())
    precision = _rate(tp, tp + fp)
    recall = _rate(tp, tp + fn)
    if precision is None or recall is None or precision + recall == 0:
        f1 = 0.0 if (precision is not None or recall is not None) else None
    else:
        f1 = 2 * precision * recall / (precision + recall)
    return {"tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1}


def _share(mask: pd.Series, dropped: pd.Series) -> dict[str, Any]:
    n = int(mask.sum())
    k = int((mask & dropped).sum())
    return {"n": n, "dropped": k, "rate": _rate(k, n)}


def score(decisions: pd.DataFrame, truth: pd.DataFrame) -> dict[str, Any]:
    """Quality of one system's decisions; see the module docstring. Raises ``ScoringError``."""
    _validate(decisions, truth)
    cols = [c for c in ("doc_id", "action", "layer", "matched_doc_id") if c in decisions.columns]
    dec = decisions[cols].copy()
    dec["doc_id"] = dec["doc_id"].astype(str)
    t = truth.copy()
    t["doc_id"] = t["doc_id"].astype(str)
    everything = t.merge(dec, on="doc_id", how="left")  # one-to-one: _validate proved it
    unjudged = everything["kind"].astype(str).isin(UNJUDGED_KINDS)
    df = everything[~unjudged].reset_index(drop=True)
    dropped = df["action"].eq("drop")
    dup = df["is_duplicate"].astype(bool)
    kind = df["kind"].astype(str)

    overall = _prf(dropped, dup)
    result: dict[str, Any] = {
        "counts": {
            "docs": len(everything),
            "duplicates": int(dup.sum()),
            "non_duplicates": int((~dup).sum()),
            "dropped": int(dropped.sum()),
            "kept": int((~dropped).sum()),
            "tp": overall["tp"],
            "fp": overall["fp"],
            "fn": overall["fn"],
            "tn": int((~dropped & ~dup).sum()),
            "by_kind": {k: _share(kind.eq(k), dropped) for k in sorted(kind.unique())},
            "unjudged": int(unjudged.sum()),
        },
        "precision": overall["precision"],
        "recall": overall["recall"],
        "f1": overall["f1"],
    }

    # Recall per duplicate kind, and per true-Jaccard band of the near copies.
    result["unjudged"] = _unjudged(everything[unjudged])
    result["recall_by_kind"] = {
        k: {"n": s["n"], "dropped": s["dropped"], "recall": s["rate"]}
        for k in DUPLICATE_KINDS
        if (s := _share(kind.eq(k) & dup, dropped))["n"]
    }
    near = kind.eq("near_copy") & dup
    jac = pd.to_numeric(df["true_jaccard"], errors="coerce")
    bands: dict[str, Any] = {}
    low = near & (jac < NEAR_BANDS[0][1])
    if low.any():
        bands[f"<{NEAR_BANDS[0][1]}"] = _band(low, dropped)
    for label, lo, hi in NEAR_BANDS:
        bands[label] = _band(near & (jac >= lo) & (jac < hi), dropped)
    unknown = near & jac.isna()
    if unknown.any():
        bands["unknown"] = _band(unknown, dropped)
    result["recall_near_by_band"] = bands
    result["recall_near_j_ge_0_8"] = _band(near & (jac >= 0.8), dropped)["recall"]
    result["recall_near_j_ge_0_7"] = _band(near & (jac >= 0.7), dropped)["recall"]
    result["recall_near_j_0_5_0_7"] = _band(near & (jac >= 0.5) & (jac < 0.7), dropped)["recall"]
    # The same bands on the earlier measure (word 3-grams for English), for runs before it changed.
    if "true_jaccard_words" in df:
        jw = pd.to_numeric(df["true_jaccard_words"], errors="coerce")
        result["recall_near_by_band_words"] = {
            label: _band(near & (jw >= lo) & (jw < hi), dropped) for label, lo, hi in NEAR_BANDS
        }
    lang = df["lang"].astype(str)
    result["recall_near_by_band_lang"] = {
        str(code): {label: _band(near & m & (jac >= lo) & (jac < hi), dropped) for label, lo, hi in NEAR_BANDS}
        for code in sorted(lang[near].unique())
        if (m := lang.eq(code)).any()
    }
    # Per edit kind (a copy with several edits counts under each), overall and per language.
    if "edits" in df:
        edits = df["edits"].map(lambda e: frozenset(e) if e is not None and not isinstance(e, float) else frozenset())
        names = sorted({e for es in edits[near] for e in es})
        has = {e: edits.map(lambda es, e=e: e in es).astype(bool) for e in names}
        result["recall_near_by_edit"] = {e: _band(near & has[e], dropped) for e in names}
        result["recall_near_by_edit_lang"] = {
            str(code): {e: _band(near & has[e] & lang.eq(code), dropped) for e in names}
            for code in sorted(lang[near].unique())
        }
        # The targets are per language x edit kind x band (>= 0.97 at J >= 0.7, >= 0.90 at 0.5-0.7).
        result["recall_near_by_edit_band_lang"] = {
            str(code): {
                label: {e: _band(near & has[e] & lang.eq(code) & (jac >= lo) & (jac < hi), dropped) for e in names}
                for label, lo, hi in TARGET_BANDS
            }
            for code in sorted(lang[near].unique())
        }
        result["recall_near_by_edit_count"] = {
            str(k): _band(near & edits.map(len).eq(k), dropped) for k in sorted({len(es) for es in edits[near]})
        }

    # Cross-batch duplicates (source in an earlier batch) need the registry; same-batch ones do not.
    doc_ids = df["doc_id"].tolist()
    batches = df["batch_id"].astype(str).tolist()
    # Sources and matches may be unjudged documents: look them up over the whole truth.
    batch_of = dict(zip(everything["doc_id"].tolist(), everything["batch_id"].astype(str).tolist(), strict=True))
    earlier = pd.Series(
        [
            isinstance(src, str) and src in batch_of and batch_of[src] < own  # "YYYY-MM-DDTHH" sorts by time
            for src, own in zip(df["source_doc_id"].tolist(), batches, strict=True)
        ],
        index=df.index,
    )
    result["recall_by_source_batch"] = {
        "same_batch": _band(dup & ~earlier, dropped),
        "earlier_batch": _band(dup & earlier, dropped),
    }
    # What the registry's MinHash path alone decides (its bands, stored signature bits, text reads):
    # near copies of a document of an earlier batch, per language and true-Jaccard band.
    result["recall_near_earlier_batch_by_band_lang"] = {
        str(code): {label: _band(near & earlier & lang.eq(code) & (jac >= lo) & (jac < hi), dropped) for label, lo, hi in NEAR_BANDS}
        for code in sorted(lang[near].unique())
    }

    # False drops: every non-duplicate kind, the must-keep kinds always listed.
    non_dup = ~dup
    fd_kinds = sorted(set(kind[non_dup].unique()) | set(MUST_KEEP_KINDS))
    result["false_drop_rate_by_kind"] = {k: _share(kind.eq(k) & non_dup, dropped) for k in fd_kinds}
    result["false_drop_rate"] = _rate(int((dropped & non_dup).sum()), int(non_dup.sum()))
    must_keep = kind.isin(MUST_KEEP_KINDS) & non_dup
    result["must_keep_false_drop_rate"] = _share(must_keep, dropped)["rate"]

    result["by_lang"] = {
        str(lang): _prf(dropped[m], dup[m])
        for lang in sorted(df["lang"].astype(str).unique())
        if (m := df["lang"].astype(str).eq(lang)).any()
    }

    # Per layer: how many drops, how many of them right.
    layers: dict[str, Any] = {}
    if dropped.any():
        layer = (
            df["layer"].astype("object").where(df["layer"].notna(), "(none)")
            if "layer" in df
            else pd.Series("(none)", index=df.index)
        )
        for name in sorted(layer[dropped].astype(str).unique()):
            m = dropped & layer.astype(str).eq(name)
            correct = int((m & dup).sum())
            layers[name] = {
                "drops": int(m.sum()),
                "correct": correct,
                "precision": _rate(correct, int(m.sum())),
            }
    result["by_layer"] = layers

    # Provenance: a correct drop must name a member of its own truth cluster (not itself).
    tp_mask = dropped & dup
    provenance: dict[str, Any] = {
        "checked": int(tp_mask.sum()),
        "correct": 0,
        "precision": None,
        "no_match": 0,
    }
    wrong_ids: list[str] = []
    if "matched_doc_id" in df:
        clusters = df["cluster_id"].astype(str).tolist()
        cluster_of = dict(zip(everything["doc_id"].tolist(), everything["cluster_id"].astype(str).tolist(), strict=True))
        matched = [m if isinstance(m, str) and m else None for m in df["matched_doc_id"].tolist()]
        same_cluster = pd.Series(
            [
                m is not None and m != d and cluster_of.get(m) == c
                for m, d, c in zip(matched, doc_ids, clusters, strict=True)
            ],
            index=df.index,
        )
        ok = tp_mask & same_cluster
        no_match = pd.Series([m is None for m in matched], index=df.index)
        provenance["correct"] = int(ok.sum())
        provenance["no_match"] = int((tp_mask & no_match).sum())
        provenance["precision"] = _rate(provenance["correct"], provenance["checked"])
        wrong_ids = df["doc_id"][tp_mask & ~ok].tolist()
    result["provenance"] = provenance
    result["provenance_precision"] = provenance["precision"]

    result["examples"] = {
        "false_drops": _ids(df["doc_id"][dropped & non_dup].tolist()),
        "misses": _ids(df["doc_id"][~dropped & dup].tolist()),
        "wrong_provenance": _ids(wrong_ids),
    }
    return result


def _unjudged(rows: pd.DataFrame) -> dict[str, Any]:
    """Per unjudged kind: how many, how many dropped, and the dropped share by true-Jaccard band."""
    out: dict[str, Any] = {}
    dropped = rows["action"].eq("drop")
    jac = pd.to_numeric(rows["true_jaccard"], errors="coerce")
    for k in UNJUDGED_KINDS:
        m = rows["kind"].astype(str).eq(k)
        bands = {f"<{NEAR_BANDS[0][1]}": _band(m & (jac < NEAR_BANDS[0][1]), dropped)}
        bands.update({label: _band(m & (jac >= lo) & (jac < hi), dropped) for label, lo, hi in NEAR_BANDS})
        out[k] = {**_band(m, dropped), "by_band": bands}
    return out


def _band(mask: pd.Series, dropped: pd.Series) -> dict[str, Any]:
    s = _share(mask, dropped)
    return {"n": s["n"], "dropped": s["dropped"], "recall": s["rate"]}


# ---------------------------------------------------------------------------------------------
# Rendering

TABLE_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("precision", lambda r: r.get("precision")),
    ("recall", lambda r: r.get("recall")),
    ("F1", lambda r: r.get("f1")),
    ("recall J>=0.8", lambda r: r.get("recall_near_j_ge_0_8")),
    ("recall J>=0.7", lambda r: r.get("recall_near_j_ge_0_7")),
    ("recall J 0.5-0.7", lambda r: r.get("recall_near_j_0_5_0_7")),
    ("false-drop rate", lambda r: r.get("false_drop_rate")),
    ("template FD", lambda r: _fd(r, "template_distinct")),
    ("short FD", lambda r: _fd(r, "short_distinct")),
    ("lead-in FD", lambda r: _fd(r, "short_leadin")),
    ("update FD", lambda r: _fd(r, "url_update")),
    ("appended FD", lambda r: _fd(r, "url_append")),
    ("list-page FD", lambda r: _fd(r, "list_page")),
)


def format_near_table(result: Mapping[str, Any]) -> str:
    """Near-copy recall of one system per language: by true-Jaccard band and by edit kind."""
    by_band = result.get("recall_near_by_band_lang") or {}
    by_edit = result.get("recall_near_by_edit_lang") or {}
    langs = sorted(set(by_band) | set(by_edit))
    cols = [label for label, _, _ in NEAR_BANDS] + sorted({e for v in by_edit.values() for e in v})
    header = ["lang", *cols]
    rows = []
    for code in langs:
        cells = {**by_band.get(code, {}), **by_edit.get(code, {})}
        rows.append([code, *(f"{_fmt(cells[c]['recall'])} ({cells[c]['n']})" if c in cells else "n/a" for c in cols)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["| " + " | ".join(c.rjust(widths[i]) for i, c in enumerate(r)) + " |" for r in [header, *rows]]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def format_edit_band_table(result: Mapping[str, Any]) -> str:
    """Near-copy recall of one system per language and target band (rows) by edit kind (columns),
    the lowest cell of each row last: the table issue #17's per-edit targets are read from."""
    cells = result.get("recall_near_by_edit_band_lang") or {}
    edits = sorted({e for bands in cells.values() for row in bands.values() for e in row})
    header = ["lang", "band", *edits, "lowest"]
    rows = []
    for code in sorted(cells):
        for label, _, _ in TARGET_BANDS:
            row = cells[code].get(label, {})
            shown = [row[e] for e in edits if e in row and row[e]["n"]]
            low = min((c["recall"] for c in shown), default=None)
            rows.append([
                code, label,
                *(f"{_fmt(row[e]['recall'])} ({row[e]['n']})" if e in row and row[e]["n"] else "n/a" for e in edits),
                _fmt(low),
            ])  # fmt: skip
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["| " + " | ".join(c.rjust(widths[i]) for i, c in enumerate(r)) + " |" for r in [header, *rows]]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fd(result: Mapping[str, Any], kind: str) -> float | None:
    return (result.get("false_drop_rate_by_kind") or {}).get(kind, {}).get("rate")


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def format_table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table, one row per system (readable in a terminal and in the README)."""
    header = ["system", *(name for name, _ in TABLE_COLUMNS)]
    rows = [[str(system), *(_fmt(get(r)) for _, get in TABLE_COLUMNS)] for system, r in results.items()]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])
